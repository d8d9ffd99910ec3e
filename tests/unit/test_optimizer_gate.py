"""Tests of the Optimizer's gate, its options and the report of a run that could not start."""

import pathlib

import numpy as np
import pytest

from components.optimizer import measurement, optimizer_lib, report, run_config
from core.errors import UserInputError


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


def test_skipped_report_has_every_variant_skipped(tmp_path):
  result = optimizer_lib.skipped_report("not a Keras model", run_config.OptimizerConfig())
  assert result["status"] == "skipped"
  assert {e["status"] for e in result["variants"]} == {"skipped"}
  assert {e["reason"] for e in result["variants"]} == {"not a Keras model"}
  assert result["blessed_variants"] == []
  paths = report.write_report(result, str(tmp_path))
  assert "Nothing was optimized: not a Keras model" in pathlib.Path(paths["report.md"]).read_text()
