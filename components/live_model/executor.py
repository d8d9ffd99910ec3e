"""Executor of LiveModel: copies the live SavedModel into Model artifacts and marks them."""

from __future__ import annotations

import json
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components import model_contract, properties, serving_layout
from components.live_model import live_model_lib

AVAILABLE_PROPERTY = "available"
LIVE_VERSION_PROPERTY = "live_version"
REASON_PROPERTY = "reason"
# On reference_statistics: the training data's label counts and rows (JSON, the manifest's).
TRAINING_DATA_PROPERTY = "training_data"


def is_available(model: types.Artifact) -> bool:
  """False for a LiveModel output marked unavailable (nothing live, or nothing to warm from)."""
  return not (
    model.has_custom_property(AVAILABLE_PROPERTY)
    and model.get_int_custom_property(AVAILABLE_PROPERTY) == 0
  )


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
    live = live_model_lib.live_version(
      exec_properties[properties.SERVING_DIR_KEY], exec_properties[properties.MODEL_NAME_KEY]
    )
    if live is None:
      for artifact in (baseline, warm, *references):
        _unavailable(artifact, "nothing was live")
      logging.info(
        "LiveModel: nothing is live under %s.", exec_properties[properties.SERVING_DIR_KEY]
      )
      return
    serving = path_utils.serving_model_dir(baseline.uri)
    live_model_lib.copy_saved_model(live, serving)
    _available(baseline, live)
    if references:
      self._references(live, *references)
    fingerprints = model_contract.data_fingerprints(input_dict.get("examples") or [])
    if live_model_lib.trained_on_same_data(live, fingerprints):
      _unavailable(warm, f"live version {live.version} was trained on this run's data")
    else:
      live_model_lib.copy_saved_model(live, path_utils.serving_model_dir(warm.uri))
      _available(warm, live)
    logging.info("LiveModel: version %d at %s is live.", live.version, live.path)

  def _references(
    self, live: live_model_lib.LiveVersion, schema: types.Artifact, statistics: types.Artifact
  ) -> None:
    """Copies the live version's training schema and statistics, when it recorded them."""
    if not live_model_lib.copy_training_data(live, schema.uri, statistics.uri):
      for artifact in (schema, statistics):
        _unavailable(artifact, f"live version {live.version} was pushed without its training data")
      return
    statistics.split_names = artifact_utils.encode_split_names(
      live_model_lib.statistics_splits(statistics.uri)
    )
    statistics.set_string_custom_property(
      TRAINING_DATA_PROPERTY,
      json.dumps(live.manifest.get(serving_layout.TRAINING_DATA_FIELD) or {}),
    )
    for artifact in (schema, statistics):
      _available(artifact, live)


def _available(artifact: types.Artifact, live: live_model_lib.LiveVersion) -> None:
  artifact.set_int_custom_property(AVAILABLE_PROPERTY, 1)
  artifact.set_int_custom_property(LIVE_VERSION_PROPERTY, live.version)
  artifact.set_string_custom_property("source", live.path)


def _unavailable(artifact: types.Artifact, reason: str) -> None:
  artifact.set_int_custom_property(AVAILABLE_PROPERTY, 0)
  artifact.set_string_custom_property(REASON_PROPERTY, reason)
