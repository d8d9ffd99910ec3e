"""The Evaluator's side of the blessing floor: the floor set in its TFMA config, and the checks a
candidate passes besides it.

The floor itself (the flags', or the automatic one from the eval split's label counts) is
decided by `core.floors`, as the command line decides it before the run.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from core import floors, properties, tasks

_ACCURACY_METRICS = ("BinaryAccuracy", "SparseCategoricalAccuracy", "CategoricalAccuracy")
_MSE_METRICS = ("MeanSquaredError",)


def with_floor(eval_config_json: str, task: str, value: float) -> str:
  """An EvalConfig (JSON) whose task metric's value threshold is `value`.

  Classification: the lower bound of the accuracy metric. Regression: the upper bound of the
  mean squared error. Change thresholds (against the live model) are left as they are.
  """
  import tensorflow_model_analysis as tfma
  from google.protobuf import json_format

  config = json_format.Parse(eval_config_json, tfma.EvalConfig())
  names = _MSE_METRICS if task == tasks.REGRESSION else _ACCURACY_METRICS
  for spec in config.metrics_specs:
    for metric in spec.metrics:
      if metric.class_name not in names:
        continue
      if task == tasks.REGRESSION:
        metric.threshold.value_threshold.upper_bound.value = value
      else:
        metric.threshold.value_threshold.lower_bound.value = value
  return json_format.MessageToJson(config, sort_keys=True)


def auto_floor_spec(task: str) -> str:
  """The Evaluator's `auto_floor` parameter for a task (JSON)."""
  return json.dumps({"task": task})


# ----------------------------------------------------------------------------- classes or quantity

# The check a multiclass model of number classes also passes under the automatic floor; a
# candidate that fails it fails as `core.floors.EXPECTED_VALUE_RMSE`.


@dataclasses.dataclass(frozen=True)
class QuantityCheck:
  """The classes' expected value against the mean, on the eval split.

  Attributes:
    rmse: the root mean squared error of the expected value (sum of probability x class).
    bound: that of always answering the train split's mean label.
    reason: one sentence for the summary.
  """

  rmse: float
  bound: float
  reason: str

  @property
  def passed(self) -> bool:
    return self.rmse < self.bound


def number_classes(classes: Any) -> list[float] | None:
  """The class values as numbers, when there are three or more and every one is a number."""
  values = []
  for c in classes or ():
    if isinstance(c, bool) or not isinstance(c, (int, float)):
      return None
    values.append(float(c))
  return values if len(values) >= 3 else None


def quantity_check(
  probabilities: Any, label_values: Any, classes: list[float], stats: dict[str, Any]
) -> QuantityCheck | None:
  """How the model's expected value compares with the train mean, or None without a mean.

  Args:
    probabilities: the model's class scores on the eval split, one row per example.
    label_values: each example's label value as the examples hold it (`outputs_lib.raw_labels`;
      NaN: none), so that a value no training row has counts as itself; scored as a class
      index, it counted as the largest class (an eval value of 18 as 16).
    classes: the class values (`number_classes`).
    stats: the Examples' `label_stats`, whose train counts give the mean.
  """
  import numpy as np

  counts = (stats.get(properties.TRAIN_SPLIT) or {}).get("counts") or {}
  try:
    pairs = [(float(value), int(n)) for value, n in counts.items()]
  except (TypeError, ValueError):
    return None
  rows = sum(n for _, n in pairs)
  p = np.asarray(probabilities, dtype=np.float64)
  y = np.asarray(label_values, dtype=np.float64)
  keep = ~np.isnan(y)
  if not rows or p.ndim != 2 or p.shape[1] != len(classes) or len(y) != len(p) or not keep.any():
    return None
  mean = sum(v * n for v, n in pairs) / rows
  values = np.asarray(classes)
  truth = y[keep]
  rmse = floors.expected_value_rmse(p[keep], values, truth)
  bound = float(np.sqrt(np.mean((mean - truth) ** 2)))
  verdict = "errs less" if rmse < bound else "errs no less"
  return QuantityCheck(
    rmse,
    bound,
    f"read as {len(classes)} classes of numbers; their expected value {verdict} than always "
    f"answering the train mean {mean:.4g} (RMSE {rmse:.4g} against {bound:.4g} on the eval split)",
  )


# ----------------------------------------------------------------------------- answers

# The check every candidate evaluated in process passes; a candidate that fails it fails as
# `core.floors.NON_FINITE_ANSWERS`.


def non_finite_answers(predictions, labels) -> int:
  """How many labeled rows have a prediction with a NaN or infinite value.

  Args:
    predictions: [rows, k] model outputs.
    labels: [rows] labels, NaN where a row has none (those rows are not scored).
  """
  import numpy as np

  predictions = np.asarray(predictions, dtype=np.float64).reshape(len(labels), -1)
  labels = np.asarray(labels, dtype=np.float64)
  labeled = ~np.isnan(labels)
  finite = np.isfinite(predictions).all(axis=1)
  return int(np.sum(labeled & ~finite))
