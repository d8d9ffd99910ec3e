"""Tests of the Optimizer component: construction, and Executor.Do on tiny model and Examples."""

import json
import os
import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf
from tfx import types
from tfx.types import artifact_utils, standard_artifacts

from components import defaults
from components.errors import UserInputError
from components.optimizer import (
  OptimizationReport,
  OptimizedModel,
  Optimizer,
  optimizer_lib,
  spec,
)
from components.optimizer import executor as executor_module
from tests import tabular_data as td


def make_artifact(artifact_type, uri) -> types.Artifact:
  artifact = artifact_type()
  artifact.uri = str(uri)
  return artifact


def run_executor(tmp_path, model_uri, examples_uri, schema_path=None, **component_args):
  """Runs Executor.Do with the exec_properties a real Optimizer component serialises."""
  component = Optimizer(
    model=types.Channel(type=standard_artifacts.Model),
    examples=types.Channel(type=standard_artifacts.Examples),
    **component_args,
  )
  examples = make_artifact(standard_artifacts.Examples, examples_uri)
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  input_dict = {
    spec.MODEL_KEY: [make_artifact(standard_artifacts.Model, model_uri)],
    spec.EXAMPLES_KEY: [examples],
  }
  if schema_path is not None:
    schema_uri = os.path.dirname(str(schema_path))
    input_dict[spec.SCHEMA_KEY] = [make_artifact(standard_artifacts.Schema, schema_uri)]
  optimized = make_artifact(OptimizedModel, tmp_path / "optimized_model")
  report = make_artifact(OptimizationReport, tmp_path / "report")
  output_dict = {spec.OPTIMIZED_MODEL_KEY: [optimized], spec.REPORT_KEY: [report]}
  executor_module.Executor().Do(input_dict, output_dict, dict(component.exec_properties))
  return optimized, report


def test_component_wires_spec_and_outputs():
  component = Optimizer(
    model=types.Channel(type=standard_artifacts.Model),
    examples=types.Channel(type=standard_artifacts.Examples),
    schema=types.Channel(type=standard_artifacts.Schema),
    transform_graph=types.Channel(type=standard_artifacts.TransformGraph),
    task="regression",
    label_key="price_xf",
    variants=["tflite_int8", "qat"],
    tensorrt="off",
  )
  props = component.exec_properties
  assert json.loads(props[spec.VARIANTS_KEY]) == ["tflite_int8", "qat"]
  assert props[spec.TENSORRT_KEY] == "off"
  assert props[spec.TASK_KEY] == "regression"
  assert props[spec.LABEL_KEY_KEY] == "price_xf"
  assert props[spec.TARGET_SPARSITY_KEY] == defaults.TARGET_SPARSITY
  assert props[spec.MAX_ACCURACY_DROP_KEY] == 1.0
  assert props[spec.LATENCY_RUNS_KEY] == 200
  assert set(component.inputs) == {
    spec.MODEL_KEY,
    spec.EXAMPLES_KEY,
    spec.SCHEMA_KEY,
    spec.TRANSFORM_GRAPH_KEY,
  }
  assert component.outputs[spec.OPTIMIZED_MODEL_KEY].type is OptimizedModel
  assert component.outputs[spec.REPORT_KEY].type is OptimizationReport
  assert OptimizedModel.TYPE_NAME.endswith("OptimizedModel")
  assert issubclass(OptimizedModel, types.Artifact)
  executor_class = component.executor_spec.executor_class
  assert f"{executor_class.__module__}.{executor_class.__name__}" == (
    "components.optimizer.executor.Executor"
  )


def test_component_defaults_and_optional_inputs():
  component = Optimizer(
    model=types.Channel(type=standard_artifacts.Model),
    examples=types.Channel(type=standard_artifacts.Examples),
  )
  variants = json.loads(component.exec_properties[spec.VARIANTS_KEY])
  assert tuple(variants) == optimizer_lib.DEFAULT_VARIANTS
  assert "qat" not in variants
  assert component.exec_properties[spec.TENSORRT_KEY] == "auto"
  assert component.exec_properties[spec.TASK_KEY] == "auto"
  assert component.exec_properties[spec.LABEL_KEY_KEY] == "label"
  assert spec.SCHEMA_KEY not in component.inputs
  assert spec.TRANSFORM_GRAPH_KEY not in component.inputs
  config = executor_module.config_from_exec_properties(component.exec_properties)
  assert config == optimizer_lib.OptimizerConfig()


@pytest.mark.parametrize(
  ("args", "message"),
  [
    ({"tensorrt": "yes"}, "tensorrt='yes'"),
    ({"variants": ["tflite_int4"]}, "Unknown optimizer variant"),
    ({"variants": "tflite_int8"}, "list of names"),
    ({"target_sparsity": 1.5}, "target_sparsity"),
    ({"latency_runs": 0}, "latency_runs"),
    ({"task": "ranking"}, "task='ranking'"),
  ],
)
def test_component_rejects_nonsense(args, message):
  with pytest.raises(ValueError, match=message):
    Optimizer(
      model=types.Channel(type=standard_artifacts.Model),
      examples=types.Channel(type=standard_artifacts.Examples),
      **args,
    )


def _cells(markdown_row: str) -> int:
  """Cell borders in a markdown table row (escaped pipes inside a cell do not count)."""
  return len(re.findall(r"(?<!\\)\|", markdown_row))


def test_executor_do_writes_variants_signatures_report_and_properties(tmp_path, tabular_model):
  optimized, report = run_executor(
    tmp_path,
    tabular_model["model_uri"],
    tabular_model["examples"],
    tabular_model["schema"],
    variants=["tflite_float32", "tflite_int8"],
    tensorrt="auto",
    max_train_rows=300,
    latency_runs=20,
  )
  report_dir = pathlib.Path(report.uri)
  for name in ("report.json", "report.md", "report.png"):
    assert (report_dir / name).stat().st_size > 0
  # Every row of the variants table, the skipped TensorRT one included, has the header's cells.
  table = [
    line
    for line in (report_dir / "report.md").read_text().splitlines()
    if line.startswith("| ") and "|---" not in line
  ]
  header = [line for line in table if line.startswith("| variant |")]
  rows = [line for line in table if line.split("|")[1].strip() in ("baseline", "tensorrt_fp16")]
  assert header and len(rows) == 2, table
  assert {_cells(line) for line in rows} == {_cells(header[0])}
  result = json.loads((report_dir / "report.json").read_text())
  assert result["rows"] == {"train": 300, "eval": len(tabular_model["eval"])}
  assert result["task"] == "multiclass"  # from the model's contract
  # The baseline is measured on the same rows the trainer evaluated on.
  assert result["baseline"]["accuracy"] == pytest.approx(tabular_model["result"].eval_accuracy)
  entries = {e["name"]: e for e in result["variants"]}
  assert list(entries) == ["tflite_float32", "tflite_int8", "onnx", "tensorrt_fp16"]
  for name in ("tflite_float32", "tflite_int8", "onnx"):
    assert entries[name]["status"] == "ok", entries[name].get("reason")
  # The model has text inputs, which TensorRT does not take.
  assert entries["tensorrt_fp16"]["status"] == "skipped"

  blessed = json.loads(optimized.get_string_custom_property("blessed_variants"))
  assert blessed == result["blessed_variants"]
  assert {"tflite_float32", "onnx"} <= set(blessed)
  assert json.loads(report.get_string_custom_property("blessed_variants")) == blessed
  assert optimized.get_string_custom_property("optimizer_status") == "ok"
  # Only variant folders and the index are left in the output, no staging or scratch files.
  out = pathlib.Path(optimized.uri)
  assert sorted(os.listdir(out)) == ["onnx", "tflite_float32", "tflite_int8", "variants.json"]
  index, listed = optimizer_lib.read_index(str(out))
  assert [v.name for v in listed] == blessed
  signature = json.loads((out / "tflite_int8" / "signature.json").read_text())
  inputs = {i["name"]: i for i in signature["inputs"]}
  assert set(inputs) == {"numeric", "text_city", "text_color"}
  assert inputs["numeric"]["columns"] == ["age", "income", "ratio"]
  assert inputs["numeric"]["missing_value"] == "NaN"
  assert inputs["text_color"]["columns"] == ["color"]
  assert signature["label"] == {"key": "label", "classes": ["high", "low", "mid"]}
  assert signature["output_meaning"].startswith("probabilities [batch, 3]")
  assert index["variants"]["tflite_int8"]["signature"] == signature


def test_executor_skips_a_model_that_is_not_keras(tmp_path, tabular_model):
  model_uri = tmp_path / "stock_model"
  module = tf.Module()
  module.v = tf.Variable(1.0)
  module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([None])])
  tf.saved_model.save(module, str(model_uri / "Format-Serving"))
  optimized, report = run_executor(tmp_path, model_uri, tabular_model["examples"])
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "skipped"
  assert "is not a Keras SavedModel" in result["reason"]
  assert {e["status"] for e in result["variants"]} == {"skipped"}
  assert (pathlib.Path(report.uri) / "report.png").is_file()
  assert os.listdir(optimized.uri) == []
  assert optimized.get_string_custom_property("blessed_variants") == "[]"
  assert optimized.get_string_custom_property("optimizer_status") == "skipped"


@pytest.fixture(scope="module")
def stock_model(tmp_path_factory):
  """A model without a contract, as a stock run_fn writes it: inputs named after the features.

  Regression on the generated data's complete columns (age, ratio); the label is the raw column.
  """
  root = tmp_path_factory.mktemp("stock")
  data = td.write_examples(str(root), "regression", train_rows=400, eval_rows=150)
  tf.keras.utils.set_random_seed(0)
  inputs = {k: tf.keras.Input((1,), name=k) for k in ("age", "ratio")}
  x = tf.keras.layers.Concatenate()([inputs["age"] / 50.0, inputs["ratio"]])
  x = tf.keras.layers.Dense(16, activation="relu")(x)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(x))
  model.compile(tf.keras.optimizers.Adam(0.01), "mse")
  rows = data["train"]
  features = {k: np.array([[float(r[k])] for r in rows], np.float32) for k in ("age", "ratio")}
  model.fit(features, np.array([r[td.LABEL] for r in rows]), epochs=5, verbose=0)
  model.save(str(root / "model" / "Format-Serving"), save_format="tf")
  return {**data, "model_uri": root / "model"}


def test_executor_reads_a_stock_model_through_the_schema(tmp_path, stock_model):
  optimized, report = run_executor(
    tmp_path,
    stock_model["model_uri"],
    stock_model["examples"],
    stock_model["schema"],
    task="regression",
    variants=["tflite_float32"],
    tensorrt="off",
    latency_runs=20,
  )
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "ok" and result["task"] == "regression" and result["metric"] == "rmse"
  labels = np.array([r[td.LABEL] for r in stock_model["eval"]])
  assert result["rows"]["eval"] == len(labels)
  # The baseline is measured against the raw label column.
  assert 0 < result["baseline"]["rmse"] < 2 * float(np.std(labels))
  [entry] = result["variants"]
  assert entry["status"] == "ok" and entry["agreement"] == 1.0
  signature = json.loads(
    (pathlib.Path(optimized.uri) / "tflite_float32" / "signature.json").read_text()
  )
  assert {i["name"]: i["columns"] for i in signature["inputs"]} == {
    "age": ["age"],
    "ratio": ["ratio"],
  }
  assert signature["label"] == {"key": "label", "classes": []}


def test_executor_needs_the_schema_for_a_model_without_contract(tmp_path, stock_model):
  with pytest.raises(UserInputError, match=r"wire schema=schema_gen\.outputs"):
    run_executor(
      tmp_path,
      stock_model["model_uri"],
      stock_model["examples"],
      task="regression",
      variants=["tflite_float32"],
      tensorrt="off",
    )
