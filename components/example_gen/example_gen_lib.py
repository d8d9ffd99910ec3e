"""ExampleGen planning and bookkeeping: input files and spans, units of work, span digests."""

from __future__ import annotations

import collections
import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from components import arguments, beam_args
from components.example_gen import (
  csv_batch,
  csv_convert,
  csv_errors,
  csv_infer,
  csv_read,
  csv_split,
  io_lib,
)
from core import spans

# Bytes per unit of conversion work (a chunk of a large uncompressed file without quotes).
CHUNK_BYTES = 16 << 20
# Below this much input, conversion stays in the launcher's process: each DirectRunner
# worker process costs about 350 MB and seconds to start, and on two cores saves little.
PARALLEL_MIN_BYTES = 256 << 20


def cpu_count() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@dataclasses.dataclass(frozen=True)
class FilePlan:
  """The input files of one execution.

  Attributes:
    files: (path, split) pairs; split is the input split a file belongs to when
      the input config names the splits, else None (rows are hash-split).
    spans: The spans whose files are read, ascending.
    file_spans: The span of each file, in the order of `files`.
  """

  files: tuple[tuple[str, str | None], ...]
  spans: tuple[int, ...]
  file_spans: tuple[int, ...] = ()

  @property
  def paths(self) -> list[str]:
    return [p for p, _ in self.files]


def window_patterns(unresolved: str, span: int, rolling: int) -> list[tuple[int, str]]:
  """Patterns of the last `rolling` spans up to `span`, oldest first; [] without a window.

  Args:
    unresolved: The input pattern with its `{SPAN}` placeholder.
    span: The newest span, as resolved by the driver.
    rolling: How many spans to read, the newest included.
  """
  from tfx.components.example_gen import utils

  if rolling <= 1 or utils.SPAN_SPEC not in unresolved:
    return []
  return [
    (s, utils.get_pattern_for_span_version(unresolved, True, False, False, s, None))
    for s in range(max(0, span - rolling + 1), span + 1)
  ]


def plan_files(
  input_base: str,
  splits: Sequence[tuple[str, str]],
  hash_split: bool,
  span: int = 0,
  rolling: int = 1,
  unresolved_pattern: str | None = None,
) -> FilePlan:
  """Lists the files to read.

  Args:
    input_base: Folder the patterns are relative to.
    splits: (name, resolved pattern) of each input split.
    hash_split: Whether the output config hash-splits one input split's rows.
    span: The resolved span.
    rolling: Spans to read with a `{SPAN}` pattern, the newest included.
    unresolved_pattern: The pattern before span resolution, for the window.

  Returns:
    The files and spans.

  Raises:
    CsvInputError: if a pattern matches no file.
  """
  if hash_split:
    name, pattern = splits[0]
    patterns = window_patterns(unresolved_pattern or "", span, rolling) or [(span, pattern)]
    files: list[tuple[str, str | None]] = []
    file_spans: list[int] = []
    for s, p in patterns:
      found = io_lib.glob(os.path.join(input_base, p))
      files.extend((f, None) for f in found)
      file_spans.extend(s for _ in found)
    if not files:
      raise csv_errors.CsvInputError(
        f"no CSV file matches {pattern!r} under {input_base}; "
        "check the data root and the input pattern."
      )
    return FilePlan(tuple(files), tuple(sorted(set(file_spans))), tuple(file_spans))
  files = []
  for name, pattern in splits:
    found = io_lib.glob(os.path.join(input_base, pattern))
    if not found:
      raise csv_errors.CsvInputError(
        f"no CSV file matches {pattern!r} for split {name!r} under {input_base}; "
        "check the input config."
      )
    files.extend((f, name) for f in found)
  return FilePlan(tuple(files), (span,), tuple(span for _ in files))


def span_digests(results: Sequence[csv_convert.UnitResult], plan: FilePlan) -> dict[str, dict]:
  """Each span's rows read and the digest of their lines (`csv_split.LinesDigest`).

  Returns:
    str(span) -> {"rows": rows read, "digest": 16 hex digits}: the Examples' `span_digests`,
    which the data gate compares between nights to find a span delivered again.
  """
  span_of = dict(zip(plan.paths, plan.file_spans, strict=True))
  rows: dict[int, int] = collections.defaultdict(int)
  digests: dict[int, int] = collections.defaultdict(int)
  for r in results:
    span = span_of[r.file]
    rows[span] += r.rows_read
    digests[span] = (digests[span] + r.content_digest) % 2**64
  return {str(s): {"rows": rows[s], "digest": f"{digests[s]:016x}"} for s in sorted(rows)}


def plan_units(files: Sequence[tuple[str, str | None]]) -> list[csv_convert.Unit]:
  """Cuts the input files into units of work of about CHUNK_BYTES (see `csv_read.plan_chunks`).

  The cut depends on the files alone, not on the machine, so a rerun elsewhere writes the
  same shards.

  Args:
    files: (path, fixed split or None) pairs.

  Returns:
    Units, numbered in file order.
  """
  units: list[csv_convert.Unit] = []
  for path, fixed in files:
    for chunk in csv_read.plan_chunks(path, CHUNK_BYTES):
      units.append(csv_convert.Unit(len(units), chunk, fixed))
  return units


def direct_runner_args(args: Sequence[str], num_units: int, total_bytes: int) -> list[str]:
  """Lets Beam's DirectRunner convert units on every core, unless told otherwise.

  Only when no other runner and no DirectRunner mode was chosen, and when there
  are several units and enough bytes: worker processes take a second or two to
  start.
  """
  args = list(args)
  if num_units < 2 or total_bytes < PARALLEL_MIN_BYTES:
    return args
  if beam_args.distributed_runner(args) or arguments.flag_value(args, "--direct_running_mode"):
    return args
  workers = min(cpu_count(), num_units)
  if workers < 2:
    return args
  return [*args, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


def check_named_columns(
  path: str,
  names: Sequence[str],
  delimiter: str,
  label_key: str | None = None,
  partition_column: str | None = None,
) -> None:
  """Checks that the columns the options name are in the header.

  Raises:
    CsvInputError: naming the fix (another column, or --delimiter when the
      header looks delimited by something else).
  """
  hint = csv_errors.delimiter_hint(names, delimiter)
  if label_key and label_key not in names:
    fix = hint or f"pass one of {csv_errors.shown_names(sorted(names))} as --label-key"
    raise csv_errors.CsvInputError(
      f"label column {label_key!r} is not in the header of {path}; {fix}."
    )
  if partition_column and partition_column not in names:
    fix = hint or f"use one of {sorted(names)}"
    raise csv_errors.CsvInputError(
      f"partition_feature_name {partition_column!r} is not a column of {path}; {fix}."
    )


def column_types(
  paths: Sequence[str],
  names: Sequence[str],
  delimiter: str,
  label_key: str | None = None,
  schema_path: str | None = None,
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
) -> dict[str, str]:
  """Column types from a schema when given, else inferred from the whole input.

  Raises:
    CsvInputError: if the schema lacks a column.
  """
  if schema_path:
    from_schema = csv_infer.types_from_schema(schema_path)
    missing = [c for c in names if c not in from_schema]
    if missing:
      raise csv_errors.CsvInputError(
        f"schema {schema_path} has no type for columns {missing}; add them to the schema."
      )
    return {c: from_schema[c] for c in names}
  return csv_infer.infer_column_types(paths, delimiter, label_key, block_size)


@dataclasses.dataclass(frozen=True)
class Job:
  """What one execution converts, and how.

  Attributes:
    files: The input files and their spans.
    units: The units of conversion work, in file order.
    options: How rows are typed and written.
    split_plan: Where rows go.
  """

  files: FilePlan
  units: list[csv_convert.Unit]
  options: csv_batch.ConvertOptions
  split_plan: csv_split.SplitPlan


def plan_job(
  input_base: str,
  input_splits: Sequence[tuple[str, str]],
  split_names: Sequence[str],
  hash_buckets: Sequence[int] = (),
  *,
  span: int = 0,
  rolling: int = 1,
  unresolved_pattern: str | None = None,
  delimiter: str = ",",
  label_key: str | None = None,
  partition_column: str | None = None,
  schema_path: str | None = None,
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
  allow_non_finite: bool = False,
  keep_label_tokens: bool = False,
  lenient_columns: Sequence[str] = (),
) -> Job:
  """Plans one execution: lists the files, checks the header, types the columns, cuts units.

  Args:
    input_base: Folder the input patterns are relative to.
    input_splits: (name, resolved pattern) of each input split.
    split_names: Output split names, in order.
    hash_buckets: Buckets per output split when one input split's rows are hash-split;
      empty when the input config names the splits.
    span: The resolved span.
    rolling: Spans to read with a `{SPAN}` pattern, the newest included.
    unresolved_pattern: The pattern before span resolution, for the window.
    delimiter: Field delimiter.
    label_key: Label column, or None.
    partition_column: Column whose value decides a row's split, or None.
    schema_path: A schema.pbtxt with the column types, or None to infer them.
    block_size: Bytes per Arrow read block to start with.
    allow_non_finite: Whether NaN and +-inf are accepted in float columns.
    keep_label_tokens: Whether a text label's missing tokens are classes, not missing labels.
    lenient_columns: Columns whose bad cells are written empty instead of failing their row.

  Raises:
    CsvInputError: for input a user can fix, in one sentence naming the fix.
  """
  files = plan_files(
    input_base,
    input_splits,
    hash_split=bool(hash_buckets),
    span=span,
    rolling=rolling,
    unresolved_pattern=unresolved_pattern,
  )
  first = files.files[0][0]
  names = csv_read.read_header(first, delimiter)
  check_named_columns(first, names, delimiter, label_key, partition_column)
  types = column_types(files.paths, names, delimiter, label_key, schema_path, block_size)
  options = csv_batch.ConvertOptions(
    column_types=types,
    label_key=label_key,
    allow_non_finite=allow_non_finite,
    delimiter=delimiter,
    block_size=block_size,
    keep_label_tokens=keep_label_tokens,
    lenient_columns=frozenset(lenient_columns),
    digest_lines=bool(unresolved_pattern) and spans.is_unresolved(unresolved_pattern),
  )
  split_plan = csv_split.SplitPlan(
    names=tuple(split_names),
    hash_buckets=tuple(hash_buckets),
    partition_column=partition_column,
    input_base=input_base,
  )
  return Job(files, plan_units(files.files), options, split_plan)


def resolve_without_driver(exec_properties: dict[str, Any]) -> dict[str, Any] | None:
  """Resolves span, version and fingerprint where no ExampleGen driver ran.

  Open-source Kubeflow runs the executor alone, so the input pattern still
  holds `{SPAN}`. This runs TFX's own FileBasedDriver resolution, which picks
  the latest span (and version) and fingerprints its files.

  Args:
    exec_properties: The execution properties the executor received.

  Returns:
    Updated execution properties (resolved input config, span, version,
    input_fingerprint), or None when a driver already resolved them.
  """
  from tfx.components.example_gen import driver, utils
  from tfx.proto import example_gen_pb2
  from tfx.types import standard_component_specs
  from tfx.utils import proto_utils

  input_config = example_gen_pb2.Input()
  proto_utils.json_to_proto(
    exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
  )
  unresolved = any(spans.is_unresolved(s.pattern) for s in input_config.splits)
  if not unresolved and exec_properties.get(utils.SPAN_PROPERTY_NAME) is not None:
    return None
  props = dict(exec_properties)
  try:
    return driver.FileBasedDriver(None).resolve_exec_properties(props, None, None)
  except ValueError as e:
    raise csv_errors.CsvInputError(
      spans.unresolvable(
        input_config.splits[0].pattern,
        exec_properties.get(standard_component_specs.INPUT_BASE_KEY),
        str(e),
      )
    ) from None
