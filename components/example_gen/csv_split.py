"""Which split each row goes to: hashes of a row's place in its file or of its cells."""

from __future__ import annotations

import dataclasses
import hashlib
import zlib

import numpy as np
import pyarrow as pa

from components.example_gen import csv_read


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
  offsets, data = csv_read.cell_bytes(values)
  offsets = offsets.astype(np.int64)
  lengths = np.diff(offsets)
  sums = np.zeros(n, dtype=np.uint64)
  if offsets[-1]:
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


class LinesDigest:
  """A digest of a chunk's lines as a multiset: the sum (modulo 2**64) of each line's hash.

  Fed the chunk's bytes block by block (`csv_read.scan_chunk`'s `on_block`), it hashes every
  line but a file's header and blank lines, a line's CRC-32 and length mixed to 64 bits, and
  adds the hashes up. So the digest of a span's rows is the same whatever the order of its rows,
  the files they are cut into, gzip, CRLF line ends and the chunks a file is read in (digests of
  parts add up), and a changed cell changes it (CRC-32 misses no change of 4 bytes or fewer);
  the order of the columns counts. The data gate compares the digests of spans to find a source
  that delivers the same rows again (`gate_lib`). It costs about 0.9 s per million lines of 65
  cells (157 MB; the UTF-8 scan it rides on takes 0.25 s, their conversion seconds), so only
  input in spans is digested.
  """

  def __init__(self, skip_header: bool):
    self._skip = skip_header
    self._carry = b""
    self.value = 0

  def update(self, block: bytes) -> None:
    data = self._carry + block if self._carry else block
    cut = data.rfind(b"\n") + 1
    self._carry = data[cut:]
    if cut:
      lines = data[:cut]
      if b"\r" in lines:
        lines = lines.replace(b"\r\n", b"\n")
      self._add(lines.split(b"\n"))

  def finish(self) -> int:
    """The digest, after the last block (a last line without a line end counts too)."""
    if self._carry:
      self._add([self._carry.rstrip(b"\r")])
      self._carry = b""
    return self.value

  def _add(self, lines: list[bytes]) -> None:
    if self._skip:
      lines, self._skip = lines[1:], False
    crcs = np.fromiter(map(zlib.crc32, lines), np.uint64, len(lines))
    lengths = np.fromiter(map(len, lines), np.uint64, len(lines))
    hashes = _mix(crcs | (lengths << np.uint64(32)))
    self.value = (self.value + int(hashes[lengths > 0].sum(dtype=np.uint64))) % 2**64


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
