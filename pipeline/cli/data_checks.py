"""Checks the data before anything heavy runs: the task and the blessing floor its label
column decides, the columns the flags name, and whether the splits leave the eval split rows
enough (the files the input pattern picks: `span_checks`).

What the run decides from the data is decided here by the same code (core.spans, core.floors,
core.splits and the ExampleGen's own split hashes), so the user sees before the run the decision
the run makes. Nothing here imports TensorFlow; each mistake is one `error:` line naming the fix
(a CheckError).
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence

from core import column_types, floors, properties, splits, tasks, written_numbers
from pipeline.cli.checks import CheckError


def default_pattern(data_root: str) -> str:
  """'span-{SPAN}/…' for span folders, else the CSV files there (plain or gzipped)."""
  names = os.listdir(data_root)
  prefix = "span-{SPAN}/" if any(re.fullmatch(r"span-\d+", n) for n in names) else ""
  if prefix:
    names = []
    for n in os.listdir(data_root):
      if re.fullmatch(r"span-\d+", n) and os.path.isdir(os.path.join(data_root, n)):
        names.extend(os.listdir(os.path.join(data_root, n)))
  plain = any(n.endswith(".csv") for n in names)
  gzipped = any(n.endswith(".csv.gz") for n in names)
  if gzipped and plain:
    return prefix + "*.csv*"
  return prefix + ("*.csv.gz" if gzipped else "*.csv")


@dataclasses.dataclass(frozen=True)
class LabelDecision:
  """The task and the blessing floor decided from the label column.

  Attributes:
    task: one of tasks.TASKS.
    min_accuracy: classification floor.
    max_mse: regression ceiling, or None.
    floor_reason: how the floor was chosen.
    rows: data rows with a label (the rest are left out).
    auto: whether the floor is automatic (the Evaluator then takes it from the eval split).
    task_reason: why the task is the one decided (tasks.task_reason).
    unlabeled: data rows whose label is empty (or a missing token), left out.
    readings: the label is a count the default model reads both ways (`tasks.reads_both`),
      under the automatic floor only.
    quantity_max_mse: the automatic ceiling of the quantity reading (with `readings`).
  """

  task: str
  min_accuracy: float
  max_mse: float | None
  floor_reason: str
  rows: int
  auto: bool = False
  task_reason: str = ""
  unlabeled: int = 0
  readings: bool = False
  quantity_max_mse: float | None = None


def decide_label(
  files: Sequence[str],
  label_key: str,
  delimiter: str,
  requested_task: str,
  max_classes: int,
  min_accuracy: float | None,
  max_mse: float | None,
  model_label_key: str | None = None,
  default_model: bool = True,
) -> LabelDecision:
  """Profiles the label column of the input and decides the task and the floor.

  A count label is read both ways (`tasks.reads_both`) only by the default model
  (`default_model`); a run_fn module trains the task it is given.

  The floor is the one `core.floors` decides from the label column (the Evaluator decides it
  again from the eval split). When the model learns a label a Transform computes and the task
  is given (`floors.label_sets_floor`), the task is the one given, and the floor is
  `--min-accuracy` / `--max-mse` or none.

  Raises:
    CheckError: or tasks.LabelError, naming the column and the fix.
  """
  from components.example_gen import csv_profile

  profile = csv_profile.profile_column(
    files,
    label_key,
    delimiter,
    max_distinct=max_classes,
    keep_text_tokens=tasks.keeps_label_tokens(requested_task),
  )
  if not profile.num_rows:
    where = files[0] if len(files) == 1 else f"the {len(files)} input files"
    raise CheckError(
      f"{where} hold{'s' if len(files) == 1 else ''} a header and no data rows; add rows, or "
      "check that whatever writes the data finished writing it."
    )
  if not default_model and not model_label_key:
    # A run_fn module's model is scored against the label as the examples hold it.
    tasks.label_view(label_key, None, profile.kind == column_types.CSV_STRING)
  _refuse_auto_task_of_a_made_label(label_key, model_label_key, requested_task, profile.kind)
  # Rows with an empty label are left out by the ExampleGen: only the others train and score.
  present = profile.num_rows - profile.num_empty
  if not floors.label_sets_floor(label_key, model_label_key, requested_task):
    return LabelDecision(
      requested_task,
      min_accuracy or 0.0,
      max_mse,
      floors.computed_label_reason(
        requested_task, min_accuracy, max_mse, label_key, model_label_key
      ),
      present,
      task_reason=f"--task {requested_task}",
      unlabeled=profile.num_empty,
    )
  if requested_task in (tasks.AUTO, tasks.REGRESSION):
    _check_decimal_commas(label_key, profile, delimiter)
  distinct = list(profile.values)
  count = profile.distinct_count_at_least + (1 if profile.truncated else 0)
  task = tasks.infer_task(label_key, profile.kind, distinct, count, requested_task, max_classes)
  decision = _floor(task, profile, present, distinct, min_accuracy, max_mse)
  why = tasks.task_reason(profile.kind, distinct, count, requested_task, task, max_classes)
  decision = dataclasses.replace(decision, task_reason=why, unlabeled=profile.num_empty)
  both = tasks.reads_both(profile.kind, distinct, count, requested_task, task)
  if decision.auto and default_model and both:
    variance = getattr(profile, "variance", None) if present else None
    ceiling = floors.decide(tasks.REGRESSION, None, None, variance=variance).value
    why = (
      f"{why}; whole numbers, none below 0, so it is trained both as classes and as a quantity, "
      "and the reading that errs less on held-out rows is kept"
    )
    return dataclasses.replace(decision, task_reason=why, readings=True, quantity_max_mse=ceiling)
  return decision


def _refuse_auto_task_of_a_made_label(
  label_key: str, model_label_key: str | None, requested_task: str, kind: str | None
) -> None:
  """Under --task auto, a label the Transform makes from a number with a decimal point: the raw
  column cannot tell a quantity from classes. TFX's taxi module makes the 0/1 `tips_xf` of the
  float `tips`, which was read as a regression, with a floor of the raw tips' variance that no
  model could miss. (A text label is classes either way; a whole-number one is taken as its
  classes passed on, as the penguin modules do.)"""
  made = model_label_key and model_label_key != label_key
  if made and requested_task == tasks.AUTO and kind == column_types.CSV_FLOAT:
    raise CheckError(
      f"label {model_label_key!r} (--eval-label-key) is made by the Transform from the number "
      f"column {label_key!r}, so whether it is a quantity or classes cannot be read from the "
      "data; pass --task regression, binary or multiclass."
    )


def _floor(task, profile, present, distinct, min_accuracy, max_mse) -> LabelDecision:
  """The decision's floor (`floors.decide`), from the flags or the label's profile."""
  if task == tasks.REGRESSION:
    variance = getattr(profile, "variance", None) if present else None
    floor = floors.decide(task, min_accuracy, max_mse, variance=variance)
    return LabelDecision(task, 0.0, floor.value, floor.reason, present, auto=floor.auto)
  counts = getattr(profile, "value_counts", None) or {}
  majority = max(counts.values()) / present if counts and present else 1.0 / len(distinct)
  floor = floors.decide(task, min_accuracy, max_mse, majority=majority)
  return LabelDecision(task, floor.value, None, floor.reason, present, auto=floor.auto)


# A number with a decimal comma (or an integer), as a European spreadsheet writes it.
_DECIMAL_COMMA_NUMBER = re.compile(r"\s*[+-]?(\d+,\d+|\d+|,\d+)\s*")
# A number with thousands separators (or one under a thousand), as "215,000" or "1,250.5".
_THOUSANDS_NUMBER = re.compile(r"\s*[+-]?\d{1,3}(,\d{3})*(\.\d+)?\s*")


# The marks of a number written for people that no plain number has.
_SIGNS = re.compile(r"[$€£¥%()]")


def _check_decimal_commas(label_key: str, profile, delimiter: str) -> None:
  """Refuses a text label whose every value is a number written for people: with currency or
  percent signs (`core.written_numbers`), a decimal comma or thousands separators.

  Such a column reads as text (as in stock CsvExampleGen), so a numeric target would become
  hundreds of classes that the model cannot learn, silently, or, with more values than the
  class cap, end in advice that leads nowhere. A label of too many values to count is judged
  by the values counted (`sample`).
  """
  values = [v for v in profile.values or profile.sample if isinstance(v, str)]
  if profile.kind != "string" or not values:
    return
  signs = [v for v in values if _SIGNS.search(v)]
  if signs and all(written_numbers.parse_number(v) is not None for v in values):
    shown = ", ".join(repr(v) for v in signs[:2])
    raise CheckError(
      f"the label {label_key!r} holds numbers written with currency or percent signs ({shown}), "
      "which read as text and would make each value a class; write them as plain numbers "
      "(12.5, 42000), or pass --task multiclass if they are class names."
    )
  shown = ", ".join(repr(v) for v in [v for v in values if "," in v][:2])
  if not shown:
    return
  # Groups of exactly three digits after every comma read as thousands ("215,000"); a value
  # such as "20,5" or "1,25" can only be a decimal comma.
  if all(_THOUSANDS_NUMBER.fullmatch(v) for v in values):
    raise CheckError(
      f"the label {label_key!r} holds numbers written with thousands separators ({shown}), "
      "which read as text; write them without the separators (pandas: pd.read_csv(path, "
      "thousands=',').to_csv(path, index=False)), or pass --task multiclass if they are class "
      "names."
    )
  if not all(_DECIMAL_COMMA_NUMBER.fullmatch(v) for v in values):
    return
  sep = "\\t" if delimiter == "\t" else delimiter
  raise CheckError(
    f"the label {label_key!r} holds numbers written with a decimal comma ({shown}), which read "
    "as text and would make each value a class; write the file with '.' as the decimal mark "
    f"(pandas: pd.read_csv(path, sep='{sep}', decimal=',').to_csv(path, index=False)), or "
    "pass --task multiclass if they are class names."
  )


def check_model_names(path: str, delimiter: str, skip: Sequence[str]) -> None:
  """Refuses a header two of whose columns the default model would feed under one input name
  (`model_contract.name_clashes`), before anything runs.

  Args:
    skip: the columns the model does not read (the label, --exclude-columns).

  Raises:
    CheckError: naming the two columns.
  """
  from components import model_contract
  from components.example_gen import csv_read

  names = [n for n in csv_read.read_header(path, delimiter) if n not in set(skip)]
  clashes = model_contract.name_clashes(names)
  if clashes:
    raise CheckError(model_contract.clash_error(clashes))


def check_flag_columns(path: str, delimiter: str, wanted: Sequence[tuple[str, str]]) -> None:
  """Refuses flags that name columns the data does not have.

  Args:
    path: the first input file (its header is every file's header).
    delimiter: the field delimiter.
    wanted: (flag, column) pairs, e.g. ("--split-column", "user_id").

  Raises:
    CheckError: naming the first missing column, its flag and the columns there are.
  """
  from components.example_gen import csv_read

  header = csv_read.read_header(path, delimiter)
  for flag, column in wanted:
    if column not in header:
      shown = ", ".join(repr(c) for c in header[:8]) + (", ..." if len(header) > 8 else "")
      raise CheckError(
        f"{flag} {column!r} is not a column of {path}; pass one of {shown} ({len(header)} columns)."
      )


def check_label_kept(path: str, delimiter: str, label_key: str, live_columns, live: int) -> None:
  """Refuses tonight's file without the label column the live version was trained on: the data
  lost it, and the fix is the data, not another --label-key (which the column check advised).

  Args:
    live_columns: the columns live version `live` was trained on (None: unknown).

  Raises:
    CheckError: naming the column, the live version and the file.
  """
  from components.example_gen import csv_read

  if not live_columns or label_key not in live_columns:
    return
  if label_key not in csv_read.read_header(path, delimiter):
    raise CheckError(
      f"column {label_key!r}, the label live version {live} was trained on, is not in the header "
      f"of {path}: the data lost it; fix what writes the data (a model of another label is a new "
      "model: pass --label-key and another --model-name)."
    )


def check_inputs_left(path: str, delimiter: str, label_key: str, excluded: Sequence[str]) -> None:
  """Refuses a header with no column but the label (and those --exclude-columns leaves out):
  the run failed in the trainer, after the ExampleGen and the statistics had run.

  Raises:
    CheckError: naming the columns there are.
  """
  from components.example_gen import csv_read

  header = csv_read.read_header(path, delimiter)
  if label_key in header and not set(header) - {label_key, *excluded}:
    raise CheckError(
      f"{path} holds no column but the label {label_key!r}"
      + (f" and the excluded {', '.join(map(repr, excluded))}" if excluded else "")
      + "; a model needs at least one input column: add the columns it should learn from."
    )


def check_grouped_eval_size(
  files: Sequence[str],
  column: str,
  delimiter: str,
  hash_buckets: tuple[int, int],
  labeled_rows: int,
  min_eval_examples: int,
) -> None:
  """Refuses a --split-column whose groups would leave the eval split too small.

  A grouped split keeps every value's rows in one split, so a few large groups (or many rows
  with no value, which are one group) can put far fewer rows in the eval split than its share.
  This counts what the ExampleGen's hash will do (`csv_profile.grouped_split`).

  Args:
    files: the input files.
    column: --split-column.
    delimiter: the field delimiter.
    hash_buckets: the train and eval splits' hash buckets.
    labeled_rows: data rows with a label (only they reach the splits).
    min_eval_examples: the fewest eval rows accepted.
  """
  from components.example_gen import csv_profile, csv_split

  plan = splits.plan(*hash_buckets, partition_column=column)
  rows_plan = csv_split.SplitPlan(
    plan.names, plan.hash_buckets, partition_column=plan.partition_column
  )
  split = csv_profile.grouped_split(files, column, rows_plan, delimiter)
  total = sum(split.rows)
  if not total:
    return
  # Rows without a label are left out of both splits alike.
  expected = int(labeled_rows * split.rows[1] / total)
  if split.rows[0] and expected >= min_eval_examples:
    return
  values = f"{split.groups:,} value{'s' if split.groups != 1 else ''}"
  if not split.rows[0]:
    outcome = f"puts all {labeled_rows:,} rows in the eval split and none in the train split"
    fix = "split by a column with more and smaller groups, or leave --split-column out."
  else:
    outcome = (
      f"puts about {expected:,} of {labeled_rows:,} rows in the eval split, fewer than "
      f"--min-eval-examples {min_eval_examples}"
    )
    fix = (
      "split by a column with more and smaller groups, leave --split-column out, or lower "
      "--min-eval-examples."
    )
  largest = ""
  if split.largest_value is not None:
    value = "empty cells" if split.largest_value == "" else repr(split.largest_value)
    largest = f" (the largest group, {value}, has {split.largest_rows:,} rows)"
  raise CheckError(
    f"--split-column {column!r} has {values}, and a grouped split keeps each value's rows in "
    f"one split: that {outcome}{largest}; {fix}"
  )


def check_eval_size(
  rows: int, eval_rows: int, eval_share: float, min_eval_examples: int, unlabeled: int = 0
) -> None:
  """Refuses data too small for an evaluation of at least `min_eval_examples` rows.

  Args:
    rows: data rows with a label.
    eval_rows: those the eval split gets (`csv_profile.position_split`: the split is known
      before the run).
    eval_share: the share of rows the eval split gets, for the rows to add (about the
      missing eval rows over the share).
    min_eval_examples: the fewest eval rows accepted.
    unlabeled: data rows left out for an empty label, named in the message.
  """
  if eval_rows >= min_eval_examples:
    return
  counted, more = f"{rows} rows", "rows"
  if unlabeled:
    counted = f"{rows} rows with a label ({unlabeled:,} more have none)"
    more = "rows with a label"
  raise CheckError(
    f"the data has {counted}, and the eval split gets {eval_rows} of them, fewer than "
    f"--min-eval-examples {min_eval_examples}; add {more} (about "
    f"{math.ceil((min_eval_examples - eval_rows) / eval_share)} more) or lower "
    "--min-eval-examples."
  )


def eval_rows(
  files: Sequence[str],
  data_root: str,
  label_key: str,
  delimiter: str,
  hash_buckets: tuple[int, int],
  keep_text_tokens: bool,
) -> int:
  """The rows with a label that the eval split of a run will get, split by their place in their
  files as the ExampleGen splits them (its input base is the data root)."""
  from components.example_gen import csv_profile, csv_split

  plan = splits.plan(*hash_buckets)
  rows_plan = csv_split.SplitPlan(plan.names, plan.hash_buckets, input_base=data_root)
  split = csv_profile.position_split(
    files, label_key, rows_plan, delimiter, keep_text_tokens=keep_text_tokens
  )
  return split[plan.names.index(properties.EVAL_SPLIT)]
