"""A version's manifest.json: its fields, how it is built, written and read.

The Pusher writes one manifest into every version it publishes, last; a rollback writes one
that re-publishes an earlier version's. Every field that is read elsewhere (LiveModel, the
data gate, the rollback command, the runners' key) is named here once, and read through the
accessors below.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

from components import storage
from components.serving import layout
from components.serving.paths import PusherError

MANIFEST_FORMAT = "tfx-pipeline-kit.pusher-manifest/1"

# The fields the serving package writes into every manifest.
FORMAT_FIELD = "format"
MODEL_NAME_FIELD = "model_name"
VERSION_FIELD = "version"
CREATED_AT_FIELD = "created_at"
EVENT_FIELD = "event"
CONTENT_SHA256_FIELD = "content_sha256"
FILES_FIELD = "files"
VARIANTS_FIELD = "variants"
SOURCE_FIELD = "source"
# A rollback's: the version it re-publishes, and {from, to, reason}.
REPUBLISHED_FROM_FIELD = "republished_from"
ROLLBACK_FIELD = "rollback"
# The fields the Pusher adds about the push (`push_manifest`'s `extra`).
DATA_SPANS_FIELD = "data_spans"
EXAMPLES_FIELD = "examples"
DATA_FINGERPRINTS_FIELD = "data_fingerprints"
# {uri, task, label_classes, training_fingerprint} of the trained model.
MODEL_FIELD = "model"
TRAINING_FINGERPRINT_FIELD = "training_fingerprint"
BLESSING_FIELD = "blessing"
LINEAGE_FIELD = "lineage"
OPTIMIZER_FIELD = "optimizer"
TRANSFORM_GRAPH_FIELD = "transform_graph"
# The key the Pusher's run cached LiveModel by (`live_model_lib.live_model_key`).
LIVE_KEY_FIELD = "live_key"
# What the version was trained on (rows per split, the label's counts, each span's digest) and
# its evaluation.
TRAINING_DATA_FIELD = "training_data"
TRAINING_ROWS_FIELD = "rows"
TRAINING_LABEL_STATS_FIELD = "label_stats"
# str(span) -> {"rows", "digest"} (the Examples' `span_digests`).
TRAINING_SPAN_DIGESTS_FIELD = "span_digests"
EVALUATION_FIELD = "evaluation"

# The fields a push's `extra` may not set: the serving package's own.
RESERVED_FIELDS = frozenset(
  {
    FORMAT_FIELD,
    MODEL_NAME_FIELD,
    VERSION_FIELD,
    CREATED_AT_FIELD,
    EVENT_FIELD,
    CONTENT_SHA256_FIELD,
    FILES_FIELD,
    VARIANTS_FIELD,
    SOURCE_FIELD,
    REPUBLISHED_FROM_FIELD,
  }
)

PUSH_EVENT = "push"
ROLLBACK_EVENT = "rollback"


# ----------------------------------------------------------------------------- reading fields


def training_fingerprint(manifest: Mapping[str, Any]) -> str | None:
  """The fingerprint of the training run that produced a version (None before it was recorded)."""
  return (manifest.get(MODEL_FIELD) or {}).get(TRAINING_FINGERPRINT_FIELD)


def data_spans(manifest: Mapping[str, Any]) -> list[int]:
  """The spans the version was trained on ([] where unrecorded)."""
  return [int(span) for span in manifest.get(DATA_SPANS_FIELD) or []]


def data_fingerprints(manifest: Mapping[str, Any]) -> list[str]:
  """The fingerprints of the Examples the version was trained on."""
  return list(manifest.get(DATA_FINGERPRINTS_FIELD) or [])


def training_data(manifest: Mapping[str, Any]) -> dict[str, Any]:
  """Rows per split and the label's counts of the data the version was trained on ({} if
  unrecorded)."""
  return dict(manifest.get(TRAINING_DATA_FIELD) or {})


def republished_from(manifest: Mapping[str, Any]) -> int | None:
  """The version a rollback's manifest re-publishes (None for a push)."""
  return (manifest.get(REPUBLISHED_FROM_FIELD) or {}).get(VERSION_FIELD)


def recorded_live_key(manifest: Mapping[str, Any]) -> str | None:
  """The LiveModel key of the run that pushed the version, if it recorded one (not a rollback)."""
  recorded = manifest.get(LIVE_KEY_FIELD)
  if not isinstance(recorded, str) or ROLLBACK_FIELD in manifest:
    return None
  return recorded


def content_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
  """The manifest's `content_sha256`: one digest over every file's path and sha256."""
  digest = hashlib.sha256()
  for rel in sorted(files):
    digest.update(f"{rel}\0{files[rel]['sha256']}\n".encode())
  return digest.hexdigest()


# ----------------------------------------------------------------------------- building


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
  """The manifest of a pushed version (`extra` holds the Pusher's fields about the push)."""
  return {
    FORMAT_FIELD: MANIFEST_FORMAT,
    MODEL_NAME_FIELD: model_name,
    VERSION_FIELD: version,
    CREATED_AT_FIELD: created_at,
    EVENT_FIELD: PUSH_EVENT,
    CONTENT_SHA256_FIELD: content,
    FILES_FIELD: dict(files),
    VARIANTS_FIELD: {
      name: {"path": f"{layout.VARIANTS_SUBDIR}/{name}", "metrics": dict(metrics)}
      for name, metrics in sorted(variant_metrics.items())
    },
    SOURCE_FIELD: dict(source),
    **extra,
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
      VERSION_FIELD: version,
      CREATED_AT_FIELD: created_at,
      EVENT_FIELD: ROLLBACK_EVENT,
      REPUBLISHED_FROM_FIELD: {
        VERSION_FIELD: target,
        CREATED_AT_FIELD: source_manifest.get(CREATED_AT_FIELD),
        EVENT_FIELD: source_manifest.get(EVENT_FIELD),
      },
      ROLLBACK_FIELD: {"from": live, "to": target, "reason": reason},
    }
  )
  return manifest


# ----------------------------------------------------------------------------- files


def dumps(manifest: Mapping[str, Any]) -> str:
  """A manifest's text, as every copy of it is written."""
  return json.dumps(dict(manifest), indent=2, sort_keys=True) + "\n"


def read_manifest(path: str) -> dict[str, Any]:
  """Reads ``manifest.json`` of a version folder (local or on an object store).

  Args:
    path: The version folder.

  Returns:
    The manifest as a dict.

  Raises:
    PusherError: If the manifest is missing or not valid JSON.
  """
  manifest_path = os.path.join(path, layout.MANIFEST_FILE)
  try:
    if storage.is_remote(path):
      from tfx.dsl.io import fileio

      if not fileio.exists(manifest_path):
        raise FileNotFoundError(manifest_path)
      with fileio.open(manifest_path, "r") as f:
        manifest = json.loads(f.read())
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


def safe_manifest(path: str) -> dict[str, Any]:
  """`read_manifest`, or {} where the manifest is missing or unreadable (an incomplete version)."""
  try:
    return read_manifest(path)
  except PusherError:
    return {}


def write_copy(folder: str, manifest: Mapping[str, Any]) -> None:
  """Writes a copy of a version's manifest into another folder (the Pusher's PushedModel)."""
  from tfx.dsl.io import fileio

  fileio.makedirs(folder)
  with fileio.open(os.path.join(folder, layout.MANIFEST_FILE), "w") as f:
    f.write(dumps(manifest))
