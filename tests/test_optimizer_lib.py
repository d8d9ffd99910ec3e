"""Tests of the Optimizer library: every variant, measurement, gating, failures, TensorRT modes."""

import gzip
import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

from components.optimizer import (
  conversions,
  optimizer_lib,
  report,
  runtimes,
  tensorrt_lib,
  variants,
)

TRT_REASON = tensorrt_lib.unavailable_reason()
NEEDS_NO_TENSORRT = pytest.mark.skipif(
  TRT_REASON is None, reason="this host can build TensorRT engines"
)
ALL_VARIANTS = (*optimizer_lib.DEFAULT_VARIANTS, variants.QAT)


def digits_split(seed: int = 0):
  """sklearn's digits (offline), shuffled: 1437 train rows and 360 eval rows."""
  data = load_digits()
  order = np.random.default_rng(seed).permutation(len(data.target))
  x = data.data[order].astype(np.float32)
  y = data.target[order].astype(np.int64)
  return x[:1437], y[:1437], x[1437:], y[1437:]


def build_digits_model(hidden_activation: str = "relu") -> tf.keras.Model:
  """The digits MLP of the pipeline: scales raw 0..16 pixels itself (no Lambda layers)."""
  return tf.keras.Sequential(
    [
      tf.keras.Input((64,)),
      tf.keras.layers.Rescaling(1 / 16.0),
      tf.keras.layers.Dense(128, activation=hidden_activation),
      tf.keras.layers.Dense(64, activation="relu"),
      tf.keras.layers.Dense(10, activation="softmax"),
    ]
  )


def write_keras_model(
  folder: pathlib.Path, train_x, train_y, epochs: int = 20, hidden_activation: str = "relu"
) -> pathlib.Path:
  """Trains the digits MLP and writes it in the Format-Keras layout (model.h5, input_spec.json)."""
  tf.keras.utils.set_random_seed(0)
  model = build_digits_model(hidden_activation)
  # Several steps per call: Keras' per-step Python overhead dominates on a 2-core CPU.
  model.compile("adam", "sparse_categorical_crossentropy", steps_per_execution=10)
  model.fit(train_x, train_y, epochs=epochs, batch_size=64, verbose=0)
  folder.mkdir(parents=True, exist_ok=True)
  model.save(folder / "model.h5")
  spec = {
    "feature_keys": [f"pixel_{i}" for i in range(64)],
    "label_key": "label",
    "num_classes": 10,
  }
  (folder / "input_spec.json").write_text(json.dumps(spec))
  tf.keras.backend.clear_session()
  return folder


@pytest.fixture(scope="module")
def data():
  return digits_split()


@pytest.fixture(scope="module")
def keras_dir(tmp_path_factory, data):
  train_x, train_y, _, _ = data
  return write_keras_model(tmp_path_factory.mktemp("model") / "Format-Keras", train_x, train_y)


@pytest.fixture(scope="module")
def full_run(tmp_path_factory, keras_dir, data):
  """One optimize() with every variant (QAT included) and tensorrt='auto'."""
  output_dir = tmp_path_factory.mktemp("optimized")
  config = optimizer_lib.OptimizerConfig(variants=ALL_VARIANTS, tensorrt="auto")
  result = optimizer_lib.optimize(str(keras_dir), *data, str(output_dir), config)
  return result, output_dir


def by_name(result: dict) -> dict:
  return {entry["name"]: entry for entry in result["variants"]}


def keras_probs(keras_dir, x):
  model = tf.keras.models.load_model(keras_dir / "model.h5", compile=False)
  return model.predict(x, verbose=0)


def test_every_variant_converts_runs_and_is_measured(full_run, data):
  result, output_dir = full_run
  eval_y = data[3]
  entries = by_name(result)
  expected = [name for name in optimizer_lib.VARIANT_ORDER if name != variants.TENSORRT_FP16]
  assert [n for n in entries if n != variants.TENSORRT_FP16] == expected
  baseline = result["baseline"]
  assert baseline["accuracy"] > 0.85
  assert baseline["latency_runs"] == 200
  for name in expected:
    entry = entries[name]
    assert entry["status"] == "ok", (name, entry.get("reason"))
    assert 0.8 < entry["accuracy"] <= 1.0, name
    assert entry["top1_agreement"] > 0.85, name
    assert entry["accuracy_drop_pp"] == pytest.approx(
      (baseline["accuracy"] - entry["accuracy"]) * 100, abs=1e-6
    )
    assert 0 < entry["gzipped_size_bytes"] < entry["size_bytes"], name
    assert 0 < entry["latency_ms_p50"] <= entry["latency_ms_p90"], name
    assert entry["latency_runs"] == 200
    assert entry["ratios"]["size_bytes"] == pytest.approx(
      entry["size_bytes"] / baseline["size_bytes"]
    )
    model_file = output_dir / entry["path"]
    assert model_file.is_file()
    assert model_file.stat().st_size == entry["size_bytes"]
    assert len(gzip.compress(model_file.read_bytes(), 9)) == entry["gzipped_size_bytes"]
  # Accuracy is measured, not copied: count the int8 model's correct predictions ourselves.
  with runtimes.TFLiteRuntime(str(output_dir / entries["tflite_int8"]["path"])) as runtime:
    predictions = runtimes.predict_batched(runtime, data[2]).argmax(1)
  assert entries["tflite_int8"]["accuracy"] == pytest.approx(np.mean(predictions == eval_y))
  # Only converted variants leave a folder (tensorrt_fp16 is skipped here or built on a GPU).
  assert {p.name for p in output_dir.iterdir()} == {
    "variants.json",
    *(n for n, e in entries.items() if e["status"] == "ok"),
  }
  index = json.loads((output_dir / "variants.json").read_text())
  assert index["variants"] == json.loads(json.dumps(result["variants"]))
  assert index["blessed_variants"] == result["blessed_variants"]
  json.dumps(result)  # The report must be JSON-serialisable as is.


def test_int8_variant_is_smaller_with_int8_io(full_run):
  entries = by_name(full_run[0])
  int8, float32 = entries["tflite_int8"], entries["tflite_float32"]
  assert int8["size_bytes"] < 0.5 * float32["size_bytes"]
  assert entries["tflite_dynamic_range"]["size_bytes"] < float32["size_bytes"]
  assert entries["tflite_float16"]["size_bytes"] < float32["size_bytes"]
  assert int8["details"]["input_dtype"] == "int8"
  assert int8["details"]["output_dtype"] == "int8"
  assert int8["details"]["int8_fallback"] is False
  assert entries["tflite_float32"]["details"]["input_dtype"] == "float32"


def test_pruned_variant_reaches_target_sparsity(full_run):
  result, output_dir = full_run
  entry = by_name(result)["pruned"]
  assert entry["details"]["sparsity"]["overall"] >= 0.8 - 0.01
  # Check the saved weights directly rather than trusting the report.
  model = tf.keras.models.load_model(output_dir / entry["path"], compile=False)
  kernels = [layer.kernel.numpy() for layer in model.layers if hasattr(layer, "kernel")]
  zeros = sum(int(np.sum(k == 0)) for k in kernels)
  assert zeros / sum(k.size for k in kernels) >= 0.79
  assert entry["runtime"] == "tensorflow"


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
  assert entry["gzipped_size_bytes"] < 0.25 * result["baseline"]["gzipped_size_bytes"]


def test_qat_variant_is_int8(full_run):
  entry = by_name(full_run[0])["qat"]
  assert entry["details"]["qat_scope"] in ("whole_model", "annotated_supported_layers")
  assert entry["details"]["input_dtype"] == "int8"
  assert entry["size_bytes"] < by_name(full_run[0])["tflite_float32"]["size_bytes"]


def test_onnx_parity_check(full_run, keras_dir, data):
  result, output_dir = full_run
  entry = by_name(result)["onnx"]
  parity = entry["details"]["onnx_parity"]
  assert parity["passed"] is True
  assert parity["max_abs_diff"] < 1e-4
  assert parity["top1_agreement"] == 1.0
  assert parity["rows"] == len(data[2])
  # Recompute the parity with onnxruntime and TensorFlow directly.
  with runtimes.OnnxRuntime(str(output_dir / entry["path"])) as runtime:
    onnx_probs = runtime.predict(data[2])
  tf_probs = keras_probs(keras_dir, data[2])
  assert np.max(np.abs(onnx_probs - tf_probs)) == pytest.approx(parity["max_abs_diff"], abs=1e-5)


def test_onnx_parity_detects_a_mismatch(full_run, data):
  result, output_dir = full_run
  onnx_path = str(output_dir / by_name(result)["onnx"]["path"])
  reference = np.roll(keras_probs_from_onnx(onnx_path, data[2]), 1, axis=1)
  parity = variants.onnx_parity(onnx_path, data[2], reference, tolerance=1e-4)
  assert parity["passed"] is False
  assert parity["top1_agreement"] < 0.5


def keras_probs_from_onnx(onnx_path, x):
  with runtimes.OnnxRuntime(onnx_path) as runtime:
    return runtime.predict(x)


def test_tensorrt_auto_records_engine_build(full_run):
  entries = by_name(full_run[0])
  entry = entries[variants.TENSORRT_FP16]
  if TRT_REASON is None:
    assert entry["status"] == "ok"
    assert entry["details"]["precision"] == "fp16"
  else:
    assert entry["status"] == "skipped"
    assert entry["reason"] == TRT_REASON
    assert entry["blessed"] is False
    if "tensorrt" in TRT_REASON:
      assert "pip install .[tensorrt]" in entry["reason"]
  # The ONNX model is produced and measured either way.
  assert entries["onnx"]["status"] == "ok"
  assert entries["onnx"]["runtime"] == "onnxruntime"


@NEEDS_NO_TENSORRT
def test_unavailable_reason_names_the_missing_pieces(monkeypatch):
  monkeypatch.setattr(tensorrt_lib.importlib.util, "find_spec", lambda name: None)
  reason = tensorrt_lib.unavailable_reason()
  assert reason.startswith("tensorrt Python package not installed: pip install .[tensorrt]")


def test_tensorrt_off_has_no_engine_and_no_onnx(tmp_path, keras_dir, data):
  config = optimizer_lib.OptimizerConfig(
    variants=(variants.TFLITE_FLOAT32,), tensorrt="off", latency_runs=200
  )
  result = optimizer_lib.optimize(str(keras_dir), *data, str(tmp_path), config)
  assert [e["name"] for e in result["variants"]] == ["tflite_float32"]
  assert sorted(os.listdir(tmp_path)) == ["tflite_float32", "variants.json"]


@NEEDS_NO_TENSORRT
def test_tensorrt_required_fails_clearly_and_writes_nothing(tmp_path, keras_dir, data):
  config = optimizer_lib.OptimizerConfig(variants=(variants.TFLITE_FLOAT32,), tensorrt="required")
  with pytest.raises(tensorrt_lib.TensorRTUnavailableError) as raised:
    optimizer_lib.optimize(str(keras_dir), *data, str(tmp_path), config)
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
      assert entry["blessed"] == (entry["accuracy_drop_pp"] <= bound)
    else:
      assert entry["blessed"] is False
  assert result["blessed_variants"] == [e["name"] for e in result["variants"] if e["blessed"]]
  assert "tflite_float32" in result["blessed_variants"]


def test_negative_bound_blesses_nothing(tmp_path, keras_dir, data):
  # -5 means a variant must beat the baseline by 5 points; float32 TFLite matches it exactly.
  config = optimizer_lib.OptimizerConfig(
    variants=(variants.TFLITE_FLOAT32,), tensorrt="off", max_accuracy_drop=-5.0
  )
  result = optimizer_lib.optimize(str(keras_dir), *data, str(tmp_path), config)
  entry = result["variants"][0]
  assert entry["status"] == "ok"
  assert entry["accuracy_drop_pp"] == pytest.approx(0.0, abs=0.3)
  assert entry["blessed"] is False
  assert result["blessed_variants"] == []


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


def test_gate_rejects_a_sabotaged_variant_and_isolates_a_failure(
  tmp_path, keras_dir, data, monkeypatch
):
  monkeypatch.setitem(variants.VARIANTS, SabotagedVariant.name, SabotagedVariant)
  monkeypatch.setitem(variants.VARIANTS, BrokenVariant.name, BrokenVariant)
  config = optimizer_lib.OptimizerConfig(
    variants=("broken", variants.TFLITE_FLOAT32, "sabotaged"), tensorrt="off"
  )
  result = optimizer_lib.optimize(str(keras_dir), *data, str(tmp_path), config)
  entries = by_name(result)
  assert entries["broken"]["status"] == "failed"
  assert entries["broken"]["reason"] == "RuntimeError: converter exploded on op FancyOp"
  assert entries["sabotaged"]["status"] == "ok"
  assert entries["sabotaged"]["accuracy_drop_pp"] > 1.0
  assert entries["sabotaged"]["blessed"] is False
  assert entries["tflite_float32"]["blessed"] is True
  assert result["blessed_variants"] == ["tflite_float32"]
  # The failed variant's half-written folder is gone.
  assert sorted(os.listdir(tmp_path)) == ["sabotaged", "tflite_float32", "variants.json"]


def test_real_converter_rejection_is_isolated(tmp_path, data):
  # TFLite has no Softsign kernel, so both TFLite conversions fail; tf2onnx supports it.
  train_x, train_y, _, _ = data
  keras_dir = write_keras_model(
    tmp_path / "Format-Keras", train_x, train_y, epochs=3, hidden_activation="softsign"
  )
  output_dir = tmp_path / "out"
  output_dir.mkdir()
  config = optimizer_lib.OptimizerConfig(
    variants=(variants.TFLITE_FLOAT32, variants.TFLITE_INT8, variants.ONNX),
    tensorrt="off",
    latency_runs=200,
  )
  result = optimizer_lib.optimize(str(keras_dir), *data, str(output_dir), config)
  entries = by_name(result)
  for name in (variants.TFLITE_FLOAT32, variants.TFLITE_INT8):
    assert entries[name]["status"] == "failed"
    assert entries[name]["reason"].startswith("ConverterError: ")
    assert "Softsign" in entries[name]["reason"]
    assert len(entries[name]["reason"]) <= optimizer_lib.MAX_REASON_CHARS + 10
  assert entries[variants.ONNX]["status"] == "ok"
  assert sorted(os.listdir(output_dir)) == ["onnx", "variants.json"]


def test_int8_fallback_keeps_float_io(tmp_path, keras_dir, data):
  config = optimizer_lib.OptimizerConfig(
    variants=(variants.TFLITE_INT8,), tensorrt="off", int8_fallback=True
  )
  result = optimizer_lib.optimize(str(keras_dir), *data, str(tmp_path), config)
  entry = result["variants"][0]
  assert entry["status"] == "ok"
  assert entry["details"]["int8_fallback"] is True
  assert entry["details"]["input_dtype"] == "float32"
  assert entry["accuracy_drop_pp"] <= 2.0


def test_baseline_problems_fail_the_run(tmp_path, keras_dir, data):
  train_x, train_y, eval_x, eval_y = data
  config = optimizer_lib.OptimizerConfig(variants=(variants.TFLITE_FLOAT32,), tensorrt="off")
  with pytest.raises(FileNotFoundError, match="Format-Keras"):
    optimizer_lib.optimize(str(tmp_path), *data, str(tmp_path), config)
  with pytest.raises(ValueError, match="feature_keys"):
    optimizer_lib.optimize(
      str(keras_dir), train_x[:, :10], train_y, eval_x[:, :10], eval_y, str(tmp_path), config
    )
  with pytest.raises(ValueError, match="class ids"):
    optimizer_lib.optimize(
      str(keras_dir), train_x, train_y, eval_x, eval_y + 10, str(tmp_path), config
    )
  assert os.listdir(tmp_path) == []


def test_gate_bound_is_inclusive():
  assert optimizer_lib.gate(0.95, 0.96, 1.0) == (True, 1.0)
  assert optimizer_lib.gate(0.949, 0.96, 1.0)[0] is False
  assert optimizer_lib.gate(0.97, 0.96, -0.5) == (True, -1.0)


@pytest.mark.parametrize(
  ("options", "message"),
  [
    ({"variants": ("tflite_int4",)}, "Unknown optimizer variant"),
    ({"variants": "tflite_int8"}, "list of names"),
    ({"tensorrt": "maybe"}, "tensorrt='maybe'"),
    ({"target_sparsity": 1.0}, "target_sparsity"),
    ({"latency_runs": 0}, "latency_runs"),
  ],
)
def test_config_rejects_nonsense(options, message):
  with pytest.raises(ValueError, match=message):
    optimizer_lib.OptimizerConfig(**options).validate()


def test_variant_names_follow_the_tensorrt_mode():
  names = optimizer_lib.OptimizerConfig(variants=("tflite_int8",), tensorrt="auto").variant_names()
  assert names == ["tflite_int8", "onnx", "tensorrt_fp16"]
  off = optimizer_lib.OptimizerConfig(variants=("tflite_int8", "tensorrt_fp16"), tensorrt="off")
  assert off.variant_names() == ["tflite_int8"]


def test_tflite_runtime_quantizes_int8_io(full_run, data):
  result, output_dir = full_run
  path = str(output_dir / by_name(result)["tflite_int8"]["path"])
  with runtimes.TFLiteRuntime(path) as runtime:
    scale, zero_point = runtime.input_detail["quantization"]
    single = runtime.predict(data[2][:1])
    batch = runtime.predict(data[2][:5])
  assert scale > 0
  assert -128 <= zero_point <= 127
  assert single.dtype == np.float32
  np.testing.assert_allclose(single[0], batch[0], atol=1e-6)
  # Dequantized softmax outputs are probabilities.
  np.testing.assert_allclose(batch.sum(axis=1), 1.0, atol=0.05)


def test_representative_dataset_yields_single_rows(data):
  rows = list(conversions.representative_dataset(data[0], 7)())
  assert len(rows) == 7
  assert rows[0][0].shape == (1, 64)
  assert rows[0][0].dtype == np.float32


def test_write_report_files(tmp_path, full_run):
  paths = report.write_report(full_run[0], str(tmp_path))
  assert json.loads(pathlib.Path(paths[report.REPORT_JSON]).read_text()) == json.loads(
    json.dumps(full_run[0])
  )
  markdown = pathlib.Path(paths[report.REPORT_MD]).read_text()
  for entry in full_run[0]["variants"]:
    assert f"| {entry['name']} | {entry['status']} |" in markdown
  assert pathlib.Path(paths[report.REPORT_PNG]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
  assert not list(tmp_path.glob("*.tmp"))


def test_skipped_report_has_every_variant_skipped(tmp_path):
  result = optimizer_lib.skipped_report("no Format-Keras", optimizer_lib.OptimizerConfig())
  assert result["status"] == "skipped"
  assert {e["status"] for e in result["variants"]} == {"skipped"}
  assert {e["reason"] for e in result["variants"]} == {"no Format-Keras"}
  assert result["blessed_variants"] == []
  paths = report.write_report(result, str(tmp_path))
  assert "Nothing was optimized: no Format-Keras" in pathlib.Path(paths["report.md"]).read_text()


def test_fine_tuning_leaves_no_graph_in_the_global_gradient_registry(data):
  # Model.fit registers a tf.custom_gradient per trace in this process-wide registry, which keeps
  # every traced training graph alive; fine_tune must not (this was a ~25 MB per run leak).
  from tensorflow.python.framework import ops

  def custom_gradients() -> int:
    return sum(1 for key in ops._gradient_registry.list() if key.startswith("CustomGradient"))

  before = custom_gradients()
  model = build_digits_model()
  pruned = conversions.prune(
    model,
    data[0][:256],
    data[1][:256],
    target_sparsity=0.5,
    epochs=1,
    batch_size=32,
    learning_rate=1e-3,
  )
  assert conversions.kernel_sparsity(pruned)["overall"] >= 0.49
  assert custom_gradients() == before
  tf.keras.backend.clear_session()
