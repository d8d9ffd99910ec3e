"""Local and object-store model folders behind the one interface that push and rollback use.

Both kinds publish a version the same way: stage its files (a local staging folder, or a plan
of uploads), then `publish` it under a number, with manifest.json last. What differs, and lives
here, is how: a local folder is locked, and its version appears by one rename
(`local_store`); an object store has neither, and a version is complete once its manifest
exists (`object_store_lib`).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from components import serving_layout, storage
from components.pusher import inventory, local_store, object_store_lib
from components.pusher.serving_paths import PusherError


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


class _Folder:
  """What both kinds of folder compute alike from their `versions` and `manifest`."""

  def versions(self) -> list[int]:
    raise NotImplementedError

  def manifest(self, version: int) -> dict[str, Any]:
    raise NotImplementedError

  def live(self) -> tuple[int | None, dict[str, Any]]:
    """The live version (the highest) and its manifest; (None, {}) when there is none."""
    versions = self.versions()
    return (versions[-1], self.manifest(versions[-1])) if versions else (None, {})


class LocalFolder(_Folder):
  """A local model folder: locked in a `with` block, and cleared of dead writers' leftovers."""

  def __init__(self, base: str, lock_timeout_s: float):
    self.base = base
    self._lock = local_store.locked(base, lock_timeout_s)

  def __enter__(self) -> LocalFolder:
    self._lock.__enter__()
    local_store.clean_leftovers(self.base)
    return self

  def __exit__(self, *exc: object) -> None:
    self._lock.__exit__(*exc)

  def path(self, version: int) -> str:
    return os.path.join(self.base, str(version))

  def versions(self) -> list[int]:
    """The versions, ascending; the last one is live."""
    return local_store.versions_in(self.base)

  def taken(self) -> list[int]:
    """Every number in use, for `serving_layout.next_version`."""
    return self.versions()

  def manifest(self, version: int) -> dict[str, Any]:
    return inventory.safe_manifest(self.path(version))

  def read_history(self) -> list[dict[str, Any]]:
    return local_store.read_history(self.base)

  def append_history(self, entry: Mapping[str, Any]) -> None:
    local_store.append_history(self.base, entry)

  def prune(self, keep_versions: int) -> list[int]:
    return local_store.prune(self.base, keep_versions)

  def _staged(self, staging: str, files: dict[str, dict[str, Any]]) -> Staged:
    return Staged(
      files,
      lambda version, manifest: local_store.publish(self.base, staging, version, manifest),
      lambda: shutil.rmtree(staging),
    )

  def stage_push(
    self, saved_model_dir: str, variants: Mapping[str, str], extra_trees: Mapping[str, str]
  ) -> Staged:
    """Copies (and hashes) the SavedModel, the variants and the extra folders into staging."""
    staging = local_store.new_staging(self.base)
    files: dict[str, dict[str, Any]] = {}
    local_store.copy_tree(saved_model_dir, staging, "", files)
    for name in sorted(variants):
      rel = os.path.join(serving_layout.VARIANTS_SUBDIR, name)
      src = variants[name]
      if os.path.isdir(src):
        local_store.copy_tree(src, staging, rel, files)
      else:
        local_store.copy_tree_file(src, staging, os.path.join(rel, os.path.basename(src)), files)
    for rel, src in sorted(extra_trees.items()):
      local_store.copy_tree(src, staging, rel, files)
    return self._staged(staging, files)

  def stage_copy(self, version: int, files: Mapping[str, Any]) -> Staged:
    """Copies a version's files (all but its manifest) into staging, checked against `files`."""
    staging = local_store.new_staging(self.base)
    copied: dict[str, dict[str, Any]] = {}
    skip = {serving_layout.MANIFEST_FILE}
    local_store.copy_tree(self.path(version), staging, "", copied, skip=skip)
    if copied != files:
      shutil.rmtree(staging)
      raise PusherError(f"Version {version} changed while it was being copied; try again.")
    return self._staged(staging, copied)


class RemoteFolder(_Folder):
  """A model folder on an object store: no lock, so one writer per model at a time.

  Args:
    base: The model folder's URI.
    remove_incomplete: Delete the version folders that dead pushes left without a manifest
      on entering (a push does; a rollback leaves them).
  """

  def __init__(self, base: str, remove_incomplete: bool):
    self.base = base
    self._remove_incomplete = remove_incomplete
    self._incomplete: list[int] = []

  def __enter__(self) -> RemoteFolder:
    _, self._incomplete = object_store_lib.versions(self.base)
    if self._remove_incomplete:
      object_store_lib.remove_incomplete(self.base, self._incomplete)
    return self

  def __exit__(self, *exc: object) -> None:
    pass

  def path(self, version: int) -> str:
    return f"{self.base}/{version}"

  def versions(self) -> list[int]:
    """The complete versions, ascending; the last one is live."""
    return object_store_lib.versions(self.base)[0]

  def taken(self) -> list[int]:
    """Every number in use, incomplete folders' too: TF Serving may have loaded one of them."""
    return sorted({*self.versions(), *self._incomplete})

  def manifest(self, version: int) -> dict[str, Any]:
    return object_store_lib.read_manifest(self.path(version))

  def read_history(self) -> list[dict[str, Any]]:
    return object_store_lib.read_history(self.base)

  def append_history(self, entry: Mapping[str, Any]) -> None:
    object_store_lib.append_history(self.base, entry)

  def prune(self, keep_versions: int) -> list[int]:
    removed = object_store_lib.prune(self.base, keep_versions)
    if removed:
      self.append_history({"time": serving_layout.utc_now(), "event": "prune", "versions": removed})
    return removed

  def _staged(self, plan: list[tuple[str, str]], files: dict[str, dict[str, Any]]) -> Staged:
    return Staged(
      files,
      lambda version, manifest: object_store_lib.upload_version(self.base, version, plan, manifest),
    )

  def stage_push(
    self, saved_model_dir: str, variants: Mapping[str, str], extra_trees: Mapping[str, str]
  ) -> Staged:
    """Plans the uploads and hashes the local files; nothing is written before `publish`."""
    plan = object_store_lib.plan_files(
      saved_model_dir, variants, extra_trees, serving_layout.VARIANTS_SUBDIR
    )
    return self._staged(plan, object_store_lib.digest_files(plan))

  def stage_copy(self, version: int, files: Mapping[str, Any]) -> Staged:
    """Plans copying a version's files; `publish` copies them, then writes the manifest."""
    return self._staged(object_store_lib.plan_copy(self.path(version), files), dict(files))


def open_folder(base: str, lock_timeout_s: float, *, push: bool) -> LocalFolder | RemoteFolder:
  """The folder for a model's base path (local or a URI), to use in a `with` block.

  A push creates a missing local folder and, on an object store, deletes the version folders
  that dead pushes left without a manifest. A rollback does neither: the caller reports a
  missing folder, and incomplete versions wait for the next push.
  """
  if storage.is_remote(base):
    return RemoteFolder(base, remove_incomplete=push)
  if push:
    os.makedirs(base, exist_ok=True)
  return LocalFolder(base, lock_timeout_s)
