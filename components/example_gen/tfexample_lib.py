"""Vectorised tf.Example serialisation of typed Arrow columns, one value or none per cell."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING, CSV_UNKNOWN

# Wire format (tensorflow/core/example/{example,feature}.proto), field by field:
#   Example  { Features features = 1; }
#   Features { map<string, Feature> feature = 1; }  -> entries { key = 1; value = 2; }
#   Feature  { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
#                           Int64List int64_list = 3; } }
#   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1 [packed]; }
#   Int64List { repeated int64 value = 1 [packed]; }
# A cell with a value becomes a one-value list, an empty cell an empty list of the
# column's type, and every cell of a CSV_UNKNOWN column a Feature with no kind set, as
# stock CsvExampleGen writes them. The bytes are built for a whole column at once
# with numpy: each row's piece is laid out in a fixed-width matrix and the unused
# bytes are masked out. This is several times faster than building protos per row.
_LENGTH_DELIMITED = 0x0A  # Field 1, wire type 2: every length-delimited field 1 here.
_KIND_TAG = {CSV_STRING: 0x0A, CSV_FLOAT: 0x12, CSV_INT: 0x1A}
_VALUE_TAG = b"\x12"  # Map entry field 2 (the Feature).


def _binary(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
  return pa.Array.from_buffers(
    pa.binary(), len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
  )


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """Base-128 varints of unsigned values: an (n, width) byte matrix and each one's length."""
  u = np.asarray(values, dtype=np.uint64)
  n = len(u)
  if n == 0:
    return np.zeros((0, 1), dtype=np.uint8), np.zeros(0, dtype=np.int64)
  top = int(u.max())
  width = 1
  while width < 10 and top >= 1 << (7 * width):
    width += 1
  if width == 1:
    return u.astype(np.uint8).reshape(n, 1), np.ones(n, dtype=np.int64)
  lengths = np.ones(n, dtype=np.int64)
  for k in range(1, width):
    lengths += u >= np.uint64(1 << (7 * k))
  matrix = np.empty((n, width), dtype=np.uint8)
  for k in range(width):
    low = ((u >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
    matrix[:, k] = low | ((k < lengths - 1).astype(np.uint8) << 7)
  return matrix, lengths


def _pack(segments: Sequence, n: int) -> pa.Array:
  """Concatenates per-row segments into a binary array.

  Args:
    segments: Each either bytes (the same for every row) or (matrix, lengths): an
      (n, width) byte matrix of which each row uses its first `lengths[i]` bytes.
    n: Rows.
  """
  widths = [len(s) if isinstance(s, bytes) else s[0].shape[1] for s in segments]
  total = sum(widths)
  matrix = np.empty((n, total), dtype=np.uint8)
  mask = None
  start = 0
  for segment, width in zip(segments, widths, strict=True):
    end = start + width
    if isinstance(segment, bytes):
      matrix[:, start:end] = np.frombuffer(segment, dtype=np.uint8)
    else:
      values, lengths = segment
      matrix[:, start:end] = values
      if width and not (lengths == width).all():
        if mask is None:
          mask = np.ones((n, total), dtype=bool)
        mask[:, start:end] = np.arange(width) < lengths[:, None]
    start = end
  offsets = np.zeros(n + 1, dtype=np.int32)
  if mask is None:
    offsets[1:] = np.arange(1, n + 1, dtype=np.int32) * total
    return _binary(matrix.reshape(-1), offsets)
  np.cumsum(mask.sum(axis=1), out=offsets[1:])
  return _binary(matrix[mask], offsets)


def _entry_head(key: bytes, len_value: np.ndarray) -> list:
  """Segments of a map entry up to its Feature: tag, entry length, key, value tag and length."""
  value_len = _varints(len_value)
  entry_len = _varints(len(key) + len(_VALUE_TAG) + value_len[1] + len_value)
  return [bytes([_LENGTH_DELIMITED]), entry_len, key + _VALUE_TAG, value_len]


def _fixed_head(valid: np.ndarray, kind: str, value_bytes: np.ndarray) -> tuple:
  """The Feature's kind tag, list length, list field tag and value length, for one-value lists.

  An empty cell gets only the kind tag and a zero length (an empty list).
  """
  n = len(valid)
  list_len = 2 + value_bytes  # Field tag, value length byte, value.
  head = np.empty((n, 4), dtype=np.uint8)
  head[:, 0] = _KIND_TAG[kind]
  head[:, 1] = np.where(valid, list_len, 0)
  head[:, 2] = _LENGTH_DELIMITED
  head[:, 3] = value_bytes
  return (head, np.where(valid, 4, 2)), np.where(valid, 2 + list_len, 2)


def _numeric_segments(key: bytes, kind: str, values: pa.Array) -> list:
  n = len(values)
  valid = np.asarray(values.is_valid(), dtype=bool)
  filled = (values.fill_null(0) if values.null_count else values).to_numpy(zero_copy_only=False)
  if kind == CSV_INT:
    value, value_lengths = _varints(filled.astype(np.int64).view(np.uint64))
  else:
    value = filled.astype("<f4").view(np.uint8).reshape(n, 4)
    value_lengths = np.full(n, 4, dtype=np.int64)
  if valid.all() and (value_lengths == value_lengths[0]).all():
    # Every row the same length (floats, or ints of one varint size): all but the
    # value bytes are the same for every row.
    width = int(value_lengths[0])
    feature = bytes([_KIND_TAG[kind], 2 + width, _LENGTH_DELIMITED, width])
    entry = key + _VALUE_TAG + _varint(len(feature) + width) + feature
    prefix = bytes([_LENGTH_DELIMITED]) + _varint(len(entry) + width) + entry
    return [prefix, (value, value_lengths)]
  head, len_value = _fixed_head(valid, kind, value_lengths)
  return [*_entry_head(key, len_value), head, (value, np.where(valid, value_lengths, 0))]


def _bytes_piece(key: bytes, values: pa.Array) -> pa.Array:
  n = len(values)
  valid = np.asarray(values.is_valid(), dtype=bool)
  size = pc.binary_length(values).fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
  size_varint = _varints(size)
  list_len = 1 + size_varint[1] + size
  list_len_varint = _varints(list_len)
  len_value = np.where(valid, 1 + list_len_varint[1] + list_len, 2)
  kind = np.full((n, 1), _KIND_TAG[CSV_STRING], dtype=np.uint8)
  empty = np.zeros((n, 1), dtype=np.uint8)
  # A value: kind tag, list length, value tag, value length; an empty cell: tag, 0.
  list_len_or_zero = (
    np.where(valid[:, None], list_len_varint[0], empty),
    np.where(valid, list_len_varint[1], 1),
  )
  ones = np.ones(n, dtype=np.int64)
  segments = [
    *_entry_head(key, len_value),
    (kind, ones),
    list_len_or_zero,
    (np.full((n, 1), _LENGTH_DELIMITED, dtype=np.uint8), valid.astype(np.int64)),
    (size_varint[0], np.where(valid, size_varint[1], 0)),
  ]
  head = _pack(segments, n)
  return pc.binary_join_element_wise(head, values.fill_null(b""), b"")


def _varint(value: int) -> bytes:
  out = bytearray()
  while value >= 0x80:
    out.append((value & 0x7F) | 0x80)
    value >>= 7
  out.append(value)
  return bytes(out)


def _unknown_piece(key: bytes) -> bytes:
  entry = key + _VALUE_TAG + b"\x00"  # A Feature of length 0: no kind set.
  return bytes([_LENGTH_DELIMITED]) + _varint(len(entry)) + entry


def _key(name: str) -> bytes:
  raw = name.encode("utf-8")
  return bytes([_LENGTH_DELIMITED]) + _varint(len(raw)) + raw


def serialize_examples(
  columns: Sequence[tuple[str, str, pa.Array | None]], num_rows: int
) -> pa.Array:
  """Serialises one tf.Example per row.

  Args:
    columns: (name, kind, values) per feature. `values` is a flat int64, float32
      or binary array (kind CSV_INT, CSV_FLOAT, CSV_STRING) with nulls for empty cells, or
      None for a CSV_UNKNOWN column.
    num_rows: Rows.

  Returns:
    A binary array of serialized tf.Examples.
  """
  if num_rows == 0:
    return pa.array([], type=pa.binary())
  # Map entries may come in any order: numeric and empty columns are packed together
  # in one matrix, string columns (of any length) joined on after.
  segments: list = []
  strings: list[pa.Array] = []
  for name, kind, values in columns:
    key = _key(name)
    if kind == CSV_UNKNOWN or values is None:
      segments.append(_unknown_piece(key))
    elif kind == CSV_STRING:
      strings.append(_bytes_piece(key, values))
    else:
      segments.extend(_numeric_segments(key, kind, values))
  pieces = ([_pack(segments, num_rows)] if segments else []) + strings
  if not pieces:
    pieces = [pa.array([b""] * num_rows, type=pa.binary())]
  features = pc.binary_join_element_wise(*pieces, b"") if len(pieces) > 1 else pieces[0]
  size = pc.binary_length(features).to_numpy(zero_copy_only=False).astype(np.int64)
  head = _pack([bytes([_LENGTH_DELIMITED]), _varints(size)], num_rows)
  return pc.binary_join_element_wise(head, features, b"")
