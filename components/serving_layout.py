"""The serving folder's layout, one owner: what the Pusher writes and every reader relies on.

    <serving_dir>/<model_name>/
      <version>/                 a SavedModel that TF Serving loads; numeric, the highest is live
        manifest.json            written last: a version folder without it is incomplete
        assets.extra/variants/   the blessed optimized variants, one folder each
        training_data/           what the version was trained on: schema.pbtxt and
                                 statistics/Split-<name>/FeatureStats.pb (the next night's
                                 reference; TF Serving ignores the folder)
      history.jsonl              a local folder's log: one JSON line per push, rollback, prune or
                                 accepted data change
      .history/                  an object store's log: one JSON file per entry (no appends there)
      nights.jsonl, .nights/     the record of the nights, one entry each (the same two forms)

The Pusher (`components/pusher/`: `local_store.py`, `object_store_lib.py`), LiveModel
(`components/live_model/live_model_lib.py`) and `pipeline/rollback.py` read these names from
here. Plain Python: no TensorFlow or TFX.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "tfx-pipeline-kit.pusher-manifest/1"
HISTORY_FILE = "history.jsonl"
HISTORY_DIR = ".history"
VARIANTS_SUBDIR = "assets.extra/variants"
# A SavedModel's graph file; TF tooling (and TF Serving) take it to mean "the model is complete".
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
# The manifest field where the Pusher records the key its run's LiveModel was cached by.
LIVE_KEY_FIELD = "live_key"
# What a version was trained on, beside its SavedModel: the schema and the statistics.
TRAINING_DATA_DIR = "training_data"
TRAINING_SCHEMA_FILE = "schema.pbtxt"
TRAINING_STATISTICS_DIR = "statistics"
# The manifest fields of the training data (rows, label counts) and of the evaluation.
TRAINING_DATA_FIELD = "training_data"
EVALUATION_FIELD = "evaluation"
# The nights' record.
NIGHTS_FILE = "nights.jsonl"
NIGHTS_DIR = ".nights"
# History events besides push, rollback and prune: a data change accepted for the live version.
ACCEPT_EVENT = "accept"

# ASCII digits only (str.isdigit also takes '²' or '٣'), at most 18 so the number fits int64.
_VERSION_NAME = re.compile(r"[0-9]{1,18}")


def is_version_name(name: str) -> bool:
  """Whether a folder name is a version number TF Serving would load."""
  return bool(_VERSION_NAME.fullmatch(name))


def version_numbers(names: Iterable[str]) -> list[int]:
  """The version numbers among folder names, ascending (the last one is live)."""
  return sorted(int(n) for n in names if is_version_name(n))


def is_variants_path(rel_path: str) -> bool:
  """Whether a path relative to a version folder lies under the variants folder."""
  parts = rel_path.replace("\\", "/").split("/")
  return parts[:2] == VARIANTS_SUBDIR.split("/")


def is_training_data_path(rel_path: str) -> bool:
  """Whether a path relative to a version folder lies under the training-data folder."""
  return rel_path.replace("\\", "/").split("/")[0] == TRAINING_DATA_DIR


def saved_model_last(rel_path: str) -> tuple[bool, str]:
  """Sort key for writing a version's files: by path, the SavedModel's graph file after all others.

  Stock TFX copies saved_model.pb last for the reason in `SAVED_MODEL_FILES`; on an object
  store, where there is no rename, that order is what keeps a half-written version unloadable.
  """
  return rel_path in SAVED_MODEL_FILES, rel_path


def utc_now() -> str:
  """The time stamp of manifests and history entries: UTC to the second, e.g. ...T12:00:00Z."""
  now = datetime.datetime.now(datetime.timezone.utc)
  return now.isoformat(timespec="seconds").replace("+00:00", "Z")


def content_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
  """The manifest's `content_sha256`: one digest over every file's path and sha256."""
  digest = hashlib.sha256()
  for rel in sorted(files):
    digest.update(f"{rel}\0{files[rel]['sha256']}\n".encode())
  return digest.hexdigest()


def training_fingerprint(manifest: Mapping[str, Any]) -> str | None:
  """The fingerprint of the training run that produced a version (None before it was recorded)."""
  return (manifest.get("model") or {}).get("training_fingerprint")


# --------------------------------------------------------------------------- versions and history


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
    if entry.get("event") == "rollback":
      if entry.get("from_content_sha256"):
        rejected[entry["from_content_sha256"]] = entry
      rejected.pop(entry.get("to_content_sha256"), None)
  return rejected


def identical_reason(
  live: int | None,
  live_manifest: Mapping[str, Any],
  content: str,
  history: Iterable[Mapping[str, Any]],
) -> str:
  """Why a candidate with this content digest is not pushed, or '' when it is new."""
  if live is not None and live_manifest.get("content_sha256") == content:
    return f"identical to live version {live} (same sha256 of every file); nothing pushed"
  rejected = rejected_contents(history).get(content)
  if rejected:
    return (
      f"identical to version {rejected.get('from')}, which was rolled back at "
      f"{rejected.get('time')} ({rejected.get('reason') or 'no reason given'}); not re-pushing "
      "it (use rollback --to to restore it deliberately)"
    )
  return ""


def push_manifest(
  *,
  model_name: str,
  version: int,
  created_at: str,
  content: str,
  files: Mapping[str, Any],
  variant_metrics: Mapping[str, Mapping[str, Any]],
  source: Mapping[str, Any],
  extra: Mapping[str, Any],
) -> dict[str, Any]:
  """The manifest.json of a pushed version (`extra` holds the Pusher's run details)."""
  return {
    "format": MANIFEST_FORMAT,
    "model_name": model_name,
    "version": version,
    "created_at": created_at,
    "event": "push",
    "content_sha256": content,
    "files": dict(files),
    "variants": {
      name: {"path": f"{VARIANTS_SUBDIR}/{name}", "metrics": dict(metrics)}
      for name, metrics in sorted(variant_metrics.items())
    },
    "source": dict(source),
    **extra,
  }


def push_history_entry(manifest: Mapping[str, Any], previous_live: int | None) -> dict[str, Any]:
  """The history entry of a push."""
  return {
    "time": manifest["created_at"],
    "event": "push",
    "version": manifest["version"],
    "previous_live": previous_live,
    "content_sha256": manifest["content_sha256"],
  }


def rollback_manifest(
  source_manifest: Mapping[str, Any],
  *,
  version: int,
  created_at: str,
  live: int,
  target: int,
  reason: str,
) -> dict[str, Any]:
  """The manifest of version `version`, which re-publishes version `target`'s files."""
  manifest = dict(source_manifest)
  manifest.update(
    {
      "version": version,
      "created_at": created_at,
      "event": "rollback",
      "republished_from": {
        "version": target,
        "created_at": source_manifest.get("created_at"),
        "event": source_manifest.get("event"),
      },
      "rollback": {"from": live, "to": target, "reason": reason},
    }
  )
  return manifest


def rollback_history_entry(
  manifest: Mapping[str, Any], live_manifest: Mapping[str, Any]
) -> dict[str, Any]:
  """The history entry of a rollback (`manifest` from `rollback_manifest`)."""
  rollback = manifest["rollback"]
  return {
    "time": manifest["created_at"],
    "event": "rollback",
    "from": rollback["from"],
    "to": rollback["to"],
    "version": manifest["version"],
    "reason": rollback["reason"],
    "from_content_sha256": live_manifest.get("content_sha256"),
    "to_content_sha256": manifest["content_sha256"],
    "from_training_fingerprint": training_fingerprint(live_manifest),
  }
