"""The compatibility matrix at the executors: trainer modules the project did not write.

Each module is trained unchanged by the DistributedTrainer's executor, then evaluated, optimized
and pushed by the Evaluator's, Optimizer's and Pusher's, with the execution properties the
pipeline gives them for the same run_local.py flags (`tests/support/executor_runs`), and must
push. Modules with a preprocessing_fn get the stock Transform's executor first. The data and
modules are those of `tests/support/stock_module_data`. TFX's penguin Keras module, with its
Transform and Tuner and the cache between runs, runs whole in
`tests/e2e/test_stock_modules_e2e.py`.
"""

from __future__ import annotations

import pathlib

import pytest

from pipeline.definition import nodes
from tests.support import executor_runs
from tests.support import stock_module_data as data
from tests.support.cli_runs import states

# The tests that check the module's training and push, not its optimized variants, build none;
# the testdata trainer module's test builds the default variants, and the user styles' tests the
# TFLite one each checks.
NO_VARIANTS = ("--optimizer-variants", "none")
# The stock modules get TrainArgs(num_steps) from --train-steps; a third of the default 600
# learns these tables as well (TFX's own penguin pipeline trains 100; the testdata module reached
# 0.78 binary accuracy on taxi with 200 steps and with 600).
STEPS = ("--train-steps", "200")


@pytest.fixture(scope="module")
def penguins(tmp_path_factory) -> executor_runs.Run:
  """TFX's penguins_processed.csv through ExampleGen, StatisticsGen, SchemaGen and
  ExampleValidator."""
  root = tmp_path_factory.mktemp("penguin")
  folder = data.write_penguins_processed(root / "penguins")
  flags = ("--data-root", folder, "--label-key", "species")
  return executor_runs.executed(flags, root / "out", executor_runs.DATA)


def _release(tmp_path, upstream: executor_runs.Run, *flags, transform=False) -> dict:
  """Runs [Transform,] the trainer, Evaluator, Optimizer and Pusher on `upstream`'s data with
  run_local.py's `flags` added to its own; returns what run_summary.json would say."""
  ran = (nodes.TRANSFORM, *executor_runs.RELEASE) if transform else executor_runs.RELEASE
  run = executor_runs.Run([*upstream.flags, *flags], tmp_path / "out")
  run.outputs.update(upstream.outputs)
  run.execute(*ran, properties=executor_runs.NO_TRANSFORM_STATISTICS)
  return run.summary()


def _model_properties(summary: dict) -> dict:
  strategy = summary["strategy"]
  return {k: strategy[k] for k in ("strategy", "strategy_chosen_by")}


def _taxi(tmp_path, write, *flags) -> dict:
  """A taxi CSV (`write` makes its folder) through every node the taxi modules' runs have but
  LiveModel and the DataGate; returns what run_summary.json would say."""
  folder = write(tmp_path / "taxi")
  run = executor_runs.Run(("--data-root", folder, *data.TAXI_FLAGS, *flags), tmp_path / "out")
  run.execute(
    *executor_runs.DATA,
    nodes.TRANSFORM,
    *executor_runs.RELEASE,
    properties=executor_runs.NO_TRANSFORM_STATISTICS,
  )
  return run.summary()


@pytest.mark.timeout(1200)
def test_taxi_native_keras_with_transform(tmp_path):
  module = data.TFX_EXAMPLES / "chicago_taxi_pipeline" / "taxi_utils_native_keras.py"
  assert module.is_file(), "TFX no longer ships the taxi example"
  # The taxi CSV's first 5,000 rows, where `pickup_census_tract` has no value at all: the
  # schema types it as bytes and the module's model reads it as a number.
  summary = _taxi(
    tmp_path,
    data.write_taxi_head,
    *("--module-file", module, "--train-steps", "300", "--optimizer-variants", "tflite_float32"),
  )
  assert summary["pushed"]["pushed"], summary["pushed"]
  # The empty census tract column reaches the model's number input as missing values: the
  # Optimizer crashed on it before (a string cast to int32) and failed the run.
  variant = {v["name"]: v for v in summary["optimizer"]["variants"]}["tflite_float32"]
  assert variant["status"] == "ok" and variant["agreement"] >= 0.99, variant
  # TFX's own taxi pipeline blesses this model at BinaryAccuracy >= 0.6.
  assert summary["eval_metrics"]["binary_accuracy"] >= 0.6
  assert _model_properties(summary) == {"strategy": "mirrored", "strategy_chosen_by": "module"}


@pytest.mark.timeout(1200)
def test_penguin_template_model_with_its_own_preprocessing(tmp_path, penguins):
  # The model of `tfx template copy --model=penguin`, as installed: run_fn and preprocessing_fn
  # live in two files that import their siblings from the tfx package.
  models = data.TFX_EXAMPLES.parent / "experimental" / "templates" / "penguin" / "models"
  assert (models / "model.py").is_file(), "TFX no longer ships the penguin template"
  flags = ("--module-file", models / "model.py", "--transform-module", models / "preprocessing.py")
  run = executor_runs.Run([*penguins.flags, *flags], tmp_path / "unused")
  # The Transform the pipeline builds runs the --transform-module file.
  transform_module = pathlib.Path(run.node(nodes.TRANSFORM).exec_properties["module_file"])
  assert transform_module.resolve() == (models / "preprocessing.py").resolve()
  summary = _release(
    tmp_path, penguins, *flags, "--eval-label-key", "species_xf", *NO_VARIANTS, *STEPS,
    transform=True,
  )  # fmt: skip
  assert states(summary)["Transform"] == "ran"
  assert summary["pushed"]["pushed"], summary["pushed"]
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.9
  assert _model_properties(summary) == {"strategy": "mirrored", "strategy_chosen_by": "module"}


@pytest.mark.timeout(1200)
def test_tfx_component_testdata_trainer_module_on_taxi(tmp_path):
  # TFX's own Trainer tests use this module (Transform, run_fn, tf.saved_model.save, Keras'
  # CategoryEncoding); the variants the Optimizer cannot build say why instead of failing.
  module = (
    data.TFX_EXAMPLES.parent / "components" / "testdata" / "module_file" / "trainer_module.py"
  )
  assert module.is_file(), "TFX no longer ships its trainer test module"
  summary = _taxi(tmp_path, data.write_taxi, "--module-file", module, *STEPS)
  assert summary["pushed"]["pushed"], summary["pushed"]
  assert summary["eval_metrics"]["binary_accuracy"] >= 0.6
  variants = {v["name"]: v for v in summary["optimizer"]["variants"]}
  assert variants["tflite_float32"]["status"] == "ok", variants["tflite_float32"]
  assert variants["tflite_float32"]["agreement"] >= 0.99
  int8 = variants["tflite_int8"]
  assert int8["status"] == "skipped" and "CategoryEncoding" in int8["reason"], int8
  assert variants["pruned"]["status"] == "skipped"
  assert "tf.saved_model.save" in variants["pruned"]["reason"]
  assert not [v for v in variants.values() if v["status"] == "failed"], variants


def test_network_module_on_a_text_label(tmp_path):
  # A build_model(hparams) module inside the default model, on the raw Palmer penguins (the
  # species as text, empty cells): the Evaluator reads the label as the model's class index
  # through the default model's transform_features signature, as for the bundled module.
  folder = tmp_path / "penguins"
  folder.mkdir()
  (folder / "penguins.csv").write_bytes(data.raw_penguins_csv().read_bytes())
  raw = executor_runs.executed(
    ("--data-root", folder, "--label-key", "species"), tmp_path / "data", executor_runs.DATA
  )
  summary = _release(
    tmp_path,
    raw,
    *("--module-file", data.MODULES / "network_module.py", "--hparams", "width=24"),
    *("--train-steps", "300", *NO_VARIANTS),
  )
  assert summary["status"] == "succeeded", summary.get("error")
  assert summary["pushed"]["pushed"], summary["pushed"]
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.9
  assert _model_properties(summary) == {"strategy": "one_device", "strategy_chosen_by": "trainer"}


@pytest.mark.parametrize(
  ("module", "chosen_by", "extra"),
  [
    ("simple_keras_module.py", "module", ()),
    ("custom_loop_module.py", "module", ()),
    ("custom_config_module.py", "trainer", ("--hparams", "hidden_units=12")),
    ("saved_model_module.py", "trainer", ()),
  ],
)
def test_user_styles_of_trainer_modules(tmp_path, penguins, module, chosen_by, extra):
  summary = _release(
    tmp_path,
    penguins,
    *("--module-file", data.MODULES / module, *extra),
    *("--optimizer-variants", "tflite_float32", *STEPS),
  )
  assert summary["pushed"]["pushed"], summary["pushed"]
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.9
  expected = "mirrored" if chosen_by == "module" else "one_device"
  assert _model_properties(summary) == {"strategy": expected, "strategy_chosen_by": chosen_by}
  variants = {v["name"]: v for v in summary["optimizer"]["variants"]}
  if module == "custom_loop_module.py":
    # Its one 'features' input is filled by the module's own code, not by a feature: the
    # Optimizer says so and the trained model is pushed alone.
    assert {v["status"] for v in variants.values()} == {"skipped"}
    assert all("input 'features'" in v["reason"] for v in variants.values())
  else:
    assert variants["tflite_float32"]["status"] == "ok", variants["tflite_float32"]
