"""Local and object-store model folders behind the one interface that every reader and writer uses.

Both kinds publish a version the same way: stage its files (a local staging folder, or a plan
of uploads), then `publish` them under a number, with manifest.json last. What differs is
how: a local folder is locked, and its version appears by one rename (`local`); an object
store has neither, and a version is complete once its manifest exists (`remote`). Readers
take a folder from `folder`; writers open one with `open_folder` in a `with` block.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from components import storage
from components.serving import layout, local, manifest, remote
from components.serving.paths import PusherError


@dataclasses.dataclass
class Staged:
  """A version's files, ready to publish under a number.

  Attributes:
    files: The manifest's `files`: relative path -> sha256 and size.
    publish: Publishes the files as (version, manifest) and returns the version folder.
    discard: Drops the staged files when nothing is published.
  """

  files: dict[str, dict[str, Any]]
  publish: Callable[[int, Mapping[str, Any]], str]
  discard: Callable[[], None] = lambda: None


class LocalFolder:
  """A local model folder; in a `with` block, locked and cleared of dead writers' leftovers."""

  def __init__(self, base: str, lock_timeout_s: float = local.DEFAULT_LOCK_TIMEOUT_S):
    self.base = base
    self._lock_timeout_s = lock_timeout_s
    self._lock: local.locked | None = None

  def __enter__(self) -> LocalFolder:
    self._lock = local.locked(self.base, self._lock_timeout_s)
    self._lock.__enter__()
    local.clean_leftovers(self.base)
    return self

  def __exit__(self, *exc: object) -> None:
    if self._lock is not None:
      self._lock.__exit__(*exc)

  def path(self, version: int) -> str:
    return os.path.join(self.base, str(version))

  def versions(self) -> list[int]:
    """The version folders, ascending (complete ones: each appeared by one rename)."""
    return local.versions_in(self.base)

  def taken(self) -> list[int]:
    """Every number in use, for `history.next_version`."""
    return self.versions()

  def manifest(self, version: int) -> dict[str, Any]:
    """The version's manifest; {} where it is missing or unreadable."""
    return manifest.safe_manifest(self.path(version))

  def read_log(self, log: layout.Log) -> list[dict[str, Any]]:
    return local.read_log(self.base, log.file)

  def append_log(self, log: layout.Log, entry: Mapping[str, Any]) -> None:
    os.makedirs(self.base, exist_ok=True)
    local.append_log(self.base, log.file, entry)

  def prune(self, keep_versions: int, live: int | None) -> list[int]:
    return local.prune(self.base, keep_versions, live)

  def _staged(self, staging: str, files: dict[str, dict[str, Any]]) -> Staged:
    return Staged(
      files,
      lambda version, version_manifest: local.publish(
        self.base, staging, version, version_manifest
      ),
      lambda: shutil.rmtree(staging),
    )

  def stage_push(
    self, saved_model_dir: str, variants: Mapping[str, str], extra_trees: Mapping[str, str]
  ) -> Staged:
    """Copies (and hashes) the SavedModel, the variants and the extra folders into staging."""
    staging = local.new_staging(self.base)
    files: dict[str, dict[str, Any]] = {}
    local.copy_tree(saved_model_dir, staging, "", files)
    for name in sorted(variants):
      rel = os.path.join(layout.VARIANTS_SUBDIR, name)
      src = variants[name]
      if os.path.isdir(src):
        local.copy_tree(src, staging, rel, files)
      else:
        local.copy_tree_file(src, staging, os.path.join(rel, os.path.basename(src)), files)
    for rel, src in sorted(extra_trees.items()):
      local.copy_tree(src, staging, rel, files)
    return self._staged(staging, files)

  def stage_copy(self, version: int, files: Mapping[str, Any]) -> Staged:
    """Copies a version's files (all but its manifest) into staging, checked against `files`."""
    staging = local.new_staging(self.base)
    copied: dict[str, dict[str, Any]] = {}
    skip = {layout.MANIFEST_FILE}
    local.copy_tree(self.path(version), staging, "", copied, skip=skip)
    if copied != files:
      shutil.rmtree(staging)
      raise PusherError(f"Version {version} changed while it was being copied; try again.")
    return self._staged(staging, copied)


class RemoteFolder:
  """A model folder on an object store: no lock, so one writer per model at a time.

  Args:
    base: The model folder's URI.
    remove_incomplete: Delete the version folders that dead pushes left without a manifest
      on entering a `with` block (a push does; a rollback leaves them).
  """

  def __init__(self, base: str, remove_incomplete: bool = False):
    self.base = base
    self._remove_incomplete = remove_incomplete
    self._incomplete: list[int] = []

  def __enter__(self) -> RemoteFolder:
    _, self._incomplete = remote.versions(self.base)
    if self._remove_incomplete:
      remote.remove_incomplete(self.base, self._incomplete)
    return self

  def __exit__(self, *exc: object) -> None:
    pass

  def path(self, version: int) -> str:
    return f"{self.base}/{version}"

  def versions(self) -> list[int]:
    """The complete versions (with a manifest), ascending."""
    return remote.versions(self.base)[0]

  def taken(self) -> list[int]:
    """Every number in use, incomplete folders' too: TF Serving may have loaded one of them."""
    return sorted({*self.versions(), *self._incomplete})

  def manifest(self, version: int) -> dict[str, Any]:
    """The version's manifest; {} where it is missing or unreadable."""
    return manifest.safe_manifest(self.path(version))

  def read_log(self, log: layout.Log) -> list[dict[str, Any]]:
    return remote.read_log(self.base, log.folder)

  def append_log(self, log: layout.Log, entry: Mapping[str, Any]) -> None:
    remote.append_log(self.base, log.folder, entry)

  def prune(self, keep_versions: int, live: int | None) -> list[int]:
    return remote.prune(self.base, keep_versions, live)

  def _staged(self, plan: list[tuple[str, str]], files: dict[str, dict[str, Any]]) -> Staged:
    return Staged(
      files,
      lambda version, version_manifest: remote.upload_version(
        self.base, version, plan, version_manifest
      ),
    )

  def stage_push(
    self, saved_model_dir: str, variants: Mapping[str, str], extra_trees: Mapping[str, str]
  ) -> Staged:
    """Plans the uploads and hashes the local files; nothing is written before `publish`."""
    plan = remote.plan_files(saved_model_dir, variants, extra_trees, layout.VARIANTS_SUBDIR)
    return self._staged(plan, remote.digest_files(plan))

  def stage_copy(self, version: int, files: Mapping[str, Any]) -> Staged:
    """Plans copying a version's files; `publish` copies them, then writes the manifest."""
    return self._staged(remote.plan_copy(self.path(version), files), dict(files))


Folder = LocalFolder | RemoteFolder


def folder(base: str) -> Folder:
  """The folder of a model's base path (local or a URI), to read without a lock."""
  return RemoteFolder(base) if storage.is_remote(base) else LocalFolder(base)


def open_folder(base: str, lock_timeout_s: float, *, push: bool) -> Folder:
  """The folder for a model's base path (local or a URI), to write in a `with` block.

  A push creates a missing local folder and, on an object store, deletes the version folders
  that dead pushes left without a manifest. A rollback does neither: the caller reports a
  missing folder, and incomplete versions wait for the next push.
  """
  if storage.is_remote(base):
    return RemoteFolder(base, remove_incomplete=push)
  if push:
    os.makedirs(base, exist_ok=True)
  return LocalFolder(base, lock_timeout_s)


def verify(path: str, unlisted: bool = True) -> list[str]:
  """Problems of a version folder (local or on an object store); [] when it is intact. A file
  the manifest does not list is one where `unlisted` (local folders only)."""
  return remote.verify(path) if storage.is_remote(path) else local.verify(path, unlisted)
