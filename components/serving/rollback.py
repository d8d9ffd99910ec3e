"""Rollback: make an earlier version live again by re-publishing it as the highest version."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from components import storage
from components.serving import history, layout, live, local, manifest, paths, store
from components.serving.paths import PusherError
from components.serving.publish import PushResult, check_keep_versions, retire


def rollback(
  serving_dir: str,
  model_name: str,
  *,
  to_version: int | str | None = None,
  previous: bool = False,
  reason: str = "",
  keep_versions: int | None = None,
  lock_timeout_s: float = local.DEFAULT_LOCK_TIMEOUT_S,
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
  base = paths.model_dir(serving_dir, model_name)
  if (to_version is None) == (not previous):
    raise PusherError("Pass exactly one of --to VERSION and --previous.")
  target_arg = None if to_version is None else paths.parse_version(to_version)
  if keep_versions is not None:
    keep_versions = check_keep_versions(keep_versions)
  remote = storage.is_remote(base)
  if not remote and not os.path.isdir(base):
    raise PusherError(
      f"No model folder at {base}; nothing has been pushed for {model_name!r}. Check "
      "--model-name (the data folder's name by default) and --serving-dir."
    )
  with store.open_folder(base, lock_timeout_s, push=False) as folder:
    entries = folder.read_log(layout.HISTORY)
    versions = folder.versions()
    current = live.live_in(folder)
    if current is None:
      raise PusherError(
        f"{base} holds no complete versions; nothing to roll back."
        if remote or versions
        else f"{base} holds no versions; nothing to roll back. Push a model first (run_local.py)."
      )
    target = _rollback_target(model_name, versions, current, target_arg, entries, folder.manifest)
    source_manifest = _checked_source(target, folder.path(target))
    _check_differs(target, source_manifest, current)
    staged = folder.stage_copy(target, source_manifest[manifest.FILES_FIELD])
    version_manifest = manifest.rollback_manifest(
      source_manifest, version=history.next_version(folder.taken(), entries),
      created_at=layout.utc_now(), live=current.version, target=target, reason=reason,
    )  # fmt: skip
    version = version_manifest[manifest.VERSION_FIELD]
    path = staged.publish(version, version_manifest)
    folder.append_log(layout.HISTORY, history.rollback_entry(version_manifest, current.manifest))
    removed = retire(folder, keep_versions, version) if keep_versions is not None else []
  return PushResult(
    True, version, path, "", version, version_manifest[manifest.CONTENT_SHA256_FIELD],
    tuple(removed), version_manifest,
  )  # fmt: skip


def _rollback_target(
  model_name: str,
  versions: list[int],
  current: live.LiveVersion,
  to_version: int | None,
  entries: list[dict[str, Any]],
  manifest_of: Callable[[int], dict[str, Any]],
) -> int:
  """The version a rollback restores: `to_version`, or with None the newest earlier version
  whose content differs from the live one and was not itself rolled back away from."""
  if to_version is None:
    live_content = current.manifest.get(manifest.CONTENT_SHA256_FIELD)
    rejected = history.rejected_contents(entries)
    rolled_away = []
    for version in reversed([v for v in versions if v < current.version]):
      content = manifest_of(version).get(manifest.CONTENT_SHA256_FIELD)
      if content and content != live_content and content not in rejected:
        return version
      if content and content != live_content:
        rolled_away.append(version)
    if rolled_away:
      shown = ", ".join(map(str, sorted(rolled_away)))
      raise PusherError(
        f"No earlier version of {model_name!r} differs from live version {current.version} "
        f"but those a rollback moved away from ({shown}); to serve one of them again, pass "
        f"--to {max(rolled_away)}."
      )
    raise PusherError(
      f"No earlier version of {model_name!r} differs from live version {current.version}; "
      "use --list to see the versions."
    )
  if to_version not in versions:
    raise PusherError(
      f"Version {to_version} of {model_name!r} does not exist (have {versions}); "
      "use --list to see the versions."
    )
  if to_version == current.version:
    raise PusherError(
      f"Version {to_version} of {model_name!r} is already live; pass another --to VERSION "
      "(--list shows them)."
    )
  return to_version


def _checked_source(target: int, source: str) -> dict[str, Any]:
  """The manifest of the version a rollback restores, once it verifies."""
  problems = store.verify(source)
  if problems:
    raise PusherError(
      f"Version {target} fails verification ({problems[0]}); not restoring it. Pick a "
      "version whose --list status is ok."
    )
  return manifest.read_manifest(source)


def _check_differs(target: int, source_manifest: dict[str, Any], current: live.LiveVersion) -> None:
  content = source_manifest.get(manifest.CONTENT_SHA256_FIELD)
  if content == current.manifest.get(manifest.CONTENT_SHA256_FIELD):
    raise PusherError(
      f"Version {target} has the same content as live version {current.version}; nothing to "
      "roll back. Pass an older --to VERSION (--list shows the versions)."
    )
