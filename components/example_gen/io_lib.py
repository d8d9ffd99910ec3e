"""File access without TensorFlow: local or Beam filesystems, gzip and TFRecord writing."""

from __future__ import annotations

import concurrent.futures
import contextlib
import glob as glob_lib
import io
import os
import re
import shutil
import struct
import zlib
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from components import storage

try:
  from google_crc32c import value as _crc32c
except ImportError:  # pragma: no cover - google-crc32c comes with apache-beam[gcp]
  from apache_beam.io.tfrecordio import _default_crc32c_fn as _crc32c

GZIP_MAGIC = b"\x1f\x8b"
_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_CRC_MASK_DELTA = 0xA282EAD8

# Conversion workers import this module instead of TensorFlow, which would cost each
# worker process about half a gigabyte. Local paths use the os module, s3:// Beam's S3IO
# (below), other remote ones (gs://, hdfs://) Beam's filesystems, and only schemes Beam does
# not know fall back to tf.io.gfile.


# Beam's S3 file system builds a new boto3 session and client for every call: 61 of them took
# 17 of the 23 s an ExampleGen run on digits spent against a loopback S3 server (moto). s3://
# paths therefore go through one client per process and set of S3 options, with Beam's own
# S3IO on top of it.
_S3_CLIENTS: dict[tuple, object] = {}
_S3_OPTIONS = (
  "s3_access_key_id",
  "s3_secret_access_key",
  "s3_session_token",
  "s3_endpoint_url",
  "s3_region_name",
  "s3_api_version",
  "s3_verify",
  "s3_disable_ssl",
)


def _s3(path: str):
  """Beam's S3IO over this process's shared client for `path`'s options, or None for a path
  that is not s3:// (or without Beam's AWS extras)."""
  if not path.startswith("s3://"):
    return None
  try:
    from apache_beam.io.aws import s3io
    from apache_beam.io.aws.clients.s3 import boto3_client
  except ImportError:  # pragma: no cover - without boto3 Beam has no S3 file system either
    return None
  from apache_beam.options.pipeline_options import S3Options

  options = _beam_options()
  view = options.view_as(S3Options)
  key = tuple(getattr(view, name, None) for name in _S3_OPTIONS)
  if key not in _S3_CLIENTS:
    _S3_CLIENTS[key] = boto3_client.Client(options=options)
  return s3io.S3IO(client=_S3_CLIENTS[key])


def _s3_glob(s3, pattern: str) -> list[str]:
  """Beam's glob on an object store: `*` stays within a folder, `**` crosses them."""
  from apache_beam.io.filesystem import FileSystem

  prefix = re.match(r"^[^[*?]*", pattern).group(0)
  if prefix == pattern:
    return [pattern] if s3.exists(pattern) else []
  match = re.compile(FileSystem.translate_pattern(pattern)).match
  return sorted(p for p, _ in s3.list_files(prefix) if match(p) and not p.endswith("/"))


def _beam_options():
  """The running pipeline's options, or (outside one) defaults set once for this process."""
  from apache_beam.io.filesystems import FileSystems

  if getattr(FileSystems, "_pipeline_options", None) is None:
    # Outside a running pipeline Beam's S3 file system has no options and refuses to work
    # ("Must provide one of client or options"); default options let boto3 take its
    # configuration from the environment (AWS_* variables, AWS_ENDPOINT_URL_S3).
    from apache_beam.options.pipeline_options import PipelineOptions

    FileSystems.set_options(PipelineOptions([]))
  return FileSystems._pipeline_options


def _beam_fs(path: str):
  from apache_beam.io.filesystems import FileSystems

  _beam_options()
  try:
    FileSystems.get_filesystem(path)
  except ValueError:
    return None
  return FileSystems


def _gfile():
  import tensorflow as tf

  return tf.io.gfile


class _GFileReader(io.RawIOBase):
  """A tf.io.gfile.GFile as a standard raw stream, which pyarrow and io.BufferedReader need."""

  def __init__(self, f):
    super().__init__()
    self._f = f

  def readable(self) -> bool:
    return True

  def seekable(self) -> bool:
    return True

  def readinto(self, b) -> int:
    data = self._f.read(len(b))
    b[: len(data)] = data
    return len(data)

  def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
    self._f.seek(offset, whence)
    return self._f.tell()

  def tell(self) -> int:
    return self._f.tell()

  def close(self) -> None:
    if not self.closed:
      self._f.close()
    super().close()


def open_read(path: str) -> BinaryIO:
  """Opens a file for reading bytes, as stored (no decompression)."""
  if not storage.is_remote(path):
    return open(path, "rb")
  s3 = _s3(path)
  if s3 is not None:
    return s3.open(path, "r")
  fs = _beam_fs(path)
  if fs is not None:
    from apache_beam.io.filesystem import CompressionTypes

    return fs.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
  return io.BufferedReader(_GFileReader(_gfile().GFile(path, "rb")), buffer_size=1 << 20)


def open_write(path: str) -> BinaryIO:
  """Creates (or truncates) a file for writing bytes; local parent folders are made."""
  if not storage.is_remote(path):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    return open(path, "wb")
  s3 = _s3(path)
  if s3 is not None:
    return s3.open(path, "w")
  fs = _beam_fs(path)
  if fs is not None:
    from apache_beam.io.filesystem import CompressionTypes

    return fs.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
  return _gfile().GFile(path, "wb")


def size(path: str) -> int:
  """Size of a file in bytes."""
  if not storage.is_remote(path):
    return os.path.getsize(path)
  s3 = _s3(path)
  if s3 is not None:
    return s3.size(path)
  fs = _beam_fs(path)
  if fs is not None:
    return fs.match([path])[0].metadata_list[0].size_in_bytes
  return _gfile().stat(path).length


def glob(pattern: str) -> list[str]:
  """Sorted files (not folders) matching a glob pattern."""
  if not storage.is_remote(pattern):
    return sorted(p for p in glob_lib.glob(pattern) if os.path.isfile(p))
  s3 = _s3(pattern)
  if s3 is not None:
    return _s3_glob(s3, pattern)
  fs = _beam_fs(pattern)
  if fs is not None:
    found = fs.match([pattern])[0].metadata_list
    return sorted(m.path for m in found if not m.path.endswith("/"))
  return sorted(_gfile().glob(pattern))


def makedirs(path: str) -> None:
  if not storage.is_remote(path):
    os.makedirs(path, exist_ok=True)
    return
  if path.startswith("s3://"):
    return  # An object store has no folders to make.
  fs = _beam_fs(path)
  if fs is None:
    _gfile().makedirs(path)
    return
  # It may exist already; object stores have no folders to make.
  with contextlib.suppress(OSError):
    fs.mkdirs(path)


def rename(src: str, dst: str) -> None:
  """Moves a file, replacing `dst` if it exists."""
  if not storage.is_remote(src):
    os.replace(src, dst)
    return
  s3 = _s3(src)
  if s3 is not None:
    s3.rename(src, dst)  # A copy over `dst`, then the delete of `src`.
    return
  fs = _beam_fs(src)
  if fs is None:
    _gfile().rename(src, dst, overwrite=True)
    return
  if fs.exists(dst):
    fs.delete([dst])
  fs.rename([src], [dst])


def remove(path: str) -> None:
  if not storage.is_remote(path):
    os.remove(path)
    return
  s3 = _s3(path)
  if s3 is not None:
    s3.delete(path)
    return
  fs = _beam_fs(path)
  if fs is None:
    _gfile().remove(path)
  else:
    fs.delete([path])


def rmtree(path: str) -> None:
  """Deletes a folder and everything under it."""
  if not storage.is_remote(path):
    shutil.rmtree(path, ignore_errors=True)
    return
  s3 = _s3(path)
  if s3 is not None:
    s3.delete_tree(path.rstrip("/") + "/")
    return
  fs = _beam_fs(path)
  if fs is None:
    _gfile().rmtree(path)
  else:
    fs.delete([path.rstrip("/") + "/"])


def is_gzip(path: str) -> bool:
  """Whether a file starts with the gzip magic bytes, whatever its name."""
  with open_read(path) as f:
    return f.read(2) == GZIP_MAGIC


def _masked_crc(data: bytes) -> int:
  crc = _crc32c(data)
  return (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF


_HEADERS: dict[int, bytes] = {}
_MAX_CACHED_HEADERS = 1 << 16


def _header(length: int) -> bytes:
  """The 12 bytes before a record: its length and the masked CRC of the length."""
  header = _HEADERS.get(length)
  if header is None:
    packed = _LENGTH.pack(length)
    header = packed + _CRC.pack(_masked_crc(packed))
    if len(_HEADERS) < _MAX_CACHED_HEADERS:
      _HEADERS[length] = header
  return header


def frame_records(records) -> bytes:
  """Frames serialized records as TFRecords: length, its masked CRC32C, data, its CRC."""
  parts = []
  append = parts.append
  headers = _HEADERS
  crc32c, pack, delta = _crc32c, _CRC.pack, _CRC_MASK_DELTA
  for record in records:
    append(headers.get(len(record)) or _header(len(record)))
    append(record)
    crc = crc32c(record)
    append(pack((((crc >> 15) | (crc << 17)) + delta) & 0xFFFFFFFF))
  return b"".join(parts)


def _masked_crcs(crcs: np.ndarray) -> np.ndarray:
  crcs = crcs.astype(np.uint32)
  return ((crcs >> np.uint32(15)) | (crcs << np.uint32(17))) + np.uint32(_CRC_MASK_DELTA)


def frame_array(records: pa.Array) -> pa.Array:
  """Frames a binary array of serialized records as TFRecords, one framed record per item."""
  n = len(records)
  lengths = pc.binary_length(records).to_numpy(zero_copy_only=False).astype("<u8")
  unique, inverse = np.unique(lengths, return_inverse=True)
  headers = np.frombuffer(b"".join(_header(int(u)) for u in unique), dtype=np.uint8)
  headers = headers.reshape(len(unique), 12)[inverse].reshape(-1)
  crc32c = _crc32c
  crcs = np.fromiter((crc32c(r) for r in records.to_pylist()), dtype=np.uint32, count=n)
  trailers = _masked_crcs(crcs).astype("<u4").view(np.uint8)
  return pc.binary_join_element_wise(
    _fixed_width(headers, 12, n), records, _fixed_width(trailers, 4, n), b""
  )


def _fixed_width(data: np.ndarray, width: int, n: int) -> pa.Array:
  offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
  return pa.Array.from_buffers(
    pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
  )


def _data_buffer(values: pa.Array):
  """The bytes of a binary array's items, back to back, without copying."""
  offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)
  first, last = offsets[values.offset], offsets[values.offset + len(values)]
  return values.buffers()[2][first:last] if last > first else b""


class GzipTFRecordWriter:
  """Writes one gzipped TFRecord file, readable by tf.data and TFX (`FORMAT_TFRECORDS_GZIP`).

  Compression and writing run on a background thread (zlib and file writes release
  the GIL), so they overlap with the caller preparing the next records.

  Args:
    path: Output file, local or remote.
    level: zlib compression level, 1 (fastest) to 9 (smallest).
  """

  def __init__(self, path: str, level: int = 1):
    self._file = open_write(path)
    # wbits 16 + 15: a gzip member, as TensorFlow's GZIP record writer makes.
    self._zip = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tfrecord-gzip")
    self._pending: concurrent.futures.Future | None = None
    self.count = 0

  def _compress_and_write(self, framed: bytes) -> None:
    self._file.write(self._zip.compress(framed))

  def _wait(self) -> None:
    if self._pending is not None:
      pending, self._pending = self._pending, None
      pending.result()

  def write_many(self, records) -> None:
    """Appends serialized records (a sequence of bytes, or a binary Arrow array)."""
    if isinstance(records, pa.Array):
      framed = _data_buffer(frame_array(records)) if len(records) else b""
    else:
      framed = frame_records(records)
    self.count += len(records)
    # One batch in flight at most, so memory stays bounded.
    self._wait()
    self._pending = self._thread.submit(self._compress_and_write, framed)

  def close(self) -> None:
    if self._file is None:
      return
    try:
      self._wait()
      self._file.write(self._zip.flush())
    finally:
      self._thread.shutdown(wait=True)
      self._file.close()
      self._file = None
