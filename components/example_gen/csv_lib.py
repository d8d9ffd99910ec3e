"""Batched CSV -> tf.Example conversion on Arrow record batches, with bad-row quarantine.

Nothing here knows TFX types: the executor hands over plain paths and options.
Every column is read as raw bytes by Arrow's C++ CSV reader, validated and cast
per column with vectorised Arrow kernels, encoded by tfx_bsl's C++
RecordBatch -> tf.Example encoder, split by a fingerprint of each serialized
example and written as gzipped TFRecords.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import hashlib
import io
import itertools
import json
import os
import uuid
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import tensorflow as tf
from tfx_bsl.coders import example_coder

from components.errors import UserInputError

INT = "int"
FLOAT = "float"
STRING = "string"
COLUMN_TYPES = (INT, FLOAT, STRING)

# Share of sampled non-empty values that must parse for a column to be numeric.
# Below 1.0 so that one bad cell in the sample is quarantined later instead of
# silently turning a numeric column into a string column.
_NUMERIC_SHARE = 0.99
_QUARANTINE_FIELDS = ("file", "line", "reason", "row")
_CHUNK_FIELDS = ("file", "chunk", "line", "reason", "row")
_MAX_QUARANTINED_TEXT = 500
_MAX_CELL_IN_REASON = 60
# Stand-ins for undecodable bytes while Arrow parses input that is not UTF-8, and back.
_REPLACEMENT = "\ufffd".encode()
_UNDECODABLE = b"\xff"


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
    block_size: Bytes per Arrow read block; must exceed the longest row.
    compression_level: zlib level of the gzipped TFRecords (1 fastest, 9 smallest).
  """

  column_types: dict[str, str]
  label_key: str | None = None
  allow_non_finite: bool = False
  delimiter: str = ","
  block_size: int = 8 << 20
  compression_level: int = 1


@dataclasses.dataclass(frozen=True)
class SplitPlan:
  """Where examples go.

  Attributes:
    names: Output split names, in order.
    hash_buckets: Buckets per split for hash partitioning; empty when `fixed` is set.
    fixed: Name of the single split every row of a unit goes to (input-defined
      splits), or None for hash partitioning.
    partition_column: Column whose value is hashed instead of the whole example.
  """

  names: tuple[str, ...]
  hash_buckets: tuple[int, ...] = ()
  fixed: str | None = None
  partition_column: str | None = None


@dataclasses.dataclass
class UnitResult:
  """What converting one input file produced."""

  file: str
  chunk: int = 0
  lines: int = 0
  rows_read: int = 0
  bad_rows: int = 0
  rows_per_split: dict[str, int] = dataclasses.field(default_factory=dict)
  shards: dict[str, str] = dataclasses.field(default_factory=dict)
  quarantine_file: str | None = None
  # Message of the CsvInputError that stopped this unit, if any.
  error: str | None = None

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> UnitResult:
    return cls(**json.loads(text))


def _open_binary(path: str):
  # Local paths go straight to Arrow (memory-mapped); anything else (gs://, hdfs://)
  # through TensorFlow's filesystem layer.
  if "://" in path:
    return tf.io.gfile.GFile(path, "rb")
  return path


@dataclasses.dataclass(frozen=True)
class Chunk:
  """A byte range of a CSV file that holds whole rows; (0, None) is the whole file."""

  path: str
  index: int = 0
  start: int = 0
  end: int | None = None


def plan_chunks(path: str, target_bytes: int) -> list[Chunk]:
  """Cuts a large CSV file into byte ranges at line ends, so workers share one file.

  Only files without a quote character are cut: there every line is exactly
  one row, so a cut at a newline never splits a row and line numbers stay
  exact. Other files are one chunk each.

  Args:
    path: CSV file.
    target_bytes: Approximate chunk size; files up to 1.5x this stay whole.

  Returns:
    Chunks in file order.
  """
  size = tf.io.gfile.stat(path).length
  if size <= target_bytes * 3 // 2:
    return [Chunk(path)]
  with tf.io.gfile.GFile(path, "rb") as f:
    data_start = len(f.readline())
    f.seek(0)
    # One pass over the bytes; find() runs at memchr speed.
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
  return [Chunk(path, i, a, b) for i, (a, b) in enumerate(itertools.pairwise(cuts))]


def _chunk_source(chunk: Chunk) -> tuple[bytes | None, int]:
  """The bytes of a chunk (None for a whole file) and the number of lines it holds (or 0)."""
  if chunk.end is None:
    return None, 0
  with tf.io.gfile.GFile(chunk.path, "rb") as f:
    f.seek(chunk.start)
    data = f.read(chunk.end - chunk.start)
  return data, data.count(b"\n")


def _is_utf8(path: str, data: bytes | None) -> bool:
  """Whether a file (or a chunk's bytes) decodes as UTF-8; ASCII decodes at memcpy speed."""
  decoder = codecs.getincrementaldecoder("utf-8")()
  try:
    if data is not None:
      decoder.decode(data, final=True)
      return True
    with tf.io.gfile.GFile(path, "rb") as f:
      while block := f.read(16 << 20):
        decoder.decode(block)
    decoder.decode(b"", final=True)
  except UnicodeDecodeError:
    return False
  return True


def _mark_undecodable(batch: pa.RecordBatch) -> pa.RecordBatch:
  """Turns the U+FFFD of a repaired input back into bytes that are not UTF-8."""
  return pa.RecordBatch.from_arrays(
    [pc.replace_substring(c, _REPLACEMENT, _UNDECODABLE) for c in batch.columns],
    names=batch.schema.names,
  )


def read_header(path: str, delimiter: str = ",") -> list[str]:
  """Returns the column names in the first record of a CSV file.

  Raises:
    CsvInputError: if the file is empty, the header is undecodable, empty or
      has blank or duplicate names.
  """
  with tf.io.gfile.GFile(path, "rb") as f:
    head = f.read(1 << 20)
  if not head.strip():
    raise CsvInputError(f"{path} is empty; give a CSV file whose first line is a header.")
  head = head.removeprefix(codecs.BOM_UTF8)
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


_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowNotImplementedError)


def _cast_cells(values: pa.Array, target: pa.DataType) -> tuple[pa.Array, np.ndarray]:
  """Casts an array with Arrow, marking the cells that cannot be cast.

  Returns:
    The cast array (nulls where casting failed) and a boolean mask of failures
    among non-null inputs.
  """
  try:
    return pc.cast(values, target), np.zeros(len(values), dtype=bool)
  except _CAST_ERRORS:
    pass
  # Slow path, only for arrays holding at least one bad cell.
  out, failed = [], np.zeros(len(values), dtype=bool)
  for i, v in enumerate(values.to_pylist()):
    if v is None:
      out.append(None)
      continue
    try:
      out.append(pc.cast(pa.array([v], type=values.type), target)[0].as_py())
    except _CAST_ERRORS:
      out.append(None)
      failed[i] = True
  return pa.array(out, type=target), failed


def _parse_numeric(values: pa.Array, kind: str) -> tuple[pa.Array, np.ndarray]:
  """Casts a string array to int64 or float64; see `_cast_cells`."""
  return _cast_cells(values, pa.int64() if kind == INT else pa.float64())


def _to_utf8(values: pa.Array) -> tuple[pa.Array, np.ndarray]:
  """Validates binary cells as UTF-8; returns strings and a mask of undecodable cells."""
  return _cast_cells(values, pa.string())


def _as_list_array(values: pa.Array) -> pa.Array:
  """Wraps a flat array as a list array with one value per row (null -> null list)."""
  valid = np.asarray(values.is_valid(), dtype=bool) if values.null_count else None
  if valid is None:
    offsets = pa.array(np.arange(len(values) + 1, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, values)
  counts = np.concatenate([[0], np.cumsum(valid, dtype=np.int32)])
  mask = np.concatenate([~valid, [False]])
  offsets = pa.array(counts.astype(np.int32), mask=mask)
  return pa.ListArray.from_arrays(offsets, values.filter(pa.array(valid)))


@dataclasses.dataclass
class _BatchVerdict:
  table: pa.RecordBatch | None
  bad_index: np.ndarray
  bad_reason: list[str]
  keep: np.ndarray


def convert_batch(raw: pa.RecordBatch, options: ConvertOptions) -> _BatchVerdict:
  """Validates and types one batch of raw (binary) columns.

  Args:
    raw: Record batch whose columns are all binary, as read from the CSV.
    options: Conversion options.

  Returns:
    The typed batch of good rows (list-wrapped, ready for the encoder), and the
    indices and reasons of rejected rows.
  """
  n = raw.num_rows
  reasons: list[str | None] = [None] * n
  bad = np.zeros(n, dtype=bool)

  def reject(mask: np.ndarray, why: str) -> None:
    for i in np.flatnonzero(mask & ~bad):
      reasons[i] = why
    bad[:] |= mask

  typed: dict[str, pa.Array] = {}
  for name in raw.schema.names:
    kind = options.column_types[name]
    text, undecodable = _to_utf8(raw.column(name))
    reject(undecodable, f"column {name!r}: bytes are not valid UTF-8")
    if name == options.label_key:
      reject(np.asarray(text.is_null(), dtype=bool) & ~undecodable, f"missing label {name!r}")
    if kind == STRING:
      typed[name] = text.cast(pa.binary())
      continue
    values, failed = _parse_numeric(text, kind)
    if failed.any():
      cells = text.to_pylist()
      for i in np.flatnonzero(failed & ~bad):
        # A huge cell in the reason would exceed the csv module's field limit on read-back.
        cell = (
          cells[i]
          if len(cells[i]) <= _MAX_CELL_IN_REASON
          else cells[i][:_MAX_CELL_IN_REASON] + "..."
        )
        reasons[i] = (
          f"column {name!r}: {cell!r} is not {'an integer' if kind == INT else 'a number'}"
        )
      bad |= failed
    if kind == FLOAT:
      if not options.allow_non_finite and values.null_count < len(values):
        finite = pc.is_finite(values).fill_null(True)
        reject(~np.asarray(finite, dtype=bool), f"column {name!r}: NaN or infinity")
      values = values.cast(pa.float32())
    typed[name] = values

  keep = ~bad
  good = None
  if keep.any():
    mask = pa.array(keep)
    good = pa.RecordBatch.from_arrays(
      [_as_list_array(typed[c].filter(mask)) for c in raw.schema.names],
      names=raw.schema.names,
    )
  bad_index = np.flatnonzero(bad)
  return _BatchVerdict(good, bad_index, [reasons[i] or "rejected" for i in bad_index], keep)


def row_keys(raw: pa.RecordBatch, keep: np.ndarray, column: str | None = None) -> list[bytes]:
  """Canonical bytes of each kept row (or of one column) for deterministic splitting.

  Serialized tf.Examples are not canonical (map order may differ between
  encodings), so the split hashes the row's cells as read instead.
  """
  mask = pa.array(keep)
  cols = [raw.column(column)] if column else raw.columns
  cells = [c.filter(mask).fill_null(b"") for c in cols]
  if len(cells) == 1:
    return cells[0].to_pylist()
  return pc.binary_join_element_wise(*cells, b"\x1f").to_pylist()


def assign_splits(keys: Sequence[bytes], plan: SplitPlan) -> np.ndarray:
  """Returns the split index of every row, deterministically.

  Args:
    keys: Per-row canonical bytes (see `row_keys`).
    plan: The split plan.
  """
  if plan.fixed is not None:
    return np.full(len(keys), plan.names.index(plan.fixed), dtype=np.int64)
  source = keys
  fingerprints = np.frombuffer(
    b"".join(hashlib.blake2b(s, digest_size=8).digest() for s in source), dtype="<u8"
  )
  upper = np.cumsum(plan.hash_buckets).astype(np.uint64)
  return np.searchsorted(upper, fingerprints % upper[-1], side="right")


def _record_numbers(start: int, count: int, skipped: set[int]) -> tuple[np.ndarray, int]:
  """Record numbers of the next `count` good rows, skipping rows the parser rejected."""
  numbers, r = [], start
  while len(numbers) < count:
    if r not in skipped:
      numbers.append(r)
    r += 1
  return np.asarray(numbers, dtype=np.int64), r


def iter_raw_batches(
  path: str,
  column_names: Sequence[str],
  options: ConvertOptions,
  on_ragged,
  source=None,
  has_header: bool = True,
):
  """Yields raw binary record batches of a CSV file (or chunk) after its header.

  Args:
    path: CSV file, used for messages and, without `source`, for reading.
    column_names: Header names.
    options: Conversion options.
    on_ragged: Called with (record_number, text, expected, actual) for rows with
      a wrong number of fields; those rows are skipped.
    source: Bytes to read instead of `path` (a chunk's).
    has_header: Whether the first record is the header (false for later chunks).

  Raises:
    CsvInputError: if Arrow cannot parse the file (for example a row longer
      than the block size).
  """

  def handler(row) -> str:
    on_ragged(row.number, row.text, row.expected_columns, row.actual_columns)
    return "skip"

  data = source
  repaired = not _is_utf8(path, data)
  if repaired:
    # pyarrow decodes a ragged row's text as strict UTF-8 before calling the handler, so
    # undecodable bytes in a ragged row stop the parser (and print a traceback). Such input
    # is parsed from a copy with U+FFFD in their place: ASCII bytes, hence rows and fields,
    # are unchanged, and `_mark_undecodable` restores undecodable cells for quarantine.
    if data is None:
      with tf.io.gfile.GFile(path, "rb") as f:
        data = f.read()
    data = data.decode("utf-8", "replace").encode("utf-8")
  try:
    reader = pa_csv.open_csv(
      _open_binary(path) if data is None else pa.BufferReader(pa.py_buffer(data)),
      read_options=pa_csv.ReadOptions(
        column_names=list(column_names),
        skip_rows=int(has_header),
        block_size=options.block_size,
        use_threads=False,
      ),
      parse_options=pa_csv.ParseOptions(
        delimiter=options.delimiter, newlines_in_values=True, invalid_row_handler=handler
      ),
      convert_options=pa_csv.ConvertOptions(
        column_types={c: pa.binary() for c in column_names},
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=True,
      ),
    )
    for batch in reader:
      yield _mark_undecodable(batch) if repaired else batch
  except pa.ArrowInvalid as e:
    size = len(data) if data is not None else tf.io.gfile.stat(path).length
    if has_header and size <= options.block_size and "skip initial" in str(e):
      return  # A header without a line end and nothing after it: no data rows.
    reason = " ".join(str(e).split())[:_MAX_QUARANTINED_TEXT]
    raise CsvInputError(
      f"{path}: the CSV parser stopped ({reason}); if a row is longer than "
      f"{options.block_size} bytes, raise the block size."
    ) from None


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
  `offset_line_numbers` makes them absolute once every chunk is done.

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
  result = UnitResult(file=path, chunk=chunk.index, rows_per_split={s: 0 for s in plan.names})
  source, result.lines = _chunk_source(chunk)
  token = uuid.uuid4().hex[:8]
  tmp_paths = {s: os.path.join(output_dirs[s], f".tmp-{shard_name}-{token}.gz") for s in plan.names}
  record_options = tf.io.TFRecordOptions(
    compression_type="GZIP", compression_level=options.compression_level
  )
  writers = {s: tf.io.TFRecordWriter(p, record_options) for s, p in tmp_paths.items()}
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

  has_header = chunk.start == 0
  next_record = 2 if has_header else 1
  partition_column = plan.partition_column if plan.fixed is None else None
  try:
    for raw in iter_raw_batches(path, names, options, on_ragged, source, has_header):
      numbers, next_record = _record_numbers(next_record, raw.num_rows, set(ragged))
      verdict = convert_batch(raw, options)
      for i, why in zip(verdict.bad_index, verdict.bad_reason, strict=True):
        row = [raw.column(c)[i].as_py() for c in names]
        text = ",".join("" if v is None else v.decode("utf-8", "replace") for v in row)
        quarantined.append(
          {
            "file": path,
            "chunk": chunk.index,
            "line": int(numbers[i]),
            "reason": why,
            "row": text[:_MAX_QUARANTINED_TEXT],
          }
        )
      result.rows_read += raw.num_rows
      if verdict.table is None:
        continue
      serialized = example_coder.RecordBatchToExamples(verdict.table)
      split_of = assign_splits(row_keys(raw, verdict.keep, partition_column), plan)
      for s_index, split in enumerate(plan.names):
        writer = writers[split]
        for j in np.flatnonzero(split_of == s_index):
          writer.write(serialized[j])
        result.rows_per_split[split] += int(np.count_nonzero(split_of == s_index))
  finally:
    for w in writers.values():
      w.close()
  quarantined.extend(ragged.values())
  result.rows_read += len(ragged)
  result.bad_rows = len(quarantined)
  for split, tmp in tmp_paths.items():
    final = os.path.join(output_dirs[split], f"{shard_name}.gz")
    tf.io.gfile.rename(tmp, final, overwrite=True)
    result.shards[split] = final
  if quarantined:
    quarantined.sort(key=lambda r: r["line"])
    result.quarantine_file = os.path.join(quarantine_dir, f"{shard_name}.csv")
    write_quarantine(result.quarantine_file, quarantined, with_chunk=True)
  return result


def offset_line_numbers(results: Sequence[UnitResult], rows: list[dict]) -> list[dict]:
  """Makes chunk-relative line numbers absolute, given every chunk's result."""
  offsets: dict[tuple[str, int], int] = {}
  for path in {r.file for r in results}:
    # Chunks start after the header line; a whole-file unit counts it itself.
    total = 1 if any(r.lines for r in results if r.file == path) else 0
    for r in sorted((r for r in results if r.file == path), key=lambda r: r.chunk):
      offsets[(path, r.chunk)] = total
      total += r.lines
  for row in rows:
    row["line"] = int(row["line"]) + offsets.get((row["file"], int(row.get("chunk", 0))), 0)
  return rows


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
  tf.io.gfile.makedirs(os.path.dirname(path))
  with tf.io.gfile.GFile(path, "w") as f:
    f.write(buf.getvalue())


def infer_column_types(
  paths: Sequence[str], delimiter: str = ",", sample_rows: int = 10_000
) -> dict[str, str]:
  """Infers int, float or string for every column from the first rows of the input.

  Types are decided once, before any data is converted, so every shard and
  every worker uses the same ones. A column is an int column when at least 99%
  of its sampled non-empty values are integers (one bad cell is tolerated in
  small samples, as long as the good ones are the majority), a float column
  when that holds for numbers, and a string column otherwise. The rejected
  cells are quarantined later. Columns with no sampled values are floats.

  Args:
    paths: Input files; sampled in order until `sample_rows` rows are seen.
    delimiter: Field delimiter.
    sample_rows: Rows to sample.

  Returns:
    Column name -> type.
  """
  names = read_header(paths[0], delimiter)
  samples: dict[str, list[pa.Array]] = {c: [] for c in names}
  seen = 0
  options = ConvertOptions(
    column_types={c: STRING for c in names}, delimiter=delimiter, block_size=1 << 20
  )
  for path in paths:
    if read_header(path, delimiter) != names:
      continue
    for raw in iter_raw_batches(path, names, options, lambda *_: None):
      for c in names:
        samples[c].append(raw.column(c))
      seen += raw.num_rows
      if seen >= sample_rows:
        break
    if seen >= sample_rows:
      break
  types = {}
  for c in names:
    if not samples[c]:
      types[c] = FLOAT
      continue
    text, _ = _to_utf8(pa.concat_arrays(samples[c])[:sample_rows])
    text = text.drop_null()
    if len(text) == 0:
      types[c] = FLOAT
      continue
    # Tolerate 1% of bad cells, and at least one in small samples.
    tolerated = min(max(1, int(len(text) * (1 - _NUMERIC_SHARE))), (len(text) - 1) // 2)
    _, int_failed = _parse_numeric(text, INT)
    _, float_failed = _parse_numeric(text, FLOAT)
    if int_failed.sum() <= tolerated:
      types[c] = INT
    elif float_failed.sum() <= tolerated:
      types[c] = FLOAT
    else:
      types[c] = STRING
  return types


def types_from_schema(schema_path: str) -> dict[str, str]:
  """Reads column types from a TFMD schema.pbtxt (INT, FLOAT, BYTES features)."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = schema_pb2.Schema()
  with tf.io.gfile.GFile(schema_path) as f:
    text_format.Parse(f.read(), schema)
  kinds = {schema_pb2.INT: INT, schema_pb2.FLOAT: FLOAT, schema_pb2.BYTES: STRING}
  return {f.name: kinds[f.type] for f in schema.feature if f.type in kinds}


def iter_quarantine_rows(paths: Sequence[str]) -> Iterator[dict]:
  """Yields the rows of several quarantine files."""
  for path in paths:
    with tf.io.gfile.GFile(path) as f:
      yield from csv.DictReader(f)
