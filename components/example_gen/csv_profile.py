"""What a CSV column holds: a whole input's profile, and a label's value counts per split."""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components.example_gen import csv_read, csv_split
from components.example_gen.csv_errors import (
  CsvInputError,
  damaged_gzip_as_input_error,
  delimiter_hint,
  shown_names,
)
from components.example_gen.csv_infer import column_kind, missing_tokens, parse_numeric
from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING, CSV_UNKNOWN


class LabelCounts:
  """Counts of a label column's values as read, and their moments when they are numbers.

  The Evaluator takes its automatic floor from the eval split's counts: the share of the most
  frequent value (classification) or the variance (regression).
  """

  # Distinct values kept; past this a label is no class label the kit trains.
  MAX_VALUES = 1001

  def __init__(self, rows=0, counts=None, overflow=False, numeric=True, total=0.0, total_sq=0.0):
    self.rows = int(rows)
    self.counts = dict(counts or {})
    self.overflow = bool(overflow)
    self.numeric = bool(numeric)
    self.total = float(total)
    self.total_sq = float(total_sq)

  def add(self, values: pa.Array) -> None:
    """Adds the raw cells (bytes) of one batch."""
    self.rows += len(values)
    if not self.overflow:
      for item in pc.value_counts(values).to_pylist():
        text = item["values"]
        text = text if isinstance(text, str) else text.decode("utf-8", "replace")
        self.counts[text] = self.counts.get(text, 0) + int(item["counts"])
      if len(self.counts) > self.MAX_VALUES:
        self.overflow = True
        self.counts = {}
    if self.numeric:
      try:
        numbers = pc.cast(pc.utf8_trim_whitespace(values.cast(pa.string())), pa.float64())
      except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        self.numeric = False
        return
      array = numbers.to_numpy(zero_copy_only=False)
      self.total += float(np.nansum(array))
      self.total_sq += float(np.nansum(np.square(array)))

  def merge(self, other: LabelCounts) -> None:
    self.rows += other.rows
    self.overflow = self.overflow or other.overflow
    if self.overflow:
      self.counts = {}
    else:
      for value, n in other.counts.items():
        self.counts[value] = self.counts.get(value, 0) + n
      if len(self.counts) > self.MAX_VALUES:
        self.overflow, self.counts = True, {}
    self.numeric = self.numeric and other.numeric
    self.total += other.total
    self.total_sq += other.total_sq

  def to_json(self) -> dict:
    out = {"rows": self.rows, "counts": self.counts, "overflow": self.overflow}
    if self.numeric:
      out.update(total=self.total, total_sq=self.total_sq)
    return out

  @classmethod
  def from_json(cls, data: dict) -> LabelCounts:
    numeric = "total" in data
    return cls(
      data["rows"],
      data.get("counts"),
      data.get("overflow", False),
      numeric,
      data.get("total", 0.0),
      data.get("total_sq", 0.0),
    )


@dataclasses.dataclass(frozen=True)
class ColumnProfile:
  """What one column of a CSV input holds; see `profile_column`.

  Attributes:
    column: The column's name.
    kind: 'int', 'float' or 'string' by the ExampleGen's type rules (csv_infer), None when
      every cell is empty.
    num_rows: Data rows read (rows with the wrong number of fields are not rows).
    num_empty: Rows whose cell in this column is empty (or a missing token, in a number column).
    values: The distinct non-empty values, sorted, as Python ints, floats or
      strs; empty when `truncated`. NaN is left out.
    truncated: More than `max_distinct` distinct cells were seen, so `values`
      was not kept.
    distinct_count_at_least: The number of distinct values; a lower bound when
      `truncated`.
    value_counts: Rows holding each value (keys as in `values`); None when
      `truncated`.
    sample: When `truncated`, the distinct values seen before it stopped counting (over
      `max_distinct` of them, sorted, as in `values`): what a label's values look like.
    mean: Mean of the finite values of an 'int' or 'float' column, else None.
    variance: Their population variance (the mean squared error of always
      answering the mean), else None.
  """

  column: str
  kind: str | None
  num_rows: int
  num_empty: int
  values: tuple[Any, ...]
  truncated: bool
  distinct_count_at_least: int
  value_counts: dict[Any, int] | None = None
  mean: float | None = None
  variance: float | None = None
  sample: tuple[Any, ...] = ()


def _missing_cells(cells: Sequence[bytes], kind: str, keep_text_tokens: bool) -> set[bytes]:
  """The cells that are empty by csv_infer's rule (its missing tokens): in a label of any kind,
  the only column profiled (the ExampleGen leaves such rows out, text labels included, unless
  `keep_text_tokens` makes a text label's tokens values, as `--task multiclass` does)."""
  if kind == CSV_UNKNOWN or not cells or (kind == CSV_STRING and keep_text_tokens):
    return set()
  mask = missing_tokens(pa.array(cells, pa.binary()).cast(pa.string()))
  return {c for c, m in zip(cells, mask, strict=True) if m}


def _typed_value(cell: bytes, kind: str) -> Any:
  if kind == CSV_INT:
    return int(cell)
  if kind == CSV_FLOAT:
    return float(cell)
  return cell.decode("utf-8")


class _Moments:
  """Count, mean and sum of squared deviations, merged batch by batch (Chan et al.)."""

  def __init__(self):
    self.count, self.mean, self.m2 = 0, 0.0, 0.0

  def add(self, values: np.ndarray) -> None:
    values = values[np.isfinite(values)]
    if not len(values):
      return
    count, mean = len(values), float(values.mean())
    m2 = float(((values - mean) ** 2).sum())
    total = self.count + count
    delta = mean - self.mean
    self.mean += delta * count / total
    self.m2 += m2 + delta * delta * self.count * count / total
    self.count = total


def _is_nan(value: Any) -> bool:
  return isinstance(value, float) and math.isnan(value)


class _ColumnTally:
  """What `profile_column` learns of one column, batch by batch."""

  def __init__(self, max_distinct: int, keep_text_tokens: bool):
    self.max_distinct = max_distinct
    self.keep_text_tokens = keep_text_tokens
    self.kind = CSV_UNKNOWN
    self.rows = self.empty = 0
    # Cells as written -> rows; dropped once there are more than max_distinct of them.
    self.counts: collections.Counter[bytes] = collections.Counter()
    self.truncated = False
    # Distinct typed values when the counts were dropped.
    self.kept = 0
    self.sample: tuple[Any, ...] = ()
    self.moments = _Moments()

  def add(self, values: pa.Array) -> None:
    """Adds one batch's cells (binary, nulls for empty cells)."""
    self.rows += len(values)
    self.empty += values.null_count
    text = values.cast(pa.string())
    self.kind = column_kind(text, self.kind)
    if self.kind in (CSV_INT, CSV_FLOAT):
      numbers, _ = parse_numeric(text, CSV_FLOAT)
      self.moments.add(numbers.drop_null().to_numpy(zero_copy_only=False))
    if self.truncated:
      return
    tally = pc.value_counts(values.drop_null())
    self.counts.update(
      dict(zip(tally.field("values").to_pylist(), tally.field("counts").to_pylist(), strict=True))
    )
    if len(self.counts) > self.max_distinct:
      self.truncated = True
      missing = _missing_cells(list(self.counts), self.kind, self.keep_text_tokens)
      typed = {_typed_value(c, self.kind) for c in self.counts if c not in missing}
      self.kept = len(typed)
      self.sample = tuple(sorted(v for v in typed if not _is_nan(v))[: self.max_distinct + 1])
      self.counts = collections.Counter()

  def profile(self, column: str) -> ColumnProfile:
    """The profile of everything added, under the column's name."""
    kind, rows, empty = self.kind, self.rows, self.empty
    if kind == CSV_UNKNOWN:
      return ColumnProfile(column, None, rows, empty, (), False, 0, {})
    numeric = kind in (CSV_INT, CSV_FLOAT) and self.moments.count > 0
    spread = {
      "mean": self.moments.mean if numeric else None,
      "variance": self.moments.m2 / self.moments.count if numeric else None,
    }
    typed: collections.Counter[Any] = collections.Counter()
    missing = _missing_cells(list(self.counts), kind, self.keep_text_tokens)
    for cell, n in self.counts.items():
      if cell in missing:
        empty += n
        continue
      value = _typed_value(cell, kind)
      # NaN, which the ExampleGen quarantines, is no value to list.
      if not _is_nan(value):
        typed[value] += n
    if self.truncated or len(typed) > self.max_distinct:
      distinct = max(self.kept, len(typed))
      sample = self.sample or tuple(sorted(typed)[: self.max_distinct + 1])
      return ColumnProfile(column, kind, rows, empty, (), True, distinct, **spread, sample=sample)
    ordered = sorted(typed)
    counts = {v: typed[v] for v in ordered}
    return ColumnProfile(
      column, kind, rows, empty, tuple(ordered), False, len(ordered), counts, **spread
    )


def column_batches(
  paths: Sequence[str],
  column: str,
  delimiter: str = ",",
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
  flag: str = "--label-key",
) -> Iterator[pa.Array]:
  """The raw cells (bytes) of one column of CSV files, a batch at a time, as the ExampleGen
  reads them: rows with the wrong number of fields, the header written again and cells that
  are not valid UTF-8 (which it quarantines) left out.

  Raises:
    CsvInputError: if a file lacks the column (naming `flag` as the fix) or starts with rows
      of another width than its header.
  """
  for path in paths:
    names = csv_read.read_header(path, delimiter)
    if column not in names:
      fix = delimiter_hint(names, delimiter) or f"pass one of {shown_names(names)} as {flag}"
      raise CsvInputError(f"column {column!r} is not in the header of {path}; {fix}.")
    widths = collections.Counter(csv_read.record_widths(path, delimiter))
    if widths and len(names) not in widths:
      fields, _ = widths.most_common(1)[0]
      raise CsvInputError(
        f"the first data rows of {path} have a different number of fields than its header "
        f"({len(names)}): most have {fields}; make the first line of each file its column names."
      )
    with damaged_gzip_as_input_error(path):
      chunk = csv_read.Chunk(path)
      utf8, _ = csv_read.scan_chunk(chunk)
      # One more column tells the header written again (`csv_read.repeated_header`) from a
      # cell that happens to hold the column's name.
      other = [n for n in names if n != column][:1]
      batches = csv_read.iter_raw_batches(
        chunk,
        names,
        delimiter,
        block_size,
        utf8=utf8,
        include_columns=[column, *other],
        use_threads=True,
      )
      for raw in batches:
        values = raw.column(column)
        bad = csv_read.repeated_header(raw)
        if not utf8:
          bad |= csv_read.undecodable(values)
        if bad.any():
          values = values.filter(pa.array(~bad))
        yield values


def profile_column(
  paths: Sequence[str],
  column: str,
  delimiter: str = ",",
  max_distinct: int = 1000,
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
  keep_text_tokens: bool = False,
) -> ColumnProfile:
  """Profiles one column of CSV files: its type, counts, distinct values and spread.

  Reads only that column (Arrow still tokenises the rows) on every core, with the
  type rules of the ExampleGen, so a runner can tell a binary, multiclass or
  regression label apart before it builds a pipeline. Files may be local or
  remote, gzipped or not. Rows with the wrong number of fields are not counted,
  and neither are cells that are not valid UTF-8 (the ExampleGen quarantines both).

  Args:
    paths: CSV files, each with a header.
    column: Name of the column to profile.
    delimiter: Field delimiter.
    max_distinct: Most distinct values to keep; beyond it `truncated` is set
      (cells are told apart as written, so '1' and '01' count twice here).
    block_size: Bytes per read block to start with.
    keep_text_tokens: Count a text column's missing tokens (NA, None) as values, as the
      ExampleGen's `keep_label_tokens` does, instead of as empty cells.

  Returns:
    The profile.

  Raises:
    CsvInputError: if there are no files, or a file lacks the column.
    ValueError: if max_distinct is negative.
  """
  if max_distinct < 0:
    raise ValueError("max_distinct must be 0 or more.")
  if not paths:
    raise CsvInputError("no CSV files to profile; check the data root and the input pattern.")
  tally = _ColumnTally(max_distinct, keep_text_tokens)
  for values in column_batches(paths, column, delimiter, block_size, flag="--label-key"):
    tally.add(values)
  return tally.profile(column)


@dataclasses.dataclass(frozen=True)
class GroupedSplit:
  """Where a grouped split (rows with the same value of a column stay together) puts rows.

  Attributes:
    rows: rows per split, in the plan's order of split names.
    groups: distinct values of the column (an empty cell is one value).
    largest_rows: rows of the largest group.
    largest_value: that group's value as read ('' for empty cells), or None where it was not
      the most frequent value of any read batch (then it is not named).
  """

  rows: tuple[int, ...]
  groups: int
  largest_rows: int
  largest_value: str | None


def grouped_split(
  paths: Sequence[str],
  column: str,
  plan: csv_split.SplitPlan,
  delimiter: str = ",",
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
) -> GroupedSplit:
  """Counts the rows each split of `plan` gets when the ExampleGen splits by `column`.

  It hashes each cell as the ExampleGen does (`csv_split.row_hashes`), so the counts are the
  ones a run writes, less the rows it leaves out for other reasons (an empty label). Memory
  grows with the number of groups, not of rows.
  """
  hashes = np.zeros(0, dtype=np.uint64)
  counts = np.zeros(0, dtype=np.int64)
  named: dict[int, str] = {}
  for values in column_batches(paths, column, delimiter, block_size, flag="--split-column"):
    if not len(values):
      continue
    batch = pa.RecordBatch.from_arrays([values], [column])
    batch_hashes = csv_split.row_hashes(batch, np.ones(len(values), dtype=bool), column)
    unique, index, batch_counts = np.unique(batch_hashes, return_index=True, return_counts=True)
    top = int(np.argmax(batch_counts))
    cell = values[int(index[top])].as_py()
    named.setdefault(int(unique[top]), (cell or b"").decode("utf-8", "replace"))
    hashes, inverse = np.unique(np.concatenate([hashes, unique]), return_inverse=True)
    counts = np.bincount(inverse, np.concatenate([counts, batch_counts]), len(hashes))
    counts = counts.astype(np.int64)
  splits = csv_split.assign_splits(hashes, plan)
  rows = np.bincount(splits, counts, len(plan.names)).astype(np.int64)
  largest = int(np.argmax(counts)) if len(counts) else -1
  return GroupedSplit(
    rows=tuple(int(r) for r in rows),
    groups=len(hashes),
    largest_rows=int(counts[largest]) if largest >= 0 else 0,
    largest_value=named.get(int(hashes[largest])) if largest >= 0 else None,
  )


def position_split(
  paths: Sequence[str],
  column: str,
  plan: csv_split.SplitPlan,
  delimiter: str = ",",
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
  keep_text_tokens: bool = False,
) -> tuple[int, ...]:
  """Counts the rows with a value in `column` (the label) that each split of `plan` gets when
  the ExampleGen splits rows by their place in their file, its default.

  Each row's place is its file's key under `plan.input_base` and its record number (the header
  is record 1), hashed as `csv_split.position_hashes` does, so the counts are the ones a run
  writes. Rows whose label is empty or a missing token are left out, as the ExampleGen leaves
  them out (a text label's tokens are values with `keep_text_tokens`). Rows the ExampleGen
  quarantines (the wrong number of fields, cells that are not UTF-8) shift the record numbers
  of the rows after them in their file, so with such rows the counts are close, not exact;
  by default such a row fails the run anyway.

  Returns:
    Rows per split, in the plan's order of split names.
  """
  present = np.zeros(len(plan.names), dtype=np.int64)
  tokens = np.zeros(len(plan.names), dtype=np.int64)
  kind = CSV_UNKNOWN
  for path in paths:
    key = csv_split.file_key(path, plan.input_base)
    record = 2
    for values in column_batches([path], column, delimiter, block_size):
      numbers = np.arange(record, record + len(values), dtype=np.uint64)
      record += len(values)
      if not len(values):
        continue
      splits = csv_split.assign_splits(csv_split.position_hashes(key, numbers), plan)
      text = values.cast(pa.string())
      kind = column_kind(text, kind)
      valid = np.asarray(values.is_valid(), dtype=bool)
      token = missing_tokens(text) & valid
      present += np.bincount(splits[valid], minlength=len(plan.names))
      tokens += np.bincount(splits[token], minlength=len(plan.names))
  if kind == CSV_UNKNOWN:
    return tuple(0 for _ in plan.names)
  kept = present if kind == CSV_STRING and keep_text_tokens else present - tokens
  return tuple(int(n) for n in kept)
