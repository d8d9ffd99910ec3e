"""Checks every flag, path, module and the data before anything heavy runs, and resolves what
depends on the data (the task and the blessing floor) into the PipelineConfig.

Nothing here imports TensorFlow: each mistake is reported in well under a second as one
`error:` line naming the fix (a ValueError subclass the runners print).
"""

from __future__ import annotations

import ast
import dataclasses
import math
import os
import pathlib
import re
import tempfile
import uuid
from collections.abc import Sequence

from components import storage
from core import defaults, floors, properties, spans, splits, tasks
from core.errors import UserInputError


class CheckError(UserInputError):
  """A flag, path, module or data problem found before the run; the message names the fix."""


def control_characters(value: str) -> list[str]:
  """The control characters in a value, as escapes (newlines, tabs, escapes, line separators)."""
  import unicodedata

  found = [c for c in value if unicodedata.category(c) == "Cc" or c in "\u2028\u2029"]
  return sorted({repr(c)[1:-1] for c in found})


def check_text(flag: str, value: str | None) -> None:
  """Refuses a flag value holding control characters (they break logs, crontabs, requests)."""
  if value is None:
    return
  bad = control_characters(str(value))
  if bad:
    raise CheckError(f"{flag} contains control characters ({', '.join(bad)}); remove them.")


def check_fraction(flag: str, value: float) -> None:
  if not 0.0 <= value <= 1.0:
    raise CheckError(f"{flag} must be between 0 and 1, got {value:g}.")


def check_beam_args(flag: str, values: list[str]) -> None:
  """Beam options as Beam parses them: `--name=value` or `--name`, and no runner that is known
  to compute wrong results."""
  for value in values:
    check_text(flag, value)
    if not value.startswith("--") or value == "--":
      raise CheckError(
        f"{flag} {value!r} is not a Beam option; pass it as {flag}=--name=value, e.g. "
        f"{flag}=--runner=DataflowRunner."
      )
    if value.split("=", 1)[0] == "--runner" and "dask" in value.lower():
      raise CheckError(
        f"{flag} {value!r}: Beam's DaskRunner runs only the last branch of a pipeline here "
        "(stock CsvExampleGen on it wrote no train split); use the DirectRunner, Dataflow, "
        "Flink or Spark."
      )
  if values:
    _check_beam_parses(flag, values)


def _check_beam_parses(flag: str, values: list[str]) -> None:
  """The options as Beam's own parser reads them in each Beam component, which otherwise exits
  mid-run on one it cannot read (`--runner` without a value), its message only in the log."""
  import contextlib
  import io

  from apache_beam.options.pipeline_options import PipelineOptions

  said = io.StringIO()
  try:
    with contextlib.redirect_stderr(said):
      PipelineOptions(list(values)).get_all_options()
  except SystemExit:
    lines = said.getvalue().strip().splitlines() or ["it cannot be read"]
    reason = lines[-1].split("error: ", 1)[-1]
    raise CheckError(
      f"{flag} {' '.join(values)!r}: Beam cannot parse these options ({reason}); give each as "
      f"{flag}=--name=value, e.g. {flag}=--runner=DataflowRunner."
    ) from None


def check_at_least(flag: str, value: float, low: float) -> None:
  if not value >= low:  # NaN is not at least anything
    raise CheckError(f"{flag} must be at least {low:g}, got {value:g}.")


def check_local_cluster(workers: int, ps: int) -> None:
  """A local cluster's processes (workers, and with --local-ps a chief) fit this machine."""
  limit = defaults.max_local_processes()
  processes = defaults.local_cluster_processes(workers, ps)
  if processes > limit:
    raise CheckError(
      f"--local-workers {workers} and --local-ps {ps} would start {processes} processes "
      f"on this machine, over its {limit} (4 per CPU); pass fewer, or train across machines "
      "with run_kubeflow.py --workers N."
    )


def check_uri(flag: str, value: str | None) -> None:
  """An object-store URI names a bucket: gs://BUCKET/... or s3://BUCKET/..."""
  if not storage.is_remote(value):
    return
  scheme, _, rest = str(value).partition("://")
  if not rest.split("/", 1)[0]:
    raise CheckError(f"{flag} {value} names no bucket; pass {scheme}://BUCKET/PATH.")


# A container image reference as registries read it (distribution/reference's grammar):
# [host[:port]/]path[:tag][@digest], path components lower-case.
_HOST = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
  rf"(?:{_HOST}(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
  r"(?::[\w][\w.-]{0,127})?(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)


def check_image(flag: str, image: str) -> None:
  """A container image reference a registry accepts, e.g. gcr.io/PROJECT/tfx-pipeline-kit:1.0."""
  if not _IMAGE.fullmatch(image):
    raise CheckError(
      f"{flag} {image!r} is not a container image reference; pass REGISTRY/NAME:TAG in lower "
      "case, e.g. gcr.io/my-project/tfx-pipeline-kit:1.0."
    )


def check_output_file(flag: str, path: str) -> None:
  """A file to write: not a folder, in a folder that exists."""
  p = pathlib.Path(path)
  if p.is_dir():
    raise CheckError(f"{flag} {path} is a folder; pass a file name, e.g. {p / 'pipeline.json'}.")
  if not p.parent.resolve().is_dir():
    raise CheckError(f"{flag} {path}: folder {p.parent} does not exist; create it first.")


def check_schema_file(flag: str, path: str) -> None:
  """A --schema file parses as a TFMD Schema in text format, as SchemaGen writes it."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  try:
    with open(path, encoding="utf-8") as f:
      text_format.Parse(f.read(), schema_pb2.Schema())
  except (text_format.ParseError, UnicodeDecodeError) as e:
    detail = " ".join(str(e).split()).rstrip(".")
    raise CheckError(
      f"{flag} {path} is not a Schema in text format ({detail}); pass the schema.pbtxt "
      "that SchemaGen wrote, or leave --schema out."
    ) from None


def check_module_folder(flag: str, path: str) -> None:
  """TFX packages every *.py file beside a module into a wheel: each must be a file."""
  folder = pathlib.Path(path).parent
  odd = sorted(p.name for p in folder.glob("*.py") if not p.is_file())
  if odd:
    raise CheckError(
      f"{flag} {path}: its folder also holds {odd[0]!r}, which is not a file, and TFX packages "
      "every *.py beside the module; rename it or move the module to a folder of its own."
    )


def check_folder(flag: str, path: str, *, must_exist: bool) -> None:
  """A local folder flag: not a file, and (when it must exist) there."""
  p = pathlib.Path(path)
  if p.exists() and not p.is_dir():
    raise CheckError(f"{flag} {path} is a file, not a folder; pass a folder.")
  if must_exist and not p.exists():
    raise CheckError(f"{flag} {path} does not exist; pass an existing folder.")


def check_writable(flag: str, path: str) -> None:
  """Tries a write in the folder (or its nearest existing parent), as the run will.

  Raises:
    CheckError: when the folder (or a parent) is a file, or a test file cannot be written.
  """
  p = pathlib.Path(path)
  for parent in [p, *p.parents]:
    if parent.exists():
      break
  if not parent.is_dir():
    raise CheckError(f"{flag} {path}: {parent} is a file, not a folder; pass a folder.")
  try:
    fd, probe = tempfile.mkstemp(prefix=f".write-check-{uuid.uuid4().hex[:6]}-", dir=parent)
    os.close(fd)
    os.unlink(probe)
  except OSError as e:
    reason = e.strerror or str(e)
    raise CheckError(
      f"{flag} {path} cannot be written ({reason} in {parent}); pass a folder you can write."
    ) from None


def module_functions(path: str) -> set[str]:
  """Names of the top-level functions a module file defines (read, not imported).

  Raises:
    CheckError: when the file is missing, not a file, or not valid Python.
  """
  p = pathlib.Path(path)
  if not p.exists():
    raise CheckError(f"module file {path} does not exist; pass a Python module file.")
  if not p.is_file():
    raise CheckError(f"module file {path} is not a file; pass a Python module file.")
  try:
    tree = ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
  except (SyntaxError, UnicodeDecodeError) as e:
    line = getattr(e, "lineno", None)
    where = f" (line {line})" if line else ""
    raise CheckError(f"module file {path} is not valid Python{where}: {e}; fix it.") from None
  names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
  # `run_fn = some_helper(...)` style assignments count too.
  for node in tree.body:
    if isinstance(node, ast.Assign):
      names.update(t.id for t in node.targets if isinstance(t, ast.Name))
  return names


@dataclasses.dataclass(frozen=True)
class ModulePlan:
  """Which stock components a module file asks for.

  Attributes:
    transform: a Transform runs (preprocessing_fn in the module or the transform module).
    tune: a Tuner runs (--tune, with tuner_fn in the module).
    style: who builds the model: 'default' (the bundled module), 'build_model' (the default
      model around the module's network) or 'run_fn' (the module itself).
  """

  transform: bool
  tune: bool
  style: str = defaults.RUN_FN


def plan_modules(
  module_file: str | None, transform_module: str | None, tune: bool, local: bool = True
) -> ModulePlan:
  """Checks the module files against the flags and decides Transform and Tuner.

  Args:
    module_file: the trainer module, or None for the bundled default module.
    transform_module: a separate file with preprocessing_fn, or None.
    tune: whether --tune was given.
    local: whether the files are on this machine (they cannot be read otherwise).

  Raises:
    CheckError: naming the missing function and the flag to change.
  """
  if module_file is None:
    functions = {defaults.RUN_FN, defaults.TUNER_FN}
  elif local and not storage.is_remote(module_file):
    functions = module_functions(module_file)
    check_module_folder("--module-file", module_file)
    if defaults.RUN_FN not in functions and defaults.BUILD_MODEL_FN not in functions:
      raise CheckError(
        f"module file {module_file} defines neither run_fn(fn_args) nor build_model(hparams); "
        "add one of them."
      )
  else:
    functions = {defaults.RUN_FN}
  transform = defaults.PREPROCESSING_FN in functions
  if transform_module:
    local_file = local and not storage.is_remote(transform_module)
    if local_file:
      check_module_folder("--transform-module", transform_module)
    if local_file and defaults.PREPROCESSING_FN not in module_functions(transform_module):
      raise CheckError(
        f"--transform-module {transform_module} defines no preprocessing_fn(inputs); add it."
      )
    transform = True
  if tune and defaults.TUNER_FN not in functions:
    raise CheckError(
      f"--tune needs a tuner_fn(fn_args) in {module_file}; add one or leave out --tune."
    )
  if module_file is None:
    style = "default"
  elif defaults.RUN_FN not in functions:
    style = defaults.BUILD_MODEL_FN
  else:
    style = defaults.RUN_FN
  return ModulePlan(transform=transform, tune=tune, style=style)


def input_files(data_root: str, pattern: str) -> list[str]:
  """The files a pattern matches (local or object store); with a `{SPAN}` or date placeholder,
  the newest span's (and version's), as the ExampleGen's driver picks them (`spans.newest`).

  Raises:
    CheckError: when an object store cannot be listed, or the span cannot be resolved.
  """
  full = os.path.join(data_root, pattern)
  if not spans.is_unresolved(full):
    return _glob(full, full)
  try:
    candidates = spans.matching(full)[0]
  except ValueError as e:  # TFX's driver refuses the same patterns.
    raise CheckError(spans.unresolvable(pattern, data_root, str(e))) from None
  found = _glob(candidates, full)
  try:
    newest = spans.newest(full, found)
  except ValueError as e:  # A file whose span is not a number: TFX's driver fails on it too.
    raise CheckError(spans.unresolvable(pattern, data_root, str(e))) from None
  return _glob(newest.pattern, full) if newest else []


def _glob(path: str, shown: str) -> list[str]:
  """The files a glob matches; `shown` is the pattern a listing error names."""
  from components.example_gen import io_lib

  try:
    return io_lib.glob(path)
  except Exception as e:  # Object-store clients raise their own error types.
    raise CheckError(
      f"cannot list {shown} ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
      "check the path and the credentials, or pass --task to skip reading the data here."
    ) from None


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
  """

  task: str
  min_accuracy: float
  max_mse: float | None
  floor_reason: str
  rows: int
  auto: bool = False
  task_reason: str = ""
  unlabeled: int = 0


def decide_label(
  files: Sequence[str],
  label_key: str,
  delimiter: str,
  requested_task: str,
  max_classes: int,
  min_accuracy: float | None,
  max_mse: float | None,
  model_label_key: str | None = None,
) -> LabelDecision:
  """Profiles the label column of the input and decides the task and the floor.

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
  return dataclasses.replace(decision, task_reason=why, unlabeled=profile.num_empty)


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


def _check_decimal_commas(label_key: str, profile, delimiter: str) -> None:
  """Refuses a text label whose every value is a number written with a decimal comma.

  Such a column reads as text (as in stock CsvExampleGen), so a numeric target would become
  hundreds of classes that the model cannot learn, silently.
  """
  values = [v for v in profile.values if isinstance(v, str)]
  if profile.kind != "string" or not values:
    return
  if not all(_DECIMAL_COMMA_NUMBER.fullmatch(v) for v in values):
    return
  shown = ", ".join(repr(v) for v in [v for v in values if "," in v][:2])
  if not shown:
    return
  sep = "\\t" if delimiter == "\t" else delimiter
  raise CheckError(
    f"the label {label_key!r} holds numbers written with a decimal comma ({shown}), which read "
    "as text and would make each value a class; write the file with '.' as the decimal mark "
    f"(pandas: pd.read_csv(path, sep='{sep}', decimal=',').to_csv(path, index=False)), or "
    "pass --task multiclass if they are class names."
  )


def check_excluded_columns(exclude_columns: Sequence[str], label_key: str) -> None:
  """Refuses --exclude-columns naming the label: the label is never a feature anyway.

  Raises:
    CheckError: naming the label and the fix.
  """
  if label_key in exclude_columns:
    raise CheckError(
      f"--exclude-columns names the label {label_key!r}, which is never a feature (the model "
      "learns to predict it, not from it); leave it out of --exclude-columns."
    )


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
