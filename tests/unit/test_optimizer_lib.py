"""Tests of the Optimizer library on dict-input Keras models: every variant, signatures, gating."""

import dataclasses
import gzip
import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from components.errors import UserInputError
from components.optimizer import (
  conversions,
  data_lib,
  fine_tuning,
  measurement,
  optimizer_lib,
  report,
  run_config,
  runtimes,
  tensorrt_lib,
  variant_index,
  variants,
)
from models.tabular import layers as preprocessing_layers
from tests.support import tabular_data as td

TRT_REASON = tensorrt_lib.unavailable_reason()
NEEDS_NO_TENSORRT = pytest.mark.skipif(
  TRT_REASON is None, reason="this host can build TensorRT engines"
)
ALL_VARIANTS = (*run_config.DEFAULT_VARIANTS, variants.QAT)
COLUMNS = {"numeric": list(td.NUMERIC), "text_color": ["color"]}
MISSING = {"numeric": "NaN", "text_color": ""}


def sample(task: str, rows: int, seed: int):
  data = td.make_rows(rows, task, seed)
  return td.model_inputs(data), td.label_targets(data, task)


def build_model(task: str, train_inputs, activation: str = "relu") -> tf.keras.Model:
  """A dict-input model as the trainer builds it: preprocessing layers, then a small MLP."""
  tf.keras.utils.set_random_seed(0)
  numbers = train_inputs["numeric"]
  numeric = tf.keras.Input((len(td.NUMERIC),), name="numeric")
  color = tf.keras.Input((1,), dtype=tf.string, name="text_color")
  x = tf.keras.layers.Concatenate()(
    [
      preprocessing_layers.NumericPreprocessing(
        np.nanmean(numbers, 0), np.nanstd(numbers, 0), np.isnan(numbers).any(0)
      )(numeric),
      preprocessing_layers.CategoryOneHot(list(td.COLORS), missing_slot=True)(color),
    ]
  )
  x = tf.keras.layers.Dense(64, activation=activation)(x)
  x = tf.keras.layers.Dense(64, activation="relu")(x)
  if task == "regression":
    outputs, loss = tf.keras.layers.Dense(1)(x), "mse"
  else:
    outputs = tf.keras.layers.Dense(3, activation="softmax")(x)
    loss = "sparse_categorical_crossentropy"
  model = tf.keras.Model({"numeric": numeric, "text_color": color}, outputs)
  model.compile(tf.keras.optimizers.Adam(0.01), loss, steps_per_execution=10)
  return model


def train(task: str, train_inputs, labels, epochs: int = 20, activation: str = "relu"):
  model = build_model(task, train_inputs, activation)
  feed = {k: v.astype(bytes) if v.dtype == object else v for k, v in train_inputs.items()}
  model.fit(feed, labels, epochs=epochs, batch_size=64, verbose=0)
  return model


def facts(task: str) -> run_config.ModelFacts:
  return run_config.ModelFacts(
    task=task,
    label_key="label",
    classes=td.CLASSES.get(task, ()),
    output="what the output means",
    columns=COLUMNS,
    missing=MISSING,
  )


def quick(variant_names, **options) -> run_config.OptimizerConfig:
  options = {"tensorrt": "off", "latency_runs": 20, "warmup_runs": 2, **options}
  return run_config.OptimizerConfig(variants=tuple(variant_names), **options)


@pytest.fixture(scope="module")
def data():
  """(train inputs, train labels, eval inputs, eval labels) of the multiclass data."""
  return (*sample("multiclass", 800, 1), *sample("multiclass", 300, 2))


@pytest.fixture(scope="module")
def model(data):
  return train("multiclass", data[0], data[1])


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, model, data):
  """One optimize() with every variant (QAT included) and tensorrt='auto'."""
  output_dir = tmp_path_factory.mktemp("optimized")
  config = run_config.OptimizerConfig(variants=ALL_VARIANTS, tensorrt="auto", latency_runs=50)
  result = run(model, data, str(output_dir), config)
  return result, output_dir


def run(model, data, output_dir: str, config) -> dict:
  """optimize() on (train inputs, train labels, eval inputs, eval labels) of the multiclass data."""
  train_inputs, _, eval_inputs, eval_labels = data
  return optimizer_lib.optimize(
    model, train_inputs, eval_inputs, eval_labels, output_dir, facts("multiclass"), config
  )


def by_name(result: dict) -> dict:
  return {entry["name"]: entry for entry in result["variants"]}


def keras_outputs(model, inputs):
  return runtimes.predict_batched(runtimes.KerasRuntime(model), inputs)


def test_every_variant_converts_runs_and_is_measured(full_run, data):
  result, output_dir = full_run
  eval_y = data[3]
  entries = by_name(result)
  assert list(entries) == list(run_config.VARIANT_ORDER)
  assert result["task"] == "multiclass" and result["metric"] == "accuracy"
  assert result["rows"] == {"train": 800, "eval": 300}
  baseline = result["baseline"]
  assert baseline["accuracy"] > 0.85
  assert baseline["latency_runs"] == 50
  measured = [n for n, e in entries.items() if n not in (variants.QAT, variants.TENSORRT_FP16)]
  for name in measured:
    entry = entries[name]
    assert entry["status"] == "ok", (name, entry.get("reason"))
    assert 0.75 < entry["accuracy"] <= 1.0, name
    assert entry["metric_value"] == entry["accuracy"]
    assert entry["agreement"] > 0.8, name
    assert entry["metric_drop"] == pytest.approx(
      (baseline["accuracy"] - entry["accuracy"]) * 100, abs=1e-6
    )
    assert 0 < entry["gzipped_size_bytes"] < entry["size_bytes"], name
    assert 0 < entry["latency_ms_p50"] <= entry["latency_ms_p90"], name
    assert entry["latency_runs"] == 50
    assert entry["ratios"]["size_bytes"] == pytest.approx(
      entry["size_bytes"] / baseline["size_bytes"]
    )
    assert (output_dir / entry["path"]).is_file()
    # Sizes cover every model file (one for TFLite and ONNX, a SavedModel's tree for pruned).
    files = [output_dir / f for f in entry["files"] if not f.endswith("signature.json")]
    assert sum(f.stat().st_size for f in files) == entry["size_bytes"]
    assert sum(len(gzip.compress(f.read_bytes(), 9)) for f in files) == entry["gzipped_size_bytes"]
    assert entry["select_tf_ops"] is False, name  # builtin ops suffice for this model
  # Accuracy is measured, not copied: count the int8 model's correct predictions ourselves.
  with runtimes.TFLiteRuntime(str(output_dir / entries["tflite_int8"]["path"])) as runtime:
    predictions = runtimes.predict_batched(runtime, data[2]).argmax(1)
  assert entries["tflite_int8"]["accuracy"] == pytest.approx(np.mean(predictions == eval_y))
  # Only converted variants leave a folder, each with its model file and signature.json.
  ok = [n for n, e in entries.items() if e["status"] == "ok"]
  assert {p.name for p in output_dir.iterdir()} == {"variants.json", *ok}
  for name in ok:
    on_disk = {
      str(p.relative_to(output_dir)) for p in (output_dir / name).rglob("*") if p.is_file()
    }
    assert on_disk == set(entries[name]["files"]), name
  index = json.loads((output_dir / "variants.json").read_text())
  assert index["format"] == variant_index.INDEX_FORMAT
  assert index["task"] == "multiclass"
  assert index["variants"] == json.loads(json.dumps(entries))
  assert index["blessed_variants"] == result["blessed_variants"]
  json.dumps(result)  # The report must be JSON-serialisable as is.


def test_signature_json_gives_a_client_the_input_contract(full_run):
  result, output_dir = full_run
  entries = by_name(result)
  for name in ("tflite_float32", "tflite_int8", "onnx", "pruned"):
    signature = json.loads((output_dir / name / "signature.json").read_text())
    assert signature == json.loads(json.dumps(entries[name]["signature"]))
    assert signature["variant"] == name
    assert signature["model_file"] == os.path.basename(entries[name]["path"])
    assert signature["task"] == "multiclass"
    assert signature["label"] == {"key": "label", "classes": ["high", "low", "mid"]}
    assert signature["output_meaning"] == "what the output means"
    assert signature["preprocessing_included"] is True
    inputs = {i["name"]: i for i in signature["inputs"]}
    assert set(inputs) == {"numeric", "text_color"}
    # Positions follow the runtime's own input order.
    assert [i["position"] for i in signature["inputs"]] == [0, 1]
    assert inputs["numeric"]["dtype"] == "float32"
    assert inputs["numeric"]["shape"] == [-1, 3]
    assert inputs["numeric"]["columns"] == ["age", "income", "ratio"]
    assert inputs["numeric"]["missing_value"] == "NaN"
    assert inputs["text_color"]["dtype"] == "string"
    assert inputs["text_color"]["shape"] == [-1, 1]
    assert inputs["text_color"]["columns"] == ["color"]
    assert inputs["text_color"]["missing_value"] == ""
    [output] = signature["outputs"]
    assert output["dtype"] == "float32"
    for entry in signature["inputs"] + signature["outputs"]:
      if "quantization" in entry:
        assert entry["quantization"]["scale"] > 0
        assert isinstance(entry["quantization"]["zero_point"], int)
  tflite = json.loads((output_dir / "tflite_int8" / "signature.json").read_text())
  assert tflite["signature_key"] == "serving_default"
  assert tflite["runtime"] == "tflite"
  assert json.loads((output_dir / "onnx" / "signature.json").read_text())["runtime"] == (
    "onnxruntime"
  )


def test_int8_keeps_float_io_and_preprocessing_in_float(full_run, data):
  entries = by_name(full_run[0])
  int8, float32 = entries["tflite_int8"], entries["tflite_float32"]
  assert int8["size_bytes"] < 0.6 * float32["size_bytes"]
  assert entries["tflite_dynamic_range"]["size_bytes"] < float32["size_bytes"]
  assert entries["tflite_float16"]["size_bytes"] < float32["size_bytes"]
  assert int8["details"]["tflite_mode"] == "int8"
  assert set(int8["details"]["float_ops"]) >= {"SUB", "MUL", "NOT_EQUAL", "SELECT_V2"}
  assert int8["details"]["op_sets"] == ["TFLITE_BUILTINS_INT8", "TFLITE_BUILTINS"]
  assert float32["details"]["op_sets"] == ["TFLITE_BUILTINS"]
  # Callers feed floats and text; outputs come back as float probabilities.
  path = str(full_run[1] / int8["path"])
  with runtimes.TFLiteRuntime(path) as runtime:
    assert runtime.input_details["numeric"]["dtype"] == np.float32
    single = runtime.predict(runtimes.take(data[2], 0, 1))
    batch = runtime.predict(runtimes.take(data[2], 0, 5))
  assert single.dtype == np.float32
  np.testing.assert_allclose(single[0], batch[0], atol=1e-6)
  np.testing.assert_allclose(batch.sum(axis=1), 1.0, atol=0.05)


def test_missing_values_and_unseen_text_run_in_every_runtime(full_run, model):
  _, output_dir = full_run
  entries = by_name(full_run[0])
  rows = {
    "numeric": np.array([[np.nan, np.nan, np.nan], [30, 2e4, 0.5]], np.float32),
    "text_color": np.array([[b""], [b"purple"]], dtype=object),
  }
  expected = keras_outputs(model, rows)
  assert np.isfinite(expected).all()
  for name in ("tflite_float32", "onnx"):
    runtime = variants.create(name).load(
      str(output_dir / name), variants.Conversion([os.path.basename(entries[name]["path"])])
    )
    with runtime:
      np.testing.assert_allclose(runtime.predict(rows), expected, atol=1e-5)


def test_pruned_variant_reaches_target_sparsity(full_run):
  result, output_dir = full_run
  entry = by_name(result)["pruned"]
  target = result["config"]["target_sparsity"]
  assert entry["details"]["target_sparsity"] == target
  assert entry["details"]["sparsity"]["overall"] >= target - 0.01
  # Check the saved weights directly rather than trusting the report: the Dense kernels (2-D
  # float variables) of the shipped SavedModel, loaded without any of this project's code.
  loaded = tf.saved_model.load(str(output_dir / "pruned"))
  variables = loaded.signatures["model_inputs"].variables
  kernels = [v.numpy() for v in variables if "kernel" in v.name and len(v.shape) == 2]
  assert kernels
  zeros = sum(int(np.sum(k == 0)) for k in kernels)
  assert zeros / sum(k.size for k in kernels) >= target - 0.01
  assert entry["runtime"] == "tensorflow" and entry["path"] == "pruned/saved_model.pb"
  assert set(loaded.signatures) == {"model_inputs", "serving_default"}
  # The preprocessing survives pruning: the model_inputs signature takes the raw columns.
  assert entry["signature"]["signature_key"] == "model_inputs"


def test_pruned_int8_keeps_sparsity_and_compresses(full_run):
  result, output_dir = full_run
  entries = by_name(result)
  entry = entries["pruned_int8"]
  interpreter = tf.lite.Interpreter(model_path=str(output_dir / entry["path"]))
  interpreter.allocate_tensors()
  zeros = total = 0
  for detail in interpreter.get_tensor_details():
    # Int8 weight matrices (2-D constant tensors); weight zero points are 0, so pruned stays 0.
    if detail["dtype"] == np.int8 and len(detail["shape"]) == 2 and detail["shape"][0] > 1:
      try:
        values = interpreter.get_tensor(detail["index"])
      except ValueError:
        continue
      zeros += int(np.sum(values == 0))
      total += values.size
  assert total > 0
  assert zeros / total >= 0.75
  assert entry["gzipped_size_bytes"] < entries["tflite_int8"]["gzipped_size_bytes"]
  assert entry["gzipped_size_bytes"] < 0.5 * result["baseline"]["gzipped_size_bytes"]


def test_qat_variant_is_int8(full_run):
  entry = by_name(full_run[0])["qat"]
  assert entry["status"] == "ok", entry.get("reason")
  assert entry["details"]["qat_scope"] == "dense_and_convolution_layers"
  assert entry["size_bytes"] < by_name(full_run[0])["tflite_float32"]["size_bytes"]


def test_qat_variant_on_a_numeric_only_model(tmp_path):
  train_inputs, train_labels = sample("multiclass", 400, 1)
  eval_inputs, eval_labels = sample("multiclass", 200, 2)
  numbers = train_inputs["numeric"]
  tf.keras.utils.set_random_seed(0)
  numeric = tf.keras.Input((3,), name="numeric")
  x = preprocessing_layers.NumericPreprocessing(
    np.nanmean(numbers, 0), np.nanstd(numbers, 0), np.isnan(numbers).any(0)
  )(numeric)
  x = tf.keras.layers.Dense(32, activation="relu")(x)
  model = tf.keras.Model({"numeric": numeric}, tf.keras.layers.Dense(3, activation="softmax")(x))
  model.compile(tf.keras.optimizers.Adam(0.01), "sparse_categorical_crossentropy")
  model.fit({"numeric": numbers}, train_labels, epochs=5, batch_size=64, verbose=0)
  result = optimizer_lib.optimize(
    model,
    {"numeric": numbers},
    {"numeric": eval_inputs["numeric"]},
    eval_labels,
    str(tmp_path),
    run_config.ModelFacts(task="multiclass", label_key="label"),
    quick([variants.QAT], min_fine_tune_steps=50, fine_tune_epochs=1),
  )
  entry = result["variants"][0]
  assert entry["status"] == "ok", entry.get("reason")
  assert entry["details"]["qat_scope"] == "dense_and_convolution_layers"
  assert entry["details"]["tflite_mode"] == "int8"


def test_onnx_parity_check(full_run, model, data):
  result, output_dir = full_run
  entry = by_name(result)["onnx"]
  parity = entry["details"]["onnx_parity"]
  assert parity["passed"] is True
  assert parity["max_abs_diff"] < 1e-4
  assert parity["rows"] == len(data[3])
  # Recompute the parity with onnxruntime and TensorFlow directly.
  with runtimes.OnnxRuntime(str(output_dir / entry["path"])) as runtime:
    onnx_probs = runtime.predict(data[2])
  tf_probs = keras_outputs(model, data[2])
  assert np.max(np.abs(onnx_probs - tf_probs)) == pytest.approx(parity["max_abs_diff"], abs=1e-5)


def test_onnx_parity_detects_a_mismatch(full_run, data):
  result, output_dir = full_run
  onnx_path = str(output_dir / by_name(result)["onnx"]["path"])
  with runtimes.OnnxRuntime(onnx_path) as runtime:
    reference = np.roll(runtimes.predict_batched(runtime, data[2]), 1, axis=1)
  parity = variants.onnx_parity(onnx_path, data[2], reference, tolerance=1e-4)
  assert parity["passed"] is False
  assert parity["max_abs_diff"] > 0.1


def test_tensorrt_auto_skips_a_model_with_text_inputs(full_run):
  entries = by_name(full_run[0])
  entry = entries[variants.TENSORRT_FP16]
  assert entry["status"] == "skipped"
  assert "text inputs ['text_color']" in entry["reason"]
  assert entry["blessed"] is False
  # The ONNX model is produced and measured either way.
  assert entries["onnx"]["status"] == "ok"
  assert entries["onnx"]["runtime"] == "onnxruntime"


@NEEDS_NO_TENSORRT
def test_unavailable_reason_names_the_missing_pieces(monkeypatch):
  monkeypatch.setattr(tensorrt_lib.importlib.util, "find_spec", lambda name: None)
  reason = tensorrt_lib.unavailable_reason()
  assert reason.startswith("tensorrt Python package not installed: pip install .[tensorrt]")


def test_tensorrt_off_has_no_engine_and_no_onnx(tmp_path, model, data):
  config = quick([variants.TFLITE_FLOAT32])
  result = run(model, data, str(tmp_path), config)
  assert [e["name"] for e in result["variants"]] == ["tflite_float32"]
  assert sorted(os.listdir(tmp_path)) == ["tflite_float32", "variants.json"]


@NEEDS_NO_TENSORRT
def test_tensorrt_required_fails_clearly_and_writes_nothing(tmp_path, model, data):
  config = quick([variants.TFLITE_FLOAT32], tensorrt="required")
  with pytest.raises(tensorrt_lib.TensorRTUnavailableError) as raised:
    run(model, data, str(tmp_path), config)
  message = str(raised.value)
  assert message.startswith("tensorrt='required' but ")
  assert TRT_REASON in message
  assert "tensorrt='auto'" in message
  assert os.listdir(tmp_path) == []


def test_blessing_follows_the_accuracy_bound(full_run):
  result, _ = full_run
  bound = result["config"]["max_accuracy_drop"]
  for entry in result["variants"]:
    if entry["status"] == "ok":
      assert entry["blessed"] == (entry["metric_drop"] <= bound)
    else:
      assert entry["blessed"] is False
  assert result["blessed_variants"] == [e["name"] for e in result["variants"] if e["blessed"]]
  assert {"tflite_float32", "onnx"} <= set(result["blessed_variants"])


def test_read_index_returns_blessed_variants_for_the_pusher(full_run):
  result, output_dir = full_run
  index, blessed = variant_index.read_index(str(output_dir))
  assert index["blessed_variants"] == result["blessed_variants"]
  assert [v.name for v in blessed] == result["blessed_variants"]
  entries = by_name(result)
  for variant in blessed:
    assert variant.folder == os.path.join(str(output_dir), variant.name)
    assert variant.signature == json.loads(
      (output_dir / variant.name / "signature.json").read_text()
    )
    assert variant.metrics["path"] == entries[variant.name]["path"]
    assert variant.metrics["accuracy"] == entries[variant.name]["accuracy"]
    assert variant.metrics["select_tf_ops"] is False
    assert "details" not in variant.metrics
  assert variant_index.read_index(str(output_dir / "nothing_here")) == ({}, [])


def test_zero_bound_blesses_only_what_matches_the_baseline(tmp_path, model, data):
  config = quick([variants.TFLITE_FLOAT32], max_accuracy_drop=0.0)
  result = run(model, data, str(tmp_path), config)
  entry = result["variants"][0]
  assert entry["status"] == "ok"
  assert entry["agreement"] == 1.0 and entry["metric_drop"] == 0.0
  assert entry["blessed"] is True
  assert result["blessed_variants"] == ["tflite_float32"]


class SabotagedVariant(variants.TFLiteFloat32Variant):
  """Converts the baseline after scrambling its weights, so accuracy collapses."""

  name = "sabotaged"

  def keras_model(self, context):
    model = context.load_baseline()
    rng = np.random.default_rng(0)
    model.set_weights([rng.permutation(w.ravel()).reshape(w.shape) for w in model.get_weights()])
    return model, {"sabotaged": True}


class BrokenVariant(variants.TFLiteFloat32Variant):
  """A variant whose converter raises."""

  name = "broken"

  def convert(self, context, out_dir):
    (pathlib.Path(out_dir) / "half_written.tflite").write_bytes(b"partial")
    raise RuntimeError("converter exploded on op FancyOp")


class RefusedVariant(variants.TFLiteFloat32Variant):
  """A variant whose conversion is known not to work for this model."""

  name = "refused"

  def convert(self, context, out_dir):
    (pathlib.Path(out_dir) / "half_written.tflite").write_bytes(b"partial")
    raise conversions.ConversionRefused("FancyOp crashes this converter; serve tflite_float32.")


def test_gate_rejects_a_sabotaged_variant_and_isolates_a_failure(
  tmp_path, model, data, monkeypatch
):
  for cls in (SabotagedVariant, BrokenVariant, RefusedVariant):
    monkeypatch.setitem(variants.VARIANTS, cls.name, cls)
  config = quick(["broken", "refused", variants.TFLITE_FLOAT32, "sabotaged"])
  result = run(model, data, str(tmp_path), config)
  entries = by_name(result)
  assert entries["broken"]["status"] == "failed"
  assert entries["broken"]["reason"] == "RuntimeError: converter exploded on op FancyOp"
  # A refusal is a skip with its own words, not a failure.
  assert entries["refused"]["status"] == "skipped"
  assert entries["refused"]["reason"] == "FancyOp crashes this converter; serve tflite_float32."
  assert entries["sabotaged"]["status"] == "ok"
  assert entries["sabotaged"]["metric_drop"] > 1.0
  assert entries["sabotaged"]["agreement"] < 0.9
  assert entries["sabotaged"]["blessed"] is False
  assert entries["tflite_float32"]["blessed"] is True
  assert result["blessed_variants"] == ["tflite_float32"]
  # The failed and refused variants' half-written folders are gone.
  assert sorted(os.listdir(tmp_path)) == ["sabotaged", "tflite_float32", "variants.json"]


def test_an_op_without_a_builtin_converts_with_select_tf_ops(tmp_path, data):
  # TFLite has no builtin Softsign: the conversion retries with Select TF ops and says so.
  softsign = train("multiclass", data[0], data[1], epochs=3, activation="softsign")
  config = quick([variants.TFLITE_FLOAT32, variants.ONNX])
  result = run(softsign, data, str(tmp_path), config)
  entries = by_name(result)
  tflite = entries[variants.TFLITE_FLOAT32]
  assert tflite["status"] == "ok", tflite.get("reason")
  assert tflite["select_tf_ops"] is True
  assert tflite["details"]["op_sets"] == ["TFLITE_BUILTINS", "SELECT_TF_OPS"]
  assert tflite["agreement"] == 1.0
  assert variant_index.read_index(str(tmp_path))[0]["variants"]["tflite_float32"]["select_tf_ops"]
  assert entries[variants.ONNX]["select_tf_ops"] is False


def test_float16_refuses_constants_beyond_its_range():
  numeric = tf.keras.Input((1,), name="numeric")
  layer = preprocessing_layers.NumericPreprocessing([1e6], [1e5], [False], name="big")
  model = tf.keras.Model({"numeric": numeric}, tf.keras.layers.Dense(1)(layer(numeric)))
  with pytest.raises(
    conversions.ConversionRefused, match="layer 'big' holds values up to 1e\\+06, beyond float16"
  ):
    variants._check_float16_range(model)


def test_baseline_problems_fail_the_run(tmp_path, model, data):
  train_x, _, eval_x, eval_y = data
  config = quick([variants.TFLITE_FLOAT32])
  empty = runtimes.take(eval_x, 0, 0)
  with pytest.raises(UserInputError, match="train or eval sample is empty"):
    optimizer_lib.optimize(
      model, train_x, empty, eval_y[:0], str(tmp_path), facts("multiclass"), config
    )
  with pytest.raises(UserInputError, match="Unknown optimizer variant"):
    run(model, data, str(tmp_path), quick(["tflite_int4"]))
  assert os.listdir(tmp_path) == []


def _gate(judge, value, baseline, max_drop, agreement=1.0, min_agreement=0.9):
  config = run_config.OptimizerConfig(max_accuracy_drop=max_drop, min_agreement=min_agreement)
  return judge.gate({"metric_value": value, "agreement": agreement}, baseline, config)


def test_gate_bound_is_inclusive_and_task_aware():
  labels = np.array([0, 1])
  judge = measurement.Judge("multiclass", labels, np.eye(2, dtype=np.float32))
  assert _gate(judge, 0.95, 0.96, 1.0) == (True, 1.0, "")
  assert _gate(judge, 0.949, 0.96, 1.0)[0] is False
  assert _gate(judge, 0.97, 0.96, -0.5) == (True, -1.0, "")
  # Regression: the drop is the percent by which the RMSE grew; lower is better.
  values = np.array([1.0, 3.0], np.float32)
  regression = measurement.Judge("regression", values, values.reshape(-1, 1))
  assert regression.metric_name == "rmse"
  assert _gate(regression, 1.01, 1.0, 1.0) == (True, 1.0, "")
  assert _gate(regression, 1.02, 1.0, 1.0)[0] is False
  assert _gate(regression, 0.9, 1.0, 0.0) == (True, -10.0, "")
  # A one-column classifier output outside [0, 1] is a logit, thresholded at 0.
  logits = measurement.Judge("binary", labels, np.array([[-2.0], [3.0]], np.float32))
  assert logits.metrics(np.array([[-0.1], [0.2]], np.float32))["accuracy"] == 1.0


def test_a_variant_that_misses_its_gate_says_which_bound():
  judge = measurement.Judge("multiclass", np.array([0, 1]), np.eye(2, dtype=np.float32))
  blessed, _, why = _gate(judge, 0.90, 0.96, 1.0, agreement=0.99)
  assert not blessed and why == "metric: +6.00 accuracy points, over the 1 allowed"
  blessed, _, why = _gate(judge, 0.96, 0.96, 1.0, agreement=0.8)
  assert not blessed
  assert why == "agreement: 80.0% of the rows agree with the baseline, under the 90% required"
  blessed, _, why = _gate(judge, 0.90, 0.96, 1.0, agreement=0.8)
  assert not blessed and why.startswith("metric: ") and "; agreement: 80.0%" in why
  regression = measurement.Judge("regression", np.array([1.0, 3.0]), np.ones((2, 1)))
  assert _gate(regression, 1.05, 1.0, 1.0, agreement=0.95)[2] == (
    "metric: +5.00% of the RMSE, over the 1 allowed"
  )


def test_the_confidence_interval_shrinks_with_the_rows():
  rng = np.random.default_rng(0)
  widths = []
  for n in (100, 10_000):
    labels = rng.integers(0, 2, n)
    outputs = np.eye(2, dtype=np.float32)[np.where(rng.random(n) < 0.9, labels, 1 - labels)]
    judge = measurement.Judge("multiclass", labels, outputs)
    p = float(np.mean(outputs.argmax(1) == labels))
    # The normal interval's half-width, 1.96 * sqrt(p (1 - p) / n) in points, which Wilson's
    # approaches as the rows grow: about 6 points at 100 rows, 0.6 at 10,000.
    widths.append((judge.confidence(outputs), 196 * np.sqrt(p * (1 - p) / n)))
  assert widths[0][0] == pytest.approx(widths[0][1], rel=0.1)
  assert widths[1][0] == pytest.approx(widths[1][1], rel=0.01) and widths[1][0] < 0.7
  values = rng.normal(0, 1, 10_000)
  regression = measurement.Judge("regression", values, (values + 0.5).reshape(-1, 1))
  # A constant error: the squared errors do not vary, so the RMSE is known exactly.
  assert regression.confidence((values + 0.5).reshape(-1, 1)) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(
  ("options", "message"),
  [
    ({"variants": ("tflite_int4",)}, "Unknown optimizer variant"),
    ({"variants": "tflite_int8"}, "list of names"),
    ({"tensorrt": "maybe"}, "tensorrt='maybe'"),
    ({"target_sparsity": 1.0}, "target_sparsity"),
    ({"latency_runs": 0}, "latency_runs"),
    ({"max_accuracy_drop": -1.0}, "must not be negative"),
  ],
)
def test_config_rejects_nonsense(options, message):
  with pytest.raises(UserInputError, match=message):
    run_config.OptimizerConfig(**options).validate()


def test_variant_names_follow_the_tensorrt_mode():
  names = run_config.OptimizerConfig(variants=("tflite_int8",), tensorrt="auto").variant_names()
  assert names == ["tflite_int8", "onnx", "tensorrt_fp16"]
  off = run_config.OptimizerConfig(variants=("tflite_int8", "tensorrt_fp16"), tensorrt="off")
  assert off.variant_names() == ["tflite_int8"]


def test_representative_dataset_yields_single_row_dicts(data):
  rows = list(conversions.representative_dataset(data[0], 7)())
  assert len(rows) == 7
  assert set(rows[0]) == {"numeric", "text_color"}
  assert rows[0]["numeric"].shape == (1, 3) and rows[0]["numeric"].dtype == np.float32
  # Text as numpy bytes: given Python objects the calibration would see every value as OOV.
  assert rows[0]["text_color"].shape == (1, 1) and rows[0]["text_color"].dtype.kind == "S"


def test_write_report_files(tmp_path, full_run):
  paths = report.write_report(full_run[0], str(tmp_path))
  assert json.loads(pathlib.Path(paths[report.REPORT_JSON]).read_text()) == json.loads(
    json.dumps(full_run[0])
  )
  markdown = pathlib.Path(paths[report.REPORT_MD]).read_text()
  assert "Task: multiclass" in markdown
  for entry in full_run[0]["variants"]:
    assert f"| {entry['name']} | {entry['status']} |" in markdown
  assert pathlib.Path(paths[report.REPORT_PNG]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert not list(tmp_path.glob("*.tmp"))


def test_skipped_report_has_every_variant_skipped(tmp_path):
  result = optimizer_lib.skipped_report("not a Keras model", run_config.OptimizerConfig())
  assert result["status"] == "skipped"
  assert {e["status"] for e in result["variants"]} == {"skipped"}
  assert {e["reason"] for e in result["variants"]} == {"not a Keras model"}
  assert result["blessed_variants"] == []
  paths = report.write_report(result, str(tmp_path))
  assert "Nothing was optimized: not a Keras model" in pathlib.Path(paths["report.md"]).read_text()


def test_fine_tuning_leaves_no_graph_in_the_global_gradient_registry(data):
  # Model.fit registers a tf.custom_gradient per trace in this process-wide registry, which keeps
  # every traced training graph alive; fine_tune must not (this was a ~25 MB per run leak).
  from tensorflow.python.framework import ops

  def custom_gradients() -> int:
    return sum(1 for key in ops._gradient_registry.list() if key.startswith("CustomGradient"))

  before = custom_gradients()
  model = build_model("multiclass", data[0])
  targets = keras_outputs(model, runtimes.take(data[0], 0, 256))
  pruned = fine_tuning.prune(
    model,
    runtimes.take(data[0], 0, 256),
    targets,
    target_sparsity=0.5,
    epochs=1,
    batch_size=32,
    learning_rate=1e-3,
  )
  assert fine_tuning.kernel_sparsity(pruned)["overall"] >= 0.49
  assert custom_gradients() == before
  tf.keras.backend.clear_session()


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory):
  train_inputs, train_labels = sample("regression", 800, 1)
  eval_inputs, eval_labels = sample("regression", 300, 2)
  model = train("regression", train_inputs, train_labels, epochs=30)
  output_dir = tmp_path_factory.mktemp("regression")
  config = quick(
    [variants.TFLITE_FLOAT32, variants.TFLITE_INT8, variants.ONNX], max_accuracy_drop=2.0
  )
  result = optimizer_lib.optimize(
    model, train_inputs, eval_inputs, eval_labels, str(output_dir), facts("regression"), config
  )
  return result, output_dir, eval_labels


def test_regression_variants_are_judged_by_rmse_and_agreement(regression_run):
  result, output_dir, eval_labels = regression_run
  assert result["task"] == "regression" and result["metric"] == "rmse"
  baseline = result["baseline"]
  assert baseline["rmse"] < 0.5 * float(np.std(eval_labels))
  assert baseline["mae"] <= baseline["rmse"]
  assert "accuracy" not in baseline
  entries = by_name(result)
  for name, entry in entries.items():
    assert entry["status"] == "ok", (name, entry.get("reason"))
    assert entry["metric_value"] == entry["rmse"]
    assert entry["metric_drop"] == pytest.approx(
      (entry["rmse"] - baseline["rmse"]) / baseline["rmse"] * 100, abs=1e-4
    )
    assert entry["blessed"] == (entry["metric_drop"] <= 2.0)
    assert 0.0 <= entry["agreement"] <= 1.0
  for name in (variants.TFLITE_FLOAT32, variants.ONNX):
    assert entries[name]["agreement"] == 1.0
    assert entries[name]["blessed"] is True
  signature = json.loads((output_dir / "onnx" / "signature.json").read_text())
  assert signature["task"] == "regression"
  assert signature["label"] == {"key": "label", "classes": []}
  index, blessed = variant_index.read_index(str(output_dir))
  assert index["task"] == "regression"
  assert {v.name for v in blessed} >= {"tflite_float32", "onnx"}
  assert all("rmse" in v.metrics and "accuracy" not in v.metrics for v in blessed)


def taxi_like_sample(rows: int, seed: int):
  """Inputs as TFX's taxi module's model takes them: named [n, 1] float32 and int32 columns.

  The label is `miles_xf + company_xf / 10 > 0.7`; rows within 0.05 of the bound are left out,
  so that no row lies on the model's decision boundary (where int8's rounding may flip it).
  """
  rng = np.random.default_rng(seed)
  miles = rng.uniform(0, 1, (rows, 1)).astype(np.float32)
  company = rng.integers(0, 5, (rows, 1)).astype(np.int32)
  score = miles[:, 0] + company[:, 0] / 10
  keep = np.abs(score - 0.7) > 0.05
  labels = score > 0.7
  return {"miles_xf": miles[keep], "company_xf": company[keep]}, labels[keep].astype(np.int64)


def test_a_model_saved_with_tf_saved_model_save_converts_from_its_inference_function(tmp_path):
  train_inputs, train_labels = taxi_like_sample(800, 1)
  eval_inputs, eval_labels = taxi_like_sample(300, 2)
  tf.keras.utils.set_random_seed(0)
  inputs = {
    "miles_xf": tf.keras.Input((1,), name="miles_xf"),
    "company_xf": tf.keras.Input((1,), dtype=tf.int32, name="company_xf"),
  }
  # Not one-hot: TFLite's int8 ONE_HOT reads its off value with the wrong scale (0.5, not 0).
  company = tf.keras.layers.Lambda(lambda c: tf.cast(c, tf.float32) / 4)(inputs["company_xf"])
  x = tf.keras.layers.concatenate([inputs["miles_xf"], company])
  x = tf.keras.layers.Dropout(0.5)(tf.keras.layers.Dense(32, activation="relu")(x))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(1, activation="sigmoid")(x))
  model.compile(tf.keras.optimizers.Adam(0.02), "binary_crossentropy", steps_per_execution=10)
  model.fit(train_inputs, train_labels, epochs=40, batch_size=64, verbose=0)
  serving_dir = str(tmp_path / "serving")
  serve = tf.function(lambda features: {"outputs": model(features)})
  specs = {k: tf.TensorSpec([None, 1], v.dtype, name=k) for k, v in inputs.items()}
  tf.saved_model.save(model, serving_dir, signatures=serve.get_concrete_function(specs))

  restored = data_lib.load_keras_model(serving_dir)
  assert conversions.restored_call(restored) is not None
  assert {k: s.dtype for k, s in data_lib.input_specs(restored).items()} == {
    "miles_xf": tf.float32,
    "company_xf": tf.int32,
  }
  # The inference function (training=False): Dropout is off, outputs are the model's own.
  expected = model.predict(eval_inputs, verbose=0)
  np.testing.assert_allclose(keras_outputs(restored, eval_inputs), expected, atol=1e-6)

  output_dir = tmp_path / "optimized"
  output_dir.mkdir()
  converted = (*variants_of("tflite"), variants.ONNX)
  config = quick([*converted, variants.PRUNED, variants.PRUNED_INT8, variants.QAT])
  binary = dataclasses.replace(facts("binary"), columns={}, missing={})
  result = optimizer_lib.optimize(
    restored, train_inputs, eval_inputs, eval_labels, str(output_dir), binary, config
  )
  assert result["baseline"]["accuracy"] == float(np.mean((expected[:, 0] >= 0.5) == eval_labels))
  entries = by_name(result)
  for name in converted:
    assert entries[name]["status"] == "ok", (name, entries[name].get("reason"))
    assert entries[name]["agreement"] >= 0.99, (name, entries[name]["agreement"])
  for name in (variants.PRUNED, variants.PRUNED_INT8, variants.QAT):
    assert entries[name]["status"] == "skipped"
    assert (
      "which keeps no Keras config: save with model.save(fn_args.serving_model_dir, "
      in (entries[name]["reason"])
    )
  signature = json.loads((output_dir / "tflite_int8" / "signature.json").read_text())
  assert {i["name"]: (i["dtype"], i["columns"]) for i in signature["inputs"]} == {
    "miles_xf": ("float32", ["miles_xf"]),
    "company_xf": ("int32", ["company_xf"]),
  }


def variants_of(prefix: str) -> tuple[str, ...]:
  return tuple(v for v in run_config.VARIANT_ORDER if v.startswith(prefix))


def test_a_call_function_to_choose_by_guessing_is_refused(tmp_path):
  module = tf.Module()
  module.scale = tf.Variable(2.0)
  module.__call__ = tf.function(lambda x: x * module.scale)
  module.__call__(tf.zeros([2, 1]))
  module.__call__(tf.zeros([2, 3]))
  tf.saved_model.save(module, str(tmp_path))
  with pytest.raises(data_lib.OptimizerInputError, match="has 2 call functions and no training"):
    data_lib.load_keras_model(str(tmp_path))


def test_int8_refuses_a_graph_the_converter_crashes_on(tmp_path):
  # Keras' CategoryEncoding is DenseBincount, which TensorFlow 2.16's int8 converter segfaults on.
  code = tf.keras.Input((1,), dtype=tf.int32, name="code")
  encoded = tf.keras.layers.CategoryEncoding(num_tokens=4)(code)
  model = tf.keras.Model({"code": code}, tf.keras.layers.Dense(2)(encoded))
  exported = conversions.export_saved_model(model, str(tmp_path / "export"))
  sample_inputs = {"code": np.array([[0], [3]], np.int32)}
  representative = conversions.representative_dataset(sample_inputs, 2)
  with pytest.raises(
    conversions.ConversionRefused, match=r"\['DenseBincount'\].*crashes the TFLite converter"
  ):
    conversions.to_tflite(exported, conversions.INT8, representative)
  content, _ = conversions.to_tflite(exported, conversions.DYNAMIC_RANGE)
  assert content


def test_a_model_with_a_date_column_skips_onnx_with_the_reason():
  """The default model parses dates with TF string ops, which tf2onnx cannot convert."""
  import types

  date = {"column": "date", "kind": "date"}
  number = {"column": "wind", "kind": "numeric"}
  contract = types.SimpleNamespace(inputs=[{"columns": [number]}, {"columns": [date]}])
  with_date = types.SimpleNamespace(contract=contract)
  reason = variants.OnnxVariant().skip_reason(with_date)
  assert reason.startswith("the model parses the date column(s) ['date'] from text")
  plain = types.SimpleNamespace(contract=types.SimpleNamespace(inputs=[{"columns": [number]}]))
  assert variants.OnnxVariant().skip_reason(plain) is None
  assert variants.OnnxVariant().skip_reason(types.SimpleNamespace(contract=None)) is None
