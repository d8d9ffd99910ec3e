"""Local folders and object stores (gs://, s3://, hdfs://), one helper for telling them apart.

Everything that may live on an object store goes through TFX's `fileio`, or through `files`,
which hands a local path the same functions on top of `os`; tools that need POSIX files (a
flock, a rename, a library that opens paths) work on a local copy that `localize` makes.
Nothing here imports TensorFlow or TFX until an object store is touched, so the runners'
checks, the night job and the ExampleGen's conversion workers can use it.
"""

from __future__ import annotations

import os


def is_remote(path: str | os.PathLike | None) -> bool:
  """Whether a path names an object store or another non-local file system (gs://, s3://)."""
  return bool(path) and "://" in str(path)


def localize(path: str, scratch: str) -> str:
  """`path` itself when it is local, else a copy of it (a file or a folder) under `scratch`.

  Args:
    path: a local path or an object-store URI.
    scratch: a local folder the copy goes into (created if needed).

  Returns:
    A local path holding the same file or folder.
  """
  if not is_remote(path):
    return path
  from tfx.dsl.io import fileio
  from tfx.utils import io_utils

  target = os.path.join(scratch, os.path.basename(path.rstrip("/")) or "copy")
  if fileio.isdir(path):
    io_utils.copy_dir(path, target)
  else:
    os.makedirs(scratch, exist_ok=True)
    io_utils.copy_file(path, target)
  return target


class _Stat:
  """What the kit reads of a file's stat: its modification time, as TFX's fileio gives it."""

  def __init__(self, path: str):
    self.mtime_nsec = os.stat(path).st_mtime_ns


class LocalFiles:
  """The part of TFX's `fileio` the kit uses, on local paths, with the same meanings, and no
  TensorFlow: a process that only writes a local folder (a night's record after its run timed
  out) does not spend seconds importing it."""

  exists = staticmethod(os.path.exists)
  isdir = staticmethod(os.path.isdir)
  listdir = staticmethod(os.listdir)
  walk = staticmethod(os.walk)
  remove = staticmethod(os.remove)
  stat = staticmethod(_Stat)

  @staticmethod
  def glob(pattern: str) -> list[str]:
    import glob

    return glob.glob(pattern)

  @staticmethod
  def makedirs(path: str) -> None:
    os.makedirs(path, exist_ok=True)

  @staticmethod
  def open(path: str, mode: str = "r"):
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))

  @staticmethod
  def rename(src: str, dst: str, overwrite: bool = False) -> None:
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(f"{dst} exists")
    os.replace(src, dst)

  @staticmethod
  def rmtree(path: str) -> None:
    import shutil

    shutil.rmtree(path)


def files(path: str):
  """The file functions for `path`: `LocalFiles` for a local path, TFX's `fileio` (TensorFlow's
  file systems, and tensorflow-io's for s3://) for an object store."""
  if not is_remote(path):
    return LocalFiles
  from tfx.dsl.io import fileio

  return fileio
