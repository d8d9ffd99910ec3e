"""Atomic, versioned pushes of SavedModels (plus optimized variants) into a TF Serving tree.

Plain Python: no TFX or TensorFlow imports, so this module is cheap to import from the CLI
(`pipeline/rollback.py`) and from crash tests that run it in a subprocess.

Layout under ``<serving_dir>/<model_name>/`` (TF Serving's model base path)::

  .lock                     exclusive lock held for the whole of a push, rollback or prune
  .staging-<uuid>/          a version being assembled; renamed to ``<N>/`` when complete
  .trash-<N>-<uuid>/        a version being deleted by retention (renamed away first)
  history.jsonl             one JSON object per push / rollback / prune, append-only
  <N>/                      a complete version; TF Serving loads the highest N (``latest`` policy)
    saved_model.pb
    variables/ ...
    assets/ ...             (if the SavedModel has assets)
    assets.extra/variants/<variant>/...   optimizer variants, ignored by TF Serving
    manifest.json           version, sha256 of every file, variant metrics, spans, lineage

TF Serving's file-system storage path source treats only all-digit child names as versions,
so the dot-prefixed staging/trash folders and ``history.jsonl`` are invisible to it. Variants
live *inside* the version folder (under ``assets.extra/``, which TF Serving's SavedModel
loader only reads for warm-up requests) so that one ``rename`` publishes the model, its
variants and its manifest together, and one folder removal retires them together.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import filelock

from components import serving_layout, storage
from components.errors import UserInputError
from components.pusher import object_store_lib

LOCK_FILE = ".lock"
STAGING_PREFIX = ".staging-"
TRASH_PREFIX = ".trash-"
DEFAULT_LOCK_TIMEOUT_S = 600.0

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_COPY_CHUNK = 1 << 20
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


class PusherError(UserInputError):
  """A problem the user can fix (bad name, missing model, nothing to roll back to)."""


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


# ----------------------------------------------------------------------------- validation


def validate_model_name(name: str, what: str = "model name") -> str:
  """Checks that a model (or variant) name is a single safe path component.

  Args:
    name: The name to check.
    what: How to call the name in the error message.

  Returns:
    The name, unchanged.

  Raises:
    PusherError: If the name is empty, contains a slash, starts with a dot (``..`` included),
      or uses characters other than letters, digits, ``.``, ``_`` and ``-``.
  """
  if not isinstance(name, str) or not _NAME_RE.match(name):
    raise PusherError(
      f"Invalid {what} {name!r}: use 1-128 letters, digits, '.', '_' or '-', starting with a "
      "letter or digit (no slashes, no '..', no absolute paths)."
    )
  return name


def parse_version(text: str | int) -> int:
  """Parses a version number as TF Serving understands it (an all-digit folder name).

  Args:
    text: The version, e.g. ``"3"`` or ``3``.

  Returns:
    The version as an int.

  Raises:
    PusherError: If the version is not a non-negative integer written with digits only.
  """
  if isinstance(text, bool):
    raise PusherError(f"Invalid version {text!r}: pass a non-negative integer such as 3.")
  if isinstance(text, int):
    if text < 0:
      raise PusherError(f"Invalid version {text!r}: pass a non-negative integer such as 3.")
    return text
  if not isinstance(text, str) or not serving_layout.is_version_name(text):
    raise PusherError(
      f"Invalid version {text!r}: pass a non-negative integer such as 3 (digits only)."
    )
  return int(text)


_URI = re.compile(r"^[a-z][a-z0-9+.-]*://[^/]+(/.*)?$")


def validate_serving_dir(serving_dir: str) -> str:
  """Checks a serving root: an absolute local path, or an object-store URI (gs://, s3://).

  Args:
    serving_dir: Root folder that TF Serving watches (one sub-folder per model).

  Returns:
    The normalised path (URIs without a trailing slash).

  Raises:
    PusherError: If the path is empty, relative, or a malformed URI.
  """
  if not isinstance(serving_dir, str) or not serving_dir:
    raise PusherError("serving_dir is empty: pass an absolute local path such as /srv/models.")
  if storage.is_remote(serving_dir):
    if not _URI.match(serving_dir) or "/../" in f"{serving_dir}/":
      raise PusherError(
        f"serving_dir {serving_dir!r} is not a valid URI; pass e.g. gs://bucket/models."
      )
    return serving_dir.rstrip("/")
  if not os.path.isabs(serving_dir):
    raise PusherError(
      f"serving_dir {serving_dir!r} is relative; pass an absolute path such as /srv/models."
    )
  return os.path.normpath(serving_dir)


def model_dir(serving_dir: str, model_name: str) -> str:
  """Returns ``<serving_dir>/<model_name>`` after validating both parts.

  Args:
    serving_dir: Serving root (absolute local path or URI).
    model_name: Model name (one path component).

  Returns:
    The model's base path, the folder TF Serving is pointed at.

  Raises:
    PusherError: If either part is invalid.
  """
  root = validate_serving_dir(serving_dir)
  name = validate_model_name(model_name)
  if storage.is_remote(root):
    return f"{root}/{name}"
  path = os.path.join(root, name)
  # Belt and braces: the name regex already forbids separators and dot-dot.
  if os.path.dirname(path) != root:
    raise PusherError(f"Model name {model_name!r} would escape the serving root {root!r}.")
  return path


# ----------------------------------------------------------------------------- reading


def list_versions(serving_dir: str, model_name: str) -> list[int]:
  """Lists the numeric version folders that TF Serving would consider, ascending.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    Sorted version numbers; empty if the model folder does not exist.
  """
  base = model_dir(serving_dir, model_name)
  if storage.is_remote(base):
    return object_store_lib.versions(base)[0]
  if not os.path.isdir(base):
    return []
  return _versions_in(base)


def live_version(serving_dir: str, model_name: str) -> int | None:
  """Returns the version TF Serving's default ``latest`` policy serves: the highest number.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    The highest version, or None when there is none.
  """
  versions = list_versions(serving_dir, model_name)
  return versions[-1] if versions else None


def version_path(serving_dir: str, model_name: str, version: int | str) -> str:
  """Returns the folder of one version after validating all parts.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.
    version: Version number.

  Returns:
    ``<serving_dir>/<model_name>/<version>``.

  Raises:
    PusherError: If any part is invalid.
  """
  return os.path.join(model_dir(serving_dir, model_name), str(parse_version(version)))


def read_manifest(path: str) -> dict[str, Any]:
  """Reads ``manifest.json`` of a version folder.

  Args:
    path: The version folder.

  Returns:
    The manifest as a dict.

  Raises:
    PusherError: If the manifest is missing or not valid JSON.
  """
  manifest_path = os.path.join(path, serving_layout.MANIFEST_FILE)
  try:
    if storage.is_remote(path):
      manifest = object_store_lib.read_manifest(path)
    else:
      with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
  except FileNotFoundError as e:
    raise PusherError(
      f"{manifest_path} is missing; this folder was not written by the Pusher."
    ) from e
  except json.JSONDecodeError as e:
    raise PusherError(
      f"{manifest_path} is not valid JSON ({e}); restore it from a backup, or roll back to "
      "another version (rollback.py --list shows which are ok)."
    ) from e
  if not isinstance(manifest, dict):
    raise PusherError(
      f"{manifest_path} does not hold a JSON object; restore it from a backup, or roll back to "
      "another version (rollback.py --list shows which are ok)."
    )
  return manifest


def verify_version(path: str) -> list[str]:
  """Checks that a version folder is complete and that every file matches its sha256.

  Args:
    path: The version folder.

  Returns:
    A list of problems; empty when the version is complete and intact.
  """
  if storage.is_remote(path):
    return object_store_lib.verify(path)
  problems = []
  if not os.path.isfile(os.path.join(path, "saved_model.pb")) and not os.path.isfile(
    os.path.join(path, "saved_model.pbtxt")
  ):
    problems.append("saved_model.pb is missing")
  try:
    manifest = read_manifest(path)
  except PusherError as e:
    return [*problems, str(e)]
  files = manifest.get("files", {})
  for rel, info in sorted(files.items()):
    full = os.path.join(path, rel)
    if not os.path.isfile(full):
      problems.append(f"{rel} is missing")
      continue
    digest, _ = _sha256_file(full)
    if digest != info.get("sha256"):
      problems.append(f"{rel} has sha256 {digest}, manifest says {info.get('sha256')}")
  on_disk = set(_walk_files(path)) - {serving_layout.MANIFEST_FILE}
  for extra in sorted(on_disk - set(files)):
    problems.append(f"{extra} is not listed in the manifest")
  if files and manifest.get("content_sha256") != _content_digest(files):
    problems.append("content_sha256 does not match the listed files")
  return problems


def read_history(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """Reads the push/rollback/prune history, skipping a line torn by a crash.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    The history entries, oldest first.
  """
  base = model_dir(serving_dir, model_name)
  if storage.is_remote(base):
    return object_store_lib.read_history(base)
  path = os.path.join(base, serving_layout.HISTORY_FILE)
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


def rolled_back_fingerprints(serving_dir: str, model_name: str) -> dict[str, int]:
  """Training fingerprints that rollbacks moved away from, with the version each left."""
  out = {}
  for entry in read_history(serving_dir, model_name):
    fingerprint = entry.get("from_training_fingerprint")
    if entry.get("event") == "rollback" and fingerprint:
      out[fingerprint] = entry.get("from")
  return out


def describe_versions(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """Summarises every version for listing: live marker, event, variants and their metrics.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    One dict per version, ascending, with keys ``version``, ``live``, ``created_at``,
    ``event``, ``republished_from``, ``content_sha256``, ``problems`` and ``variants``.
  """
  versions = list_versions(serving_dir, model_name)
  live = versions[-1] if versions else None
  rows = []
  for version in versions:
    path = version_path(serving_dir, model_name, version)
    try:
      manifest = read_manifest(path)
    except PusherError:
      manifest = {}
    rows.append(
      {
        "version": version,
        "live": version == live,
        "created_at": manifest.get("created_at"),
        "event": manifest.get("event"),
        "republished_from": (manifest.get("republished_from") or {}).get("version"),
        "content_sha256": manifest.get("content_sha256"),
        "data_spans": manifest.get("data_spans"),
        "problems": verify_version(path),
        "variants": {
          name: info.get("metrics", {}) for name, info in manifest.get("variants", {}).items()
        },
      }
    )
  return rows


# ----------------------------------------------------------------------------- writing


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
  lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
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
  keep_versions = _check_keep_versions(keep_versions)
  if not _has_saved_model(saved_model_dir):
    raise PusherError(
      f"No SavedModel at {saved_model_dir!r} (saved_model.pb missing); check that the Trainer "
      "exported its model to Format-Serving."
    )
  variants = dict(variants or {})
  for name, src in variants.items():
    validate_model_name(name, "variant name")
    if not os.path.exists(src):
      raise PusherError(
        f"Variant {name!r} source {src!r} does not exist; rerun the Optimizer, or push without "
        "that variant."
      )
  metrics = {name: dict((variant_metrics or {}).get(name, {})) for name in variants}
  extra = dict(manifest_extra or {})
  clash = _RESERVED_MANIFEST_KEYS.intersection(extra)
  if clash:
    raise ValueError(f"manifest_extra may not set reserved keys {sorted(clash)}")

  if storage.is_remote(base):
    return _push_remote(
      base,
      model_name,
      saved_model_dir,
      variants,
      metrics,
      dict(extra_trees or {}),
      extra,
      keep_versions,
      skip_if_identical,
      source,
    )
  os.makedirs(base, exist_ok=True)
  with _locked(base, lock_timeout_s):
    _clean_leftovers(base)
    staging = os.path.join(base, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    os.mkdir(staging)
    files: dict[str, dict[str, Any]] = {}
    _copy_tree(saved_model_dir, staging, "", files)
    for name in sorted(variants):
      rel = os.path.join(serving_layout.VARIANTS_SUBDIR, name)
      src = variants[name]
      if os.path.isdir(src):
        _copy_tree(src, staging, rel, files)
      else:
        _copy_tree_file(src, staging, os.path.join(rel, os.path.basename(src)), files)
    for rel, src in sorted((extra_trees or {}).items()):
      _copy_tree(src, staging, rel, files)
    content = _content_digest(files)

    history = read_history(serving_dir, model_name)
    live = _highest(base)
    live_manifest = _safe_manifest(os.path.join(base, str(live))) if live is not None else {}
    skip_reason = ""
    if skip_if_identical:
      skip_reason = serving_layout.identical_reason(live, live_manifest, content, history)
    if skip_reason:
      shutil.rmtree(staging)
      return PushResult(False, None, None, skip_reason, live, content, (), live_manifest or None)

    manifest = serving_layout.push_manifest(
      model_name=model_name,
      version=serving_layout.next_version(_versions_in(base), history),
      created_at=_utc_now(),
      content=content,
      files=files,
      variant_metrics=metrics,
      source=source
      if source is not None
      else {
        "saved_model": os.path.abspath(saved_model_dir),
        "variants": {k: os.path.abspath(v) for k, v in variants.items()},
      },
      extra=extra,
    )
    version = manifest["version"]
    path = _publish(base, staging, version, manifest)
    _append_history(base, serving_layout.push_history_entry(manifest, live))
    removed = _prune(base, keep_versions)
  return PushResult(True, version, path, "", version, content, tuple(removed), manifest)


def _push_remote(
  base: str,
  model_name: str,
  saved_model_dir: str,
  variants: dict[str, str],
  metrics: dict[str, dict[str, Any]],
  extra_trees: dict[str, str],
  extra: dict[str, Any],
  keep_versions: int,
  skip_if_identical: bool,
  source: Mapping[str, Any] | None,
) -> PushResult:
  """push_version on an object store: files first, manifest last (see object_store_lib)."""
  store = object_store_lib
  files = store.plan_files(saved_model_dir, variants, extra_trees, serving_layout.VARIANTS_SUBDIR)
  digests = store.digest_files(files)
  content = _content_digest(digests)
  history = store.read_history(base)
  complete, incomplete = store.versions(base)
  store.remove_incomplete(base, incomplete)
  live = complete[-1] if complete else None
  live_manifest = store.read_manifest(f"{base}/{live}") if live is not None else {}
  if skip_if_identical:
    reason = serving_layout.identical_reason(live, live_manifest, content, history)
    if reason:
      return PushResult(False, None, None, reason, live, content, (), live_manifest or None)
  manifest = serving_layout.push_manifest(
    model_name=model_name,
    version=serving_layout.next_version([*complete, *incomplete], history),
    created_at=_utc_now(),
    content=content,
    files=digests,
    variant_metrics=metrics,
    source=source if source is not None else {"saved_model": saved_model_dir},
    extra=extra,
  )
  version = manifest["version"]
  path = store.upload_version(base, version, files, manifest)
  store.append_history(base, serving_layout.push_history_entry(manifest, live))
  removed = store.prune(base, keep_versions)
  if removed:
    store.append_history(base, {"time": _utc_now(), "event": "prune", "versions": removed})
  return PushResult(True, version, path, "", version, content, tuple(removed), manifest)


def rollback(
  serving_dir: str,
  model_name: str,
  *,
  to_version: int | str | None = None,
  previous: bool = False,
  reason: str = "",
  keep_versions: int | None = None,
  lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
) -> PushResult:
  """Makes an earlier version live by re-publishing its files as a new highest version.

  TF Serving's default ``latest`` version policy serves the highest version number, so
  re-publishing (rather than deleting newer versions or renaming folders) is the only change
  it picks up without a config change, and it keeps every version for audit and roll-forward.
  The copy is verified against the source manifest while it is written, and goes through the
  same staging + rename path as a push.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.
    to_version: The version to restore. Exactly one of `to_version` and `previous` is needed.
    previous: Restore the newest version older than the live one whose content differs from
      the live content and was not itself rolled back from.
    reason: Free text recorded in the history.
    keep_versions: When given, apply retention after the rollback; by default nothing is
      deleted.
    lock_timeout_s: How long to wait for another push holding the lock.

  Returns:
    A `PushResult` for the new version.

  Raises:
    PusherError: If there is nothing to roll back to, the target is missing, already live or
      fails verification, or the arguments are inconsistent.
  """
  base = model_dir(serving_dir, model_name)
  if (to_version is None) == (not previous):
    raise PusherError("Pass exactly one of --to VERSION and --previous.")
  target_arg = None if to_version is None else parse_version(to_version)
  if keep_versions is not None:
    keep_versions = _check_keep_versions(keep_versions)
  if storage.is_remote(base):
    return _rollback_remote(base, model_name, target_arg, previous, reason, keep_versions)
  if not os.path.isdir(base):
    raise PusherError(
      f"No model folder at {base}; nothing has been pushed for {model_name!r}. Check "
      "--model-name (the data folder's name by default) and --serving-dir."
    )

  with _locked(base, lock_timeout_s):
    _clean_leftovers(base)
    history = read_history(serving_dir, model_name)
    versions = _versions_in(base)
    if not versions:
      raise PusherError(
        f"{base} holds no versions; nothing to roll back. Push a model first (run_local.py)."
      )
    live = versions[-1]
    live_manifest = _safe_manifest(os.path.join(base, str(live)))
    target = _rollback_target(
      model_name,
      versions,
      live_manifest,
      target_arg,
      history,
      lambda v: _safe_manifest(os.path.join(base, str(v))),
    )
    source = os.path.join(base, str(target))
    source_manifest = _checked_source(target, verify_version(source), read_manifest, source)
    _check_differs(target, source_manifest, live, live_manifest)

    staging = os.path.join(base, f"{STAGING_PREFIX}{uuid.uuid4().hex}")
    os.mkdir(staging)
    files: dict[str, dict[str, Any]] = {}
    _copy_tree(source, staging, "", files, skip={serving_layout.MANIFEST_FILE})
    if files != source_manifest["files"]:
      shutil.rmtree(staging)
      raise PusherError(f"Version {target} changed while it was being copied; try again.")
    version = serving_layout.next_version(versions, history)
    manifest = serving_layout.rollback_manifest(
      source_manifest, version=version, created_at=_utc_now(), live=live, target=target,
      reason=reason,
    )  # fmt: skip
    path = _publish(base, staging, version, manifest)
    _append_history(base, serving_layout.rollback_history_entry(manifest, live_manifest))
    removed = _prune(base, keep_versions) if keep_versions is not None else []
  return PushResult(
    True, version, path, "", version, manifest["content_sha256"], tuple(removed), manifest
  )


def _rollback_remote(
  base: str,
  model_name: str,
  target: int | None,
  previous: bool,
  reason: str,
  keep_versions: int | None,
) -> PushResult:
  """rollback() on an object store: copy the target's files to a new version, manifest last."""
  store = object_store_lib
  history = store.read_history(base)
  versions, _ = store.versions(base)
  if not versions:
    raise PusherError(f"{base} holds no complete versions; nothing to roll back.")
  live = versions[-1]
  live_manifest = store.read_manifest(f"{base}/{live}")
  target = _rollback_target(
    model_name,
    versions,
    live_manifest,
    None if previous else target,
    history,
    lambda v: store.read_manifest(f"{base}/{v}"),
  )
  source = f"{base}/{target}"
  source_manifest = _checked_source(target, store.verify(source), store.read_manifest, source)
  _check_differs(target, source_manifest, live, live_manifest)
  version = serving_layout.next_version(versions, history)
  manifest = serving_layout.rollback_manifest(
    source_manifest, version=version, created_at=_utc_now(), live=live, target=target,
    reason=reason,
  )  # fmt: skip
  path = store.copy_version(source, f"{base}/{version}", sorted(source_manifest["files"]), manifest)
  store.append_history(base, serving_layout.rollback_history_entry(manifest, live_manifest))
  removed = store.prune(base, keep_versions) if keep_versions is not None else []
  return PushResult(
    True, version, path, "", version, manifest["content_sha256"], tuple(removed), manifest
  )


def prune_versions(
  serving_dir: str,
  model_name: str,
  keep_versions: int,
  lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
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
  keep_versions = _check_keep_versions(keep_versions)
  if not os.path.isdir(base):
    return []
  with _locked(base, lock_timeout_s):
    _clean_leftovers(base)
    return _prune(base, keep_versions)


# ----------------------------------------------------------------------------- internals


def _check_keep_versions(keep_versions: int) -> int:
  if isinstance(keep_versions, bool) or not isinstance(keep_versions, int) or keep_versions < 1:
    raise PusherError(
      f"keep_versions must be an integer >= 1 (got {keep_versions!r}); keep at least 2 to be "
      "able to roll back."
    )
  return keep_versions


class _locked:
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


def _utc_now() -> str:
  return (
    datetime.datetime.now(datetime.timezone.utc)
    .isoformat(timespec="seconds")
    .replace("+00:00", "Z")
  )


def _has_saved_model(path: str) -> bool:
  return os.path.isfile(os.path.join(path, "saved_model.pb")) or os.path.isfile(
    os.path.join(path, "saved_model.pbtxt")
  )


def _versions_in(base: str) -> list[int]:
  return serving_layout.version_numbers(
    e.name for e in os.scandir(base) if e.is_dir(follow_symlinks=False)
  )


def _highest(base: str) -> int | None:
  versions = _versions_in(base)
  return versions[-1] if versions else None


def _safe_manifest(path: str) -> dict[str, Any]:
  try:
    return read_manifest(path)
  except PusherError:
    return {}


def _rollback_target(
  model_name: str,
  versions: list[int],
  live_manifest: dict[str, Any],
  to_version: int | None,
  history: list[dict[str, Any]],
  manifest_of,
) -> int:
  """The version a rollback restores: `to_version`, or with None the newest earlier version
  whose content differs from the live one and was not itself rolled back away from."""
  live = versions[-1]
  if to_version is None:
    live_content = live_manifest.get("content_sha256")
    rejected = serving_layout.rejected_contents(history)
    for version in reversed(versions[:-1]):
      content = manifest_of(version).get("content_sha256")
      if content and content != live_content and content not in rejected:
        return version
    raise PusherError(
      f"No earlier version of {model_name!r} differs from live version {live}; "
      "use --list to see the versions."
    )
  if to_version not in versions:
    raise PusherError(
      f"Version {to_version} of {model_name!r} does not exist (have {versions}); "
      "use --list to see the versions."
    )
  if to_version == live:
    raise PusherError(
      f"Version {to_version} of {model_name!r} is already live; pass another --to VERSION "
      "(--list shows them)."
    )
  return to_version


def _checked_source(target: int, problems: list[str], read, source: str) -> dict[str, Any]:
  """The manifest of the version a rollback restores, once it verifies."""
  if problems:
    raise PusherError(
      f"Version {target} fails verification ({problems[0]}); not restoring it. Pick a "
      "version whose --list status is ok."
    )
  return read(source)


def _check_differs(
  target: int, source_manifest: dict[str, Any], live: int, live_manifest: dict[str, Any]
) -> None:
  if source_manifest.get("content_sha256") == live_manifest.get("content_sha256"):
    raise PusherError(
      f"Version {target} has the same content as live version {live}; nothing to roll back. "
      "Pass an older --to VERSION (--list shows the versions)."
    )


def _walk_files(root: str) -> Iterator[str]:
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames.sort()
    for name in sorted(filenames):
      yield os.path.relpath(os.path.join(dirpath, name), root)


def _sha256_file(path: str) -> tuple[str, int]:
  digest = hashlib.sha256()
  size = 0
  with open(path, "rb") as f:
    while chunk := f.read(_COPY_CHUNK):
      digest.update(chunk)
      size += len(chunk)
  return digest.hexdigest(), size


def _content_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
  digest = hashlib.sha256()
  for rel in sorted(files):
    digest.update(f"{rel}\0{files[rel]['sha256']}\n".encode())
  return digest.hexdigest()


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


def _copy_tree_file(src: str, staging: str, rel: str, files: dict[str, dict[str, Any]]) -> None:
  dst = os.path.join(staging, rel)
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  digest, size = _copy_file(src, dst)
  files[rel] = {"sha256": digest, "size": size}


def _copy_tree(
  src_root: str,
  staging: str,
  rel_root: str,
  files: dict[str, dict[str, Any]],
  skip: frozenset[str] | set[str] = frozenset(),
) -> None:
  rels = [rel for rel in _walk_files(src_root) if rel not in skip]
  # TF tooling treats saved_model.pb as "the model is complete"; copy it last for the same
  # reason stock TFX does, although only the final rename makes the version visible.
  rels.sort(key=lambda r: (r in ("saved_model.pb", "saved_model.pbtxt"), r))
  for rel in rels:
    _copy_tree_file(os.path.join(src_root, rel), staging, os.path.join(rel_root, rel), files)
  # Empty folders (e.g. an empty assets/) are part of a SavedModel too.
  for dirpath, _, _ in os.walk(src_root):
    os.makedirs(os.path.join(staging, rel_root, os.path.relpath(dirpath, src_root)), exist_ok=True)


def _publish(base: str, staging: str, version: int, manifest: Mapping[str, Any]) -> str:
  manifest_path = os.path.join(staging, serving_layout.MANIFEST_FILE)
  with open(manifest_path, "x", encoding="utf-8") as f:
    json.dump(manifest, f, indent=2, sort_keys=True)
    f.write("\n")
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


def _append_history(base: str, entry: Mapping[str, Any]) -> None:
  path = os.path.join(base, serving_layout.HISTORY_FILE)
  line = json.dumps(entry, sort_keys=True) + "\n"
  with open(path, "a+b") as f:
    # A kill -9 mid-append can leave a line without its newline; start a fresh line so the
    # torn fragment stays on its own (read_history skips it).
    f.seek(0, os.SEEK_END)
    if f.tell() > 0:
      f.seek(-1, os.SEEK_END)
      if f.read(1) != b"\n":
        f.write(b"\n")
    f.write(line.encode())
    f.flush()
    os.fsync(f.fileno())


def _clean_leftovers(base: str) -> None:
  # Only called under the lock, so any staging/trash folder belongs to a dead process.
  for entry in os.scandir(base):
    if entry.is_dir(follow_symlinks=False) and entry.name.startswith(
      (STAGING_PREFIX, TRASH_PREFIX)
    ):
      shutil.rmtree(entry.path)


def _prune(base: str, keep_versions: int) -> list[int]:
  versions = _versions_in(base)
  if not versions:
    return []
  live = versions[-1]
  doomed = [v for v in versions[:-keep_versions] if v != live]
  for version in doomed:
    # Rename first so a crash mid-delete never leaves a half-deleted numeric folder that TF
    # Serving could try to load.
    trash = os.path.join(base, f"{TRASH_PREFIX}{version}-{uuid.uuid4().hex}")
    os.rename(os.path.join(base, str(version)), trash)
    shutil.rmtree(trash)
  if doomed:
    _fsync_dir(base)
    _append_history(base, {"time": _utc_now(), "event": "prune", "versions": doomed})
  return doomed
