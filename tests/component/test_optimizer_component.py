"""Tests of the Optimizer component: construction, and Executor.Do on tiny model and Examples."""

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
from tfx import types
from tfx.types import artifact_utils, standard_artifacts

from components.artifact_files import variant_index
from components.artifacts import OptimizationReport, OptimizedModel
from components.optimizer import (
  Optimizer,
  run_config,
  spec,
)
from components.optimizer import executor as executor_module
from core import defaults, tasks
from core.errors import UserInputError
from tests.support import tabular_data as td
from tests.support.cli_runs import REPO_ROOT, project_env


def make_artifact(artifact_type, uri) -> types.Artifact:
  artifact = artifact_type()
  artifact.uri = str(uri)
  return artifact


def run_executor(
  tmp_path, model_uri, examples_uri, schema_path=None, transform_uri=None, **component_args
):
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
  if transform_uri is not None:
    transform = make_artifact(standard_artifacts.TransformGraph, transform_uri)
    input_dict[spec.TRANSFORM_GRAPH_KEY] = [transform]
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
  assert tuple(variants) == defaults.DEFAULT_VARIANTS
  assert "qat" not in variants
  assert component.exec_properties[spec.TENSORRT_KEY] == "auto"
  assert component.exec_properties[spec.TASK_KEY] == "auto"
  assert component.exec_properties[spec.LABEL_KEY_KEY] == "label"
  assert spec.SCHEMA_KEY not in component.inputs
  assert spec.TRANSFORM_GRAPH_KEY not in component.inputs
  config = executor_module.config_from_exec_properties(component.exec_properties)
  assert config == run_config.OptimizerConfig()


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
  index, listed = variant_index.read_index(str(out))
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


def test_a_fresh_process_loads_the_layers_of_the_module_the_model_records(tabular_model):
  # As a Kubeflow step runs: nothing imported the model's layers before the Optimizer loads it.
  script = textwrap.dedent(f"""
    import json
    from components import model_contract
    from components.optimizer import data_lib

    def modules():
      model = data_lib.load_keras_model({str(tabular_model["serving_dir"])!r})
      return sorted({{type(layer).__module__ for layer in model.layers}})

    before = modules()
    model_contract.import_trainer_module({defaults.DEFAULT_MODULE_PATH!r})
    print(json.dumps([before, modules()]))
  """)
  env = project_env(PYTHONPATH=str(REPO_ROOT))
  proc = subprocess.run(
    [sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  before, after = json.loads(proc.stdout.strip().splitlines()[-1])
  assert "models.tabular.layers" not in before  # revived from the SavedModel, not rebuilt
  assert "models.tabular.layers" in after


def test_executor_skips_a_model_that_is_not_keras(tmp_path, tabular_model):
  model_uri = tmp_path / "stock_model"
  module = tf.Module()
  module.v = tf.Variable(1.0)
  module.f = tf.function(lambda x: x * module.v, input_signature=[tf.TensorSpec([None])])
  tf.saved_model.save(module, str(model_uri / "Format-Serving"))
  optimized, report = run_executor(tmp_path, model_uri, tabular_model["examples"])
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "skipped"
  assert (
    "is not a Keras SavedModel (no keras_metadata.pb) and has no call function"
    in (result["reason"])
  )
  assert "out of the Optimizer's scope" in result["reason"]
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


def test_a_model_fed_by_an_input_no_feature_is_named_after_is_skipped(tmp_path, stock_model):
  # A custom-loop module's style: one 'features' input the module fills itself. The Optimizer
  # cannot feed it from the Examples; every variant says why and the run goes on.
  inputs = tf.keras.Input((2,), name="features")
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(1)(inputs))
  model_uri = tmp_path / "model"
  model.save(str(model_uri / "Format-Serving"), save_format="tf")
  optimized, report = run_executor(
    tmp_path,
    model_uri,
    stock_model["examples"],
    stock_model["schema"],
    task="regression",
    variants=["tflite_float32", "onnx"],
    tensorrt="off",
  )
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "skipped"
  assert [v["status"] for v in result["variants"]] == ["skipped", "skipped"]
  assert all("input 'features'" in v["reason"] for v in result["variants"])
  assert os.listdir(optimized.uri) == []
  assert optimized.get_string_custom_property("blessed_variants") == "[]"


# Raw columns the tiny Transform below z-scores into `<column>_xf` (income has gaps).
TRANSFORMED = ("age", "income", "ratio")
KERAS_FIX = "save with model.save(fn_args.serving_model_dir, save_format='tf', signatures=...)"


def _fill(x):
  """A VarLen feature as dense [batch, 1], gaps 0 (as TFX's taxi module fills them)."""
  default = "" if x.dtype == tf.string else 0
  return tf.sparse.to_dense(tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default)


def _preprocessing_fn(inputs):
  import tensorflow_transform as tft

  outputs = {f"{k}_xf": _fill(tft.scale_to_z_score(inputs[k])) for k in TRANSFORMED}
  outputs["label_xf"] = tft.compute_and_apply_vocabulary(_fill(inputs[td.LABEL]))
  return outputs


def _write_transform_graph(examples: str, schema_path: str, out_dir: pathlib.Path) -> str:
  """Analyzes the train split with tf.Transform and writes a TransformGraph folder."""
  import apache_beam as beam
  import tensorflow_transform.beam as tft_beam
  from apache_beam.runners.portability.fn_api_runner import FnApiRunner
  from tfx_bsl.public import tfxio

  from components import model_contract

  source = tfxio.TFExampleRecord(
    file_pattern=f"{examples}/Split-train/*", schema=model_contract.read_schema(schema_path)
  )
  # In process: the default (Prism) runner takes three times as long on this tiny data.
  runner = FnApiRunner()
  with beam.Pipeline(runner) as pipeline, tft_beam.Context(temp_dir=str(out_dir / "tmp")):
    raw = pipeline | source.BeamSource()
    transform_fn = (raw, source.TensorAdapterConfig()) | tft_beam.AnalyzeDataset(_preprocessing_fn)
    _ = transform_fn | tft_beam.WriteTransformFn(str(out_dir))
  # TFX's Transform writes the raw schema beside the graph; the Optimizer parses rows with it.
  (out_dir / "metadata").mkdir()
  (out_dir / "metadata" / "schema.pbtxt").write_text(pathlib.Path(schema_path).read_text())
  return str(out_dir)


def _write_banded_examples(root: pathlib.Path) -> dict:
  """Examples whose class is income's band, no row within 3,000 of a bound or without income.

  The margin keeps rows off the model's decision boundaries, where int8's rounding may flip a
  class: every variant must then agree with the model on (almost) every row.
  """

  def rows(n: int, seed: int) -> list[dict]:
    kept = []
    for row in td.make_rows(n, "multiclass", seed):
      income = row["income"]
      if income is None or min(abs(income - 2.5e4), abs(income - 4.5e4)) < 3e3:
        continue
      row[td.LABEL] = "low" if income < 2.5e4 else ("high" if income > 4.5e4 else "mid")
      kept.append(row)
    return kept

  train, evals = rows(500, 1), rows(200, 2)
  td.write_split(str(root / "examples" / "Split-train"), train, "multiclass")
  td.write_split(str(root / "examples" / "Split-eval"), evals, "multiclass")
  schema = td.write_schema(str(root / "schema" / "schema.pbtxt"), "multiclass")
  return {"examples": str(root / "examples"), "schema": schema, "train": train, "eval": evals}


@pytest.fixture(scope="module")
def restored_model(tmp_path_factory):
  """A model as TFX's penguin module exports it: Keras on Transform's features, a list of named
  [None, 1] inputs, logits out, saved with tf.saved_model.save (no Keras config) with the
  `serving_default` and `transform_features` signatures and the Transform layer on the model.
  """
  import tensorflow_transform as tft

  root = tmp_path_factory.mktemp("restored")
  data = _write_banded_examples(root)
  transform_uri = _write_transform_graph(data["examples"], data["schema"], root / "transform")
  transform = tft.TFTransformOutput(transform_uri)
  raw_spec = transform.raw_feature_spec()

  def transformed(rows):
    parsed = tf.io.parse_example(tf.constant(td.serialize(rows, "multiclass")), raw_spec)
    return transform.transform_features_layer()(parsed)

  tf.keras.utils.set_random_seed(0)
  inputs = [tf.keras.Input((1,), name=f"{k}_xf") for k in TRANSFORMED]
  x = tf.keras.layers.Dense(16, activation="relu")(tf.keras.layers.concatenate(inputs))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(tf.keras.layers.Dropout(0.5)(x)))
  model.compile(
    tf.keras.optimizers.Adam(0.02),
    tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
  )
  train = {k: v.numpy() for k, v in transformed(data["train"]).items()}
  model.fit([train[f"{k}_xf"] for k in TRANSFORMED], train["label_xf"], epochs=30, verbose=0)

  model.tft_layer = transform.transform_features_layer()
  examples = tf.TensorSpec([None], tf.string, name="examples")

  @tf.function(input_signature=[examples])
  def serve(serialized):
    features = tf.io.parse_example(serialized, {k: raw_spec[k] for k in TRANSFORMED})
    return {"outputs": model(model.tft_layer(features))}

  @tf.function(input_signature=[examples])
  def transform_features(serialized):
    return model.tft_layer(tf.io.parse_example(serialized, raw_spec))

  model_uri = root / "model"
  signatures = {"serving_default": serve, "transform_features": transform_features}
  tf.saved_model.save(model, str(model_uri / "Format-Serving"), signatures=signatures)
  # The accuracy a client of the serving signature sees on the eval rows.
  evals = transformed(data["eval"])
  logits = serve(tf.constant(td.serialize(data["eval"], "multiclass")))["outputs"].numpy()
  accuracy = float(np.mean(logits.argmax(1) == evals["label_xf"].numpy()[:, 0]))
  return {**data, "model_uri": model_uri, "transform_uri": transform_uri, "accuracy": accuracy}


def test_a_label_the_transform_passes_on_renamed_is_read_from_the_raw_rows(restored_model):
  """TFX's penguin module turns `species` into `species_xf`: with --label-key species alone,
  the variants are scored on the raw column, as the Evaluator's TFMA scores the model. A text
  column is not a class index, so a raw text label still asks for --eval-label-key."""
  from components.optimizer import data_lib

  serving = str(restored_model["model_uri"] / "Format-Serving")
  model = data_lib.load_keras_model(serving)
  rows = restored_model["eval"][:40]
  serialized = td.serialize(rows, "multiclass")

  def reader(label_key):
    args = (serving, restored_model["schema"], label_key, restored_model["transform_uri"])
    return data_lib.RowReader(model, *args)

  # `age` is transformed into `age_xf` only: its raw values are the labels.
  labels = reader("age").read(serialized).labels
  expected = [np.nan if r["age"] is None else r["age"] for r in rows]
  np.testing.assert_allclose(labels, expected, equal_nan=True)
  with pytest.raises(tasks.LabelError, match=r"Transform does not pass it on.*--eval-label-key"):
    reader(td.LABEL).read(serialized)


def test_executor_converts_a_model_saved_with_tf_saved_model_save(tmp_path, restored_model):
  assert not (restored_model["model_uri"] / "Format-Serving" / "keras_metadata.pb").exists()
  optimized, report = run_executor(
    tmp_path,
    restored_model["model_uri"],
    restored_model["examples"],
    restored_model["schema"],
    restored_model["transform_uri"],
    label_key="label_xf",
    variants=[*defaults.DEFAULT_VARIANTS, "qat"],
    tensorrt="auto",
    latency_runs=20,
  )
  result = json.loads((pathlib.Path(report.uri) / "report.json").read_text())
  assert result["status"] == "ok" and result["task"] == "multiclass"
  assert result["rows"]["eval"] == len(restored_model["eval"])
  assert not result["preprocessing_included"]
  # Rows pass through the Transform graph: the baseline sees what the serving signature sees.
  assert result["baseline"]["accuracy"] == pytest.approx(restored_model["accuracy"])
  assert "keeps no Keras architecture" in result["size_basis"]
  entries = {e["name"]: e for e in result["variants"]}
  converted = ("tflite_float32", "tflite_dynamic_range", "tflite_float16", "tflite_int8", "onnx")
  for name in converted:
    entry = entries[name]
    assert entry["status"] == "ok", entry.get("reason")
    # The inference function (training=False: its Dropout is off) agrees with every variant.
    assert entry["agreement"] >= 0.99, (name, entry["agreement"], result["baseline"])
    assert entry["size_bytes"] > 0 and entry["latency_ms_p50"] > 0
  for name in ("pruned", "pruned_int8", "qat"):
    assert entries[name]["status"] == "skipped"
    assert "run_fn saved it with tf.saved_model.save" in entries[name]["reason"]
    assert KERAS_FIX in entries[name]["reason"]
  assert "pruned variants" in entries["pruned"]["reason"]
  assert "the qat variant" in entries["qat"]["reason"]
  trt = entries["tensorrt_fp16"]
  assert trt["status"] in ("skipped", "ok"), trt.get("reason")

  out = pathlib.Path(optimized.uri)
  assert sorted(os.listdir(out)) == [*sorted(converted), "variants.json"]
  blessed = json.loads(optimized.get_string_custom_property("blessed_variants"))
  assert set(converted) <= set(blessed)
  assert [v.name for v in variant_index.read_index(str(out))[1]] == blessed
  for name in ("tflite_int8", "onnx"):
    signature = json.loads((out / name / "signature.json").read_text())
    inputs = {i["name"]: i for i in signature["inputs"]}
    assert set(inputs) == {f"{k}_xf" for k in TRANSFORMED}
    assert all(i["columns"] == [n] and i["shape"] == [-1, 1] for n, i in inputs.items())
    assert signature["preprocessing_included"] is False
    assert "transform_graph" in signature
