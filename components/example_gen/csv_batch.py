"""Validating and typing one batch of raw CSV cells: the rows kept, and why others are not."""

from __future__ import annotations

import ast
import dataclasses
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components.example_gen import csv_read, tfexample_lib
from components.example_gen.csv_infer import missing_tokens, parse_numeric
from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING, CSV_UNKNOWN
from core.missing_values import MISSING_TOKENS

_MAX_CELL_IN_REASON = 60


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
  """How one CSV file is turned into examples.

  Attributes:
    column_types: Column name -> one of `core.column_types.CSV_KINDS`, for every column.
    label_key: Column that must be present and non-empty in every row, or None.
    allow_non_finite: Whether NaN and +-inf are accepted in float columns.
    delimiter: Field delimiter.
    block_size: Bytes per Arrow read block to start with; it grows for longer rows.
    compression_level: zlib level of the gzipped TFRecords (1 fastest, 9 smallest).
    columnar_copy: Whether each shard also gets its columnar copy (components/columnar.py).
    keep_label_tokens: Whether a text label's missing tokens (NA, None, ?) are classes of
      their own (`--task multiclass`) instead of missing labels.
    lenient_columns: Columns whose bad cells (bytes that are not UTF-8, a cell that is not a
      number of the column's type, NaN or infinity) are written empty instead of failing
      their row: the columns the model leaves out (`--exclude-columns`).
    digest_lines: Whether each unit digests its lines (`csv_split.LinesDigest`): for input in
      spans, whose digests the data gate compares.
  """

  column_types: dict[str, str]
  label_key: str | None = None
  allow_non_finite: bool = False
  delimiter: str = ","
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES
  compression_level: int = 1
  columnar_copy: bool = False
  keep_label_tokens: bool = False
  lenient_columns: frozenset[str] = frozenset()
  digest_lines: bool = False


@dataclasses.dataclass
class BatchVerdict:
  """The outcome of one batch.

  Attributes:
    columns: (name, kind, values) of the kept rows, values flat (int64, float32
      or binary) with nulls for empty cells, None for a CSV_UNKNOWN column.
    num_kept: Rows kept.
    bad_index: Indices of the rejected rows in the batch.
    bad_reason: Why each was rejected.
    keep: Mask of the kept rows.
  """

  columns: list[tuple[str, str, pa.Array | None]]
  num_kept: int
  bad_index: np.ndarray
  bad_reason: list[str]
  keep: np.ndarray

  def serialize(self) -> pa.Array:
    """The kept rows as serialized tf.Examples, a binary array."""
    return tfexample_lib.serialize_examples(self.columns, self.num_kept)


def _short(cell: str) -> str:
  # A huge cell in the reason would exceed the csv module's field limit on read-back.
  return cell if len(cell) <= _MAX_CELL_IN_REASON else cell[:_MAX_CELL_IN_REASON] + "..."


# The reason of a row whose label cell is empty: it cannot train or be scored, so it is left
# out (quarantined) without counting against --max-bad-row-fraction.
MISSING_LABEL = "missing label"
# How the reason of a text label written as a missing token ends, before the token.
_WRITTEN_AS = ", written as "


def is_missing_label(reason: str) -> bool:
  """Whether a quarantined row's reason is an empty label (a row left out, not a bad one)."""
  return reason.startswith(MISSING_LABEL)


def missing_label_token(reason: str) -> str | None:
  """The missing token (e.g. 'NA') a row's text label was written as, from its reason; None
  for any other reason, an empty label among them."""
  if not is_missing_label(reason) or _WRITTEN_AS not in reason:
    return None
  token = reason.rsplit(_WRITTEN_AS, 1)[1]
  return token if token in MISSING_TOKENS else None


_COLUMN_REASON = re.compile(r"column ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"): ")


def bad_column(reason: str) -> str | None:
  """The column a quarantined row's reason blames (a cell that is not a number, not UTF-8,
  NaN or infinity), or None (a row with the wrong number of fields, a missing label)."""
  m = _COLUMN_REASON.match(reason)
  return ast.literal_eval(m.group(1)) if m else None


class _Rejections:
  """The rows of one batch rejected so far, each with the first reason found for it."""

  def __init__(self, num_rows: int):
    self.reasons: list[str | None] = [None] * num_rows
    self.bad = np.zeros(num_rows, dtype=bool)

  def reject(self, mask: np.ndarray, why: str) -> None:
    """Rejects the rows of `mask` for `why`, unless an earlier reason rejected them."""
    for i in np.flatnonzero(mask & ~self.bad):
      self.reasons[i] = why
    self.bad[:] |= mask


def _reject_label_tokens(name: str, column: pa.Array, rejections: _Rejections) -> None:
  """Rejects the rows whose text label is written as a missing token, as missing labels."""
  # A text label written as a missing token (NA, ?) is a missing label, as a number's is:
  # the row is left out and counted, not learned as a class (unless --task multiclass).
  written = pc.utf8_trim_whitespace(column.cast(pa.string()))
  absent = missing_tokens(written)
  for token in sorted(set(written.filter(pa.array(absent)).to_pylist())):
    rows = np.asarray(pc.equal(written, token).fill_null(False), dtype=bool)
    rejections.reject(rows, f"{MISSING_LABEL} {name!r}{_WRITTEN_AS}{token}")


def _typed_numbers(
  name: str, column: pa.Array, kind: str, options: ConvertOptions, rejections: _Rejections
) -> pa.Array:
  """A CSV_INT or CSV_FLOAT column's values, rejecting the rows whose cell cannot be one.

  Returns:
    The values (int64 or float32), null where a cell is empty or was not a number.
  """
  text = column.cast(pa.string())
  values, failed = parse_numeric(text, kind)
  lenient = name in options.lenient_columns
  if failed.any() and not lenient:
    cells = text.to_pylist()
    noun = "an integer" if kind == CSV_INT else "a number"
    # Each row gets its own cell in the reason, so this is `reject` with a reason per row.
    for i in np.flatnonzero(failed & ~rejections.bad):
      rejections.reasons[i] = f"column {name!r}: {_short(cells[i])!r} is not {noun}"
    rejections.bad |= failed
  if kind == CSV_FLOAT:
    # Checked as float32, the type written: 1e39 is finite only as a float64.
    values = values.cast(pa.float32())
    if not options.allow_non_finite and values.null_count < len(values):
      finite = np.asarray(pc.is_finite(values).fill_null(True), dtype=bool)
      if lenient:
        values = pc.if_else(pa.array(finite), values, pa.scalar(None, pa.float32()))
      else:
        rejections.reject(~finite, f"column {name!r}: NaN or infinity")
  if name == options.label_key:
    # A numeric label written as a missing token (NA, ?) parses to no value: a missing label.
    unparsed = np.asarray(values.is_null(), dtype=bool) & ~failed
    rejections.reject(
      unparsed & np.asarray(text.is_valid(), dtype=bool), f"{MISSING_LABEL} {name!r}"
    )
  return values


def convert_batch(raw: pa.RecordBatch, options: ConvertOptions, utf8: bool = True) -> BatchVerdict:
  """Validates and types one batch of raw (binary) columns.

  Args:
    raw: Record batch whose columns are all binary, as read from the CSV.
    options: Conversion options.
    utf8: Whether the input is known to be valid UTF-8; else cells holding the
      0xFF marker of `iter_raw_batches` are rejected.

  Returns:
    The typed columns of the good rows, and the indices and reasons of rejected rows.
  """
  n = raw.num_rows
  rejections = _Rejections(n)

  columns = {name: raw.column(name) for name in raw.schema.names}
  rejections.reject(csv_read.repeated_header(raw), csv_read.REPEATED_HEADER)
  if not utf8:
    for name, column in columns.items():
      undecodable = csv_read.undecodable(column)
      if undecodable.any():
        if name not in options.lenient_columns:
          rejections.reject(undecodable, f"column {name!r}: bytes are not valid UTF-8")
        columns[name] = pc.if_else(pa.array(undecodable), pa.scalar(None, pa.binary()), column)
  if options.label_key in columns:
    label = options.label_key
    rejections.reject(
      np.asarray(columns[label].is_null(), dtype=bool), f"{MISSING_LABEL} {label!r}"
    )

  typed: dict[str, pa.Array | None] = {}
  for name, column in columns.items():
    kind = options.column_types[name]
    if kind == CSV_STRING:
      if name == options.label_key and not options.keep_label_tokens:
        _reject_label_tokens(name, column, rejections)
      typed[name] = column
    elif kind == CSV_UNKNOWN:
      typed[name] = None
    else:
      typed[name] = _typed_numbers(name, column, kind, options, rejections)
  for name, column in columns.items():
    if typed[name] is None and name not in options.lenient_columns:
      # Empty (or a missing token) in every row when the types were inferred; a value here
      # means a row that is rejected anyway, or an input that changed since.
      present = np.asarray(column.is_valid(), dtype=bool)
      if present.any():
        present &= ~missing_tokens(column.cast(pa.string()))
      rejections.reject(present, f"column {name!r}: expected an empty cell")

  bad = rejections.bad
  keep = ~bad
  count = int(keep.sum())
  mask = pa.array(keep)
  kept = []
  for name in columns:
    values = typed[name]
    if values is not None and count < n:
      values = values.filter(mask)
    kept.append((name, options.column_types[name], values))
  bad_index = np.flatnonzero(bad)
  reasons_ = [rejections.reasons[i] or "rejected" for i in bad_index]
  return BatchVerdict(kept, count, bad_index, reasons_, keep)
