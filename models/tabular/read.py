"""A training file's rows as the default model parses them: model inputs and raw labels.

From the ExampleGen's columnar copy of the file (components/columnar.py) where it has one whose
columns are typed as the schema says, else by parsing its tf.Examples with
`model_contract.parse_columns`. Both give the same arrays: numbers as float32 with NaN where a
cell is empty, text as bytes with b'' there, labels with 0, NaN or b''. On the 159,814-row train
split of a 200,000-row table of 65 int columns, profiling and loading took 1.9 s each from the
tf.Examples.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from components import columnar, model_contract
from components.model_contract import Column
from core.column_types import STORED_FLOAT32, STORED_INT64, STORED_STRING

# Rows per batch, either way.
BATCH_ROWS = 4096
# How each stored dtype sits in the copy (csv_convert's flat types).
_COPY_TYPES = {STORED_INT64: "int64", STORED_FLOAT32: "float", STORED_STRING: "binary"}


def file_batches(
  path: str, columns: Sequence[Column], label_key: str, label_dtype: str
) -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
  """(model inputs, raw labels) of one gzipped tf.Example file, BATCH_ROWS rows at a time."""
  reader = copy_of(path, [*[(c.name, c.dtype) for c in columns], (label_key, label_dtype)])
  if reader is None:
    yield from _parsed(path, columns, label_key, label_dtype)
    return
  for batch in columnar.rebatch(columnar.file_batches(reader), BATCH_ROWS):
    yield batch_inputs(batch, columns), batch_label(batch, label_key, label_dtype)


def column_values(path: str, name: str, dtype: str) -> np.ndarray:
  """One column of a gzipped tf.Example file, every row, as `file_batches` reads a label (0,
  NaN or b'' where it is empty)."""
  parts = [values for _, values in file_batches(path, (), name, dtype)]
  return np.concatenate(parts) if parts else np.array([])


def held_out_mask(path: str, rows: int, every: int, group: tuple[str, str] | None) -> np.ndarray:
  """Which of a file's `rows` records early stopping holds out: those of the groups of `group`
  (column, dtype) held out (`trainer_api.held_out_groups`), or every `every`-th record; none for
  `every` 0. `record_dataset` holds out the same records when it streams."""
  from components.distributed_trainer import trainer_api

  if group:
    values = column_values(path, *group)
    if len(values) != rows:
      raise RuntimeError(f"{path} has {len(values)} values of {group[0]!r} and {rows} rows")
    return np.asarray(trainer_api.held_out_groups(values, every), dtype=bool)
  mask = np.zeros(rows, bool)
  if every:
    mask[every - 1 :: every] = True
  return mask


def copy_of(path: str, wanted: Sequence[tuple[str, str]]):
  """The open columnar copy of `path` when it exists and holds `wanted` as typed; else None."""
  import tensorflow as tf

  copy = columnar.file_for(path)
  if not tf.io.gfile.exists(copy):
    return None
  reader = columnar.open_file(copy)
  schema = reader.schema
  for name, dtype in wanted:
    if name not in schema.names or str(schema.field(name).type) != _COPY_TYPES[dtype]:
      return None
  return reader


def batch_label(batch, name: str, dtype: str, keep: np.ndarray | None = None) -> np.ndarray:
  """One flat column of a record batch of the copy, as parse_label returns it (the rows where
  `keep`, when given)."""
  values = _values(batch.column(name), dtype)
  return values if keep is None else values[keep]


def _values(array, dtype: str) -> np.ndarray:
  """A flat column as parse_label or parse_columns returns it: 0, NaN or b'' where empty."""
  if dtype == STORED_STRING:
    return array.fill_null(b"").to_numpy(zero_copy_only=False)
  if dtype == STORED_INT64:
    return array.fill_null(0).to_numpy(zero_copy_only=False)
  return array.fill_null(float("nan")).to_numpy(zero_copy_only=False)


def batch_inputs(
  batch, columns: Sequence[Column], keep: np.ndarray | None = None
) -> dict[str, np.ndarray]:
  """The model inputs of a batch of the copy, as `model_contract.parse_columns` makes them (of
  the rows where `keep`, when given)."""
  out = {}
  numbers = []
  for c in columns:
    array = batch.column(c.name)
    if c.dtype == STORED_STRING:
      values = _values(array, STORED_STRING)
      out[c.input_name] = (values if keep is None else values[keep]).reshape(-1, 1)
      continue
    values = array.fill_null(0).to_numpy(zero_copy_only=False)
    values = (values if keep is None else values[keep]).astype(np.float32)
    if array.null_count:
      missing = np.asarray(array.is_null(), dtype=bool)
      values[missing if keep is None else missing[keep]] = np.nan
    numbers.append(values)
  if numbers:
    out[model_contract.NUMERIC_INPUT] = np.stack(numbers, axis=1)
  return out


def _parsed(path: str, columns: Sequence[Column], label_key: str, label_dtype: str):
  import tensorflow as tf

  def parse(serialized):
    return (
      model_contract.parse_columns(serialized, columns),
      model_contract.parse_label(serialized, label_key, label_dtype),
    )

  compression = "GZIP" if path.endswith(".gz") else ""
  ds = tf.data.TFRecordDataset(path, compression_type=compression).batch(BATCH_ROWS)
  yield from ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(2).as_numpy_iterator()
