"""Reads a ModelEvaluation: its overall metrics (the candidate's, the baseline's and their diffs)
and its thresholds' verdict, each failure in words."""

from __future__ import annotations

from typing import Any

from core import floors

# The sides of the overall slice's metrics, as read_overall_metrics returns them.
CANDIDATE = "candidate"
BASELINE = "baseline"
DIFF = "diff_vs_baseline"


def read_overall_metrics(uri: str) -> dict[str, dict[str, float]]:
  """The overall slice's metrics in a ModelEvaluation folder (TFMA's files, stock or ours).

  Returns:
    {"candidate": {name: value}, "baseline": {...}, "diff_vs_baseline": {...}}; a model
    without metrics (no baseline) has an empty dict; an unreadable folder gives all empty.
  """
  import tensorflow_model_analysis as tfma

  out: dict[str, dict[str, float]] = {CANDIDATE: {}, BASELINE: {}, DIFF: {}}
  try:
    results = tfma.load_metrics(uri)
  except (OSError, ValueError):
    return out
  for metrics_for_slice in results:
    if metrics_for_slice.slice_key.single_slice_keys:
      continue
    for kv in metrics_for_slice.metric_keys_and_values:
      key, value = kv.key, kv.value
      if not value.HasField("double_value"):
        continue
      if key.is_diff:
        side = DIFF
      elif key.model_name in ("", CANDIDATE):
        side = CANDIDATE
      else:
        side = BASELINE
      out[side][key.name] = round(value.double_value.value, 6)
  return out


def read_validation(uri: str) -> dict[str, Any] | None:
  """Whether the candidate passed the Evaluator's thresholds and, if not, why.

  The Pusher (a model not blessed) and the run's summary and report read it.

  Args:
    uri: The ModelEvaluation artifact folder.

  Returns:
    ``{"ok": bool, "failures": [one sentence per failed check]}``, or None when the
    evaluation holds no validation result.
  """
  import os

  import tensorflow as tf
  import tensorflow_model_analysis as tfma
  from google.protobuf import text_format

  if not tf.io.gfile.glob(os.path.join(uri, "validations*")):
    return None
  result = tfma.load_validation_result(uri)
  failures = []
  for per_slice in result.metric_validations_per_slice:
    columns = [
      f"{k.column}={getattr(k, k.WhichOneof('kind'))}"
      for k in per_slice.slice_key.single_slice_keys
    ]
    where = f" (slice {', '.join(columns)})" if columns else ""
    failures.extend(failure_text(f) + where for f in per_slice.failures)
  failures.extend(
    f"no examples in slice {text_format.MessageToString(m, as_one_line=True) or 'overall'}"
    for m in result.missing_slices
  )
  if not result.validation_ok and not failures:
    failures.append("TFMA validation failed without a metric failure; see validations.tfrecord")
  return {"ok": bool(result.validation_ok), "failures": failures}


def failure_text(failure: Any) -> str:
  """One sentence for a failed TFMA threshold, naming the metric, its value and the bound."""
  import tensorflow_model_analysis as tfma

  name = failure.metric_key.name
  value = failure.metric_value.double_value.value
  threshold = failure.metric_threshold
  if name == floors.EXPECTED_VALUE_RMSE:
    return (
      f"the label's classes are numbers, and the expected value of the model's class scores errs "
      f"more than always answering the train mean (RMSE {value:.4g} against "
      f"{threshold.value_threshold.upper_bound.value:.4g}): the label reads as a quantity; pass "
      "--task regression"
    )
  if name == floors.NON_FINITE_ANSWERS:
    return (
      f"the model answered NaN or infinity for {value:.0f} eval rows (the error metrics leave "
      "those rows out, and TF Serving would answer requests like them the same way): make the "
      "model answer every row, e.g. fill the missing or out-of-range values its inputs get"
    )
  if threshold.HasField("value_threshold"):
    bounds = threshold.value_threshold
    parts = []
    if bounds.HasField("lower_bound"):
      parts.append(f"lower bound {bounds.lower_bound.value:.4g}")
    if bounds.HasField("upper_bound"):
      parts.append(f"upper bound {bounds.upper_bound.value:.4g}")
    return f"{name} = {value:.4g} is outside the value threshold ({', '.join(parts)})"
  change = threshold.change_threshold
  higher = change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
  parts = []
  if change.HasField("absolute"):
    parts.append(f"absolute {change.absolute.value:+.4g}")
  if change.HasField("relative"):
    parts.append(f"relative {change.relative.value:+.4g}")
  better = "higher" if higher else "lower"
  return (
    f"{name} changed by {value:+.4g} against the last blessed model, beyond the change "
    f"threshold ({', '.join(parts)}; {better} is better)"
  )
