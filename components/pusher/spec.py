"""Spec keys and ComponentSpec of the atomic versioned Pusher."""

from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ComponentSpec, ExecutionParameter

from components.artifacts import OptimizedModel
from core import properties

# Input keys. The first two match stock TFX's standard_component_specs values.
MODEL_KEY = "model"
MODEL_BLESSING_KEY = "model_blessing"
OPTIMIZED_MODEL_KEY = "optimized_model"
EXAMPLES_KEY = "examples"
TRANSFORM_GRAPH_KEY = "transform_graph"
# What the model was trained on, shipped in the version's training_data/ folder, and how it
# was evaluated, recorded in its manifest.
STATISTICS_KEY = "statistics"
SCHEMA_KEY = "schema"
EVALUATION_KEY = "evaluation"
# Output key (stock value, so tools that look for "pushed_model" find it).
PUSHED_MODEL_KEY = "pushed_model"
# Execution parameter keys.
KEEP_VERSIONS_KEY = "keep_versions"


class PusherSpec(ComponentSpec):
  """Spec of the atomic versioned Pusher."""

  PARAMETERS = {
    properties.SERVING_DIR_KEY: ExecutionParameter(type=str),
    properties.MODEL_NAME_KEY: ExecutionParameter(type=str),
    properties.NIGHT_ID_KEY: ExecutionParameter(type=str, optional=True),
    KEEP_VERSIONS_KEY: ExecutionParameter(type=int),
    properties.LIVE_KEY_KEY: ExecutionParameter(type=str, optional=True),
  }
  INPUTS = {
    MODEL_KEY: ChannelParameter(type=standard_artifacts.Model),
    MODEL_BLESSING_KEY: ChannelParameter(type=standard_artifacts.ModelBlessing),
    OPTIMIZED_MODEL_KEY: ChannelParameter(type=OptimizedModel, optional=True),
    EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples, optional=True),
    TRANSFORM_GRAPH_KEY: ChannelParameter(type=standard_artifacts.TransformGraph, optional=True),
    STATISTICS_KEY: ChannelParameter(type=standard_artifacts.ExampleStatistics, optional=True),
    SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema, optional=True),
    EVALUATION_KEY: ChannelParameter(type=standard_artifacts.ModelEvaluation, optional=True),
  }
  OUTPUTS = {
    PUSHED_MODEL_KEY: ChannelParameter(type=standard_artifacts.PushedModel),
  }
