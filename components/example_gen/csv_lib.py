"""CSV to tf.Example on Arrow record batches, typed by stock CsvExampleGen's rules."""

from __future__ import annotations

import codecs
import collections
import contextlib
import csv
import dataclasses
import gzip
import io
import itertools
import json
import logging
import math
import os
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import apache_beam as beam
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from components import storage
from components.errors import UserInputError
from components.example_gen import io_lib, tfexample_lib

# How it works. Every column is read as raw bytes by Arrow's C++ CSV reader; empty
# cells are nulls. Column types follow stock CsvExampleGen (tfx_bsl's csv_decoder):
# a cell is INT when Python's int() takes it and the value fits int64, FLOAT when
# float() takes it, STRING otherwise, and a column takes the highest type of its
# cells over the whole input (INT < FLOAT < STRING; all empty: UNKNOWN). Arrow's
# casts are the fast path, used only where they provably agree with Python: on
# arrays whose bytes come from a small alphabet (Arrow also reads '0x10' as 16 and
# 'nan(1)' as NaN, Python does not) and on cells matching plain number patterns.
# Other cells (' 12', '+5', '1_000', ...) go through Python's int() and float().
# tfexample_lib serialises typed batches as tf.Examples a column at a time; they are
# split by a hash of each row and written as gzipped TFRecords without TensorFlow.

INT = tfexample_lib.INT
FLOAT = tfexample_lib.FLOAT
STRING = tfexample_lib.STRING
UNKNOWN = tfexample_lib.UNKNOWN
COLUMN_TYPES = (INT, FLOAT, STRING, UNKNOWN)
_RANK = {UNKNOWN: 0, INT: 1, FLOAT: 2, STRING: 3}
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

_QUARANTINE_FIELDS = ("file", "line", "reason", "row")
_CHUNK_FIELDS = ("file", "chunk", "line", "reason", "row")
_MAX_QUARANTINED_TEXT = 500
_MAX_CELL_IN_REASON = 60
# Stand-ins for undecodable bytes while Arrow parses input that is not UTF-8, and back.
_REPLACEMENT = "\ufffd".encode()
_UNDECODABLE = 0xFF
# A row longer than the read block makes Arrow stop; the block then grows, up to this.
_MAX_BLOCK_BYTES = 1 << 30
# Rows per batch, hence memory, follow the block size; 1 MiB costs no measurable speed.
DEFAULT_BLOCK_BYTES = 1 << 20
_BLOCK_GROWTH = 4
_LIKELY_DELIMITERS = {";": "';'", "\t": "'\\t'", "|": "'|'", ",": "','"}


def _byte_set(chars: bytes) -> np.ndarray:
  table = np.zeros(256, dtype=bool)
  table[list(chars)] = True
  return table


# Bytes of arrays whose Arrow cast equals Python's int() (no '0x') or float() (no 'nan(').
_INT_BYTES = _byte_set(b"0123456789-")
_FLOAT_BYTES = _byte_set(b"0123456789+-.eEnaiftyNAIFTY")
# Cells both Arrow and Python read alike, with the same value: ints of up to 18 digits
# (always within int64), and decimals with a point or an exponent (never Python ints).
_PLAIN_INT = r"^-?[0-9]{1,18}$"
# Python's int() refuses longer digit strings (sys.get_int_max_str_digits); Arrow does not.
_LONGEST_INT_STRING = 4300
_PLAIN_FLOAT = r"^-?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$|^-?[0-9]+[eE][+-]?[0-9]+$"

log = logging.getLogger(__name__)


class CsvInputError(UserInputError):
  """The CSV input cannot be ingested; the message names the file and the fix."""


@dataclasses.dataclass(frozen=True)
class ConvertOptions:
  """How one CSV file is turned into examples.

  Attributes:
    column_types: Column name -> one of COLUMN_TYPES, for every column.
    label_key: Column that must be present and non-empty in every row, or None.
    allow_non_finite: Whether NaN and +-inf are accepted in float columns.
    delimiter: Field delimiter.
    block_size: Bytes per Arrow read block to start with; it grows for longer rows.
    compression_level: zlib level of the gzipped TFRecords (1 fastest, 9 smallest).
  """

  column_types: dict[str, str]
  label_key: str | None = None
  allow_non_finite: bool = False
  delimiter: str = ","
  block_size: int = DEFAULT_BLOCK_BYTES
  compression_level: int = 1


@dataclasses.dataclass(frozen=True)
class SplitPlan:
  """Where examples go.

  Attributes:
    names: Output split names, in order.
    hash_buckets: Buckets per split for hash partitioning; empty when `fixed` is set.
    fixed: Name of the single split every row of a unit goes to (input-defined
      splits), or None for hash partitioning.
    partition_column: Column whose value is hashed (a grouped split: rows with the same value
      land in the same split); None hashes each row's place in its file instead.
    input_base: The folder the input files are under; a row's place is its file's path
      relative to it and its record number, so the split does not depend on where the data
      lives, nor on the row's content (its label included).
  """

  names: tuple[str, ...]
  hash_buckets: tuple[int, ...] = ()
  fixed: str | None = None
  partition_column: str | None = None
  input_base: str = ""


@dataclasses.dataclass(frozen=True)
class Chunk:
  """A byte range of a CSV file that holds whole rows; (0, None) is the whole file.

  `first_record` is the file-wide record number of the chunk's first row (the header is
  record 1), so every row has the same place in its file however the file is cut.
  """

  path: str
  index: int = 0
  start: int = 0
  end: int | None = None
  first_record: int = 2


@dataclasses.dataclass(frozen=True)
class Unit:
  """One unit of conversion work: a chunk, its shard number and its fixed split, if any."""

  index: int
  chunk: Chunk
  fixed: str | None = None


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


@dataclasses.dataclass
class UnitResult:
  """What converting one input file (or chunk) produced."""

  file: str
  chunk: int = 0
  lines: int = 0
  rows_read: int = 0
  bad_rows: int = 0
  rows_per_split: dict[str, int] = dataclasses.field(default_factory=dict)
  # Split name -> LabelCounts.to_json() of the label column's values in that split.
  label_stats: dict[str, dict] = dataclasses.field(default_factory=dict)
  shards: dict[str, str] = dataclasses.field(default_factory=dict)
  quarantine_file: str | None = None
  # Message of the CsvInputError that stopped this unit, if any.
  error: str | None = None

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> UnitResult:
    return cls(**json.loads(text))


@dataclasses.dataclass(frozen=True)
class ColumnProfile:
  """What one column of a CSV input holds; see `profile_column`.

  Attributes:
    column: The column's name.
    kind: 'int', 'float' or 'string' by stock CsvExampleGen's rules, None when
      every cell is empty.
    num_rows: Data rows read (rows with the wrong number of fields are not rows).
    num_empty: Rows whose cell in this column is empty.
    values: The distinct non-empty values, sorted, as Python ints, floats or
      strs; empty when `truncated`. NaN is left out.
    truncated: More than `max_distinct` distinct cells were seen, so `values`
      was not kept.
    distinct_count_at_least: The number of distinct values; a lower bound when
      `truncated`.
    value_counts: Rows holding each value (keys as in `values`); None when
      `truncated`.
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


# --- Reading ------------------------------------------------------------------------


@contextlib.contextmanager
def damaged_gzip_as_input_error(path: str):
  """Turns a truncated or mislabelled gzip file into a CsvInputError naming the file.

  Python's gzip raises EOFError or BadGzipFile, and Arrow an OSError from zlib; none of them
  says which file, and each reads as a bug of ours.
  """
  try:
    yield
  except (EOFError, gzip.BadGzipFile, zlib.error) as e:
    raise CsvInputError(
      f"{path} is a damaged gzip file ({e}); re-create it with gzip, or pass it uncompressed."
    ) from None
  except OSError as e:
    text = str(e)
    if "zlib" not in text and "gzip" not in text.lower():
      raise
    if not io_lib.is_gzip(path):
      raise CsvInputError(
        f"{path} ends in .gz but is not gzip-compressed; rename it to .csv or gzip it."
      ) from None
    raise CsvInputError(
      f"{path} is a damaged gzip file ({text}); re-create it with gzip, or pass it uncompressed."
    ) from None


def open_decoded(path: str):
  """Opens a CSV file for reading its bytes, decompressing gzip (detected by magic bytes)."""
  f = io_lib.open_read(path)
  head = f.read(2)
  f.seek(0)
  if head == io_lib.GZIP_MAGIC:
    return gzip.GzipFile(fileobj=f, mode="rb")
  return f


def _is_gzip(path: str) -> bool:
  return io_lib.is_gzip(path)


class _RangeFile(io.RawIOBase):
  """Reads bytes [start, end) of a binary file."""

  def __init__(self, f, start: int, end: int):
    super().__init__()
    f.seek(start)
    self._f = f
    self._left = end - start

  def readable(self) -> bool:
    return True

  def readinto(self, b) -> int:
    n = min(len(b), self._left)
    if n <= 0:
      return 0
    data = self._f.read(n)
    b[: len(data)] = data
    self._left -= len(data)
    return len(data)

  def close(self) -> None:
    self._f.close()
    super().close()


def _open_chunk(chunk: Chunk):
  """A Python binary stream of a chunk's bytes, decompressed."""
  if chunk.end is None:
    return open_decoded(chunk.path)
  return io.BufferedReader(_RangeFile(io_lib.open_read(chunk.path), chunk.start, chunk.end))


def _arrow_input(chunk: Chunk):
  """What Arrow's CSV reader reads a chunk from: a path or a stream, never all of it at once."""
  if chunk.end is None and _is_gzip(chunk.path):
    raw = (
      pa.PythonFile(io_lib.open_read(chunk.path), mode="r")
      if storage.is_remote(chunk.path)
      else pa.OSFile(chunk.path)
    )
    return pa.CompressedInputStream(raw, "gzip")
  if chunk.end is None and not storage.is_remote(chunk.path):
    return chunk.path
  return pa.PythonFile(_open_chunk(chunk), mode="r")


def scan_chunk(chunk: Chunk) -> tuple[bool, int]:
  """Whether a chunk decodes as UTF-8, and how many line feeds it holds.

  ASCII decodes at memory speed, so this pass costs little next to parsing.
  """
  decoder = codecs.getincrementaldecoder("utf-8")()
  newlines, valid = 0, True
  with _open_chunk(chunk) as f:
    while block := f.read(16 << 20):
      newlines += block.count(b"\n")
      if valid:
        try:
          decoder.decode(block)
        except UnicodeDecodeError:
          valid = False
  if valid:
    try:
      decoder.decode(b"", final=True)
    except UnicodeDecodeError:
      valid = False
  return valid, newlines


def shown_names(names: Sequence[str], limit: int = 10) -> str:
  """Column names for a message: the first `limit`, and how many there are in all."""
  shown = ", ".join(repr(n) for n in names[:limit])
  return shown + (f" ... ({len(names)} columns)" if len(names) > limit else "")


def delimiter_hint(names: Sequence[str], delimiter: str) -> str:
  """A clause suggesting --delimiter when a one-column header holds another likely delimiter."""
  if len(names) != 1:
    return ""
  for d, shown in _LIKELY_DELIMITERS.items():
    if d != delimiter and d in names[0]:
      name = "tab" if d == "\t" else repr(d)
      return f"the header looks {name}-delimited, so pass --delimiter {shown}"
  return ""


def read_header(path: str, delimiter: str = ",") -> list[str]:
  """Returns the column names in the first record of a CSV file (gzip or not).

  Raises:
    CsvInputError: if the file is empty, the header is undecodable, empty or
      has blank or duplicate names.
  """
  with damaged_gzip_as_input_error(path), open_decoded(path) as f:
    head = f.read(1 << 20)
  bom = head.startswith(codecs.BOM_UTF8)
  head = head.removeprefix(codecs.BOM_UTF8)
  if not head.strip():
    what = "holds only a byte-order mark" if bom else "is empty"
    raise CsvInputError(f"{path} {what}; give a CSV file whose first line is a header.")
  try:
    text = head.decode("utf-8")
  except UnicodeDecodeError as e:
    # The cut at 1 MiB may split a character; only a failure before it counts.
    text = head[: e.start].decode("utf-8")
    if "\n" not in text and "\r" not in text:
      raise CsvInputError(
        f"{path}: the header line is not valid UTF-8; save the file as UTF-8."
      ) from None
  header = next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [])
  names = [h.strip() for h in header]
  if not names or any(not n for n in names):
    raise CsvInputError(f"{path}: the header has a blank column name; name every column.")
  dupes = sorted({n for n in names if names.count(n) > 1})
  if dupes:
    raise CsvInputError(f"{path}: duplicate column names {dupes}; make header names unique.")
  return names


def _mark_undecodable(batch: pa.RecordBatch) -> pa.RecordBatch:
  """Turns the U+FFFD of a repaired input into a byte that never occurs in UTF-8."""
  return pa.RecordBatch.from_arrays(
    [pc.replace_substring(c, _REPLACEMENT, b"\xff") for c in batch.columns],
    names=batch.schema.names,
  )


def _open_reader(source, names, include, delimiter, block_size, has_header, handler, threads):
  return pa_csv.open_csv(
    source,
    read_options=pa_csv.ReadOptions(
      column_names=list(names),
      skip_rows=int(has_header),
      block_size=block_size,
      use_threads=threads,
    ),
    parse_options=pa_csv.ParseOptions(
      delimiter=delimiter, newlines_in_values=True, invalid_row_handler=handler
    ),
    convert_options=pa_csv.ConvertOptions(
      column_types={c: pa.binary() for c in include},
      include_columns=list(include),
      null_values=[""],
      strings_can_be_null=True,
      quoted_strings_can_be_null=True,
    ),
  )


def iter_raw_batches(
  chunk: Chunk,
  column_names: Sequence[str],
  options: ConvertOptions,
  on_ragged: Callable[[int, str, int, int], None] | None = None,
  utf8: bool | None = None,
  include_columns: Sequence[str] | None = None,
  use_threads: bool = False,
) -> Iterator[pa.RecordBatch]:
  """Yields raw binary record batches of a CSV file (or chunk) after its header.

  Empty cells are nulls and blank lines are skipped. A row longer than the read
  block makes the block grow and the read start over, past the rows already
  yielded.

  Args:
    chunk: The file or the part of it to read; a chunk after the first has no header.
    column_names: Header names.
    options: Conversion options (delimiter and starting block size).
    on_ragged: Called with (record_number, text, expected, actual) for rows with
      a wrong number of fields; those rows are skipped. May be called again for
      the same record when the read starts over.
    utf8: Whether the chunk is valid UTF-8 (see `scan_chunk`); scanned if None.
      Undecodable bytes come out as 0xFF bytes.
    include_columns: Columns to return (default all).
    use_threads: Let Arrow parse blocks on several threads.

  Raises:
    CsvInputError: if Arrow cannot parse the input.
  """

  def handler(row) -> str:
    if on_ragged is not None:
      on_ragged(row.number, row.text, row.expected_columns, row.actual_columns)
    return "skip"

  has_header = chunk.start == 0
  if utf8 is None:
    utf8, _ = scan_chunk(chunk)
  data = None
  if not utf8:
    # pyarrow decodes a ragged row's text as strict UTF-8 before calling the handler, so
    # undecodable bytes in a ragged row stop the parser. Such input is parsed from a copy
    # with U+FFFD in their place: ASCII bytes, hence rows and fields, are unchanged.
    with _open_chunk(chunk) as f:
      data = f.read().decode("utf-8", "replace").encode("utf-8")
  include = list(include_columns or column_names)
  block = options.block_size
  done = 0
  while True:
    source = pa.BufferReader(pa.py_buffer(data)) if data is not None else _arrow_input(chunk)
    seen = 0
    try:
      reader = _open_reader(
        source, column_names, include, options.delimiter, block, has_header, handler, use_threads
      )
      for batch in reader:
        start = max(0, done - seen)
        seen += batch.num_rows
        if start >= batch.num_rows:
          continue
        out = batch.slice(start) if start else batch
        done += out.num_rows
        yield out if data is None else _mark_undecodable(out)
      return
    except pa.ArrowInvalid as e:
      message = " ".join(str(e).split())
      if "straddl" in message and block < _MAX_BLOCK_BYTES:
        block = min(block * _BLOCK_GROWTH, _MAX_BLOCK_BYTES)
        log.info(
          "%s: a row is longer than the read block; reading again with %d bytes.", chunk.path, block
        )
        continue
      if has_header and "skip initial" in message:
        return  # A header without a line end and nothing after it: no data rows.
      raise CsvInputError(
        f"{chunk.path}: the CSV parser stopped ({message[:_MAX_QUARANTINED_TEXT]}); "
        "fix the file at that place."
      ) from None


def plan_chunks(path: str, target_bytes: int) -> list[Chunk]:
  """Cuts a large CSV file into byte ranges at line ends, so workers share one file.

  Only uncompressed files without a quote character are cut: there every line
  is exactly one row, so a cut at a newline never splits a row and line numbers
  stay exact. Other files are one chunk each.

  Args:
    path: CSV file.
    target_bytes: Approximate chunk size; files up to 1.5x this stay whole.

  Returns:
    Chunks in file order.
  """
  size = io_lib.size(path)
  if size <= target_bytes * 3 // 2 or _is_gzip(path):
    return [Chunk(path)]
  with io_lib.open_read(path) as f:
    data_start = len(f.readline())
    f.seek(0)
    # One pass over the bytes; `in` runs at memchr speed.
    while block := f.read(16 << 20):
      if b'"' in block:
        return [Chunk(path)]
    cuts = [data_start]
    for approx in range(data_start + target_bytes, size, target_bytes):
      if approx <= cuts[-1]:
        continue
      f.seek(approx)
      f.readline()
      pos = f.tell()
      if pos >= size:
        break
      cuts.append(pos)
    cuts.append(size)
    # Every line is a row here: a chunk's first record is 2 plus the lines before it.
    first = [2]
    for a, b in itertools.pairwise(cuts[:-1]):
      f.seek(a)
      first.append(first[-1] + _count_newlines(f, b - a))
  return [Chunk(path, i, a, b, first[i]) for i, (a, b) in enumerate(itertools.pairwise(cuts))]


def _count_newlines(f, length: int) -> int:
  count = 0
  while length > 0:
    block = f.read(min(length, 16 << 20))
    if not block:
      break
    count += block.count(b"\n")
    length -= len(block)
  return count


# --- Types --------------------------------------------------------------------------


def infer_value_kind(cell: bytes) -> str:
  """The type of one cell by stock CsvExampleGen's rules (tfx_bsl `_InferValueType`)."""
  if not cell:
    return UNKNOWN
  try:
    return INT if _INT64_MIN <= int(cell) <= _INT64_MAX else STRING
  except ValueError:
    try:
      float(cell)
    except ValueError:
      return STRING
    return FLOAT


def _data_bytes(values: pa.Array) -> np.ndarray:
  """The bytes of a string or binary array's cells, as one uint8 array."""
  buffers = values.buffers()
  if len(values) == 0 or buffers[2] is None:
    return np.zeros(0, dtype=np.uint8)
  offsets = np.frombuffer(buffers[1], dtype=np.int32)[
    values.offset : values.offset + len(values) + 1
  ]
  return np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0] : offsets[-1]]


def _cell_mask_of_bytes(values: pa.Array, byte: int) -> np.ndarray:
  """Marks the cells of a binary array that contain a given byte."""
  mask = np.zeros(len(values), dtype=bool)
  buffers = values.buffers()
  if len(values) == 0 or buffers[2] is None:
    return mask
  offsets = np.frombuffer(buffers[1], dtype=np.int32)[
    values.offset : values.offset + len(values) + 1
  ]
  data = np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
  hits = np.flatnonzero(data == byte) + offsets[0]
  if len(hits):
    mask[np.searchsorted(offsets, hits, side="right") - 1] = True
  return mask


def _try_cast(values: pa.Array, target: pa.DataType) -> pa.Array | None:
  try:
    return pc.cast(values, target)
  except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
    return None


def _plain_masks(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
  """Cells that are plain ints of up to 18 digits, and plain decimals (see module notes)."""
  plain_int = np.asarray(pc.match_substring_regex(text, _PLAIN_INT).fill_null(False), dtype=bool)
  plain_float = np.asarray(
    pc.match_substring_regex(text, _PLAIN_FLOAT).fill_null(False), dtype=bool
  )
  return plain_int, plain_float


def _column_kind(text: pa.Array, floor: str) -> str:
  """The highest type of a string array's cells and `floor`, by the stock rules.

  Args:
    text: UTF-8 cells, nulls for empty ones.
    floor: The column's type so far.
  """
  if floor == STRING:
    return STRING
  if text.null_count:
    text = text.drop_null()
  if len(text) == 0:
    return floor
  data = _data_bytes(text)
  digits_only = bool(_INT_BYTES[data].all())
  kind = None
  if digits_only and floor != FLOAT and _try_cast(text, pa.int64()) is not None:
    kind, suspect = INT, _LONGEST_INT_STRING
  elif _FLOAT_BYTES[data].all() and _try_cast(text, pa.float64()) is not None:
    # Every cell is a Python float; the Python ints among them are the cells of digits
    # and '-' only, and those beyond int64 make a STRING column.
    kind, suspect = (INT if digits_only else FLOAT), 18
  if kind is not None:
    # Long digit strings are left to Python: beyond int64 they are strings, and beyond
    # Python's 4300-digit limit for int() they are floats.
    lengths = pc.binary_length(text)
    if pc.max(lengths).as_py() > suspect:
      long_cells = text.filter(pc.greater(lengths, suspect))
      digits = long_cells.filter(pc.match_substring_regex(long_cells, r"^-?[0-9]+$"))
      for cell in digits.to_pylist():
        kind = max(kind, infer_value_kind(cell.encode()), key=_RANK.get)
    return max(floor, kind, key=_RANK.get)
  plain_int, plain_float = _plain_masks(text)
  kind = floor
  if plain_int.any():
    kind = max(kind, INT, key=_RANK.get)
  if plain_float.any():
    kind = max(kind, FLOAT, key=_RANK.get)
  rest = np.flatnonzero(~plain_int & ~plain_float)
  for cell in text.take(pa.array(rest)).to_pylist() if len(rest) else ():
    kind = max(kind, infer_value_kind(cell.encode()), key=_RANK.get)
    if kind == STRING:
      break
  return kind


def _parse_numeric(text: pa.Array, kind: str) -> tuple[pa.Array, np.ndarray]:
  """Parses UTF-8 cells as int64 or float64 with Python's int() and float() semantics.

  Returns:
    The values (nulls for empty and failed cells) and a mask of the non-empty
    cells that are not an int64 (INT) or not a number (FLOAT).
  """
  target = pa.int64() if kind == INT else pa.float64()
  allowed = _INT_BYTES if kind == INT else _FLOAT_BYTES
  fast = allowed[_data_bytes(text)].all()
  if fast and kind == INT and len(text) > text.null_count:
    fast = pc.max(pc.binary_length(text)).as_py() <= _LONGEST_INT_STRING
  if fast:
    cast = _try_cast(text, target)
    if cast is not None:
      return cast, np.zeros(len(text), dtype=bool)
  plain_int, plain_float = _plain_masks(text)
  plain = plain_int if kind == INT else plain_int | plain_float
  cast = pc.cast(pc.if_else(pa.array(plain), text, pa.scalar(None, pa.string())), target)
  rest = np.flatnonzero(~plain & np.asarray(text.is_valid(), dtype=bool))
  if len(rest) == 0:
    return cast, np.zeros(len(text), dtype=bool)
  numbers = cast.fill_null(0).to_numpy(zero_copy_only=False).copy()
  valid = plain.copy()
  failed = np.zeros(len(text), dtype=bool)
  for i, cell in zip(rest, text.take(pa.array(rest)).to_pylist(), strict=True):
    try:
      value = int(cell.encode()) if kind == INT else float(cell.encode())
    except ValueError:
      failed[i] = True
      continue
    if kind == INT and not _INT64_MIN <= value <= _INT64_MAX:
      failed[i] = True
      continue
    numbers[i] = value
    valid[i] = True
  return pa.array(numbers, type=target, mask=~valid), failed


def _undecodable(column: pa.Array) -> np.ndarray:
  return _cell_mask_of_bytes(column, _UNDECODABLE)


def infer_column_types(
  paths: Sequence[str],
  delimiter: str = ",",
  label_key: str | None = None,
  block_size: int = DEFAULT_BLOCK_BYTES,
) -> dict[str, str]:
  """Infers every column's type from the whole input, by stock CsvExampleGen's rules.

  Streams every file once. A cell is an int when Python's int() reads it
  within int64, a float when float() reads it, else a string; a column takes
  the highest type of its cells (int < float < string), and a column empty in
  every row is `UNKNOWN`. Rows the conversion quarantines whatever the types
  (wrong number of fields, bytes that are not UTF-8, a missing label) do not count.
  Files whose columns differ from the first file's are skipped here; the
  conversion reports them. Column order may differ between files.

  Args:
    paths: Input files.
    delimiter: Field delimiter.
    label_key: Label column, whose empty cells mark rows that do not count.
    block_size: Bytes per read block to start with.

  Returns:
    Column name -> one of COLUMN_TYPES.
  """
  names = read_header(paths[0], delimiter)
  kinds = dict.fromkeys(names, UNKNOWN)
  options = ConvertOptions(
    column_types=dict.fromkeys(names, STRING), delimiter=delimiter, block_size=block_size
  )
  for path in paths:
    file_names = read_header(path, delimiter)
    if set(file_names) != set(names):
      continue
    chunk = Chunk(path)
    utf8, _ = scan_chunk(chunk)
    for batch in iter_raw_batches(chunk, file_names, options, utf8=utf8, use_threads=True):
      drop = np.zeros(batch.num_rows, dtype=bool)
      if not utf8:
        for column in batch.columns:
          drop |= _undecodable(column)
      if label_key in kinds:
        drop |= np.asarray(batch.column(label_key).is_null(), dtype=bool)
      counted = batch.filter(pa.array(~drop)) if drop.any() else batch
      for name in names:
        if kinds[name] != STRING:
          kinds[name] = _column_kind(counted.column(name).cast(pa.string()), kinds[name])
      if all(k == STRING for k in kinds.values()):
        return kinds
  return kinds


def types_from_schema(schema_path: str) -> dict[str, str]:
  """Reads column types from a TFMD schema.pbtxt (INT, FLOAT, BYTES features)."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = schema_pb2.Schema()
  with io_lib.open_read(schema_path) as f:
    text_format.Parse(f.read().decode("utf-8"), schema)
  kinds = {schema_pb2.INT: INT, schema_pb2.FLOAT: FLOAT, schema_pb2.BYTES: STRING}
  return {f.name: kinds[f.type] for f in schema.feature if f.type in kinds}


# --- Converting ---------------------------------------------------------------------


@dataclasses.dataclass
class BatchVerdict:
  """The outcome of one batch.

  Attributes:
    columns: (name, kind, values) of the kept rows, values flat (int64, float32
      or binary) with nulls for empty cells, None for an UNKNOWN column.
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
  reasons: list[str | None] = [None] * n
  bad = np.zeros(n, dtype=bool)

  def reject(mask: np.ndarray, why: str) -> None:
    for i in np.flatnonzero(mask & ~bad):
      reasons[i] = why
    bad[:] |= mask

  columns = {name: raw.column(name) for name in raw.schema.names}
  if not utf8:
    for name, column in columns.items():
      undecodable = _undecodable(column)
      if undecodable.any():
        reject(undecodable, f"column {name!r}: bytes are not valid UTF-8")
        columns[name] = pc.if_else(pa.array(undecodable), pa.scalar(None, pa.binary()), column)
  if options.label_key in columns:
    label = options.label_key
    reject(np.asarray(columns[label].is_null(), dtype=bool), f"missing label {label!r}")

  typed: dict[str, pa.Array | None] = {}
  for name, column in columns.items():
    kind = options.column_types[name]
    if kind == STRING:
      typed[name] = column
    elif kind == UNKNOWN:
      typed[name] = None
    else:
      text = column.cast(pa.string())
      values, failed = _parse_numeric(text, kind)
      if failed.any():
        cells = text.to_pylist()
        noun = "an integer" if kind == INT else "a number"
        for i in np.flatnonzero(failed & ~bad):
          reasons[i] = f"column {name!r}: {_short(cells[i])!r} is not {noun}"
        bad |= failed
      if kind == FLOAT:
        # Checked as float32, the type written: 1e39 is finite only as a float64.
        values = values.cast(pa.float32())
        if not options.allow_non_finite and values.null_count < len(values):
          finite = np.asarray(pc.is_finite(values).fill_null(True), dtype=bool)
          reject(~finite, f"column {name!r}: NaN or infinity")
      typed[name] = values
  for name, column in columns.items():
    if typed[name] is None:
      # Empty in every row when the types were inferred; a value here means a row that
      # is rejected anyway, or an input that changed since.
      reject(np.asarray(column.is_valid(), dtype=bool), f"column {name!r}: expected an empty cell")

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
  reasons_ = [reasons[i] or "rejected" for i in bad_index]
  return BatchVerdict(kept, count, bad_index, reasons_, keep)


_HASH_MUL = np.uint64(0x100000001B3)
_powers_cache = np.ones(1, dtype=np.uint64)


def _powers(count: int) -> np.ndarray:
  """_HASH_MUL ** k modulo 2**64 for k in [0, count)."""
  global _powers_cache
  if len(_powers_cache) < count:
    grown = np.full(max(count, 2 * len(_powers_cache)), _HASH_MUL, dtype=np.uint64)
    grown[0] = 1
    _powers_cache = np.cumprod(grown, dtype=np.uint64)
  return _powers_cache[:count]


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finaliser, element-wise (uint64 arithmetic wraps)."""
  x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return x ^ (x >> np.uint64(31))


def _cell_hashes(values: pa.Array) -> np.ndarray:
  """A 64-bit hash of each cell's bytes (empty and null cells alike)."""
  if values.null_count:
    values = values.fill_null(b"")
  n = len(values)
  buffers = values.buffers()
  offsets = np.frombuffer(buffers[1], dtype=np.int32)[values.offset : values.offset + n + 1]
  offsets = offsets.astype(np.int64) - offsets[0]
  lengths = np.diff(offsets)
  sums = np.zeros(n, dtype=np.uint64)
  if offsets[-1]:
    start = int(np.frombuffer(buffers[1], dtype=np.int32)[values.offset])
    data = np.frombuffer(buffers[2], dtype=np.uint8)[start : start + offsets[-1]]
    # Polynomial hash: byte j of a cell weighs _HASH_MUL ** (bytes after it in the cell).
    row = np.repeat(np.arange(n), lengths)
    after = offsets[1:][row] - 1 - np.arange(len(data))
    terms = data.astype(np.uint64) * _powers(int(lengths.max()))[after]
    nonempty = lengths > 0
    sums[nonempty] = np.add.reduceat(terms, offsets[:-1][nonempty])
  return _mix(sums + lengths.astype(np.uint64))


def row_hashes(raw: pa.RecordBatch, keep: np.ndarray, column: str | None = None) -> np.ndarray:
  """A 64-bit hash of each kept row's cells as read (or of one column), for splitting.

  The cells as read are canonical, unlike serialized tf.Examples, and hashing them
  a column at a time with numpy is much faster than a hash call per row.
  """
  columns = [raw.column(column)] if column else raw.columns
  mask = None if keep.all() else pa.array(keep)
  hashes = np.zeros(int(keep.sum()), dtype=np.uint64)
  for i, values in enumerate(columns):
    cells = _cell_hashes(values if mask is None else values.filter(mask))
    hashes = _mix(hashes * _HASH_MUL + cells + np.uint64(i))
  return hashes


# Changing it moves rows between splits; it is part of what a run's split means.
_SPLIT_SEED = b"tfx-pipeline-kit/split-by-position/v1"


def file_key(path: str, input_base: str) -> str:
  """A file's path relative to the input base ('/'-separated), or its name outside it."""
  base = input_base.rstrip("/")
  if base and path.startswith(base + "/"):
    return path[len(base) + 1 :]
  return path.rsplit("/", 1)[-1]


def position_hashes(key: str, records: np.ndarray) -> np.ndarray:
  """A 64-bit hash of each row's place: its file's key and its record number in the file.

  Unlike a hash of the row's cells (stock TFX), this keeps duplicate rows apart (identical
  rows of one file spread over the splits like any others) and never looks at the label, and
  it is the same on every rerun and machine.
  """
  import hashlib

  seed = np.frombuffer(
    hashlib.blake2b(key.encode("utf-8"), digest_size=8, key=_SPLIT_SEED).digest(), np.uint64
  )[0]
  return _mix(_mix(records.astype(np.uint64) + seed) ^ seed)


def assign_splits(hashes: np.ndarray, plan: SplitPlan) -> np.ndarray:
  """Returns the split index of every row, deterministically.

  Args:
    hashes: Per-row hashes (see `row_hashes`).
    plan: The split plan.
  """
  if plan.fixed is not None:
    return np.full(len(hashes), plan.names.index(plan.fixed), dtype=np.int64)
  upper = np.cumsum(plan.hash_buckets).astype(np.uint64)
  return np.searchsorted(upper, hashes % upper[-1], side="right")


def _record_numbers(start: int, count: int, skipped: set[int]) -> tuple[np.ndarray, int]:
  """Record numbers of the next `count` good rows, skipping rows the parser rejected."""
  numbers, r = [], start
  while len(numbers) < count:
    if r not in skipped:
      numbers.append(r)
    r += 1
  return np.asarray(numbers, dtype=np.int64), r


def _row_text(raw: pa.RecordBatch, i: int, delimiter: str) -> str:
  row = [raw.column(c)[i].as_py() for c in raw.schema.names]
  return delimiter.join("" if v is None else v.decode("utf-8", "replace") for v in row)


def convert_file(
  chunk: Chunk,
  options: ConvertOptions,
  plan: SplitPlan,
  output_dirs: dict[str, str],
  shard_name: str,
  quarantine_dir: str,
) -> UnitResult:
  """Converts one CSV file (or chunk of one) into one gzipped TFRecord shard per split.

  Shards are written under temporary names and renamed at the end, so a retried
  or killed worker never leaves a partial shard under its final name. In a
  chunk after the first, quarantined line numbers are relative to the chunk;
  `example_gen_lib.merge_results` makes them absolute once every chunk is done.

  Args:
    chunk: The CSV file or the part of it to convert.
    options: Conversion options; its column types must cover the header.
    plan: The split plan.
    output_dirs: Split name -> folder for that split's shards.
    shard_name: Base file name of this unit's shards, unique per unit.
    quarantine_dir: Folder for this unit's bad-row file.

  Returns:
    Counts and file names.

  Raises:
    CsvInputError: for a header that does not match the expected columns, or a
      file Arrow cannot parse.
  """
  path = chunk.path
  names = read_header(path, options.delimiter)
  missing = [c for c in options.column_types if c not in names]
  extra = [c for c in names if c not in options.column_types]
  if missing or extra:
    raise CsvInputError(
      f"{path}: header differs from the other input files (missing {missing}, "
      f"unexpected {extra}); give all files of a split the same columns."
    )
  result = UnitResult(file=path, chunk=chunk.index, rows_per_split=dict.fromkeys(plan.names, 0))
  utf8, newlines = scan_chunk(chunk)
  if chunk.end is not None:
    result.lines = newlines
  token = uuid.uuid4().hex[:8]
  tmp_paths = {s: os.path.join(output_dirs[s], f".tmp-{shard_name}-{token}.gz") for s in plan.names}
  writers = {
    s: io_lib.GzipTFRecordWriter(p, options.compression_level) for s, p in tmp_paths.items()
  }
  quarantined: list[dict] = []
  ragged: dict[int, dict] = {}

  def on_ragged(number, text, expected, actual):
    ragged[number] = {
      "file": path,
      "chunk": chunk.index,
      "line": number,
      "reason": f"expected {expected} fields, found {actual}",
      "row": (text or "")[:_MAX_QUARANTINED_TEXT],
    }

  next_record = first_local = 2 if chunk.start == 0 else 1
  partition_column = plan.partition_column if plan.fixed is None else None
  key = file_key(path, plan.input_base)
  labels = {s: LabelCounts() for s in plan.names}
  try:
    for raw in iter_raw_batches(chunk, names, options, on_ragged, utf8=utf8):
      numbers, next_record = _record_numbers(next_record, raw.num_rows, set(ragged))
      verdict = convert_batch(raw, options, utf8)
      for i, why in zip(verdict.bad_index, verdict.bad_reason, strict=True):
        quarantined.append(
          {
            "file": path,
            "chunk": chunk.index,
            "line": int(numbers[i]),
            "reason": why,
            "row": _row_text(raw, i, options.delimiter)[:_MAX_QUARANTINED_TEXT],
          }
        )
      result.rows_read += raw.num_rows
      if not verdict.num_kept:
        continue
      serialized = verdict.serialize()
      if partition_column:
        hashes = row_hashes(raw, verdict.keep, partition_column)
      else:
        records = numbers[verdict.keep] + (chunk.first_record - first_local)
        hashes = position_hashes(key, records)
      split_of = assign_splits(hashes, plan)
      label = (
        raw.column(options.label_key).filter(pa.array(verdict.keep))
        if options.label_key in raw.schema.names
        else None
      )
      for s_index, split in enumerate(plan.names):
        picked = split_of == s_index
        count = int(picked.sum())
        if count == len(serialized):
          writers[split].write_many(serialized)
        elif count:
          writers[split].write_many(serialized.filter(pa.array(picked)))
        result.rows_per_split[split] += count
        if label is not None and count:
          labels[split].add(label if count == len(label) else label.filter(pa.array(picked)))
  finally:
    for w in writers.values():
      w.close()
  quarantined.extend(ragged.values())
  result.label_stats = {s: c.to_json() for s, c in labels.items() if c.rows}
  result.rows_read += len(ragged)
  result.bad_rows = len(quarantined)
  for split, tmp in tmp_paths.items():
    final = os.path.join(output_dirs[split], f"{shard_name}.gz")
    io_lib.rename(tmp, final)
    result.shards[split] = final
  if quarantined:
    quarantined.sort(key=lambda r: r["line"])
    result.quarantine_file = os.path.join(quarantine_dir, f"{shard_name}.csv")
    write_quarantine(result.quarantine_file, quarantined, with_chunk=True)
  return result


class ConvertUnitFn(beam.DoFn):
  """Converts one `Unit` and emits its `UnitResult` as JSON.

  It lives here, not in the executor module, so that Beam worker processes
  unpickle it without importing TensorFlow or TFX.
  """

  def __init__(self, options: ConvertOptions, plan: SplitPlan, output_dirs, quarantine_dir):
    self._options = options
    self._plan = plan
    self._output_dirs = output_dirs
    self._quarantine_dir = quarantine_dir

  def process(self, unit: Unit):
    plan = dataclasses.replace(self._plan, fixed=unit.fixed)
    try:
      result = convert_file(
        unit.chunk,
        self._options,
        plan,
        self._output_dirs,
        f"data-{unit.index:05d}",
        self._quarantine_dir,
      )
    except CsvInputError as e:
      # DirectRunner worker processes hand exceptions back as RuntimeErrors holding a
      # traceback, so a user error travels as data and the executor raises it again.
      result = UnitResult(file=unit.chunk.path, chunk=unit.chunk.index, error=str(e))
    yield result.to_json()


def write_quarantine(path: str, rows: list[dict], with_chunk: bool = False) -> None:
  """Writes rejected rows as CSV with file, line, reason and the row text."""
  buf = io.StringIO()
  fields = _CHUNK_FIELDS if with_chunk else _QUARANTINE_FIELDS
  writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
  writer.writeheader()
  # Python 3.10's csv module can neither write nor read a NUL character.
  writer.writerows(
    {k: v.replace("\0", "\\0") if isinstance(v, str) else v for k, v in row.items()} for row in rows
  )
  io_lib.makedirs(os.path.dirname(path))
  with io_lib.open_write(path) as f:
    f.write(buf.getvalue().encode("utf-8"))


def iter_quarantine_rows(paths: Sequence[str]) -> Iterator[dict]:
  """Yields the rows of several quarantine files."""
  for path in paths:
    with io_lib.open_read(path) as f:
      yield from csv.DictReader(io.StringIO(f.read().decode("utf-8"), newline=""))


# --- Profiling ----------------------------------------------------------------------


def _typed_value(cell: bytes, kind: str) -> Any:
  if kind == INT:
    return int(cell)
  if kind == FLOAT:
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


def profile_column(
  paths: Sequence[str],
  column: str,
  delimiter: str = ",",
  max_distinct: int = 1000,
  block_size: int = DEFAULT_BLOCK_BYTES,
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
  kind = UNKNOWN
  rows = empty = 0
  counts: collections.Counter[bytes] = collections.Counter()
  truncated = False
  kept = 0
  moments = _Moments()
  for path in paths:
    names = read_header(path, delimiter)
    if column not in names:
      hint = delimiter_hint(names, delimiter)
      fix = hint or f"pass one of {shown_names(names)} as --label-key"
      raise CsvInputError(f"column {column!r} is not in the header of {path}; {fix}.")
    options = ConvertOptions(
      column_types=dict.fromkeys(names, STRING), delimiter=delimiter, block_size=block_size
    )
    with damaged_gzip_as_input_error(path):
      chunk = Chunk(path)
      utf8, _ = scan_chunk(chunk)
      for raw in iter_raw_batches(
        chunk, names, options, utf8=utf8, include_columns=[column], use_threads=True
      ):
        values = raw.column(0)
        if not utf8:
          bad = _undecodable(values)
          if bad.any():
            values = values.filter(pa.array(~bad))
        rows += len(values)
        empty += values.null_count
        text = values.cast(pa.string())
        kind = _column_kind(text, kind)
        if kind in (INT, FLOAT):
          numbers, _ = _parse_numeric(text, FLOAT)
          moments.add(numbers.drop_null().to_numpy(zero_copy_only=False))
        if not truncated:
          tally = pc.value_counts(values.drop_null())
          counts.update(
            dict(
              zip(tally.field("values").to_pylist(), tally.field("counts").to_pylist(), strict=True)
            )
          )
          truncated = len(counts) > max_distinct
          if truncated:
            kept = len({_typed_value(c, kind) for c in counts})
            counts = collections.Counter()
  if kind == UNKNOWN:
    return ColumnProfile(column, None, rows, empty, (), False, 0, {})
  numeric = kind in (INT, FLOAT) and moments.count > 0
  spread = {
    "mean": moments.mean if numeric else None,
    "variance": moments.m2 / moments.count if numeric else None,
  }
  typed: collections.Counter[Any] = collections.Counter()
  for cell, n in counts.items():
    value = _typed_value(cell, kind)
    # NaN, which the ExampleGen quarantines, is no value to list.
    if not (isinstance(value, float) and math.isnan(value)):
      typed[value] += n
  if truncated or len(typed) > max_distinct:
    return ColumnProfile(column, kind, rows, empty, (), True, max(kept, len(typed)), **spread)
  ordered = sorted(typed)
  return ColumnProfile(
    column,
    kind,
    rows,
    empty,
    tuple(ordered),
    False,
    len(ordered),
    {v: typed[v] for v in ordered},
    **spread,
  )
