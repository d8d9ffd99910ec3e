"""Publishing a version: a SavedModel and its variants as the next version, and retention.

The serving folder may be local (`local`: lock, staging folder, fsync, rename) or an object
store (`remote`: manifest last); `store` puts both behind one interface. Plain Python: no TFX
or TensorFlow imports for a local folder, so the crash tests run it cheaply in a subprocess.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from typing import Any

from components import storage
from components.serving import history, layout, live, local, manifest, paths, store
from components.serving.paths import PusherError


@dataclasses.dataclass(frozen=True)
class PushResult:
  """Outcome of `push_version` or `rollback.rollback`.

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
  lock_timeout_s: float = local.DEFAULT_LOCK_TIMEOUT_S,
  source: Mapping[str, Any] | None = None,
  evaluated_while_live: int | None = None,
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
    manifest_extra: More JSON-serialisable manifest fields (data spans, lineage, ...).
    keep_versions: How many of the newest versions to keep; the live one is never deleted.
    skip_if_identical: Push nothing when the content equals the live version's, or equals
      content that a rollback moved away from (so a nightly rerun does not undo a rollback).
    lock_timeout_s: How long to wait for another push holding the lock.
    source: What to record as the origin in the manifest (the artifact URIs where the files
      were first copied from remote storage); defaults to the given local paths.
    evaluated_while_live: The version live when the model was evaluated (0: none, None: not
      checked); nothing is pushed over another one (pushed beside this run, or a rollback).

  Returns:
    A `PushResult`.

  Raises:
    PusherError: On invalid names, a missing SavedModel or variant, or a lock timeout.
  """
  base = paths.model_dir(serving_dir, model_name)
  keep_versions = check_keep_versions(keep_versions)
  variants, metrics, extra = _checked_inputs(
    saved_model_dir, variants or {}, variant_metrics or {}, manifest_extra or {}
  )
  if source is None:
    source = _default_source(base, saved_model_dir, variants)
  with store.open_folder(base, lock_timeout_s, push=True) as folder:
    staged = folder.stage_push(saved_model_dir, variants, extra_trees or {})
    content = manifest.content_digest(staged.files)
    entries = folder.read_log(layout.HISTORY)
    current = live.live_in(folder)
    live_number = current.version if current else None
    skip = _skip_reason(current, content, entries, skip_if_identical, evaluated_while_live)
    if skip:
      staged.discard()
      live_manifest = current.manifest if current else None
      return PushResult(False, None, None, skip, live_number, content, (), live_manifest)
    version_manifest = manifest.push_manifest(
      model_name=model_name,
      version=history.next_version(folder.taken(), entries),
      created_at=layout.utc_now(),
      content=content,
      files=staged.files,
      variant_metrics=metrics,
      source=source,
      extra=extra,
    )
    version = version_manifest[manifest.VERSION_FIELD]
    path = staged.publish(version, version_manifest)
    folder.append_log(layout.HISTORY, history.push_entry(version_manifest, live_number))
    removed = retire(folder, keep_versions, version)
  return PushResult(True, version, path, "", version, content, tuple(removed), version_manifest)


def _skip_reason(
  current: live.LiveVersion | None,
  content: str,
  entries: Iterable[Mapping[str, Any]],
  skip_if_identical: bool,
  evaluated_while_live: int | None,
) -> str:
  """Why to publish nothing ('' to publish): `_identical_reason`, else `_moved_reason`."""
  identical = skip_if_identical and _identical_reason(current, content, entries)
  return identical or _moved_reason(current.version if current else None, evaluated_while_live)


def _moved_reason(live_number: int | None, evaluated_while_live: int | None) -> str:
  """Why not to push a model evaluated while another version was live than the one live now
  ('' where the same one is, or nothing is live now, or the evaluation did not say)."""
  if evaluated_while_live is None or live_number in (None, evaluated_while_live):
    return ""
  then = f"version {evaluated_while_live}" if evaluated_while_live else "nothing"
  return (
    f"version {live_number} went live during this run, which compared the model with what was "
    f"live when it began ({then}); the next run compares with version {live_number}"
  )


def _identical_reason(
  current: live.LiveVersion | None, content: str, entries: Iterable[Mapping[str, Any]]
) -> str:
  """Why a candidate with this content digest is not pushed, or '' when it is new."""
  if current is not None and current.manifest.get(manifest.CONTENT_SHA256_FIELD) == content:
    return (
      f"identical to live version {current.version} (same sha256 of every file); nothing pushed"
    )
  rejected = history.rejected_contents(entries).get(content)
  if rejected:
    return (
      f"identical to version {rejected.get('from')}, which was rolled back at "
      f"{rejected.get('time')} ({rejected.get('reason') or 'no reason given'}); not re-pushing "
      "it (use rollback --to to restore it deliberately)"
    )
  return ""


def _checked_inputs(
  saved_model_dir: str,
  variants: Mapping[str, str],
  variant_metrics: Mapping[str, Mapping[str, Any]],
  manifest_extra: Mapping[str, Any],
) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, Any]]:
  """push_version's inputs checked before anything is locked or written: (variants, metrics
  per variant, manifest_extra) as plain dicts."""
  if not local.has_saved_model(saved_model_dir):
    raise PusherError(
      f"No SavedModel at {saved_model_dir!r} (saved_model.pb missing); check that the Trainer "
      "exported its model to Format-Serving."
    )
  variants = dict(variants)
  for name, src in variants.items():
    paths.validate_model_name(name, "variant name")
    if not os.path.exists(src):
      raise PusherError(
        f"Variant {name!r} source {src!r} does not exist; rerun the Optimizer, or push without "
        "that variant."
      )
  metrics = {name: dict(variant_metrics.get(name, {})) for name in variants}
  extra = dict(manifest_extra)
  clash = manifest.RESERVED_FIELDS.intersection(extra)
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


def retire(folder: store.Folder, keep_versions: int, live_number: int | None) -> list[int]:
  """Deletes all but the newest `keep_versions` versions of an open folder, never the live one,
  and records the deletion in the history."""
  removed = folder.prune(keep_versions, live_number)
  if removed:
    folder.append_log(layout.HISTORY, history.prune_entry(removed))
  return removed
