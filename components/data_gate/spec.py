"""DataGate's spec: its parameters, inputs and output, under named keys."""

from __future__ import annotations

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from core import properties

STATISTICS_KEY = "statistics"
SCHEMA_KEY = "schema"
EXAMPLES_KEY = "examples"
REFERENCE_STATISTICS_KEY = "reference_statistics"
REFERENCE_SCHEMA_KEY = "reference_schema"
BASELINE_KEY = "baseline"
RESULT_KEY = "result"
LABEL_KEY_KEY = "label_key"
TASK_KEY = "task"
EXCLUDE_COLUMNS_KEY = "exclude_columns"
THRESHOLDS_KEY = "thresholds"
ACCEPT_KEY = "accept"


class DataGateSpec(ComponentSpec):
  """Spec of DataGate."""

  PARAMETERS = {
    LABEL_KEY_KEY: ExecutionParameter(type=str),
    TASK_KEY: ExecutionParameter(type=str),
    EXCLUDE_COLUMNS_KEY: ExecutionParameter(type=str, optional=True),
    THRESHOLDS_KEY: ExecutionParameter(type=str, optional=True),
    ACCEPT_KEY: ExecutionParameter(type=str, optional=True),
    properties.SERVING_DIR_KEY: ExecutionParameter(type=str),
    properties.MODEL_NAME_KEY: ExecutionParameter(type=str),
    properties.NIGHT_ID_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
    STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
    SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema),
    EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
    REFERENCE_STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
    REFERENCE_SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema),
    BASELINE_KEY: ChannelParameter(type=standard_artifacts.Model),
  }
  OUTPUTS = {
    RESULT_KEY: ChannelParameter(type=standard_artifacts.ExampleAnomalies),
  }
