"""The columnar copy of an Examples artifact, one owner: its layout, its writer and its reader.

    <examples uri>/
      Split-<name>/<shard>.gz              gzipped tf.Examples: what every stock component reads
      Columnar/Split-<name>/<shard>.arrow  the same rows in the same order, as an Arrow IPC file

Our ExampleGen writes the copy beside each shard when the in-process passes downstream will
read it (no distributed Beam runner named). StatisticsGen then reads the typed columns instead
of decoding tf.Examples, which was most of its time (docs/performance.md); the batches it builds
are the ones tfx_bsl's decoder makes of the tf.Examples (`record_batches`), so TFDV computes
what it computes from the tf.Examples. The default model's profile and load read it too
(models/tabular/read.py). Stock components read only the `Split-*` folders, so they do not see
the copy; a split without a complete copy (a stock ExampleGen's, or one written for Beam) is
read from its tf.Examples as before.

Each file holds flat columns, one value or null per row, typed as the ExampleGen typed them
(tfexample_lib: int64, float32, binary, or null for a column with no values), compressed with
zstd, which keeps the copy a small fraction of the shards beside it (docs/performance.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from components import storage

FOLDER = "Columnar"
SUFFIX = ".arrow"
_COMPRESSION = "zstd"


def file_for(shard_path: str) -> str:
  """The columnar file of a tf.Example shard `<uri>/Split-<s>/<name>.gz`."""
  split_folder, name = os.path.split(shard_path)
  uri, split_name = os.path.split(split_folder)
  return os.path.join(uri, FOLDER, split_name, name.rsplit(".", 1)[0] + SUFFIX)


class Writer:
  """Appends record batches of flat typed columns to one columnar file.

  Args:
    open_write: opens a path for writing bytes (local or object store).
    path: the file to write; the caller renames it into place once it is closed.
  """

  def __init__(self, open_write: Callable[[str], BinaryIO], path: str):
    self._open_write = open_write
    self._path = path
    self._sink: BinaryIO | None = None
    self._writer: Any = None

  def write(self, batch: Any) -> None:
    import pyarrow as pa

    if self._writer is None:
      self._sink = self._open_write(self._path)
      options = pa.ipc.IpcWriteOptions(compression=_COMPRESSION)
      self._writer = pa.ipc.new_file(self._sink, batch.schema, options=options)
    self._writer.write_batch(batch)

  @property
  def written(self) -> bool:
    return self._writer is not None

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None
    if self._sink is not None:
      self._sink.close()
      self._sink = None


def flat_batch(columns: Sequence[tuple[str, Any]]) -> Any:
  """A record batch of (name, flat values) columns; None values become a null column."""
  import pyarrow as pa

  n = next((len(v) for _, v in columns if v is not None), 0)
  arrays = [v if v is not None else pa.nulls(n) for _, v in columns]
  return pa.RecordBatch.from_arrays(arrays, [name for name, _ in columns])


def complete_files(shard_paths: Sequence[str], exists: Callable[[str], bool]) -> list[str] | None:
  """The columnar files of every shard of a split, or None where one is missing."""
  files = [file_for(p) for p in shard_paths]
  return files if files and all(exists(f) for f in files) else None


def _as_decoded(batch: Any) -> Any:
  """A flat batch as tfx_bsl's ExamplesToRecordBatchDecoder returns the same rows' tf.Examples.

  Columns in name order; a value becomes a one-value large_list, a null an empty list (the
  ExampleGen writes an empty cell as an empty list of the column's type), text large_binary;
  a column of nulls (an UNKNOWN column: Features with no kind) stays null.
  """
  import numpy as np
  import pyarrow as pa
  import pyarrow.compute as pc

  names = sorted(batch.schema.names)
  arrays = []
  for name in names:
    column = batch.column(name)
    if pa.types.is_null(column.type):
      arrays.append(column)
      continue
    if pa.types.is_binary(column.type) or pa.types.is_string(column.type):
      column = column.cast(pa.large_binary())
    valid = np.asarray(column.is_valid(), dtype=np.int64)
    offsets = np.zeros(len(column) + 1, dtype=np.int64)
    np.cumsum(valid, out=offsets[1:])
    values = pc.drop_null(column) if column.null_count else column
    if values.offset:  # A slice: fresh buffers, laid out as the decoder's (sums run alike).
      values = pa.concat_arrays([values])
    arrays.append(pa.LargeListArray.from_arrays(pa.array(offsets), values))
  return pa.RecordBatch.from_arrays(arrays, names)


def open_file(path: str, first_column_only: bool = False) -> Any:
  """An Arrow IPC file reader of one columnar file: memory-mapped when local, read whole from
  an object store (through TensorFlow's file systems, as the rest of the artifact is).
  `first_column_only` leaves the other columns of each batch unread."""
  import pyarrow as pa

  options = pa.ipc.IpcReadOptions(included_fields=[0]) if first_column_only else None
  if not storage.is_remote(path):
    return pa.ipc.open_file(pa.memory_map(path), options=options)
  import tensorflow as tf

  with tf.io.gfile.GFile(path, "rb") as f:
    return pa.ipc.open_file(pa.BufferReader(f.read()), options=options)


def rebatch(batches: Iterable[Any], rows: int) -> Iterator[Any]:
  """The rows of `batches`, in order, in batches of `rows` (the last may be shorter)."""
  pending: list = []
  held = 0
  for whole in batches:
    rest = whole
    while rest.num_rows:
      take = min(rows - held, rest.num_rows)
      pending.append(rest.slice(0, take))
      held += take
      rest = rest.slice(take)
      if held == rows:
        yield _concat(pending)
        pending, held = [], 0
  if held:
    yield _concat(pending)


def file_batches(reader: Any) -> Iterator[Any]:
  """The record batches of an open columnar file, in order."""
  for i in range(reader.num_record_batches):
    yield reader.get_batch(i)


def record_batches(files: Sequence[str], batch_rows: int) -> Iterator[Any]:
  """The split's rows in `batch_rows` batches across files, as the decoder returns them.

  The batches hold the same rows as tfx_bsl's record dataset batches the tf.Example shards
  into (file order, batches running across file ends) and are typed as its decoder types them
  (`_as_decoded`). One file's batches and one output batch are held at a time.

  Args:
    files: the split's columnar files, in the order of its shards.
    batch_rows: rows per batch (the last may be shorter).
  """
  rows = (batch for path in files for batch in file_batches(open_file(path)))
  for batch in rebatch(rows, batch_rows):
    yield _as_decoded(batch)


def batch_sizes(files: Sequence[str]) -> list[int]:
  """The rows of every record batch of the files, in order.

  Only each batch's first column is read: the others stay compressed, so counting a split of
  65 columns costs about a sixty-fifth of reading it.
  """
  sizes: list[int] = []
  for path in files:
    reader = open_file(path, first_column_only=True)
    sizes.extend(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
  return sizes


def sampled_examples(
  files: Sequence[str], positions: Any, sizes: Sequence[int] | None = None
) -> list[bytes] | None:
  """The rows at `positions` (sorted, 0-based across the files in order) as serialized
  tf.Examples, or None where a column holds no values in some file (a Feature with no kind,
  which the encoder cannot write): then read the shards instead.

  Each drawn row is the shard's record in the same place: the copy holds the same rows in the
  same order, every value as a one-value list and an empty cell as an empty list of its type,
  as the ExampleGen writes them. Only the drawn rows are encoded. Given the batches' `sizes`
  (`batch_sizes`), a batch that holds no drawn row is not read at all.
  """
  import numpy as np
  import pyarrow as pa
  from tfx_bsl.coders import example_coder

  positions = np.asarray(positions, dtype=np.int64)
  known = iter(sizes) if sizes is not None else None
  picked, offset = [], 0
  for path in files:
    reader = open_file(path)
    for i in range(reader.num_record_batches):
      batch = None if known is not None else reader.get_batch(i)
      rows = next(known) if known is not None else batch.num_rows
      lo, hi = np.searchsorted(positions, [offset, offset + rows])
      if hi > lo:
        batch = batch if batch is not None else reader.get_batch(i)
        picked.append(batch.take(pa.array(positions[lo:hi] - offset)))
      offset += rows
  if not picked:
    return []
  if any(pa.types.is_null(b.schema.field(i).type) for b in picked for i in range(b.num_columns)):
    return None
  encoder = example_coder.RecordBatchToExamplesEncoder()
  return [record for batch in picked for record in encoder.encode(_as_decoded(batch))]


def _concat(batches: list) -> Any:
  """One batch of `batches`' rows, its columns in the first batch's order.

  Files of one split may hold their columns in different orders: each keeps the order of the
  CSV file it was converted from, and the files of a folder need only the same header names.
  """
  import pyarrow as pa

  if len(batches) == 1:
    return batches[0]
  names = batches[0].schema.names
  batches = [
    b
    if b.schema.names == names
    else pa.RecordBatch.from_arrays([b.column(n) for n in names], names)
    for b in batches
  ]
  return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
