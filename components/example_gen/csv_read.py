"""Reading CSV input: headers, chunks of large files, and raw Arrow batches of its cells."""

from __future__ import annotations

import codecs
import collections
import csv
import dataclasses
import gzip
import io
import itertools
import logging
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from components import storage
from components.example_gen import io_lib
from components.example_gen.csv_errors import (
  MAX_QUOTED_TEXT,
  CsvInputError,
  damaged_gzip_as_input_error,
)

# Every column is read as raw bytes by Arrow's C++ CSV reader; empty cells are nulls.
# Input that is not UTF-8 is parsed from a repaired copy in which each undecodable byte
# becomes the 0xFF byte (never part of UTF-8), so the conversion can reject those cells.

# Stand-ins for undecodable bytes while Arrow parses input that is not UTF-8, and back.
_REPLACEMENT = "\ufffd".encode()
_UNDECODABLE = 0xFF
# A row longer than the read block makes Arrow stop; the block then grows, up to this.
_MAX_BLOCK_BYTES = 1 << 30
# Rows per batch, hence memory, follow the block size; 1 MiB costs no measurable speed.
DEFAULT_BLOCK_BYTES = 1 << 20
_BLOCK_GROWTH = 4
# What is read of a file's beginning for its header and its first records' widths.
_HEAD_BYTES = 1 << 20
# The csv module keeps its field size limit in a C long (32 bits on Windows).
_MAX_CSV_FIELD = (1 << 31) - 1

log = logging.getLogger(__name__)


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


def open_decoded(path: str):
  """Opens a CSV file for reading its bytes, decompressing gzip (detected by magic bytes)."""
  f = io_lib.open_read(path)
  head = f.read(2)
  f.seek(0)
  if head == io_lib.GZIP_MAGIC:
    return gzip.GzipFile(fileobj=f, mode="rb")
  return f


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
  if chunk.end is None and io_lib.is_gzip(chunk.path):
    raw = (
      pa.PythonFile(io_lib.open_read(chunk.path), mode="r")
      if storage.is_remote(chunk.path)
      else pa.OSFile(chunk.path)
    )
    return pa.CompressedInputStream(raw, "gzip")
  if chunk.end is None and not storage.is_remote(chunk.path):
    return chunk.path
  return pa.PythonFile(_open_chunk(chunk), mode="r")


def scan_chunk(chunk: Chunk, on_block: Callable[[bytes], None] | None = None) -> tuple[bool, int]:
  """Whether a chunk decodes as UTF-8, and how many line feeds it holds.

  ASCII decodes at memory speed, so this pass costs little next to parsing.

  Args:
    chunk: The chunk.
    on_block: Called with each block of the chunk's bytes, decompressed, in order.
  """
  decoder = codecs.getincrementaldecoder("utf-8")()
  newlines, valid = 0, True
  with _open_chunk(chunk) as f:
    while block := f.read(16 << 20):
      if on_block is not None:
        on_block(block)
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


def csv_reader(text: str, delimiter: str = ",") -> Iterator[list[str]]:
  """Python's csv reader over `text`, with a field size limit no cell of `text` can pass."""
  _allow_fields_of(len(text))
  return csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)


def csv_dict_reader(text: str) -> Iterator[dict[str, str]]:
  """Python's csv DictReader over `text` (header first), with the same field size limit."""
  _allow_fields_of(len(text))
  return csv.DictReader(io.StringIO(text, newline=""))


def _allow_fields_of(chars: int) -> None:
  """Raises the csv module's field size limit (128 Ki characters) to `chars` if lower.

  A long free-text cell is valid data, and no cell of a text is longer than the text. Arrow's
  reader, which reads the data itself, has no such limit (its read block grows instead).
  """
  if csv.field_size_limit() < chars:
    csv.field_size_limit(min(chars, _MAX_CSV_FIELD))


def record_widths(path: str, delimiter: str = ",", records: int = 100) -> list[int]:
  """The number of fields of the first `records` data records of a CSV file (gzip or not).

  Records are read from the file's first MiB; the last one read there may be cut short by
  that limit (a long cell), so it is left out unless the file ended first.
  """
  with damaged_gzip_as_input_error(path), open_decoded(path) as f:
    head = f.read(_HEAD_BYTES)
  text = head.removeprefix(codecs.BOM_UTF8).decode("utf-8", "replace")
  rows = csv_reader(text, delimiter)
  next(rows, None)
  widths = [len(row) for row in itertools.islice(rows, records + 1) if row]
  if len(widths) > records:
    return widths[:records]
  return widths[:-1] if len(head) == _HEAD_BYTES else widths


def read_header(path: str, delimiter: str = ",") -> list[str]:
  """Returns the column names in the first record of a CSV file (gzip or not).

  Raises:
    CsvInputError: if the file is empty, the header is undecodable, empty or
      has blank or duplicate names.
  """
  with damaged_gzip_as_input_error(path), open_decoded(path) as f:
    head = f.read(_HEAD_BYTES)
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
  header = next(csv_reader(text, delimiter), [])
  names = [h.strip() for h in header]
  blank = [i + 1 for i, n in enumerate(names) if not n]
  if not names or blank:
    where = f" (column {blank[0]} of {len(names)})" if blank else ""
    # R's write.csv and pandas' to_csv put a table's row labels first, under the name "".
    r_hint = (
      " (R's write.csv and pandas' to_csv write the row labels first, unnamed: pass"
      " row.names = FALSE or index=False)"
    )
    raise CsvInputError(
      f"{path}: the header has a blank column name{where}; name every column"
      f"{r_hint if blank[:1] == [1] and len(names) > 1 else ''}."
    )
  dupes = sorted({n for n in names if names.count(n) > 1})
  if dupes:
    raise CsvInputError(f"{path}: duplicate column names {dupes}; make header names unique.")
  return names


def cell_bytes(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
  """A string or binary array's cell offsets, from 0, and its cells' bytes back to back."""
  buffers = values.buffers()
  if len(values) == 0 or buffers[2] is None:
    return np.zeros(len(values) + 1, dtype=np.int32), np.zeros(0, dtype=np.uint8)
  offsets = np.frombuffer(buffers[1], dtype=np.int32)[
    values.offset : values.offset + len(values) + 1
  ]
  data = np.frombuffer(buffers[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
  return offsets - offsets[0], data


def undecodable(column: pa.Array) -> np.ndarray:
  """Marks the cells of a raw batch's column that held bytes that are not UTF-8."""
  offsets, data = cell_bytes(column)
  mask = np.zeros(len(column), dtype=bool)
  hits = np.flatnonzero(data == _UNDECODABLE)
  if len(hits):
    mask[np.searchsorted(offsets, hits, side="right") - 1] = True
  return mask


def _mark_undecodable(batch: pa.RecordBatch) -> pa.RecordBatch:
  """Turns the U+FFFD of a repaired input into a byte that never occurs in UTF-8."""
  return pa.RecordBatch.from_arrays(
    [pc.replace_substring(c, _REPLACEMENT, b"\xff") for c in batch.columns],
    names=batch.schema.names,
  )


# The last readers `iter_raw_batches` finished with, kept alive a while. Arrow's read-ahead
# tasks can outlive a reader and hold its Python row handler; when one of them drops the last
# reference, it takes the GIL on an Arrow thread, and if the interpreter is shutting down by
# then (a preflight's one-line error exits right after reading a column) the process aborts
# with "terminate called without an active exception" (exit code 134, in about 1 run of 8 on
# MASS's cats). Kept here, the readers go with the module, on the main thread.
_recent_readers: collections.deque = collections.deque(maxlen=8)


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


def _repaired_copy(chunk: Chunk) -> bytes:
  """A chunk's bytes with U+FFFD in place of each undecodable byte.

  pyarrow decodes a ragged row's text as strict UTF-8 before calling the handler, so
  undecodable bytes in a ragged row would stop the parser. In the copy, ASCII bytes, hence
  rows and fields, are unchanged.
  """
  with _open_chunk(chunk) as f:
    return f.read().decode("utf-8", "replace").encode("utf-8")


def iter_raw_batches(
  chunk: Chunk,
  column_names: Sequence[str],
  delimiter: str = ",",
  block_size: int = DEFAULT_BLOCK_BYTES,
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
    delimiter: Field delimiter.
    block_size: Bytes per read block to start with.
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
  data = None if utf8 else _repaired_copy(chunk)
  include = list(include_columns or column_names)
  block = block_size
  done = 0
  while True:
    source = pa.BufferReader(pa.py_buffer(data)) if data is not None else _arrow_input(chunk)
    seen = 0
    reader = None
    try:
      reader = _open_reader(
        source, column_names, include, delimiter, block, has_header, handler, use_threads
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
        f"{chunk.path}: the CSV parser stopped ({message[:MAX_QUOTED_TEXT]}); "
        "fix the file at that place."
      ) from None
    finally:
      if reader is not None:
        _recent_readers.append(reader)


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
  if size <= target_bytes * 3 // 2 or io_lib.is_gzip(path):
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


REPEATED_HEADER = "repeats the header row (files joined with their headers?)"


def repeated_header(raw: pa.RecordBatch) -> np.ndarray:
  """The rows of a batch of raw cells whose every cell is its column's name: a header again.

  `cat a.csv b.csv > data.csv` keeps b's header as a row. Read as data it turns every number
  column into text and adds a class named after the label column.
  """
  rows = np.ones(raw.num_rows, dtype=bool)
  for name, column in zip(raw.schema.names, raw.columns, strict=True):
    rows &= np.asarray(_equals_name(column, name).fill_null(False), dtype=bool)
    if not rows.any():
      break
  return rows


def _equals_name(column: pa.Array, name: str) -> pa.Array:
  """Which cells hold `name`, spaces around it allowed (as the header's cells are read)."""
  try:
    text = column.cast(pa.string())
  except pa.ArrowInvalid:  # Bytes that are not UTF-8 somewhere in the batch: compare bytes.
    return pc.equal(column, pa.scalar(name.encode(), column.type))
  return pc.equal(pc.utf8_trim_whitespace(text), name)
