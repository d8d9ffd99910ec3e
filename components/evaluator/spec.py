"""Spec keys and ComponentSpec of the Evaluator: stock TFX's, plus the automatic floor and the
live version's schema."""

import tensorflow_model_analysis as tfma
from tfx.types import standard_artifacts, standard_component_specs
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

# JSON {"task": ...} when the floor is automatic (floor_lib); absent or "" otherwise.
AUTO_FLOOR_KEY = "auto_floor"
# The EvalConfig (JSON) of a count label's quantity reading: the Evaluator takes it instead of
# `eval_config` when the candidate Model's task is regression; absent for other labels.
QUANTITY_EVAL_CONFIG_KEY = "quantity_eval_config"
# The schema the live version was trained on (LiveModel's reference_schema).
BASELINE_SCHEMA_KEY = "baseline_schema"


class EvaluatorSpec(standard_component_specs.EvaluatorSpec):
  """The stock EvaluatorSpec plus `auto_floor` and the live version's schema."""

  PARAMETERS = {
    **standard_component_specs.EvaluatorSpec.PARAMETERS,
    AUTO_FLOOR_KEY: ExecutionParameter(type=str, optional=True),
    QUANTITY_EVAL_CONFIG_KEY: ExecutionParameter(type=tfma.EvalConfig, optional=True),
  }
  INPUTS = {
    **standard_component_specs.EvaluatorSpec.INPUTS,
    BASELINE_SCHEMA_KEY: ChannelParameter(type=standard_artifacts.Schema, optional=True),
  }
