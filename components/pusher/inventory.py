"""What a model's serving folder holds: versions, manifests, history, and their verification.

Every reader here takes a local serving root or an object-store URI (gs://, s3://) and
dispatches to `local_store` or `object_store_lib`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from components import serving_layout, storage
from components.pusher import local_store, object_store_lib
from components.pusher.serving_paths import PusherError, model_dir, version_path


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
  return local_store.versions_in(base)


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


def has_saved_model(path: str) -> bool:
  """Whether a local folder holds a SavedModel's graph file."""
  return any(os.path.isfile(os.path.join(path, name)) for name in serving_layout.SAVED_MODEL_FILES)


def safe_manifest(path: str) -> dict[str, Any]:
  """`read_manifest`, or {} where the Pusher's manifest is missing or unreadable."""
  try:
    return read_manifest(path)
  except PusherError:
    return {}


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
  if not has_saved_model(path):
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
    digest, _ = local_store.sha256_file(full)
    if digest != info.get("sha256"):
      problems.append(f"{rel} has sha256 {digest}, manifest says {info.get('sha256')}")
  on_disk = set(local_store.walk_files(path)) - {serving_layout.MANIFEST_FILE}
  for extra in sorted(on_disk - set(files)):
    problems.append(f"{extra} is not listed in the manifest")
  if files and manifest.get("content_sha256") != serving_layout.content_digest(files):
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
  return local_store.read_history(base)


def accepted_changes(serving_dir: str, model_name: str, live: int | None) -> list[str]:
  """The columns (or `all`) whose changes were accepted against the live version `live`.

  An acceptance holds until another version goes live: that version's own training data is
  the next reference.
  """
  names: list[str] = []
  for entry in read_history(serving_dir, model_name):
    if entry.get("event") == serving_layout.ACCEPT_EVENT and entry.get("live_version") == live:
      names += [n for n in entry.get("columns") or [] if n not in names]
  return names


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
