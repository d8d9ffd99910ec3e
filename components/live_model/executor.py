"""Executor of LiveModel: copies the live SavedModel into Model artifacts and marks them."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components import model_contract
from components.serving import live, manifest
from core import properties, splits

_LOG = logging.getLogger(__name__)


class Executor(base_executor.BaseExecutor):
  """Reads the live version; outputs it as the baseline and, if trained on other data, as the
  warm-start model."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    baseline = artifact_utils.get_single_instance(output_dict["baseline"])
    warm = artifact_utils.get_single_instance(output_dict["warm_start"])
    references = [
      artifact_utils.get_single_instance(output_dict[key])
      for key in ("reference_schema", "reference_statistics")
      if output_dict.get(key)
    ]
    current = live.live_version(
      exec_properties[properties.SERVING_DIR_KEY], exec_properties[properties.MODEL_NAME_KEY]
    )
    if current is None:
      for artifact in (baseline, warm, *references):
        _unavailable(artifact, "nothing was live")
      _LOG.info("LiveModel: nothing is live under %s.", exec_properties[properties.SERVING_DIR_KEY])
      return
    serving = path_utils.serving_model_dir(baseline.uri)
    live.copy_saved_model(current, serving)
    _available(baseline, current)
    if references:
      self._references(current, *references)
    fingerprints = model_contract.data_fingerprints(input_dict.get("examples") or [])
    if _trained_on_same_data(current, fingerprints):
      _unavailable(warm, f"live version {current.version} was trained on this run's data")
    else:
      live.copy_saved_model(current, path_utils.serving_model_dir(warm.uri))
      _available(warm, current)
    _LOG.info("LiveModel: version %d at %s is live.", current.version, current.path)

  def _references(
    self, current: live.LiveVersion, schema: types.Artifact, statistics: types.Artifact
  ) -> None:
    """Copies the live version's training schema and statistics, when it recorded them."""
    if not live.copy_training_data(current, schema.uri, statistics.uri):
      for artifact in (schema, statistics):
        _unavailable(
          artifact, f"live version {current.version} was pushed without its training data"
        )
      return
    statistics.split_names = artifact_utils.encode_split_names(_statistics_splits(statistics.uri))
    statistics.set_string_custom_property(
      properties.LIVE_TRAINING_DATA_PROPERTY, json.dumps(manifest.training_data(current.manifest))
    )
    for artifact in (schema, statistics):
      _available(artifact, current)


def _trained_on_same_data(current: live.LiveVersion, data_fingerprints: Sequence[str]) -> bool:
  """Whether the live version was trained on exactly these Examples (by data fingerprint)."""
  return bool(data_fingerprints) and sorted(current.data_fingerprints) == sorted(data_fingerprints)


def _statistics_splits(statistics_dir: str) -> list[str]:
  """The split names of an ExampleStatistics folder (its `Split-<name>` subfolders)."""
  found = (splits.split_of_folder(n) for n in fileio.listdir(statistics_dir))
  return sorted(s for s in found if s is not None)


def _available(artifact: types.Artifact, current: live.LiveVersion) -> None:
  artifact.set_int_custom_property(properties.LIVE_AVAILABLE_PROPERTY, 1)
  artifact.set_int_custom_property(properties.LIVE_VERSION_PROPERTY, current.version)
  artifact.set_string_custom_property("source", current.path)


def _unavailable(artifact: types.Artifact, reason: str) -> None:
  artifact.set_int_custom_property(properties.LIVE_AVAILABLE_PROPERTY, 0)
  artifact.set_string_custom_property(properties.LIVE_REASON_PROPERTY, reason)
