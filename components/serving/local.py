"""The local backend: a model folder on a local (or mounted) disk, published atomically.

Under ``<serving_dir>/<model_name>/`` (TF Serving's model base path), besides `layout`'s names::

  .lock                     exclusive lock held for the whole of a push, rollback or prune
  .staging-<uuid>/          a version being assembled; renamed to ``<N>/`` when complete
  .trash-<N>-<uuid>/        a version being deleted by retention (renamed away first)

TF Serving's file-system storage path source treats only all-digit child names as versions,
so the dot-prefixed staging/trash folders and the logs are invisible to it. Variants live
*inside* the version folder (under ``assets.extra/``, which TF Serving's SavedModel loader only
reads for warm-up requests) so that one ``rename`` publishes the model, its variants and its
manifest together, and one folder removal retires them together.

`remote` is the same protocol for object stores, which have neither rename nor lock; `store`
puts both behind one interface.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Mapping
from typing import IO, Any

import filelock

from components.serving import layout, manifest
from components.serving.paths import PusherError

LOCK_FILE = ".lock"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
DEFAULT_LOCK_TIMEOUT_S = 600.0

_COPY_CHUNK = 1 << 20


class locked:
  """Exclusive inter-process lock on a model folder (flock; released by the kernel on kill)."""

  def __init__(self, base: str, timeout_s: float):
    self._path = os.path.join(base, LOCK_FILE)
    self._timeout_s = timeout_s
    self._lock = filelock.FileLock(self._path, timeout=timeout_s)

  def __enter__(self) -> None:
    try:
      self._lock.acquire()
    except filelock.Timeout as e:
      raise PusherError(
        f"Another push or rollback has held {self._path} for over {self._timeout_s:.0f} s; "
        "wait for it to finish (or stop it) and retry."
      ) from e

  def __exit__(self, *exc: object) -> None:
    self._lock.release()


# ----------------------------------------------------------------------------- reading


def versions_in(base: str) -> list[int]:
  """The numeric version folders under a model folder, ascending ([] when there is none)."""
  if not os.path.isdir(base):
    return []
  return layout.version_numbers(e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False))


def read_log(base: str, name: str) -> list[dict[str, Any]]:
  """The entries of a log file (`layout.Log.file`), oldest first, skipping a line torn by a
  crash."""
  path = os.path.join(base, name)
  if not os.path.exists(path):
    return []
  entries = []
  with open(path, encoding="utf-8") as f:
    for raw in f:
      line = raw.strip()
      if not line:
        continue
      try:
        entry = json.loads(line)
      except json.JSONDecodeError:
        continue  # A kill -9 during an append can leave one partial line.
      if isinstance(entry, dict):
        entries.append(entry)
  return entries


def walk_files(root: str) -> Iterator[str]:
  """Every file under `root`, relative to it, in a stable (sorted) order."""
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
      yield os.path.relpath(os.path.join(dirpath, name), root)


def sha256_stream(f: IO[bytes]) -> tuple[str, int]:
  """(sha256, size) of what is left to read in a binary file object."""
  digest = hashlib.sha256()
  size = 0
  while chunk := f.read(_COPY_CHUNK):
    digest.update(chunk)
    size += len(chunk)
  return digest.hexdigest(), size


def sha256_file(path: str) -> tuple[str, int]:
  """(sha256, size) of a local file."""
  with open(path, "rb") as f:
    return sha256_stream(f)


# ----------------------------------------------------------------------------- writing


def new_staging(base: str) -> str:
  """Makes an empty staging folder under a locked model folder and returns it."""
  staging = os.path.join(base, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
  os.mkdir(staging)
  return staging


def _fsync_dir(path: str) -> None:
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _copy_file(src: str, dst: str) -> tuple[str, int]:
  """Copies one file, fsyncs it and returns (sha256, size) of what was written."""
  digest = hashlib.sha256()
  size = 0
  with open(src, "rb") as fin, open(dst, "xb") as fout:
    while chunk := fin.read(_COPY_CHUNK):
      fout.write(chunk)
      digest.update(chunk)
      size += len(chunk)
    fout.flush()
    os.fsync(fout.fileno())
  shutil.copymode(src, dst)
  return digest.hexdigest(), size


def copy_tree_file(src: str, staging: str, rel: str, files: dict[str, dict[str, Any]]) -> None:
  """Copies one file to `rel` under the staging folder and records its digest in `files`."""
  dst = os.path.join(staging, rel)
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  digest, size = _copy_file(src, dst)
  files[rel] = {"sha256": digest, "size": size}


def copy_tree(
  src_root: str,
  staging: str,
  rel_root: str,
  files: dict[str, dict[str, Any]],
  skip: frozenset[str] | set[str] = frozenset(),
) -> None:
  """Copies a folder to `rel_root` under the staging folder, recording every file in `files`."""
  rels = [rel for rel in walk_files(src_root) if rel not in skip]
  # Only the final rename makes the version visible; saved_model.pb still goes last, as in
  # stock TFX (see layout.saved_model_last).
  rels.sort(key=layout.saved_model_last)
  for rel in rels:
    copy_tree_file(os.path.join(src_root, rel), staging, os.path.join(rel_root, rel), files)
  # Empty folders (e.g. an empty assets/) are part of a SavedModel too.
  for dirpath, _, _ in os.walk(src_root):
    os.makedirs(os.path.join(staging, rel_root, os.path.relpath(dirpath, src_root)), exist_ok=True)


def publish(base: str, staging: str, version: int, version_manifest: Mapping[str, Any]) -> str:
  """Writes the manifest, fsyncs the staging folder and renames it to the version's number."""
  manifest_path = os.path.join(staging, layout.MANIFEST_FILE)
  with open(manifest_path, "x", encoding="utf-8") as f:
    f.write(manifest.dumps(version_manifest))
    f.flush()
    os.fsync(f.fileno())
  for dirpath, _, _ in os.walk(staging, topdown=False):
    _fsync_dir(dirpath)
  target = os.path.join(base, str(version))
  # os.rename silently replaces an *empty* target folder; the lock makes this check race-free
  # among pushers, and it stops us from ever replacing something we did not create.
  if os.path.lexists(target):
    raise RuntimeError(f"version folder {target} already exists; refusing to overwrite it")
  os.rename(staging, target)
  _fsync_dir(base)
  return target


def append_log(base: str, name: str, entry: Mapping[str, Any]) -> None:
  """Appends one entry to a log file (`layout.Log.file`) and fsyncs it."""
  path = os.path.join(base, name)
  line = json.dumps(entry, sort_keys=True) + "\n"
  with open(path, "a+b") as f:
    # A kill -9 mid-append can leave a line without its newline; start a fresh line so the
    # torn fragment stays on its own (read_log skips it).
    f.seek(0, os.SEEK_END)
    if f.tell() > 0:
      f.seek(-1, os.SEEK_END)
      if f.read(1) != b"\n":
        f.write(b"\n")
    f.write(line.encode())
    f.flush()
    os.fsync(f.fileno())


def clean_leftovers(base: str) -> None:
  """Removes staging and trash folders; called under the lock only, so they are dead writers'."""
  for entry in os.scandir(base):
    if entry.is_dir(follow_symlinks=False) and entry.name.startswith(
      (STAGING_PREFIX, TRASH_PREFIX)
    ):
      shutil.rmtree(entry.path)


def prune(base: str, keep_versions: int, live: int | None) -> list[int]:
  """Deletes all but the newest `keep_versions` versions, never `live`; returns those deleted."""
  versions = versions_in(base)
  doomed = [v for v in versions[:-keep_versions] if v != live]
  for version in doomed:
    # Rename first so a crash mid-delete never leaves a half-deleted numeric folder that TF
    # Serving could try to load.
    trash = os.path.join(base, f"{TRASH_PREFIX}{version}-{uuid.uuid4().hex}")
    os.rename(os.path.join(base, str(version)), trash)
    shutil.rmtree(trash)
  if doomed:
    _fsync_dir(base)
  return doomed


# ----------------------------------------------------------------------------- checking


def has_saved_model(path: str) -> bool:
  """Whether a local folder holds a SavedModel's graph file."""
  return any(os.path.isfile(os.path.join(path, name)) for name in layout.SAVED_MODEL_FILES)


def verify(path: str, unlisted: bool = True) -> list[str]:
  """Problems of a local version folder: a missing SavedModel or manifest, files missing,
  not matching their sha256, or (with `unlisted`) not listed."""
  problems = []
  if not has_saved_model(path):
    problems.append("saved_model.pb is missing")
  try:
    version_manifest = manifest.read_manifest(path)
  except PusherError as e:
    return [*problems, str(e)]
  files = version_manifest.get(manifest.FILES_FIELD, {})
  for rel, info in sorted(files.items()):
    full = os.path.join(path, rel)
    if not os.path.isfile(full):
      problems.append(f"{rel} is missing")
      continue
    digest, _ = sha256_file(full)
    if digest != info.get("sha256"):
      problems.append(f"{rel} has sha256 {digest}, manifest says {info.get('sha256')}")
  on_disk = set(walk_files(path)) - {layout.MANIFEST_FILE} if unlisted else set()
  for extra in sorted(on_disk - set(files)):
    problems.append(f"{extra} is not listed in the manifest")
  content = version_manifest.get(manifest.CONTENT_SHA256_FIELD)
  if files and content != manifest.content_digest(files):
    problems.append("content_sha256 does not match the listed files")
  return problems
