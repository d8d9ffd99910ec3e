"""Stops training on data that ExampleValidator flagged, with a message naming the anomalies."""

from __future__ import annotations

import os
from collections.abc import Sequence

from tfx import types
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils

from core import properties
from core.errors import UserInputError

# Written by TFX 1.16's ExampleValidator into Split-<name>/.
_ANOMALIES_FILE = "SchemaDiff.pb"


class DataAnomaliesError(UserInputError):
  """ExampleValidator found anomalies; the message names them and the fix."""


def describe_anomalies(anomalies_file: str, limit: int = 3) -> list[str]:
  """Short descriptions ("feature 'x': Unexpected string values ...") from an Anomalies proto."""
  from tensorflow_metadata.proto.v0 import anomalies_pb2

  anomalies = anomalies_pb2.Anomalies()
  anomalies.ParseFromString(io_utils.read_bytes_file(anomalies_file))
  out = []
  for feature, info in sorted(anomalies.anomaly_info.items()):
    text = info.short_description or info.description
    out.append(f"feature {feature!r}: {text}")
  if anomalies.HasField("dataset_anomaly_info"):
    info = anomalies.dataset_anomaly_info
    out.append(f"dataset: {info.short_description or info.description}")
  return out[:limit] + ([f"and {len(out) - limit} more"] if len(out) > limit else [])


def check_no_anomalies(artifacts: Sequence[types.Artifact]) -> None:
  """Raises DataAnomaliesError if any split of an ExampleAnomalies artifact has anomalies.

  Args:
    artifacts: ExampleAnomalies artifacts (empty when the input is not wired).

  Raises:
    DataAnomaliesError: naming the split, the anomalies and where to read them.
  """
  for artifact in artifacts:
    blessed = {}
    if artifact.has_custom_property(properties.BLESSED_PROPERTY):
      blessed = artifact.get_json_value_custom_property(properties.BLESSED_PROPERTY) or {}
    for split in artifact_utils.decode_split_names(artifact.split_names):
      path = os.path.join(artifact_utils.get_split_uri([artifact], split), _ANOMALIES_FILE)
      found = describe_anomalies(path) if fileio.exists(path) else []
      if blessed.get(split, 1) == 0 or found:
        details = "; ".join(found) or "see the ExampleValidator output"
        raise DataAnomaliesError(
          f"data validation found anomalies in split {split!r}: {details} ({path}); fix the data "
          "or update the schema before training."
        )
