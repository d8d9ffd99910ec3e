"""Column types of CSV cells by stock CsvExampleGen's rules: inferring them and parsing cells."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components import model_contract
from components.example_gen import csv_read, io_lib
from core import missing_values
from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING, CSV_UNKNOWN, SCHEMA_TO_CSV

# Column types (core.column_types' CSV kinds) follow stock CsvExampleGen (tfx_bsl's
# csv_decoder): a cell is INT when Python's int() takes it and the value fits int64, FLOAT
# when float() takes it, STRING otherwise, and a column takes the highest type of its cells
# over the whole input (INT < FLOAT < STRING; all empty: UNKNOWN). Arrow's casts are the fast
# path, used only where they provably agree with Python: on arrays whose bytes come from a
# small alphabet (Arrow also reads '0x10' as 16 and 'nan(1)' as NaN, Python does not) and on
# cells matching plain number patterns. Other cells (' 12', '+5', '1_000', ...) go through
# Python's int() and float().

_RANK = {CSV_UNKNOWN: 0, CSV_INT: 1, CSV_FLOAT: 2, CSV_STRING: 3}
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


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


def missing_tokens(text: pa.Array) -> np.ndarray:
  """A mask of the cells of a string array that are one of `missing_values.MISSING_TOKENS`."""
  pattern = missing_values.MISSING_PATTERN
  return np.asarray(pc.match_substring_regex(text, pattern).fill_null(False), dtype=bool)


def infer_value_kind(cell: bytes) -> str:
  """The type of one cell by stock CsvExampleGen's rules (tfx_bsl `_InferValueType`)."""
  if not cell:
    return CSV_UNKNOWN
  try:
    return CSV_INT if _INT64_MIN <= int(cell) <= _INT64_MAX else CSV_STRING
  except ValueError:
    try:
      float(cell)
    except ValueError:
      return CSV_STRING
    return CSV_FLOAT


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


def column_kind(text: pa.Array, floor: str) -> str:
  """The highest type of a string array's cells and `floor`, by the stock rules.

  Args:
    text: UTF-8 cells, nulls for empty ones.
    floor: The column's type so far.
  """
  if floor == CSV_STRING:
    return CSV_STRING
  if text.null_count:
    text = text.drop_null()
  if len(text) == 0:
    return floor
  _, data = csv_read.cell_bytes(text)
  digits_only = bool(_INT_BYTES[data].all())
  kind = None
  if digits_only and floor != CSV_FLOAT and _try_cast(text, pa.int64()) is not None:
    kind, suspect = CSV_INT, _LONGEST_INT_STRING
  elif _FLOAT_BYTES[data].all() and (floats := _try_cast(text, pa.float64())) is not None:
    tokens = missing_tokens(text) if pc.any(pc.is_nan(floats)).as_py() else None
    if tokens is not None and tokens.any():
      # Arrow reads "nan" and "NaN" as NaN; as missing-value tokens they are empty cells.
      return column_kind(text.filter(pa.array(~tokens)), floor)
    # Every cell is a Python float; the Python ints among them are the cells of digits
    # and '-' only, and those beyond int64 make a STRING column.
    kind, suspect = (CSV_INT if digits_only else CSV_FLOAT), 18
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
  missing = missing_tokens(text)
  kind = floor
  if plain_int.any():
    kind = max(kind, CSV_INT, key=_RANK.get)
  if plain_float.any():
    kind = max(kind, CSV_FLOAT, key=_RANK.get)
  rest = np.flatnonzero(~plain_int & ~plain_float & ~missing)
  for cell in text.take(pa.array(rest)).to_pylist() if len(rest) else ():
    kind = max(kind, infer_value_kind(cell.encode()), key=_RANK.get)
    if kind == CSV_STRING:
      break
  return kind


def parse_numeric(text: pa.Array, kind: str) -> tuple[pa.Array, np.ndarray]:
  """Parses UTF-8 cells as int64 or float64 with Python's int() and float() semantics.

  Returns:
    The values (nulls for empty cells, MISSING_TOKENS and failed cells) and a mask of the
    non-empty cells that are neither a missing token nor an int64 (INT) or a number (FLOAT).
  """
  target = pa.int64() if kind == CSV_INT else pa.float64()
  allowed = _INT_BYTES if kind == CSV_INT else _FLOAT_BYTES
  fast = allowed[csv_read.cell_bytes(text)[1]].all()
  if fast and kind == CSV_INT and len(text) > text.null_count:
    fast = pc.max(pc.binary_length(text)).as_py() <= _LONGEST_INT_STRING
  if fast:
    cast = _try_cast(text, target)
    if cast is not None:
      if kind != CSV_INT and pc.any(pc.is_nan(cast)).as_py():
        # Arrow reads "nan" and "NaN" as NaN; as missing-value tokens they are empty cells.
        cast = pc.if_else(pa.array(missing_tokens(text)), pa.scalar(None, target), cast)
      return cast, np.zeros(len(text), dtype=bool)
  plain_int, plain_float = _plain_masks(text)
  plain = plain_int if kind == CSV_INT else plain_int | plain_float
  cast = pc.cast(pc.if_else(pa.array(plain), text, pa.scalar(None, pa.string())), target)
  rest = np.flatnonzero(~plain & np.asarray(text.is_valid(), dtype=bool) & ~missing_tokens(text))
  if len(rest) == 0:
    return cast, np.zeros(len(text), dtype=bool)
  numbers = cast.fill_null(0).to_numpy(zero_copy_only=False).copy()
  valid = plain.copy()
  failed = np.zeros(len(text), dtype=bool)
  for i, cell in zip(rest, text.take(pa.array(rest)).to_pylist(), strict=True):
    try:
      value = int(cell.encode()) if kind == CSV_INT else float(cell.encode())
    except ValueError:
      failed[i] = True
      continue
    if kind == CSV_INT and not _INT64_MIN <= value <= _INT64_MAX:
      failed[i] = True
      continue
    numbers[i] = value
    valid[i] = True
  return pa.array(numbers, type=target, mask=~valid), failed


def infer_column_types(
  paths: Sequence[str],
  delimiter: str = ",",
  label_key: str | None = None,
  block_size: int = csv_read.DEFAULT_BLOCK_BYTES,
) -> dict[str, str]:
  """Infers every column's type from the whole input, by stock CsvExampleGen's rules.

  Streams every file once. A cell is an int when Python's int() reads it
  within int64, a float when float() reads it, else a string; a column takes
  the highest type of its cells (int < float < string), and a column empty in
  every row is `CSV_UNKNOWN`. Rows the conversion quarantines whatever the types
  (wrong number of fields, bytes that are not UTF-8, a missing label, the header again) do
  not count.
  Files whose columns differ from the first file's are skipped here; the
  conversion reports them. Column order may differ between files.

  Args:
    paths: Input files.
    delimiter: Field delimiter.
    label_key: Label column, whose empty cells mark rows that do not count.
    block_size: Bytes per read block to start with.

  Returns:
    Column name -> one of core.column_types.CSV_KINDS.
  """
  names = csv_read.read_header(paths[0], delimiter)
  kinds = dict.fromkeys(names, CSV_UNKNOWN)
  for path in paths:
    file_names = csv_read.read_header(path, delimiter)
    if set(file_names) != set(names):
      continue
    chunk = csv_read.Chunk(path)
    utf8, _ = csv_read.scan_chunk(chunk)
    batches = csv_read.iter_raw_batches(
      chunk, file_names, delimiter, block_size, utf8=utf8, use_threads=True
    )
    for batch in batches:
      drop = np.zeros(batch.num_rows, dtype=bool)
      if not utf8:
        for column in batch.columns:
          drop |= csv_read.undecodable(column)
      if label_key in kinds:
        drop |= np.asarray(batch.column(label_key).is_null(), dtype=bool)
      drop |= csv_read.repeated_header(batch)
      counted = batch.filter(pa.array(~drop)) if drop.any() else batch
      for name in names:
        if kinds[name] != CSV_STRING:
          kinds[name] = column_kind(counted.column(name).cast(pa.string()), kinds[name])
      if all(k == CSV_STRING for k in kinds.values()):
        return kinds
  return kinds


def types_from_schema(schema_path: str) -> dict[str, str]:
  """Reads column types from a TFMD schema.pbtxt (INT, FLOAT, BYTES features) as CSV kinds."""
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  schema = schema_pb2.Schema()
  with io_lib.open_read(schema_path) as f:
    text_format.Parse(f.read().decode("utf-8"), schema)
  types = model_contract.schema_types(schema)
  return {name: SCHEMA_TO_CSV[t] for name, t in types.items()}
