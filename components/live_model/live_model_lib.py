"""Reads what the serving folder serves now: the live version, its manifest and SavedModel.

The serving folder is the source of truth for what is live, on every orchestrator: the live
version is the highest complete version (TF Serving's `latest` policy), complete meaning its
manifest.json exists (the Pusher writes it last). A rollback re-publishes an older version as
the highest, so it becomes the live one, and the baseline of the next run. Paths may be local
or object-store URIs (gs://, s3://); all access goes through TFX's fileio.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from tfx.dsl.io import fileio
from tfx.utils import io_utils

from components import serving_layout


@dataclasses.dataclass(frozen=True)
class LiveVersion:
  """The live version of a model.

  Attributes:
    version: its number.
    path: its folder (a SavedModel plus manifest.json).
    manifest: its manifest.
  """

  version: int
  path: str
  manifest: dict[str, Any]

  @property
  def training_fingerprint(self) -> str | None:
    return serving_layout.training_fingerprint(self.manifest)

  @property
  def examples(self) -> list[str]:
    return list(self.manifest.get("examples") or [])

  @property
  def data_fingerprints(self) -> list[str]:
    return list(self.manifest.get("data_fingerprints") or [])


def _entries(model_dir: str) -> list[str]:
  if not fileio.exists(model_dir):
    return []
  return [name.rstrip("/") for name in fileio.listdir(model_dir)]


def live_version(serving_dir: str, model_name: str) -> LiveVersion | None:
  """The highest complete version under `<serving_dir>/<model_name>`, or None.

  A numeric folder without manifest.json is a push in progress (or a crashed one on an object
  store, where there is no atomic rename) and is skipped.
  """
  model_dir = os.path.join(serving_dir, model_name)
  versions = serving_layout.version_numbers(_entries(model_dir))[::-1]
  for version in versions:
    path = os.path.join(model_dir, str(version))
    manifest_path = os.path.join(path, serving_layout.MANIFEST_FILE)
    if not fileio.exists(manifest_path):
      continue
    with fileio.open(manifest_path, "r") as f:
      try:
        manifest = json.loads(f.read())
      except json.JSONDecodeError:
        continue
    if isinstance(manifest, dict):
      return LiveVersion(version, path, manifest)
  return None


def copy_saved_model(live: LiveVersion, target: str) -> None:
  """Copies the live version's SavedModel (without the variants and manifest) to `target`."""
  skip = {serving_layout.MANIFEST_FILE}
  for root, dirs, files in fileio.walk(live.path):
    del dirs
    rel_root = os.path.relpath(root, live.path)
    if serving_layout.is_variants_path(rel_root) or serving_layout.is_training_data_path(rel_root):
      continue
    fileio.makedirs(os.path.join(target, rel_root))
    for name in files:
      rel = os.path.normpath(os.path.join(rel_root, name))
      if rel in skip:
        continue
      io_utils.copy_file(os.path.join(root, name), os.path.join(target, rel), overwrite=True)


def copy_training_data(live: LiveVersion, schema_dir: str, statistics_dir: str) -> bool:
  """Copies the live version's training schema and statistics into two artifact folders.

  Returns:
    False (copying nothing) when the version has no `training_data/` folder, as versions
    pushed before the data gate have not.
  """
  data = os.path.join(live.path, serving_layout.TRAINING_DATA_DIR)
  schema = os.path.join(data, serving_layout.TRAINING_SCHEMA_FILE)
  statistics = os.path.join(data, serving_layout.TRAINING_STATISTICS_DIR)
  if not (fileio.exists(schema) and fileio.isdir(statistics)):
    return False
  fileio.makedirs(schema_dir)
  io_utils.copy_file(schema, os.path.join(schema_dir, serving_layout.TRAINING_SCHEMA_FILE), True)
  io_utils.copy_dir(statistics, statistics_dir)
  return True


def statistics_splits(statistics_dir: str) -> list[str]:
  """The split names of an ExampleStatistics folder (its `Split-<name>` subfolders)."""
  prefix = "Split-"
  names = [n.rstrip("/") for n in fileio.listdir(statistics_dir)]
  return sorted(n[len(prefix) :] for n in names if n.startswith(prefix))


def trained_on_same_data(live: LiveVersion, data_fingerprints: Sequence[str]) -> bool:
  """Whether the live version was trained on exactly these Examples (by data fingerprint)."""
  return bool(data_fingerprints) and sorted(live.data_fingerprints) == sorted(data_fingerprints)


def live_key(live: LiveVersion | None) -> str:
  """A short key that changes whenever the live version does: its number and manifest digest."""
  if live is None:
    return "none"
  manifest = json.dumps(live.manifest, sort_keys=True).encode()
  return f"{live.version}:{hashlib.sha256(manifest).hexdigest()[:16]}"


def live_model_key(serving_dir: str, model_name: str, pipeline_name: str) -> str:
  """The key a runner caches LiveModel by: what the serving folder serves, read before the run.

  LiveModel's output depends on the serving folder, not on its inputs, so no cache can see
  when it changes; this key, an input of LiveModel, changes exactly when the live version
  does. A rerun with nothing new then reuses LiveModel, and with it the Evaluator and a
  warm-started Trainer. LocalDagRunner (`pipeline/run_local.py`) computes it before the run;
  on Kubeflow a small uncached task does (`pipeline.definition.kubeflow_lib.add_live_key_task`).

  One refinement keeps the first rerun after a push cached too: the Pusher records the key of
  its run's LiveModel in the manifest (`serving_layout.LIVE_KEY_FIELD`). When the live version
  carries a key of this pipeline and is not a rollback, that key is reused: that run evaluated
  and trained this very model against what was live before it, and the Pusher, which always
  runs, finds the candidate already live and pushes nothing. New data changes LiveModel's input
  and makes it run regardless.

  Returns:
    A JSON string naming the pipeline and the live version's `live_key`.
  """
  live = live_version(serving_dir, model_name)
  recorded = live.manifest.get(serving_layout.LIVE_KEY_FIELD) if live else None
  if isinstance(recorded, str) and "rollback" not in live.manifest:
    try:
      if json.loads(recorded).get("pipeline") == pipeline_name:
        return recorded
    except (json.JSONDecodeError, AttributeError):
      pass
  return json.dumps({"pipeline": pipeline_name, "live": live_key(live)}, sort_keys=True)
