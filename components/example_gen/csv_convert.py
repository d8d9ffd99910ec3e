"""Converting one unit of CSV input into gzipped TFRecord shards of tf.Examples, one per split."""

from __future__ import annotations

import collections
import csv
import dataclasses
import io
import json
import os
import uuid
from collections.abc import Iterator, Sequence

import apache_beam as beam
import numpy as np
import pyarrow as pa

from components import columnar
from components.example_gen import csv_read, csv_split, io_lib
from components.example_gen.csv_batch import (
  BatchVerdict,
  ConvertOptions,
  convert_batch,
  is_missing_label,
  missing_label_token,
)
from components.example_gen.csv_errors import MAX_QUOTED_TEXT, CsvInputError
from components.example_gen.csv_profile import LabelCounts
from components.example_gen.csv_read import Chunk
from components.example_gen.csv_split import SplitPlan
from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING, CSV_UNKNOWN

# Typed batches are serialised as tf.Examples a column at a time (tfexample_lib), split by
# a hash of each row's place in its file, and written as gzipped TFRecords without
# TensorFlow.

_QUARANTINE_FIELDS = ("file", "line", "reason", "row")
_CHUNK_FIELDS = ("file", "chunk", "line", "reason", "row")


@dataclasses.dataclass(frozen=True)
class Unit:
  """One unit of conversion work: a chunk, its shard number and its fixed split, if any."""

  index: int
  chunk: Chunk
  fixed: str | None = None


# The name each unit's result file starts with, under the executor's results folder.
RESULT_PREFIX = "unit-"


@dataclasses.dataclass
class UnitResult:
  """What converting one input file (or chunk) produced."""

  file: str
  chunk: int = 0
  lines: int = 0
  rows_read: int = 0
  bad_rows: int = 0
  # Of the bad rows, those whose only fault found is an empty label.
  unlabeled_rows: int = 0
  # Of those, the rows whose text label is a missing token, by token (e.g. {"NA": 11}).
  unlabeled_tokens: dict[str, int] = dataclasses.field(default_factory=dict)
  rows_per_split: dict[str, int] = dataclasses.field(default_factory=dict)
  # Split name -> LabelCounts.to_json() of the label column's values in that split.
  label_stats: dict[str, dict] = dataclasses.field(default_factory=dict)
  shards: dict[str, str] = dataclasses.field(default_factory=dict)
  quarantine_file: str | None = None
  # `csv_split.LinesDigest` of the unit's lines, which adds up over the chunks of a span.
  content_digest: int = 0
  # Message of the CsvInputError that stopped this unit, if any.
  error: str | None = None

  def to_json(self) -> str:
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> UnitResult:
    return cls(**json.loads(text))


def _record_numbers(start: int, count: int, skipped: set[int]) -> tuple[np.ndarray, int]:
  """Record numbers of the next `count` good rows, skipping rows the parser rejected."""
  numbers, r = [], start
  while len(numbers) < count:
    if r not in skipped:
      numbers.append(r)
    r += 1
  return np.asarray(numbers, dtype=np.int64), r


def _row_text(raw: pa.RecordBatch, i: int, delimiter: str) -> str:
  """Row i as one CSV line, quoted where a cell needs it, so the row reads back as its cells."""
  row = [raw.column(c)[i].as_py() for c in raw.schema.names]
  out = io.StringIO()
  # As in write_quarantine: Python 3.10's csv module cannot write a NUL character.
  csv.writer(out, delimiter=delimiter, lineterminator="").writerow(
    ["" if v is None else v.decode("utf-8", "replace").replace("\0", "\\0") for v in row]
  )
  return out.getvalue()


def _bad_row(chunk: Chunk, line: int, reason: str, text: str | None) -> dict:
  """A row of the unit's quarantine file."""
  return {
    "file": chunk.path,
    "chunk": chunk.index,
    "line": line,
    "reason": reason,
    "row": (text or "")[:MAX_QUOTED_TEXT],
  }


def _check_header(path: str, names: Sequence[str], column_types: dict[str, str]) -> None:
  """Raises unless a file has the columns the types were inferred (or read) for."""
  missing = [c for c in column_types if c not in names]
  extra = [c for c in names if c not in column_types]
  if missing or extra:
    raise CsvInputError(
      f"{path}: header differs from the other input files (missing {missing}, "
      f"unexpected {extra}); give all files of a split the same columns."
    )


def _split_of(
  raw: pa.RecordBatch,
  verdict: BatchVerdict,
  records: np.ndarray,
  plan: SplitPlan,
  key: str,
) -> np.ndarray:
  """The split index of each kept row of a batch, given the file-wide record numbers."""
  if plan.partition_column and plan.fixed is None:
    hashes = csv_split.row_hashes(raw, verdict.keep, plan.partition_column)
  else:
    hashes = csv_split.position_hashes(key, records[verdict.keep])
  return csv_split.assign_splits(hashes, plan)


# Arrow types of the flat values csv_batch types each kind of column as.
_FLAT_TYPES = {
  CSV_INT: pa.int64(),
  CSV_FLOAT: pa.float32(),
  CSV_STRING: pa.binary(),
  CSV_UNKNOWN: pa.null(),
}


def _flat_schema(names: Sequence[str], column_types: dict[str, str]) -> pa.Schema:
  return pa.schema([(name, _FLAT_TYPES[column_types[name]]) for name in names])


class _Shards:
  """A unit's gzipped TFRecord shard per split, under a temporary name until `commit`."""

  def __init__(
    self,
    splits: Sequence[str],
    output_dirs: dict[str, str],
    name: str,
    level: int,
    columnar_schema: pa.Schema | None = None,
  ):
    token = uuid.uuid4().hex[:8]
    self._splits = tuple(splits)
    self._final = {s: os.path.join(output_dirs[s], f"{name}.gz") for s in splits}
    self._tmp = {s: os.path.join(output_dirs[s], f".tmp-{name}-{token}.gz") for s in splits}
    self._writers = {s: io_lib.GzipTFRecordWriter(p, level) for s, p in self._tmp.items()}
    # The columnar copy of each shard (components/columnar.py), when one is wanted.
    self._schema = columnar_schema
    self._columnar_tmp: dict[str, str] = {}
    if columnar_schema is not None:
      for s in splits:
        folder, base = os.path.split(columnar.file_for(self._final[s]))
        self._columnar_tmp[s] = os.path.join(folder, f".tmp-{token}-{base}")
    self._columnar = {
      s: columnar.Writer(io_lib.open_write, p) for s, p in self._columnar_tmp.items()
    }
    self.rows = dict.fromkeys(splits, 0)
    self.labels = {s: LabelCounts() for s in splits}

  def write(
    self,
    serialized: pa.Array,
    split_of: np.ndarray,
    label: pa.Array | None,
    columns: Sequence[tuple[str, str, pa.Array | None]] = (),
  ) -> None:
    """Appends a batch's examples to their splits' shards; `label` holds their label cells and
    `columns` their typed values (for the columnar copy)."""
    flat = None
    if self._columnar:
      flat = columnar.flat_batch([(name, values) for name, _, values in columns])
      flat = flat.cast(self._schema) if flat.schema != self._schema else flat
    for s_index, split in enumerate(self._splits):
      picked = split_of == s_index
      count = int(picked.sum())
      mask = None if count == len(serialized) else pa.array(picked)
      if count:
        self._writers[split].write_many(serialized if mask is None else serialized.filter(mask))
        if flat is not None:
          self._columnar[split].write(flat if mask is None else flat.filter(mask))
      self.rows[split] += count
      if label is not None and count:
        self.labels[split].add(label if mask is None else label.filter(mask))

  def close(self) -> None:
    for w in self._writers.values():
      w.close()
    for w in self._columnar.values():
      if not w.written:  # No rows of this split in this unit: an empty file says so.
        w.write(pa.RecordBatch.from_pylist([], schema=self._schema))
      w.close()

  def commit(self) -> dict[str, str]:
    """Gives every shard (and its columnar copy first) its final name; returns split -> shard
    path."""
    for split, tmp in self._tmp.items():
      if split in self._columnar_tmp:
        io_lib.rename(self._columnar_tmp[split], columnar.file_for(self._final[split]))
      io_lib.rename(tmp, self._final[split])
    return dict(self._final)


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
  `merge_lib.merge_results` makes them absolute once every chunk is done.

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
  names = csv_read.read_header(chunk.path, options.delimiter)
  _check_header(chunk.path, names, options.column_types)
  result = UnitResult(file=chunk.path, chunk=chunk.index)
  digest = csv_split.LinesDigest(skip_header=chunk.start == 0) if options.digest_lines else None
  utf8, newlines = csv_read.scan_chunk(chunk, digest and digest.update)
  result.content_digest = digest.finish() if digest else 0
  if chunk.end is not None:
    result.lines = newlines
  schema = _flat_schema(names, options.column_types) if options.columnar_copy else None
  shards = _Shards(plan.names, output_dirs, shard_name, options.compression_level, schema)
  quarantined: list[dict] = []
  ragged: dict[int, dict] = {}

  def on_ragged(number, text, expected, actual):
    ragged[number] = _bad_row(chunk, number, f"expected {expected} fields, found {actual}", text)

  # Record numbers count from the chunk's first line; adding `to_file` makes them file-wide.
  next_record = first_local = 2 if chunk.start == 0 else 1
  to_file = chunk.first_record - first_local
  key = csv_split.file_key(chunk.path, plan.input_base)
  batches = csv_read.iter_raw_batches(
    chunk, names, options.delimiter, options.block_size, on_ragged, utf8=utf8
  )
  try:
    for raw in batches:
      numbers, next_record = _record_numbers(next_record, raw.num_rows, set(ragged))
      verdict = convert_batch(raw, options, utf8)
      quarantined.extend(
        _bad_row(chunk, int(numbers[i]), why, _row_text(raw, i, options.delimiter))
        for i, why in zip(verdict.bad_index, verdict.bad_reason, strict=True)
      )
      result.rows_read += raw.num_rows
      if not verdict.num_kept:
        continue
      label = None
      if options.label_key in raw.schema.names:
        label = raw.column(options.label_key).filter(pa.array(verdict.keep))
      split_of = _split_of(raw, verdict, numbers + to_file, plan, key)
      shards.write(verdict.serialize(), split_of, label, verdict.columns)
  finally:
    shards.close()
  quarantined.extend(ragged.values())
  result.rows_read += len(ragged)
  return _finished(result, shards, quarantined, os.path.join(quarantine_dir, f"{shard_name}.csv"))


def _finished(
  result: UnitResult, shards: _Shards, quarantined: list[dict], quarantine_file: str
) -> UnitResult:
  """Commits the unit's shards and writes its bad rows; `result` with the counts filled in."""
  result.bad_rows = len(quarantined)
  result.unlabeled_rows = sum(is_missing_label(r["reason"]) for r in quarantined)
  tokens = collections.Counter(missing_label_token(r["reason"]) for r in quarantined)
  # Other bad rows (an empty label, a ragged row) have no token: None, which sorts with no str.
  tokens.pop(None, None)
  result.unlabeled_tokens = dict(sorted(tokens.items()))
  result.rows_per_split = shards.rows
  result.label_stats = {s: c.to_json() for s, c in shards.labels.items() if c.rows}
  result.shards = shards.commit()
  if quarantined:
    quarantined.sort(key=lambda r: r["line"])
    result.quarantine_file = quarantine_file
    write_quarantine(result.quarantine_file, quarantined, with_chunk=True)
  return result


class ConvertUnitFn(beam.DoFn):
  """Converts one `Unit` and writes its `UnitResult` as JSON to `results_dir`.

  Each unit's result is one file named by its index, written under a temporary name and
  renamed, so a retried unit replaces its own result and a killed one leaves no partial file
  under a final name; the executor reads them once the pipeline is done. (Collected by a Beam
  text sink instead, with the units reshuffled even when there was one, a 30-row CSV took
  0.99 CPU s to convert against 0.34 s now, most of it in building and running those steps.)

  It lives here, not in the executor module, so that Beam worker processes
  unpickle it without importing TensorFlow or TFX.
  """

  def __init__(
    self, options: ConvertOptions, plan: SplitPlan, output_dirs, quarantine_dir, results_dir
  ):
    self._options = options
    self._plan = plan
    self._output_dirs = output_dirs
    self._quarantine_dir = quarantine_dir
    self._results_dir = results_dir

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
    name = f"{RESULT_PREFIX}{unit.index:05d}.json"
    tmp = os.path.join(self._results_dir, f".tmp-{uuid.uuid4().hex[:8]}-{name}")
    with io_lib.open_write(tmp) as f:
      f.write(result.to_json().encode("utf-8"))
    io_lib.rename(tmp, os.path.join(self._results_dir, name))
    yield unit.index


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
      yield from csv_read.csv_dict_reader(f.read().decode("utf-8"))
