"""A module in the style of TFX's penguin example (preprocessing_fn, tuner_fn, run_fn), through
the executors of the run `run_local.py --tune` makes of it (`tests/support/executor_runs`).

The stock Transform runs the module's preprocessing_fn, the Tuner its tuner_fn (3 trials, from
--tune-trials), and the DistributedTrainer its run_fn with the best hyper-parameters on the
transformed examples; the Evaluator, the Optimizer and the Pusher follow. That a rerun is served
from the cache, and what a failing preprocessing_fn prints, are whole runs' (in
`tests/e2e/test_stock_modules_e2e.py` and `tests/e2e/test_transform_tuner_e2e.py`).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from pipeline.definition import nodes
from tests.support import executor_runs, tabular_data
from tests.support.cli_runs import REPO_ROOT, states

MODULE = REPO_ROOT / "tests" / "data" / "penguin_transform_module.py"
NODES = (*executor_runs.DATA, nodes.TRANSFORM, nodes.TUNER, *executor_runs.RELEASE)


@pytest.fixture(scope="module")
def transform_run(tmp_path_factory):
  root = tmp_path_factory.mktemp("transform")
  data = root / "data"
  rows = tabular_data.write_iris_csv(data).read_text().splitlines()[1:]
  out = root / "out"
  flags = (
    "--data-root", data, "--module-file", MODULE,
    "--label-key", "species", "--eval-label-key", "species_xf", "--model-name", "iris",
    "--tune", "--tune-trials", "3", "--train-steps", "150", "--eval-steps", "5",
    # 150 rows: about 30 in the eval split.
    "--min-eval-examples", "20", "--min-accuracy", "0.8",
    "--optimizer-variants", "tflite_float32,onnx", "--quiet",
  )  # fmt: skip
  run = executor_runs.Run(flags, out).execute(
    *NODES, properties=executor_runs.NO_TRANSFORM_STATISTICS
  )
  return {"out": out, "first_summary": run.summary(), "rows": rows}


@pytest.mark.timeout(1800)
def test_transform_and_tuner_run_and_the_model_is_pushed(transform_run):
  summary = transform_run["first_summary"]
  assert summary["status"] == "succeeded", summary.get("error")
  ran = states(summary)
  assert ran["Transform"] == "ran" and ran["Tuner"] == "ran"
  assert summary["blessed"] is True
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.8
  assert summary["pushed"]["pushed"] is True and summary["pushed"]["version"] == 1


@pytest.mark.timeout(1800)
def test_the_tuner_searched_3_trials_and_the_trainer_used_its_best(transform_run):
  out = transform_run["out"]
  [best_file] = (out / "pipeline_root" / "Tuner" / "best_hyperparameters").glob("*/*")
  best = json.loads(best_file.read_text())
  values = best["values"]
  assert set(values) == {"learning_rate", "num_layers"}
  [results_file] = (out / "pipeline_root" / "Tuner" / "tuner_results").glob("*/*")
  trials = json.loads(results_file.read_text())
  assert len(trials) == 3, trials  # --tune-trials, read by the module's tuner_fn
  assert values == {k: trials[0][k] for k in values}  # best first
  # The trainer got those hyper-parameters: the pushed model has that many hidden layers.
  version_dir = pathlib.Path(transform_run["first_summary"]["pushed"]["path"])
  model = tf.keras.models.load_model(version_dir)
  hidden = [
    layer
    for layer in model.layers
    if isinstance(layer, tf.keras.layers.Dense) and layer.units == 8  # the module's width
  ]
  assert len(hidden) == values["num_layers"]


@pytest.mark.timeout(1800)
def test_the_pushed_model_serves_raw_examples(transform_run):
  version_dir = pathlib.Path(transform_run["first_summary"]["pushed"]["path"])
  model = tf.saved_model.load(str(version_dir))
  examples, truth = [], []
  for line in transform_run["rows"]:
    *values, species = line.split(",")
    features = {
      name: tf.train.Feature(float_list=tf.train.FloatList(value=[float(v)]))
      for name, v in zip(tabular_data.IRIS_FEATURES, values, strict=True)
    }
    features["species"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[species.encode()]))
    example = tf.train.Example(features=tf.train.Features(feature=features))
    examples.append(example.SerializeToString())
    truth.append(species)
  serialized = tf.constant(examples)
  [logits] = model.signatures["serving_default"](examples=serialized).values()
  # The label as the model sees it: Transform's vocabulary index, through the exported
  # transform_features signature (as the Evaluator reads it).
  labels = model.signatures["transform_features"](examples=serialized)["species_xf"].numpy()
  index_of = dict(zip(truth, labels.ravel().tolist(), strict=True))
  assert len(set(index_of.values())) == 3  # one index per species
  predicted = np.argmax(logits.numpy(), axis=1)
  assert np.mean(predicted == labels.ravel()) >= 0.8


@pytest.mark.timeout(1800)
def test_optimizer_measures_tflite_and_onnx_of_the_transformed_model(transform_run):
  out = transform_run["out"]
  [report_file] = (out / "pipeline_root" / "Optimizer" / "report").glob("*/report.json")
  report = json.loads(report_file.read_text())
  rows = {v["name"]: v for v in report["variants"]}
  for name in ("tflite_float32", "onnx"):
    row = rows[name]
    assert row["status"] == "ok", row.get("reason")
    assert row["agreement"] >= 0.99, (name, row["agreement"])
    # The module's model takes transformed features: the variant says so, and the Pusher
    # ships the transform graph beside it.
    assert row["preprocessing_included"] is False
  version_dir = pathlib.Path(transform_run["first_summary"]["pushed"]["path"])
  manifest = json.loads((version_dir / "manifest.json").read_text())
  assert sorted(manifest["transform_graph"]["needed_by"]) == ["onnx", "tflite_float32"]
  assert (version_dir / manifest["transform_graph"]["path"] / "transform_fn").is_dir()
