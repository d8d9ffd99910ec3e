"""What a label asks for: binary, multiclass or regression, decided once from the label column.

Plain Python (no TensorFlow), shared by the runners, which decide before the pipeline is
built, and by the default trainer module, which checks the same rule on the data it trains on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence

from core import column_types, defaults
from core.errors import UserInputError

AUTO = "auto"
BINARY = "binary"
MULTICLASS = "multiclass"
REGRESSION = "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)

# Whole-number labels with up to this many values are classes whatever the values. With more,
# only a run of codes from 0 or 1 (0..K-1, 1..K) is; other whole numbers (a body mass in grams,
# a count of doctor visits) are a quantity, a regression.
MAX_UNCODED_CLASSES = 20


class LabelError(UserInputError):
  """The label column cannot be learned as asked; the message names the column and the fix."""


@dataclasses.dataclass(frozen=True)
class LabelInfo:
  """The label as a model sees it.

  Attributes:
    key: the label column.
    task: one of TASKS.
    classes: the class vocabulary (sorted distinct values) for binary and multiclass; the
      model's class index i stands for classes[i]. Empty for regression.
  """

  key: str
  task: str
  classes: tuple = ()

  def to_json(self) -> dict:
    return {"key": self.key, "task": self.task, "classes": list(self.classes)}

  @classmethod
  def from_json(cls, data: dict) -> LabelInfo:
    return cls(data["key"], data["task"], tuple(data.get("classes") or ()))


def keeps_label_tokens(requested: str) -> bool:
  """Whether a text label's missing tokens (NA, None, ?) are classes of their own.

  Only `--task multiclass` says so: MASS's `survey` writes 'None' for no exercise. Otherwise a
  row whose label is a missing token is left out and counted, as a row with an empty label is
  (penguins' `sex` writes NA). A number label's missing tokens are always missing values.
  """
  return requested == MULTICLASS


def _quantity(distinct: Sequence, distinct_count: int) -> bool:
  """Whether whole-number label values read as a quantity rather than class codes."""
  if distinct_count <= MAX_UNCODED_CLASSES:
    return False
  if distinct_count > len(distinct):  # Not all values were kept: far too many for codes.
    return True
  low, high = min(distinct), max(distinct)
  return not (low in (0, 1) and high - low + 1 == distinct_count)


def _not_binary(label_key: str, kind: str | None, distinct_count: int) -> LabelError:
  # A number with a decimal point is a quantity; classes of it would be its every value.
  fix = "regression" if kind == column_types.CSV_FLOAT else "multiclass"
  return LabelError(
    f"--task binary needs exactly two label values, but {label_key!r} has {distinct_count}; "
    f"pass --task {fix} (or auto)."
  )


def infer_task(
  label_key: str,
  kind: str | None,
  distinct: Sequence,
  distinct_count: int,
  requested: str = AUTO,
  max_classes: int = defaults.MAX_CLASSES,
  rows: str = "",
) -> str:
  """Decides the task from the label column, or checks a requested one.

  `rows` names the rows the values are of where they are not the whole column ("the train
  split"): a message then says so.

  Two distinct values make a binary task; string values make a multiclass task, up to
  `max_classes` of them, and so do int values up to MAX_UNCODED_CLASSES of them or a run of
  codes from 0 or 1; floats, and other ints, make a regression.

  Args:
    label_key: the label column, for messages.
    kind: the column's CSV kind (column_types.CSV_INT, CSV_FLOAT, CSV_STRING), None when every
      label is empty.
    distinct: the distinct non-empty label values seen (possibly capped).
    distinct_count: how many distinct values there are (at least len(distinct)).
    requested: AUTO or one of TASKS (the `--task` flag).
    max_classes: the largest class count accepted for a classification task.

  Returns:
    One of TASKS.

  Raises:
    LabelError: when the label is empty, has one value, is not numeric for a regression, has
      more classes than `max_classes`, or has text values that differ only in the spaces
      around them.
  """
  if requested not in (AUTO, *TASKS):
    raise LabelError(f"--task {requested!r} is unknown; pass one of auto, {', '.join(TASKS)}.")
  if kind is None or distinct_count == 0:
    raise LabelError(
      f"label column {label_key!r} is empty in every row; if the data lost its labels upstream, "
      "fix the data, and if another column holds the label, pass it with --label-key."
    )
  if kind == column_types.CSV_STRING:
    _refuse_values_apart_by_spaces(label_key, distinct)
    if requested == AUTO:
      _refuse_values_apart_by_case(label_key, distinct)
  if requested == REGRESSION:
    if kind == column_types.CSV_STRING:
      raise LabelError(
        f"label column {label_key!r} holds text, so it cannot be a regression target; pass "
        "--task multiclass or --task binary, or another --label-key."
      )
    return REGRESSION
  if distinct_count < 2:
    raise _one_value(label_key, distinct[0], rows)
  if requested == BINARY and distinct_count != 2:
    raise _not_binary(label_key, kind, distinct_count)
  if requested == AUTO:
    if distinct_count == 2:
      return BINARY
    if kind == column_types.CSV_FLOAT:
      return REGRESSION
    if kind == column_types.CSV_INT and (
      distinct_count > max_classes or _quantity(distinct, distinct_count)
    ):
      return REGRESSION
    task = MULTICLASS
  else:
    task = requested
  if distinct_count > max_classes:
    raise _over_the_class_cap(label_key, kind, distinct, distinct_count, max_classes)
  return task


def _one_value(label_key: str, value: object, rows: str) -> LabelError:
  if rows:
    return LabelError(
      f"label column {label_key!r} has one value only in {rows} ({value!r}), though other "
      "rows may hold others; a model needs two classes to learn from: add rows of the other "
      "classes to the data, or use another --label-key."
    )
  return LabelError(
    f"label column {label_key!r} has one value only ({value!r}); a model needs at least two "
    "classes, or use another --label-key."
  )


def _over_the_class_cap(
  label_key: str, kind: str | None, distinct: Sequence, distinct_count: int, max_classes: int
) -> LabelError:
  """The error of a label with more values than `max_classes`, naming the fix that applies."""
  # Callers that stopped counting pass the values they counted plus one.
  count = (
    f"at least {distinct_count - 1}" if distinct_count > len(distinct) else str(distinct_count)
  )
  # Text can be no quantity: --task regression would be refused in turn.
  quantity = (
    "it holds text, so it is no quantity: pass another --label-key"
    if kind == column_types.CSV_STRING
    else "pass --task regression if it is a quantity"
  )
  return LabelError(
    f"label column {label_key!r} has {count} distinct values, over the "
    f"{max_classes}-class cap; {quantity}, or --max-classes N to allow more classes."
  )


def _first_spellings_of_one(distinct: Sequence, same: Callable[[str], str]) -> list[str] | None:
  """The first group of text values that `same` maps to one value (sorted), or None."""
  spellings: dict[str, list[str]] = {}
  for value in distinct:
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    spellings.setdefault(same(text), []).append(text)
  return next((sorted(s) for s in spellings.values() if len(s) > 1), None)


def _refuse_values_apart_by_spaces(label_key: str, distinct: Sequence) -> None:
  """A text label whose values differ only in the spaces around them (" yes", "yes ", from
  padded exports such as SQL CHAR columns) would train as that many classes, and the model
  would learn to tell the padding apart: that is refused, naming the values."""
  apart = _first_spellings_of_one(distinct, str.strip)
  if apart:
    raise LabelError(
      f"label column {label_key!r} has values that differ only in the spaces around them "
      f"({', '.join(map(repr, apart))}), which would train as different classes; strip the "
      "spaces from that column in the data and run again."
    )


def _refuse_values_apart_by_case(label_key: str, distinct: Sequence) -> None:
  """Under --task auto, a text label whose values differ only in case ("Yes", "yes": two
  sources, or hand-typed cells) is refused, naming the values: as classes they split one class
  in two (AER's CreditCard with a third of its yes written Yes trained 3 classes, accuracy 0.73
  against 0.96). --task multiclass keeps them apart where case is meaningful ("K", "k")."""
  apart = _first_spellings_of_one(distinct, str.casefold)
  if apart:
    raise LabelError(
      f"label column {label_key!r} has values that differ only in case "
      f"({', '.join(map(repr, apart))}), which would train as different classes; write each "
      "class one way in the data, or pass --task multiclass if they are different classes."
    )


# A label of whole numbers from 0 up, with at least this many values, read as classes by the
# automatic rule, may serve better as a quantity: the default model then trains both readings
# (`reads_both`) and keeps the one whose held-out error is lower.
MIN_READINGS_VALUES = 3
# What a count label's two readings are called in the run's records.
CLASSES_READING = "classes"
QUANTITY_READING = "quantity"


def reads_both(
  kind: str | None, distinct: Sequence, distinct_count: int, requested: str, task: str
) -> bool:
  """Whether the label is a count that may be read as classes or as a quantity.

  Only for `--task auto`, and only when the automatic rule reads the label as classes: whole
  numbers (an integer CSV column), none negative, at least MIN_READINGS_VALUES of them and all
  counted. Codes (the digits 0..9) qualify too: the held-out error decides, and a right class
  is a right value, so classes win there by far. `--task` overrides.
  """
  if requested != AUTO or task != MULTICLASS or kind != column_types.CSV_INT:
    return False
  if distinct_count < MIN_READINGS_VALUES or len(distinct) != distinct_count:
    return False
  return all(float(v).is_integer() and float(v) >= 0 for v in distinct)


@dataclasses.dataclass(frozen=True)
class Readings:
  """How a count label's two readings did on the held-out rows, and which one was kept.

  Attributes:
    classes_rmse: the root mean squared error of the classes' expected value (the sum of each
      class's probability times its value).
    quantity_rmse: that of the quantity's answer.
    rows: the held-out rows both were scored on.
  """

  classes_rmse: float
  quantity_rmse: float
  rows: int

  @property
  def winner(self) -> str:
    """The reading kept: the quantity only when it errs less (classes on a tie)."""
    return QUANTITY_READING if self.quantity_rmse < self.classes_rmse else CLASSES_READING

  @property
  def task(self) -> str:
    return REGRESSION if self.winner == QUANTITY_READING else MULTICLASS

  def describe(self) -> str:
    """One clause for the summary: which reading won, both errors, and by how much."""
    won, lost = (
      (self.quantity_rmse, self.classes_rmse)
      if self.winner == QUANTITY_READING
      else (self.classes_rmse, self.quantity_rmse)
    )
    share = (1 - won / lost) * 100 if lost > 0 else 0.0
    reading = "a quantity" if self.winner == QUANTITY_READING else "classes"
    return (
      f"read as {reading}: held-out RMSE {self.classes_rmse:.4g} as classes against "
      f"{self.quantity_rmse:.4g} as a quantity on {self.rows:,} rows, {share:.1f}% lower "
      f"(--task {MULTICLASS} or --task {REGRESSION} sets one)"
    )

  def to_json(self) -> dict:
    return {
      "winner": self.winner,
      "classes_rmse": self.classes_rmse,
      "quantity_rmse": self.quantity_rmse,
      "rows": self.rows,
    }

  @classmethod
  def from_json(cls, data: dict) -> Readings:
    return cls(float(data["classes_rmse"]), float(data["quantity_rmse"]), int(data["rows"]))


def task_reason(
  kind: str | None,
  distinct: Sequence,
  distinct_count: int,
  requested: str,
  task: str,
  max_classes: int = defaults.MAX_CLASSES,
) -> str:
  """Why `infer_task` (given the same label values) decided `task`, for the run's summary.

  A float label of a few whole values says so with the override: pandas writes integer codes
  as 1.0, 2.0 once a column has an empty cell (mi's nlsyV `momrace`).
  """
  if requested != AUTO:
    return f"--task {requested}"
  if task == BINARY:
    return "two label values"
  if kind == column_types.CSV_STRING:
    return f"{distinct_count:,} text values"
  complete = len(distinct) == distinct_count
  if kind == column_types.CSV_FLOAT:
    whole = complete and all(float(v).is_integer() for v in distinct)
    few = distinct_count <= MAX_UNCODED_CLASSES
    return "numbers with a decimal point" + (
      f", though its {distinct_count} values {_span(distinct)} are whole; --task multiclass "
      "reads them as classes"
      if whole and few
      else ""
    )
  return _whole_number_reason(distinct, distinct_count, task, max_classes, complete)


def _whole_number_reason(distinct, distinct_count, task, max_classes, complete) -> str:
  if task == MULTICLASS:
    if distinct_count <= MAX_UNCODED_CLASSES:
      return f"{distinct_count} whole-number values"
    return f"whole-number codes {_span(distinct)}"
  if not complete:  # A profile that stopped counting passes the values it counted plus one.
    return f"at least {distinct_count - 1:,} whole-number values"
  if distinct_count > max_classes:
    return f"{distinct_count:,} whole-number values, over --max-classes {max_classes:,}"
  return (
    f"{distinct_count:,} whole-number values ({_span(distinct)}), more than "
    f"{MAX_UNCODED_CLASSES} and not a run of codes from 0 or 1"
  )


def _span(values: Sequence) -> str:
  return f"{min(values):g}..{max(values):g}"


def label_info(label_key: str, task: str, distinct: Sequence) -> LabelInfo:
  """The LabelInfo for a decided task: classes are the sorted distinct values (none for
  regression)."""
  if task == REGRESSION:
    return LabelInfo(label_key, task, ())
  return LabelInfo(label_key, task, tuple(sorted(distinct)))


# Where the label a model is scored against comes from (`label_view`).
TRANSFORMED = "transformed"
RAW = "raw"


def label_view(label_key: str, transformed: Collection[str] | None, raw_text: bool | None) -> str:
  """Where the Evaluator and the Optimizer read the label a model is scored against.

  TFMA's rule, which both follow: with a Transform (the model's `transform_features` signature,
  or the Transform graph), from the transformed features, and from the raw features where they
  lack it (TFX's penguin module renames `species` to `species_xf`; its raw number still serves).
  A text label read raw cannot be compared with the model's numeric answers (TFMA fails deep in
  its Beam pipeline with "Cast string to float is not supported"), so that is a user error.

  Args:
    label_key: the label the run scores against (--eval-label-key, else --label-key).
    transformed: the transformed features' names, or None without a Transform.
    raw_text: whether the raw column is text; None where the raw features lack it.

  Returns:
    TRANSFORMED or RAW.

  Raises:
    LabelError: where neither view gives a number to score against.
  """
  if transformed is not None and label_key in transformed:
    return TRANSFORMED
  if raw_text is False:
    return RAW
  if raw_text and transformed is None:
    raise LabelError(
      f"label {label_key!r} is text, and the model is scored against the label as the examples"
      " hold it; pass the label as the model sees it (--eval-label-key, the name its Transform"
      " gives it), or write the label as class numbers."
    )
  if raw_text:
    raise LabelError(
      f"label {label_key!r} is text, and the model's Transform does not pass it on under that"
      " name; pass the label as the model sees it (--eval-label-key)."
    )
  where = "transformed features" if transformed is not None else "features"
  raise LabelError(
    f"label {label_key!r} is not among the {where}; pass the label as the model sees it"
    " (--eval-label-key)."
  )
