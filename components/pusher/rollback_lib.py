"""Rollback: make an earlier version live again by re-publishing it as the highest version."""

from __future__ import annotations

import os
from typing import Any

from components import serving_layout, storage
from components.pusher import folders, inventory, local_store
from components.pusher.pusher_lib import PushResult, check_keep_versions
from components.pusher.serving_paths import PusherError, model_dir, parse_version


def rollback(
  serving_dir: str,
  model_name: str,
  *,
  to_version: int | str | None = None,
  previous: bool = False,
  reason: str = "",
  keep_versions: int | None = None,
  lock_timeout_s: float = local_store.DEFAULT_LOCK_TIMEOUT_S,
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
    keep_versions = check_keep_versions(keep_versions)
  remote = storage.is_remote(base)
  if not remote and not os.path.isdir(base):
    raise PusherError(
      f"No model folder at {base}; nothing has been pushed for {model_name!r}. Check "
      "--model-name (the data folder's name by default) and --serving-dir."
    )
  with folders.open_folder(base, lock_timeout_s, push=False) as folder:
    history = folder.read_history()
    versions = folder.versions()
    if not versions:
      raise PusherError(
        f"{base} holds no complete versions; nothing to roll back."
        if remote
        else f"{base} holds no versions; nothing to roll back. Push a model first (run_local.py)."
      )
    live = versions[-1]
    live_manifest = folder.manifest(live)
    target = _rollback_target(
      model_name, versions, live_manifest, target_arg, history, folder.manifest
    )
    source_manifest = _checked_source(target, folder.path(target))
    _check_differs(target, source_manifest, live, live_manifest)
    staged = folder.stage_copy(target, source_manifest["files"])
    manifest = serving_layout.rollback_manifest(
      source_manifest, version=serving_layout.next_version(folder.taken(), history),
      created_at=serving_layout.utc_now(), live=live, target=target, reason=reason,
    )  # fmt: skip
    path = staged.publish(manifest["version"], manifest)
    folder.append_history(serving_layout.rollback_history_entry(manifest, live_manifest))
    removed = folder.prune(keep_versions) if keep_versions is not None else []
  return PushResult(
    True, manifest["version"], path, "", manifest["version"], manifest["content_sha256"],
    tuple(removed), manifest,
  )  # fmt: skip


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


def _checked_source(target: int, source: str) -> dict[str, Any]:
  """The manifest of the version a rollback restores, once it verifies."""
  problems = inventory.verify_version(source)
  if problems:
    raise PusherError(
      f"Version {target} fails verification ({problems[0]}); not restoring it. Pick a "
      "version whose --list status is ok."
    )
  return inventory.read_manifest(source)


def _check_differs(
  target: int, source_manifest: dict[str, Any], live: int, live_manifest: dict[str, Any]
) -> None:
  if source_manifest.get("content_sha256") == live_manifest.get("content_sha256"):
    raise PusherError(
      f"Version {target} has the same content as live version {live}; nothing to roll back. "
      "Pass an older --to VERSION (--list shows the versions)."
    )
