"""Local folders and object stores (gs://, s3://, hdfs://), one helper for telling them apart.

Everything that may live on an object store goes through TFX's `fileio`; tools that need POSIX
files (a flock, a rename, a library that opens paths) work on a local copy that `localize`
makes. Nothing here imports TensorFlow or TFX until a copy is made, so the runners' checks and
the ExampleGen's conversion workers can use it.
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
