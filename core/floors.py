"""The blessing floor: the accuracy a classifier must reach, the error a regressor must stay under.

One owner for the rule, which is applied twice: before the run, the command line decides it
from the label column of the whole input (`pipeline/cli/data_checks.py`, so the summary can say
it up front); inside the run, the Evaluator decides it again from the eval split's own label
counts (`label_stats` on the Examples), since on a file whose rows are ordered or duplicated the
whole column's majority share can be far from the eval split's.

The flags win: `--min-accuracy` (classification) or `--max-mse` (regression). Without them, a
classifier must beat always answering the most frequent class by `defaults.AUTO_FLOOR_MARGIN`,
and a regressor's mean squared error must stay under `defaults.AUTO_MSE_SHARE` of the label's
variance (what always answering the mean scores).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from core import defaults, properties, tasks

# How the reason of an automatic accuracy floor begins (the run summary recognises it).
AUTO_ACCURACY = "auto: accuracy"

# The names of the checks a candidate fails besides its metric thresholds, as the Evaluator
# records them among TFMA's validation failures and the report words them.
# A multiclass model of number classes under the automatic floor: the expected value of its
# class probabilities must err less than always answering the train split's mean label. A count
# read as classes (spell lengths 1..28) fails it; codes (digits 0..9) pass it by far, since a
# right class is a right value.
EXPECTED_VALUE_RMSE = "expected_value_rmse"
# Every candidate evaluated in process: no eval row with a label gets an answer that is not a
# finite number. TFMA's error metrics leave such rows out (its mean squared error skips a NaN
# error), so a model answering NaN for some inputs would be scored on the others and blessed;
# TF Serving would then answer NaN to requests like them.
NON_FINITE_ANSWERS = "non_finite_answers"


@dataclasses.dataclass(frozen=True)
class Floor:
  """A threshold and why.

  Attributes:
    value: the accuracy floor (classification) or the mean squared error ceiling (regression);
      None for a regression without a ceiling.
    reason: one sentence for the summary.
    auto: whether the value is the automatic one (not a flag's).
  """

  value: float | None
  reason: str
  auto: bool = False


def given(task: str, min_accuracy: float | None, max_mse: float | None) -> Floor | None:
  """The floor the flags set for `task` (`--min-accuracy`, or `--max-mse` for a regression).

  Returns:
    The Floor, or None when the task's flag is not given.
  """
  if task == tasks.REGRESSION:
    return None if max_mse is None else Floor(max_mse, f"--max-mse {max_mse:g}")
  if min_accuracy is None:
    return None
  return Floor(min_accuracy, f"--min-accuracy {min_accuracy:g}")


def accuracy_floor(majority: float, of_rows: str, of_split: str = "") -> Floor:
  """The automatic floor over the most frequent class's share: AUTO_FLOOR_MARGIN above it.

  Args:
    majority: the most frequent class's share of the rows.
    of_rows: which rows, for the reason ("of its 40 rows").
    of_split: which split, for the reason (" of the eval split"), or "".
  """
  margin = defaults.AUTO_FLOOR_MARGIN
  floor = min(round(majority + margin, 4), 0.99)
  if floor > majority:
    return Floor(
      floor,
      f"{AUTO_ACCURACY} at least {floor:g}, i.e. {margin:g} better than always answering the "
      f"most frequent class{of_split} ({majority:.4g} {of_rows}; --min-accuracy sets another "
      "floor)",
      auto=True,
    )
  # Past 0.99 the cap would bless a model that does worse than the most frequent class alone
  # (a street type paved in 99.5% of the rows): it must at least beat that, up to every row.
  floor = min(round(majority + margin, 4), 1.0)
  if majority >= 1.0:
    return Floor(
      floor,
      f"{AUTO_ACCURACY} at least 1: all {of_rows.removeprefix('of ')}{of_split} are of one "
      "class, so always answering it scores 1 and accuracy cannot show a better model "
      "(--min-accuracy sets another floor)",
      auto=True,
    )
  return Floor(
    floor,
    f"{AUTO_ACCURACY} at least {floor:g}, i.e. above always answering the most frequent "
    f"class{of_split}, which already scores {majority:.4g} {of_rows} (--min-accuracy sets "
    "another floor)",
    auto=True,
  )


def mse_ceiling(variance: float, split: str | None = None) -> Floor:
  """The automatic regression ceiling: AUTO_MSE_SHARE of the label's variance.

  Args:
    variance: the label's variance (over the whole input, or over `split`).
    split: the split the variance is of, for the reason, or None for the whole input.
  """
  whose = f"the {split} split's label" if split else "the label"
  return Floor(
    defaults.AUTO_MSE_SHARE * variance,
    f"auto: mean squared error below {defaults.AUTO_MSE_SHARE:g} x {whose} variance "
    f"({variance:.4g}), i.e. better than always predicting the mean",
    auto=True,
  )


def count_classes_floor() -> Floor:
  """The automatic floor of a count read both ways whose classes won (`tasks.reads_both`): no
  accuracy floor, since the label is a number and its classes are scored by their expected
  value, which must err less than always answering the train mean (EXPECTED_VALUE_RMSE), as a
  quantity's error must stay under the label's variance."""
  return Floor(
    0.0,
    "auto: a whole-number label kept as classes is blessed on their expected value, which must err "
    "less than always answering the train mean (no accuracy floor; --min-accuracy sets one)",
    auto=True,
  )


def expected_value_rmse(scores: Any, values: Any, truth: Any) -> float:
  """The root mean squared error of a classifier's expected value.

  Each row's class scores are normalized to sum to 1 and weighted over the classes' `values`;
  the result is compared with the rows' `truth` values. The count check of the blessing
  (`COUNT_CHECK`, the Evaluator) and the choice between a count's two readings (the default
  model) both measure a classifier of number classes this way.
  """
  import numpy as np

  p = np.asarray(scores, dtype=np.float64)
  p = p / np.clip(p.sum(axis=1, keepdims=True), 1e-12, None)
  expected = p @ np.asarray(values, dtype=np.float64)
  return float(np.sqrt(np.mean(np.square(expected - np.asarray(truth, dtype=np.float64)))))


def decide(
  task: str,
  min_accuracy: float | None,
  max_mse: float | None,
  *,
  majority: float | None = None,
  variance: float | None = None,
) -> Floor:
  """The floor of a run from the flags, else from the label column of the whole input.

  Args:
    task: binary, multiclass or regression.
    min_accuracy: --min-accuracy, or None.
    max_mse: --max-mse, or None.
    majority: the most frequent class's share of the labeled rows (needed for a
      classification without --min-accuracy).
    variance: the label's variance (regression), or None when it is not known.

  Returns:
    The Floor; a regression without --max-mse and without a variance has none (value None).
  """
  floor = given(task, min_accuracy, max_mse)
  if floor is not None:
    return floor
  if task == tasks.REGRESSION:
    if variance is None:
      return Floor(None, "no ceiling (--max-mse not given)")
    return mse_ceiling(variance)
  return accuracy_floor(majority, "of the rows")


def label_sets_floor(label_key: str, model_label_key: str | None, task: str) -> bool:
  """Whether the label column sets the automatic floor.

  Not when the model learns a label a Transform computes (`model_label_key`, e.g. TFX's taxi
  example turns the float `tips` into the 0/1 `tips_xf`) and the task is given: the raw column
  says nothing about the model's label then.
  """
  return not model_label_key or model_label_key == label_key or task == tasks.AUTO


def automatic(
  task: str,
  label_key: str,
  model_label_key: str | None,
  min_accuracy: float | None,
  max_mse: float | None,
) -> bool:
  """Whether the Evaluator takes the floor from the eval split: no flag sets one, and the label
  column does (`label_sets_floor`)."""
  return (
    min_accuracy is None and max_mse is None and label_sets_floor(label_key, model_label_key, task)
  )


def computed_label_reason(
  task: str,
  min_accuracy: float | None,
  max_mse: float | None,
  label_key: str,
  model_label_key: str,
) -> str:
  """Why the floor is the flags' or none, when the model learns a label a Transform computes."""
  if task == tasks.REGRESSION:
    reason = f"--max-mse {max_mse:g}" if max_mse is not None else "no ceiling"
  else:
    reason = f"--min-accuracy {min_accuracy:g}" if min_accuracy is not None else "no floor"
  return reason + (
    f" (the model learns {model_label_key!r}, which the Transform computes, so the "
    f"column {label_key!r} sets no automatic one)"
  )


def from_label_stats(
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
    return mse_ceiling(max(counts["total_sq"] / rows - mean * mean, 0.0), split)
  values = counts.get("counts") or {}
  if not values:
    return None
  return accuracy_floor(
    max(values.values()) / rows, f"of its {rows} rows", f" of the {split} split"
  )
