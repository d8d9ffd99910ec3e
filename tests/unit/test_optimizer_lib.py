"""Tests of the Optimizer's run on dict-input Keras models: every variant, signatures, gating."""

import gzip
import json
import os
import pathlib

import numpy as np
import pytest
import tensorflow as tf

from components.artifact_files import variant_index
from components.optimizer import formats, optimizer_lib, report, run_config
from components.optimizer.formats import onnx as onnx_format
from components.optimizer.formats import runtime_base, tflite, variant_base
from components.optimizer.formats import tensorrt as trt_format
from core import defaults
from core.errors import UserInputError
from tests.support.optimizer_models import (
  by_name,
  facts,
  keras_outputs,
  quick,
  run,
  sample,
  train,
)

TRT_REASON = trt_format.unavailable_reason()
NEEDS_NO_TENSORRT = pytest.mark.skipif(
  TRT_REASON is None, reason="this host can build TensorRT engines"
)
ALL_VARIANTS = (*defaults.DEFAULT_VARIANTS, defaults.QAT)


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


def test_every_variant_converts_runs_and_is_measured(full_run, data):
  result, output_dir = full_run
  eval_y = data[3]
  entries = by_name(result)
  assert list(entries) == list(defaults.VARIANTS)
  assert result["task"] == "multiclass" and result["metric"] == "accuracy"
  assert result["rows"] == {"train": 800, "eval": 300}
  baseline = result["baseline"]
  assert baseline["accuracy"] > 0.85
  assert baseline["latency_runs"] == 50
  measured = [n for n, e in entries.items() if n not in (defaults.QAT, defaults.TENSORRT_FP16)]
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
  with tflite.TFLiteRuntime(str(output_dir / entries["tflite_int8"]["path"])) as runtime:
    predictions = runtime_base.predict_batched(runtime, data[2]).argmax(1)
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
  with tflite.TFLiteRuntime(path) as runtime:
    assert runtime.input_details["numeric"]["dtype"] == np.float32
    single = runtime.predict(runtime_base.take(data[2], 0, 1))
    batch = runtime.predict(runtime_base.take(data[2], 0, 5))
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
    runtime = formats.create(name).load(
      str(output_dir / name), variant_base.Conversion([os.path.basename(entries[name]["path"])])
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


def test_onnx_parity_check(full_run, model, data):
  result, output_dir = full_run
  entry = by_name(result)["onnx"]
  parity = entry["details"]["onnx_parity"]
  assert parity["passed"] is True
  assert parity["max_abs_diff"] < 1e-4
  assert parity["rows"] == len(data[3])
  # Recompute the parity with onnxruntime and TensorFlow directly.
  with onnx_format.OnnxRuntime(str(output_dir / entry["path"])) as runtime:
    onnx_probs = runtime.predict(data[2])
  tf_probs = keras_outputs(model, data[2])
  assert np.max(np.abs(onnx_probs - tf_probs)) == pytest.approx(parity["max_abs_diff"], abs=1e-5)


def test_onnx_parity_detects_a_mismatch(full_run, data):
  result, output_dir = full_run
  onnx_path = str(output_dir / by_name(result)["onnx"]["path"])
  with onnx_format.OnnxRuntime(onnx_path) as runtime:
    reference = np.roll(runtime_base.predict_batched(runtime, data[2]), 1, axis=1)
  parity = onnx_format.onnx_parity(onnx_path, data[2], reference, tolerance=1e-4)
  assert parity["passed"] is False
  assert parity["max_abs_diff"] > 0.1


def test_onnx_parity_counts_nan_in_both_as_agreement_and_in_one_as_a_gap():
  reference = np.array([[0.5, np.nan], [1.0, 2.0]], np.float32)
  assert onnx_format.max_gap(reference + 1e-6, reference) < 1e-5
  one_sided = reference.copy()
  one_sided[1, 1] = np.nan
  assert onnx_format.max_gap(one_sided, reference) == np.inf
  assert onnx_format.max_gap(np.zeros((0, 2)), np.zeros((0, 2))) == 0.0


def test_tensorrt_auto_skips_a_model_with_text_inputs(full_run):
  entries = by_name(full_run[0])
  entry = entries[defaults.TENSORRT_FP16]
  assert entry["status"] == "skipped"
  assert "text inputs ['text_color']" in entry["reason"]
  assert entry["blessed"] is False
  # The ONNX model is produced and measured either way.
  assert entries["onnx"]["status"] == "ok"
  assert entries["onnx"]["runtime"] == "onnxruntime"


def test_tensorrt_off_has_no_engine_and_no_onnx(tmp_path, model, data):
  config = quick([defaults.TFLITE_FLOAT32])
  result = run(model, data, str(tmp_path), config)
  assert [e["name"] for e in result["variants"]] == ["tflite_float32"]
  assert sorted(os.listdir(tmp_path)) == ["tflite_float32", "variants.json"]


@NEEDS_NO_TENSORRT
def test_tensorrt_required_fails_clearly_and_writes_nothing(tmp_path, model, data):
  config = quick([defaults.TFLITE_FLOAT32], tensorrt="required")
  with pytest.raises(trt_format.TensorRTUnavailableError) as raised:
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
  config = quick([defaults.TFLITE_FLOAT32], max_accuracy_drop=0.0)
  result = run(model, data, str(tmp_path), config)
  entry = result["variants"][0]
  assert entry["status"] == "ok"
  assert entry["agreement"] == 1.0 and entry["metric_drop"] == 0.0
  assert entry["blessed"] is True
  assert result["blessed_variants"] == ["tflite_float32"]


class SabotagedVariant(tflite.TFLiteFloat32Variant):
  """Converts the baseline after scrambling its weights, so accuracy collapses."""

  name = "sabotaged"

  def keras_model(self, context):
    model = context.load_baseline()
    rng = np.random.default_rng(0)
    model.set_weights([rng.permutation(w.ravel()).reshape(w.shape) for w in model.get_weights()])
    return model, {"sabotaged": True}


class BrokenVariant(tflite.TFLiteFloat32Variant):
  """A variant whose converter raises."""

  name = "broken"

  def convert(self, context, out_dir):
    (pathlib.Path(out_dir) / "half_written.tflite").write_bytes(b"partial")
    raise RuntimeError("converter exploded on op FancyOp")


class RefusedVariant(tflite.TFLiteFloat32Variant):
  """A variant whose conversion is known not to work for this model."""

  name = "refused"

  def convert(self, context, out_dir):
    (pathlib.Path(out_dir) / "half_written.tflite").write_bytes(b"partial")
    raise variant_base.ConversionRefused("FancyOp crashes this converter; serve tflite_float32.")


def test_gate_rejects_a_sabotaged_variant_and_isolates_a_failure(
  tmp_path, model, data, monkeypatch
):
  for cls in (SabotagedVariant, BrokenVariant, RefusedVariant):
    monkeypatch.setitem(formats.VARIANTS, cls.name, cls)
  config = quick(["broken", "refused", defaults.TFLITE_FLOAT32, "sabotaged"])
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


def test_baseline_problems_fail_the_run(tmp_path, model, data):
  train_x, _, eval_x, eval_y = data
  config = quick([defaults.TFLITE_FLOAT32])
  empty = runtime_base.take(eval_x, 0, 0)
  with pytest.raises(UserInputError, match="train or eval sample is empty"):
    optimizer_lib.optimize(
      model, train_x, empty, eval_y[:0], str(tmp_path), facts("multiclass"), config
    )
  with pytest.raises(UserInputError, match="Unknown optimizer variant"):
    run(model, data, str(tmp_path), quick(["tflite_int4"]))
  assert os.listdir(tmp_path) == []


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


@pytest.fixture(scope="module")
def regression_run(tmp_path_factory):
  train_inputs, train_labels = sample("regression", 800, 1)
  eval_inputs, eval_labels = sample("regression", 300, 2)
  model = train("regression", train_inputs, train_labels, epochs=30)
  output_dir = tmp_path_factory.mktemp("regression")
  config = quick(
    [defaults.TFLITE_FLOAT32, defaults.TFLITE_INT8, defaults.ONNX], max_accuracy_drop=2.0
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
  for name in (defaults.TFLITE_FLOAT32, defaults.ONNX):
    assert entries[name]["agreement"] == 1.0
    assert entries[name]["blessed"] is True
  signature = json.loads((output_dir / "onnx" / "signature.json").read_text())
  assert signature["task"] == "regression"
  assert signature["label"] == {"key": "label", "classes": []}
  index, blessed = variant_index.read_index(str(output_dir))
  assert index["task"] == "regression"
  assert {v.name for v in blessed} >= {"tflite_float32", "onnx"}
  assert all("rmse" in v.metrics and "accuracy" not in v.metrics for v in blessed)
