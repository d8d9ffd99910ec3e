"""Tests of the Optimizer component: construction, examples_io and Executor.Do on tiny artifacts."""

import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tfx import types
from tfx.types import artifact_utils, standard_artifacts

from components.errors import UserInputError
from components.optimizer import (
  OptimizationReport,
  OptimizedModel,
  Optimizer,
  examples_io,
  optimizer_lib,
  spec,
  tensorrt_lib,
)
from components.optimizer import executor as executor_module
from tests.test_optimizer_lib import digits_split, write_keras_model

FEATURE_KEYS = [f"pixel_{i}" for i in range(64)]
TRT_REASON = tensorrt_lib.unavailable_reason()


def example(features: dict) -> bytes:
  feature = {}
  for key, value in features.items():
    if isinstance(value, float):
      feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[value]))
    else:
      feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def write_split(split_dir: pathlib.Path, x: np.ndarray, y: np.ndarray, files: int = 2) -> None:
  """Writes rows as gzipped TFRecords like ExampleGen: pixels int64 except pixel_0 as float."""
  split_dir.mkdir(parents=True)
  options = tf.io.TFRecordOptions(compression_type="GZIP")
  for shard in range(files):
    path = split_dir / f"data_tfrecord-{shard:05d}-of-{files:05d}.gz"
    with tf.io.TFRecordWriter(str(path), options) as writer:
      for row in range(shard, len(x), files):
        features = {key: int(x[row, i]) for i, key in enumerate(FEATURE_KEYS)}
        features["pixel_0"] = float(x[row, 0])
        features["label"] = int(y[row])
        writer.write(example(features))


def write_schema(folder: pathlib.Path, columns) -> pathlib.Path:
  folder.mkdir(parents=True)
  text = "".join(f'feature {{ name: "{c}" type: INT }}\n' for c in columns)
  (folder / "schema.pbtxt").write_text(text)
  return folder


@pytest.fixture(scope="module")
def data():
  return digits_split()


@pytest.fixture(scope="module")
def model_uri(tmp_path_factory, data):
  uri = tmp_path_factory.mktemp("model")
  write_keras_model(uri / spec.KERAS_MODEL_DIR, data[0], data[1])
  return uri


@pytest.fixture(scope="module")
def examples_uri(tmp_path_factory, data):
  uri = tmp_path_factory.mktemp("examples")
  write_split(uri / "Split-train", data[0], data[1])
  write_split(uri / "Split-eval", data[2], data[3])
  return uri


def make_artifact(artifact_type, uri) -> types.Artifact:
  artifact = artifact_type()
  artifact.uri = str(uri)
  return artifact


def run_executor(tmp_path, model_uri, examples_uri, schema_uri=None, **component_args):
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
  if schema_uri is not None:
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
    variants=["tflite_int8", "qat"],
    tensorrt="off",
    int8_fallback=True,
  )
  props = component.exec_properties
  assert json.loads(props[spec.VARIANTS_KEY]) == ["tflite_int8", "qat"]
  assert props[spec.TENSORRT_KEY] == "off"
  assert props[spec.INT8_FALLBACK_KEY] == 1
  assert props[spec.TARGET_SPARSITY_KEY] == 0.8
  assert props[spec.MAX_ACCURACY_DROP_KEY] == 1.0
  assert props[spec.LATENCY_RUNS_KEY] == 200
  assert component.outputs[spec.OPTIMIZED_MODEL_KEY].type is OptimizedModel
  assert component.outputs[spec.REPORT_KEY].type is OptimizationReport
  assert OptimizedModel.TYPE_NAME.endswith("OptimizedModel")
  assert issubclass(OptimizedModel, types.Artifact)
  executor_class = component.executor_spec.executor_class
  assert f"{executor_class.__module__}.{executor_class.__name__}" == (
    "components.optimizer.executor.Executor"
  )


def test_component_defaults_and_optional_schema():
  component = Optimizer(
    model=types.Channel(type=standard_artifacts.Model),
    examples=types.Channel(type=standard_artifacts.Examples),
  )
  assert tuple(json.loads(component.exec_properties[spec.VARIANTS_KEY])) == (
    optimizer_lib.DEFAULT_VARIANTS
  )
  assert "qat" not in json.loads(component.exec_properties[spec.VARIANTS_KEY])
  assert component.exec_properties[spec.TENSORRT_KEY] == "auto"
  assert spec.SCHEMA_KEY not in component.inputs
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
  ],
)
def test_component_rejects_nonsense(args, message):
  with pytest.raises(ValueError, match=message):
    Optimizer(
      model=types.Channel(type=standard_artifacts.Model),
      examples=types.Channel(type=standard_artifacts.Examples),
      **args,
    )


def test_read_split_orders_features_and_parses_dtypes(examples_uri, data):
  x, y = examples_io.read_split(
    str(examples_uri / "Split-eval"), FEATURE_KEYS, "label", max_rows=10_000
  )
  assert x.dtype == np.float32
  assert y.dtype == np.int64
  assert x.shape == data[2].shape
  # Two shards interleave the rows; compare as sets of (row, label).
  expected = {(tuple(r), int(label)) for r, label in zip(data[2], data[3], strict=True)}
  assert {(tuple(r), int(label)) for r, label in zip(x, y, strict=True)} == expected
  reversed_x, _ = examples_io.read_split(
    str(examples_uri / "Split-eval"), FEATURE_KEYS[::-1], "label", max_rows=10_000
  )
  np.testing.assert_array_equal(reversed_x, x[:, ::-1])


def test_read_split_caps_rows_with_a_seeded_sample(examples_uri, data):
  split = str(examples_uri / "Split-train")
  x, y = examples_io.read_split(split, FEATURE_KEYS, "label", max_rows=50, seed=1)
  again, _ = examples_io.read_split(split, FEATURE_KEYS, "label", max_rows=50, seed=1)
  other, _ = examples_io.read_split(split, FEATURE_KEYS, "label", max_rows=50, seed=2)
  assert x.shape == (50, 64)
  assert len(y) == 50
  np.testing.assert_array_equal(x, again)
  assert not np.array_equal(x, other)
  all_rows = {tuple(r) for r in data[0]}
  assert all(tuple(r) in all_rows for r in x)
  # A sample of the whole split, not its first rows.
  first_rows, _ = examples_io.read_split(split, FEATURE_KEYS, "label", max_rows=len(data[0]))
  assert not np.array_equal(x, first_rows[:50])


def test_read_split_errors_name_the_problem(tmp_path, examples_uri):
  with pytest.raises(UserInputError, match="No gzipped TFRecord files"):
    examples_io.read_split(str(tmp_path), FEATURE_KEYS, "label", max_rows=10)
  with pytest.raises(ValueError, match="'pixel_99'"):
    examples_io.read_split(str(examples_uri / "Split-eval"), ["pixel_99"], "label", max_rows=10)


def test_check_schema(tmp_path):
  schema = write_schema(tmp_path / "schema", [*FEATURE_KEYS, "label"]) / "schema.pbtxt"
  examples_io.check_schema(str(schema), FEATURE_KEYS, "label")
  with pytest.raises(ValueError, match="pixel_64"):
    examples_io.check_schema(str(schema), [*FEATURE_KEYS, "pixel_64"], "label")


def test_executor_do_writes_variants_report_and_properties(tmp_path, model_uri, examples_uri, data):
  schema_uri = write_schema(tmp_path / "schema", [*FEATURE_KEYS, "label"])
  optimized, report = run_executor(
    tmp_path,
    model_uri,
    examples_uri,
    schema_uri,
    variants=["tflite_int8", "pruned_int8"],
    tensorrt="auto",
    max_train_rows=600,
  )
  report_dir = pathlib.Path(report.uri)
  for name in ("report.json", "report.md", "report.png"):
    assert (report_dir / name).stat().st_size > 0
  result = json.loads((report_dir / "report.json").read_text())
  assert result["rows"] == {"train": 600, "eval": len(data[2])}
  entries = {e["name"]: e for e in result["variants"]}
  assert list(entries) == ["tflite_int8", "pruned_int8", "onnx", "tensorrt_fp16"]
  for name in ("tflite_int8", "pruned_int8", "onnx"):
    assert entries[name]["status"] == "ok", entries[name].get("reason")
  if TRT_REASON:
    assert entries["tensorrt_fp16"]["status"] == "skipped"
    assert optimized.get_string_custom_property("tensorrt_fp16_status") == "skipped"
    assert optimized.get_int_custom_property("tensorrt_fp16_blessed") == 0

  blessed = json.loads(optimized.get_string_custom_property("blessed_variants"))
  assert blessed == result["blessed_variants"]
  assert json.loads(report.get_string_custom_property("blessed_variants")) == blessed
  assert optimized.get_string_custom_property("optimizer_status") == "ok"
  assert optimized.get_float_custom_property("baseline_accuracy") == pytest.approx(
    result["baseline"]["accuracy"]
  )
  for name in ("tflite_int8", "pruned_int8", "onnx"):
    entry = entries[name]
    assert optimized.get_int_custom_property(f"{name}_blessed") == int(entry["blessed"])
    assert optimized.get_int_custom_property(f"{name}_size_bytes") == entry["size_bytes"]
    path = optimized.get_string_custom_property(f"{name}_path")
    assert os.path.isfile(os.path.join(optimized.uri, path))
  assert "tflite_int8" in blessed
  # Only variant folders are left in the output, no staging or scratch files.
  assert sorted(os.listdir(optimized.uri)) == [
    "onnx",
    "pruned_int8",
    "tflite_int8",
    "variants.json",
  ]


def test_executor_skips_a_model_without_format_keras(tmp_path, examples_uri):
  model_uri = tmp_path / "stock_model"
  (model_uri / "Format-Serving").mkdir(parents=True)
  optimized, report = run_executor(tmp_path, model_uri, examples_uri)
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "skipped"
  assert "Format-Keras" in result["reason"]
  assert {e["status"] for e in result["variants"]} == {"skipped"}
  assert (pathlib.Path(report.uri) / "report.png").is_file()
  assert os.listdir(optimized.uri) == []
  assert optimized.get_string_custom_property("blessed_variants") == "[]"
  assert optimized.get_string_custom_property("optimizer_status") == "skipped"
  assert optimized.get_int_custom_property("tflite_int8_blessed") == 0


def test_executor_rejects_a_schema_that_does_not_match(tmp_path, model_uri, examples_uri):
  schema_uri = write_schema(tmp_path / "schema", ["sepal_length", "label"])
  with pytest.raises(ValueError, match="schema has no column"):
    run_executor(tmp_path, model_uri, examples_uri, schema_uri, tensorrt="off")
