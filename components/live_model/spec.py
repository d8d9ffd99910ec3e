"""Spec keys and ComponentSpec of LiveModel."""

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from core import properties

EXAMPLES_KEY = "examples"
BASELINE_KEY = "baseline"
WARM_START_KEY = "warm_start"
REFERENCE_SCHEMA_KEY = "reference_schema"
REFERENCE_STATISTICS_KEY = "reference_statistics"


class LiveModelSpec(ComponentSpec):
  """Spec of LiveModel."""

  PARAMETERS = {
    properties.SERVING_DIR_KEY: ExecutionParameter(type=str),
    properties.MODEL_NAME_KEY: ExecutionParameter(type=str),
    properties.LIVE_KEY_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
    EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples, optional=True),
  }
  OUTPUTS = {
    BASELINE_KEY: ChannelParameter(type=standard_artifacts.Model),
    WARM_START_KEY: ChannelParameter(type=standard_artifacts.Model),
    REFERENCE_SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema),
    REFERENCE_STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics),
  }
