"""Nightly retraining pieces without a pipeline run: why the Evaluator did not bless a model."""

import os

import pytest
import tensorflow as tf
import tensorflow_model_analysis as tfma
from tensorflow_model_analysis.proto import validation_result_pb2

from components.artifact_files import evaluation_metrics
from components.report import facts


def _failure(name, value, threshold, is_diff=False):
  failure = validation_result_pb2.ValidationFailure()
  failure.metric_key.name = name
  failure.metric_key.is_diff = is_diff
  failure.metric_threshold.CopyFrom(threshold)
  failure.metric_value.double_value.value = value
  return failure


def _write_validation(folder, result):
  os.makedirs(folder, exist_ok=True)
  with tf.io.TFRecordWriter(os.path.join(folder, "validations.tfrecord")) as w:
    w.write(result.SerializeToString())


def test_validation_failures_name_metric_value_and_threshold(tmp_path):
  floor = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.9})
  )
  drop = tfma.MetricThreshold(
    change_threshold=tfma.GenericChangeThreshold(
      direction=tfma.MetricDirection.LOWER_IS_BETTER, absolute={"value": 0.1}
    )
  )
  result = validation_result_pb2.ValidationResult(validation_ok=False)
  per_slice = result.metric_validations_per_slice.add()
  per_slice.failures.append(_failure("accuracy", 0.5, floor))
  sliced = result.metric_validations_per_slice.add()
  sliced.slice_key.single_slice_keys.add(column="label", int64_value=3)
  sliced.failures.append(_failure("loss", 0.25, drop, is_diff=True))
  result.missing_slices.add(feature_keys=["label"])
  _write_validation(tmp_path / "bad", result)

  report = evaluation_metrics.read_validation(str(tmp_path / "bad"))
  assert report == {
    "ok": False,
    "failures": [
      "accuracy = 0.5 is outside the value threshold (lower bound 0.9)",
      "loss changed by +0.25 against the last blessed model, beyond the change threshold "
      "(absolute +0.1; lower is better) (slice label=3)",
      'no examples in slice feature_keys: "label"',
    ],
  }


@pytest.mark.parametrize("ok", [True, False])
def test_validation_without_metric_failures(tmp_path, ok):
  _write_validation(tmp_path, validation_result_pb2.ValidationResult(validation_ok=ok))
  report = evaluation_metrics.read_validation(str(tmp_path))
  assert report["ok"] is ok
  assert bool(report["failures"]) is not ok
  assert evaluation_metrics.read_validation(str(tmp_path / "missing")) is None


def _summary(
  task="binary", floor=0.9369, reason="auto: accuracy at least 0.9369, i.e. ...", auc=0.7491
):
  return {
    "task": task,
    "floor": {"value": floor, "reason": reason},
    "eval_metrics": {"auc": auc, "binary_accuracy": 0.9269},
  }


def test_a_rare_event_labels_refusal_says_accuracy_is_the_wrong_test():
  # ISLR's Caravan: 6% buy, so the automatic floor (the majority's 0.927 + 0.01) is out of reach.
  assert facts.imbalance_hint(_summary()) == (
    ". About 93% of the eval rows are one class, so accuracy can hardly beat always answering "
    "it; if the model's scores are what you use (AUC 0.749), set the floor with --min-accuracy"
  )
  assert facts.imbalance_hint(_summary(floor=0.76)) == ""  # Not rare: accuracy can show it.
  # carData's Arrests: 84% released, and scores that rank the rows (AUC 0.743) whose accuracy
  # (0.834) misses the 0.848 floor.
  assert facts.imbalance_hint(_summary(floor=0.8481, auc=0.7426)).startswith(
    ". About 84% of the eval rows are one class"
  )
  # As many in one class, but scores that hardly rank: accuracy is not what hides the model.
  assert facts.imbalance_hint(_summary(floor=0.8481, auc=0.55)) == ""
  assert facts.imbalance_hint(_summary(task="multiclass")) == ""
  assert facts.imbalance_hint(_summary(reason="--min-accuracy 0.95")) == ""
