"""Atomic, versioned pushes of SavedModels (plus optimized variants) into a TF Serving tree.

Plain Python: no TFX or TensorFlow imports, so this module is cheap to import from the CLI
(`pipeline/rollback.py`) and from crash tests that run it in a subprocess. The serving folder
may be local (`local_store`: lock, staging folder, fsync, rename) or an object store
(`object_store_lib`: manifest last); `folders` puts both behind one interface. Reading and
verifying versions is `inventory`'s, rolling back `rollback_lib`'s.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from components import serving_layout, storage
from components.pusher import folders, inventory, local_store
from components.pusher.serving_paths import PusherError, model_dir, validate_model_name

# Keys the library owns in manifest.json; callers' manifest_extra must not overwrite them.
_RESERVED_MANIFEST_KEYS = frozenset(
  {
    "format",
    "model_name",
    "version",
    "created_at",
    "event",
    "content_sha256",
    "files",
    "variants",
    "source",
    "republished_from",
  }
)


@dataclasses.dataclass(frozen=True)
class PushResult:
  """Outcome of `push_version` or `rollback`.

  Attributes:
    pushed: True when a new version folder was published.
    version: The published version, or None when nothing was pushed.
    path: Absolute path of the published version folder, or None.
    reason: One sentence on why nothing was pushed (empty when pushed).
    live_version: The version TF Serving's `latest` policy serves after this call.
    content_sha256: Digest over all pushed files (paths and contents).
    removed_versions: Versions deleted by retention during this call.
    manifest: The manifest written into the version (or that of the live version on a skip).
  """

  pushed: bool
  version: int | None
  path: str | None
  reason: str
  live_version: int | None
  content_sha256: str
  removed_versions: tuple[int, ...] = ()
  manifest: Mapping[str, Any] | None = None


def check_keep_versions(keep_versions: int) -> int:
  """Returns `keep_versions` once it is an int of at least 1."""
  if isinstance(keep_versions, bool) or not isinstance(keep_versions, int) or keep_versions < 1:
    raise PusherError(
      f"keep_versions must be an integer >= 1 (got {keep_versions!r}); keep at least 2 to be "
      "able to roll back."
    )
  return keep_versions


def push_version(
  serving_dir: str,
  model_name: str,
  saved_model_dir: str,
  *,
  variants: Mapping[str, str] | None = None,
  variant_metrics: Mapping[str, Mapping[str, Any]] | None = None,
  extra_trees: Mapping[str, str] | None = None,
  manifest_extra: Mapping[str, Any] | None = None,
  keep_versions: int = 5,
  skip_if_identical: bool = True,
  lock_timeout_s: float = local_store.DEFAULT_LOCK_TIMEOUT_S,
  source: Mapping[str, Any] | None = None,
) -> PushResult:
  """Publishes a SavedModel and its variants as the next version, atomically.

  The whole call holds an exclusive lock on the model folder, so concurrent pushes get
  distinct, increasing versions. Files are copied (and hashed) into a dot-prefixed staging
  folder, fsynced, and the staging folder is renamed to the numeric version: TF Serving never
  sees a half-written version, and a crash leaves only a staging folder that the next call
  removes.

  Args:
    serving_dir: Absolute serving root that TF Serving watches.
    model_name: Model name; the model's base path is ``<serving_dir>/<model_name>``.
    saved_model_dir: SavedModel folder (holds ``saved_model.pb``) to serve.
    variants: Optimized variants to ship alongside, name -> folder (or single file).
    variant_metrics: Metrics per variant name, recorded in the manifest.
    extra_trees: More folders to ship, version-relative path -> source folder (for example
      the Transform graph that variants without preprocessing need).
    manifest_extra: More JSON-serialisable manifest entries (data spans, lineage, ...).
    keep_versions: How many of the newest versions to keep; the live one is never deleted.
    skip_if_identical: Push nothing when the content equals the live version's, or equals
      content that a rollback moved away from (so a nightly rerun does not undo a rollback).
    lock_timeout_s: How long to wait for another push holding the lock.
    source: What to record as the origin in the manifest (e.g. the artifact URIs when the
      files were first copied from remote storage); defaults to the given local paths.

  Returns:
    A `PushResult`.

  Raises:
    PusherError: On invalid names, a missing SavedModel or variant, or a lock timeout.
  """
  base = model_dir(serving_dir, model_name)
  keep_versions = check_keep_versions(keep_versions)
  variants, metrics, extra = _checked_inputs(
    saved_model_dir, variants or {}, variant_metrics or {}, manifest_extra or {}
  )
  if source is None:
    source = _default_source(base, saved_model_dir, variants)
  with folders.open_folder(base, lock_timeout_s, push=True) as folder:
    staged = folder.stage_push(saved_model_dir, variants, extra_trees or {})
    content = serving_layout.content_digest(staged.files)
    history = folder.read_history()
    live, live_manifest = folder.live()
    skip_reason = skip_if_identical and serving_layout.identical_reason(
      live, live_manifest, content, history
    )
    if skip_reason:
      staged.discard()
      return PushResult(False, None, None, skip_reason, live, content, (), live_manifest or None)

    manifest = serving_layout.push_manifest(
      model_name=model_name,
      version=serving_layout.next_version(folder.taken(), history),
      created_at=serving_layout.utc_now(),
      content=content,
      files=staged.files,
      variant_metrics=metrics,
      source=source,
      extra=extra,
    )
    version = manifest["version"]
    path = staged.publish(version, manifest)
    folder.append_history(serving_layout.push_history_entry(manifest, live))
    removed = folder.prune(keep_versions)
  return PushResult(True, version, path, "", version, content, tuple(removed), manifest)


def _checked_inputs(
  saved_model_dir: str,
  variants: Mapping[str, str],
  variant_metrics: Mapping[str, Mapping[str, Any]],
  manifest_extra: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, Any]]:
  """push_version's inputs checked before anything is locked or written: (variants, metrics
  per variant, manifest_extra) as plain dicts."""
  if not inventory.has_saved_model(saved_model_dir):
    raise PusherError(
      f"No SavedModel at {saved_model_dir!r} (saved_model.pb missing); check that the Trainer "
      "exported its model to Format-Serving."
    )
  variants = dict(variants)
  for name, src in variants.items():
    validate_model_name(name, "variant name")
    if not os.path.exists(src):
      raise PusherError(
        f"Variant {name!r} source {src!r} does not exist; rerun the Optimizer, or push without "
        "that variant."
      )
  metrics = {name: dict(variant_metrics.get(name, {})) for name in variants}
  extra = dict(manifest_extra)
  clash = _RESERVED_MANIFEST_KEYS.intersection(extra)
  if clash:
    raise ValueError(f"manifest_extra may not set reserved keys {sorted(clash)}")
  return variants, metrics, extra


def _default_source(base: str, saved_model_dir: str, variants: Mapping[str, str]) -> dict:
  """The manifest's `source` when the caller names none: the paths the files came from."""
  if storage.is_remote(base):
    return {"saved_model": saved_model_dir}
  return {
    "saved_model": os.path.abspath(saved_model_dir),
    "variants": {k: os.path.abspath(v) for k, v in variants.items()},
  }


def prune_versions(
  serving_dir: str,
  model_name: str,
  keep_versions: int,
  lock_timeout_s: float = local_store.DEFAULT_LOCK_TIMEOUT_S,
) -> list[int]:
  """Deletes all but the newest `keep_versions` versions; never the live one.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.
    keep_versions: How many of the newest versions to keep (at least 1).
    lock_timeout_s: How long to wait for another push holding the lock.

  Returns:
    The versions deleted.
  """
  base = model_dir(serving_dir, model_name)
  keep_versions = check_keep_versions(keep_versions)
  if not os.path.isdir(base):
    return []
  with folders.LocalFolder(base, lock_timeout_s) as folder:
    return folder.prune(keep_versions)


def record_acceptance(
  serving_dir: str,
  model_name: str,
  columns: list[str],
  reason: str,
  lock_timeout_s: float = local_store.DEFAULT_LOCK_TIMEOUT_S,
) -> dict[str, Any]:
  """Records that changes to `columns` in the data are deliberate, against the live version.

  The data gate lets those changes through until another version goes live.

  Returns:
    The history entry written.

  Raises:
    PusherError: when nothing is live (there is nothing to accept a change against).
  """
  base = model_dir(serving_dir, model_name)
  if not storage.is_remote(base) and not os.path.isdir(base):
    raise PusherError(
      f"nothing is live under {base}: the data gate only compares with a live version, so "
      "there is no change to accept yet."
    )
  with folders.open_folder(base, lock_timeout_s, push=False) as folder:
    live, _ = folder.live()
    if live is None:
      raise PusherError(
        f"nothing is live under {base}: the data gate only compares with a live version, so "
        "there is no change to accept yet."
      )
    entry = {
      "time": serving_layout.utc_now(),
      "event": serving_layout.ACCEPT_EVENT,
      "live_version": live,
      "columns": list(columns),
      "reason": reason,
    }
    folder.append_history(entry)
  return entry
