"""The push history: every push, rollback, prune and accepted data change, in the model folder.

Entries are appended to `layout.HISTORY` (one JSON line each on a local folder, one object
each on an object store) and never rewritten; a line torn by a crash is skipped on reading.
The history remembers what the folders no longer show: the numbers of deleted versions (never
reused), the trainings rollbacks moved away from (never re-pushed), and the data changes
accepted against the live version (let through by the data gate) or withdrawn since.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from components import storage
from components.serving import layout, live, local, manifest, paths, store

# The events besides a version's own (`manifest.PUSH_EVENT`, `manifest.ROLLBACK_EVENT`):
# versions deleted by retention,
PRUNE_EVENT = "prune"
# a data change accepted for the live version, and one withdrawn.
ACCEPT_EVENT = "accept"
UNACCEPT_EVENT = "unaccept"
# What an acceptance records besides its columns: why, who (user and host) and when.
ACCEPTANCE_FIELDS = ("reason", "user", "host", "time")


def read_history(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """Reads the history, skipping a line torn by a crash.

  Args:
    serving_dir: Absolute serving root.
    model_name: Model name.

  Returns:
    The history entries, oldest first.
  """
  return store.folder(paths.model_dir(serving_dir, model_name)).read_log(layout.HISTORY)


def next_version(existing: Iterable[int], history: Iterable[Mapping[str, Any]]) -> int:
  """The number a new version gets: above every folder and every number the history names.

  The history remembers versions deleted by hand or pruned, so a number is never reused (TF
  Serving would otherwise serve a new model under an old model's number).
  """
  seen = [0, *existing]
  seen += [e["version"] for e in history if isinstance(e.get("version"), int)]
  return max(seen) + 1


def rejected_contents(history: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
  """Content digests rolled back away from (and not restored since), with their rollback entry."""
  rejected: dict[str, Mapping[str, Any]] = {}
  for entry in history:
    if entry.get("event") == manifest.ROLLBACK_EVENT:
      if entry.get("from_content_sha256"):
        rejected[entry["from_content_sha256"]] = entry
      rejected.pop(entry.get("to_content_sha256"), None)
  return rejected


def rolled_back_fingerprints(serving_dir: str, model_name: str) -> dict[str, int]:
  """Training fingerprints that rollbacks moved away from, with the version each left."""
  out = {}
  for entry in read_history(serving_dir, model_name):
    fingerprint = entry.get("from_training_fingerprint")
    if entry.get("event") == manifest.ROLLBACK_EVENT and fingerprint:
      out[fingerprint] = entry.get("from")
  return out


def acceptances(
  serving_dir: str, model_name: str, live_number: int | None
) -> dict[str, dict[str, Any]]:
  """The columns (or `all`) whose changes are accepted against live version `live_number`.

  An acceptance holds until another version goes live (that version's own training data is
  the next reference) or until it is withdrawn (`record_withdrawal`).

  Returns:
    Column -> its latest acceptance's `ACCEPTANCE_FIELDS`, in the order first accepted.
  """
  return held_acceptances(read_history(serving_dir, model_name), live_number)


def held_acceptances(
  entries: Iterable[Mapping[str, Any]], live_number: int | None
) -> dict[str, dict[str, Any]]:
  """`acceptances` from history entries already read."""
  held: dict[str, dict[str, Any]] = {}
  for entry in entries:
    if entry.get("live_version") != live_number:
      continue
    if entry.get("event") == ACCEPT_EVENT:
      for name in entry.get("columns") or []:
        held[name] = {k: entry.get(k) for k in ACCEPTANCE_FIELDS}
    elif entry.get("event") == UNACCEPT_EVENT:
      for name in entry.get("columns") or []:
        held.pop(name, None)
  return held


def accepted_changes(serving_dir: str, model_name: str, live_number: int | None) -> list[str]:
  """The names of `acceptances`: what the data gate lets through against `live_number`."""
  return list(acceptances(serving_dir, model_name, live_number))


# ----------------------------------------------------------------------------- entries


def push_entry(version_manifest: Mapping[str, Any], previous_live: int | None) -> dict[str, Any]:
  """The history entry of a push."""
  return {
    "time": version_manifest[manifest.CREATED_AT_FIELD],
    "event": manifest.PUSH_EVENT,
    "version": version_manifest[manifest.VERSION_FIELD],
    "previous_live": previous_live,
    "content_sha256": version_manifest[manifest.CONTENT_SHA256_FIELD],
  }


def rollback_entry(
  version_manifest: Mapping[str, Any], live_manifest: Mapping[str, Any]
) -> dict[str, Any]:
  """The history entry of a rollback (`version_manifest` from `manifest.rollback_manifest`)."""
  rollback = version_manifest[manifest.ROLLBACK_FIELD]
  return {
    "time": version_manifest[manifest.CREATED_AT_FIELD],
    "event": manifest.ROLLBACK_EVENT,
    "from": rollback["from"],
    "to": rollback["to"],
    "version": version_manifest[manifest.VERSION_FIELD],
    "reason": rollback["reason"],
    "from_content_sha256": live_manifest.get(manifest.CONTENT_SHA256_FIELD),
    "to_content_sha256": version_manifest[manifest.CONTENT_SHA256_FIELD],
    "from_training_fingerprint": manifest.training_fingerprint(live_manifest),
  }


def prune_entry(versions: list[int]) -> dict[str, Any]:
  """The history entry of versions deleted by retention."""
  return {"time": layout.utc_now(), "event": PRUNE_EVENT, "versions": versions}


def record_acceptance(
  serving_dir: str,
  model_name: str,
  columns: list[str],
  reason: str,
  lock_timeout_s: float = local.DEFAULT_LOCK_TIMEOUT_S,
  *,
  who: Mapping[str, str] | None = None,
  check: Callable[[live.LiveVersion], None] | None = None,
) -> dict[str, Any]:
  """Records that changes to `columns` in the data are deliberate, against the live version.

  The data gate lets those changes through until another version goes live, or until the
  acceptance is withdrawn (`record_withdrawal`).

  Args:
    who: {"user", "host"} of whoever accepts.
    check: called with the live version, under the lock, before anything is written; what it
      raises is raised and nothing is recorded.

  Returns:
    The history entry written.

  Raises:
    PusherError: when nothing is live (there is nothing to accept a change against).
  """
  with _live_folder(serving_dir, model_name, lock_timeout_s, "accept") as (folder, current):
    if check is not None:
      check(current)
    entry = {
      "time": layout.utc_now(),
      "event": ACCEPT_EVENT,
      "live_version": current.version,
      "columns": list(columns),
      "reason": reason,
      **_who(who),
    }
    folder.append_log(layout.HISTORY, entry)
  return entry


def record_withdrawal(
  serving_dir: str,
  model_name: str,
  columns: list[str] | None,
  lock_timeout_s: float = local.DEFAULT_LOCK_TIMEOUT_S,
  *,
  who: Mapping[str, str] | None = None,
) -> dict[str, Any]:
  """Withdraws acceptances against the live version: the data gate stops letting them through.

  Args:
    columns: the accepted names to withdraw; None withdraws every one.
    who: {"user", "host"} of whoever withdraws.

  Returns:
    The history entry written; its `columns` are the names withdrawn.

  Raises:
    PusherError: when nothing is live, or a name is not accepted (naming what is).
  """
  with _live_folder(serving_dir, model_name, lock_timeout_s, "withdraw") as (folder, current):
    held = held_acceptances(folder.read_log(layout.HISTORY), current.version)
    names = list(held) if columns is None else list(columns)
    missing = [n for n in names if n not in held]
    against = f"against live version {current.version} of {model_name!r}"
    if not held:
      raise paths.PusherError(f"nothing is accepted {against}, so there is nothing to take back.")
    if missing:
      what = " or ".join(repr(n) for n in missing)
      raise paths.PusherError(f"{what} is not accepted {against}; accepted: {', '.join(held)}.")
    entry = {
      "time": layout.utc_now(),
      "event": UNACCEPT_EVENT,
      "live_version": current.version,
      "columns": names,
      **_who(who),
    }
    folder.append_log(layout.HISTORY, entry)
  return entry


def _who(who: Mapping[str, str] | None) -> dict[str, str]:
  return {"user": (who or {}).get("user", ""), "host": (who or {}).get("host", "")}


@contextlib.contextmanager
def _live_folder(
  serving_dir: str, model_name: str, lock_timeout_s: float, verb: str
) -> Iterator[tuple[store.Folder, live.LiveVersion]]:
  """The model folder, locked, and its live version; PusherError when nothing is live."""
  base = paths.model_dir(serving_dir, model_name)
  nothing_live = paths.PusherError(
    f"nothing is live under {base}: the data gate only compares with a live version, so "
    f"there is no change to {verb} yet."
  )
  if not storage.is_remote(base) and not os.path.isdir(base):
    raise nothing_live
  with store.open_folder(base, lock_timeout_s, push=False) as folder:
    current = live.live_in(folder)
    if current is None:
      raise nothing_live
    yield folder, current
