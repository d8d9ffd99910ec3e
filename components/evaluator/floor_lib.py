"""The Evaluator's automatic floor, taken from the eval split the model is evaluated on.

Without `--min-accuracy` (or `--max-mse`), a classifier must beat always answering the eval
split's most frequent label by `AUTO_FLOOR_MARGIN`, and a regressor's mean squared error must
stay under `AUTO_MSE_SHARE` of the eval split's label variance (what always answering the
mean scores). The ExampleGen counts the label's values per split (`label_stats` on the
Examples artifact), so the floor is the eval split's own: on a file whose rows are ordered or
duplicated, the whole column's majority share can be far from the eval split's.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from core import defaults, properties, tasks

_ACCURACY_METRICS = ("BinaryAccuracy", "SparseCategoricalAccuracy", "CategoricalAccuracy")
_MSE_METRICS = ("MeanSquaredError",)


@dataclasses.dataclass(frozen=True)
class Floor:
  """A threshold and why.

  Attributes:
    value: the accuracy floor (classification) or the mean squared error ceiling.
    reason: one sentence for the summary.
  """

  value: float
  reason: str


def floor_from_label_stats(
  stats: dict[str, Any], task: str, split: str = properties.EVAL_SPLIT
) -> Floor | None:
  """The automatic floor of `task` from one split's label counts, or None without them.

  Args:
    stats: the Examples' `label_stats` (split -> {"rows", "counts", "total", "total_sq"}).
    task: binary, multiclass or regression.
    split: the split the Evaluator reads.

  Returns:
    The Floor, or None when the split has no counts (or the label is not numeric for a
    regression).
  """
  counts = stats.get(split)
  if not counts or not counts.get("rows"):
    return None
  rows = int(counts["rows"])
  if task == tasks.REGRESSION:
    if "total" not in counts:
      return None
    mean = counts["total"] / rows
    variance = max(counts["total_sq"] / rows - mean * mean, 0.0)
    ceiling = defaults.AUTO_MSE_SHARE * variance
    return Floor(
      ceiling,
      f"auto: mean squared error below {defaults.AUTO_MSE_SHARE:g} x the {split} split's label "
      f"variance ({variance:.4g}), i.e. better than always predicting the mean",
    )
  values = counts.get("counts") or {}
  if not values:
    return None
  return accuracy_floor(
    max(values.values()) / rows, f"of its {rows} rows", f" of the {split} split"
  )


# How the reason of an automatic accuracy floor begins (the run summary recognises it).
AUTO_ACCURACY = "auto: accuracy"


def accuracy_floor(majority: float, of_rows: str, of_split: str = "") -> Floor:
  """The automatic floor over the most frequent class's share: AUTO_FLOOR_MARGIN above it.

  Args:
    majority: the most frequent class's share of the rows.
    of_rows: which rows, for the reason ("of its 40 rows").
    of_split: which split, for the reason (" of the eval split"), or "".
  """
  floor = min(round(majority + defaults.AUTO_FLOOR_MARGIN, 4), 0.99)
  return Floor(
    floor,
    f"{AUTO_ACCURACY} at least {floor:g}, i.e. {defaults.AUTO_FLOOR_MARGIN:g} better than always "
    f"answering the most frequent class{of_split} ({majority:.4g} {of_rows}; --min-accuracy "
    "sets another floor)",
  )


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

# The check a multiclass model of number classes also passes under the automatic floor: the
# expected value of its class probabilities must err less than always answering the train
# split's mean label. A count read as classes (spell lengths 1..28) fails it; codes (digits
# 0..9) pass it by far, since a right class is a right value.
EXPECTED_VALUE_RMSE = "expected_value_rmse"


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
  probabilities: Any, label_index: Any, classes: list[float], stats: dict[str, Any]
) -> QuantityCheck | None:
  """How the model's expected value compares with the train mean, or None without a mean.

  Args:
    probabilities: the model's class scores on the eval split, one row per example.
    label_index: each example's class index (into `classes`).
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
  y = np.asarray(label_index, dtype=np.float64)
  keep = ~np.isnan(y)
  if not rows or p.ndim != 2 or p.shape[1] != len(classes) or not keep.any():
    return None
  mean = sum(v * n for v, n in pairs) / rows
  values = np.asarray(classes)
  truth = values[y[keep].astype(int)]
  scores = p[keep] / np.clip(p[keep].sum(axis=1, keepdims=True), 1e-12, None)
  rmse = float(np.sqrt(np.mean((scores @ values - truth) ** 2)))
  bound = float(np.sqrt(np.mean((mean - truth) ** 2)))
  verdict = "errs less" if rmse < bound else "errs no less"
  return QuantityCheck(
    rmse,
    bound,
    f"read as {len(classes)} classes of numbers; their expected value {verdict} than always "
    f"answering the train mean {mean:.4g} (RMSE {rmse:.4g} against {bound:.4g} on the eval split)",
  )


# ----------------------------------------------------------------------------- answers

# The check every candidate passes where this kit evaluates in process: no eval row with a label
# gets an answer that is not a finite number. TFMA's error metrics leave such rows out (its
# mean squared error skips a NaN error), so a model answering NaN for some inputs would be
# scored on the others and blessed; TF Serving would then answer NaN to requests like them.
NON_FINITE_ANSWERS = "non_finite_answers"


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
