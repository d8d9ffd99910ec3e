"""The live version: the one answer to "what does the serving folder serve now".

The live version is the highest complete version: a numeric folder whose manifest.json exists
and reads (the Pusher writes it last, and on a local folder publishes the whole version by one
rename), which is what TF Serving's `latest` policy serves once versions are published that
way. A numeric folder without a manifest is a push in progress, or one that died on an object
store where there is no rename, and is skipped. A rollback re-publishes an older version as the
highest, so it becomes the live one. The Pusher, LiveModel, the data gate's accepted changes,
retention and the rollback command all ask `live_version` (or `live_in`, under a lock).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from components import storage
from components.serving import layout, manifest, paths, store


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
    return manifest.training_fingerprint(self.manifest)

  @property
  def data_fingerprints(self) -> list[str]:
    return manifest.data_fingerprints(self.manifest)


def live_in(folder: store.Folder) -> LiveVersion | None:
  """The live version of an open (or read-only) model folder, or None when nothing is live."""
  for version in reversed(folder.versions()):
    version_manifest = folder.manifest(version)
    if version_manifest:
      return LiveVersion(version, folder.path(version), version_manifest)
  return None


def live_version(serving_dir: str, model_name: str) -> LiveVersion | None:
  """The live version under `<serving_dir>/<model_name>`: the highest complete one, or None.

  Args:
    serving_dir: Serving root (absolute local path or URI).
    model_name: Model name.

  Raises:
    PusherError: If either part is invalid.
  """
  return live_in(store.folder(paths.model_dir(serving_dir, model_name)))


def check_intact(live: LiveVersion, model_name: str) -> None:
  """Raises where a file of the live version no longer matches its manifest (a disk fault, a
  hand edit): TF Serving may fail to load it, and every step that reads it would fail too. A
  file added beside the listed ones (a warm-up file for TF Serving) is not a fault here.

  Raises:
    PusherError: one line naming the version, its first problem and the fix.
  """
  problems = store.verify(live.path, unlisted=False)
  if problems:
    raise paths.PusherError(
      f"live version {live.version} of {model_name!r} is damaged ({problems[0]}): TF Serving "
      "may not load it, and the pipeline compares every new model with it; move back to an "
      "intact version with pipeline/rollback.py --previous (--list shows each version's "
      "state), then run again."
    )


def training_columns(live: LiveVersion) -> list[str] | None:
  """The columns of the schema `live` was trained on (its `training_data/schema.pbtxt`).

  Returns:
    None where the version has no readable training schema, as versions pushed before the
    data gate have not (the gate does not compare with those).
  """
  from google.protobuf import text_format
  from tensorflow_metadata.proto.v0 import schema_pb2

  path = f"{live.path}/{layout.TRAINING_DATA_DIR}/{layout.TRAINING_SCHEMA_FILE}"
  try:
    if storage.is_remote(path):
      fileio, _ = _fileio()
      if not fileio.exists(path):
        return None
      with fileio.open(path, "r") as f:
        text = f.read()
    else:
      with open(path, encoding="utf-8") as f:
        text = f.read()
    schema = text_format.Parse(text, schema_pb2.Schema())
  except (OSError, UnicodeDecodeError, text_format.ParseError):
    return None
  return [feature.name for feature in schema.feature]


def _fileio():
  from tfx.dsl.io import fileio
  from tfx.utils import io_utils

  return fileio, io_utils


def copy_saved_model(live: LiveVersion, target: str) -> None:
  """Copies the live version's SavedModel (without the variants, the training data and the
  manifest) to `target`."""
  fileio, io_utils = _fileio()
  skip = {layout.MANIFEST_FILE}
  for root, dirs, files in fileio.walk(live.path):
    del dirs
    rel_root = os.path.relpath(root, live.path)
    if layout.is_variants_path(rel_root) or layout.is_training_data_path(rel_root):
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
  fileio, io_utils = _fileio()
  data = os.path.join(live.path, layout.TRAINING_DATA_DIR)
  schema = os.path.join(data, layout.TRAINING_SCHEMA_FILE)
  statistics = os.path.join(data, layout.TRAINING_STATISTICS_DIR)
  if not (fileio.exists(schema) and fileio.isdir(statistics)):
    return False
  fileio.makedirs(schema_dir)
  io_utils.copy_file(schema, os.path.join(schema_dir, layout.TRAINING_SCHEMA_FILE), True)
  io_utils.copy_dir(statistics, statistics_dir)
  return True
