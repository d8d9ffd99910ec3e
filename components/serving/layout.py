"""The serving folder's layout and names: what the Pusher writes and every reader relies on.

    <serving_dir>/<model_name>/
      <version>/                 a SavedModel that TF Serving loads; numeric, the highest
                                 complete one is live
        manifest.json            written last: a version folder without it is incomplete
        assets.extra/variants/   the blessed optimized variants, one folder each
        assets.extra/transform_graph/   the Transform graph, when a variant needs it
        training_data/           what the version was trained on: schema.pbtxt and
                                 statistics/Split-<name>/FeatureStats.pb (the next night's
                                 reference; TF Serving ignores the folder)
      history.jsonl, .history/   the push history: one JSON line per push, rollback, prune or
                                 accepted data change (`HISTORY`)
      nights.jsonl, .nights/     the record of the nights, one entry each (`NIGHTS`)
      .nights-open/<night>/      the facts the steps of a night still running have recorded

Plain Python: no TensorFlow or TFX.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Iterable
from typing import Any

MANIFEST_FILE = "manifest.json"
VARIANTS_SUBDIR = "assets.extra/variants"
TRANSFORM_GRAPH_SUBDIR = "assets.extra/transform_graph"
# A SavedModel's graph file; TF tooling (and TF Serving) take it to mean "the model is complete".
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
# What a version was trained on, beside its SavedModel: the schema and the statistics.
TRAINING_DATA_DIR = "training_data"
TRAINING_SCHEMA_FILE = "schema.pbtxt"
TRAINING_STATISTICS_DIR = "statistics"
# The facts of the nights still running, one folder per night.
OPEN_DIR = ".nights-open"


@dataclasses.dataclass(frozen=True)
class Log:
  """A log in the model folder, in the form each kind of folder can append to.

  Attributes:
    file: on a local folder, one JSON line per entry in this file.
    folder: on an object store (which cannot append), one object per entry in this folder.
  """

  file: str
  folder: str


HISTORY = Log(file="history.jsonl", folder=".history")
NIGHTS = Log(file="nights.jsonl", folder=".nights")

# ASCII digits only (str.isdigit also takes '²' or '٣'), at most 18 so the number fits int64.
_VERSION_NAME = re.compile(r"[0-9]{1,18}")


def is_version_name(name: str) -> bool:
  """Whether a folder name is a version number TF Serving would load."""
  return bool(_VERSION_NAME.fullmatch(name))


def version_numbers(names: Iterable[str]) -> list[int]:
  """The version numbers among folder names, ascending."""
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
  """The time stamp of manifests and log entries: UTC to the second, e.g. ...T12:00:00Z."""
  now = datetime.datetime.now(datetime.timezone.utc)
  return now.isoformat(timespec="seconds").replace("+00:00", "Z")


def parse_utc(stamp: Any) -> datetime.datetime | None:
  """The time of a `utc_now` stamp (or any ISO 8601 one), None for anything else."""
  try:
    return datetime.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
  except ValueError:
    return None
