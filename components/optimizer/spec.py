"""ComponentSpec and key constants of the Optimizer component."""

from tfx.types import component_spec, standard_artifacts

from components import artifacts

# Inputs.
MODEL_KEY = "model"
EXAMPLES_KEY = "examples"
SCHEMA_KEY = "schema"
TRANSFORM_GRAPH_KEY = "transform_graph"
# Outputs.
OPTIMIZED_MODEL_KEY = "optimized_model"
REPORT_KEY = "report"
# Parameters.
VARIANTS_KEY = "variants"  # JSON list of variant names.
TARGET_SPARSITY_KEY = "target_sparsity"
MAX_ACCURACY_DROP_KEY = "max_accuracy_drop"
MIN_AGREEMENT_KEY = "min_agreement"
TENSORRT_KEY = "tensorrt"
LATENCY_RUNS_KEY = "latency_runs"
FINE_TUNE_EPOCHS_KEY = "fine_tune_epochs"
TASK_KEY = "task"  # 'auto' or a task; a model's contract file wins.
LABEL_KEY_KEY = "label_key"  # the label as the model sees it.
MAX_TRAIN_ROWS_KEY = "max_train_rows"
MAX_EVAL_ROWS_KEY = "max_eval_rows"


class OptimizerSpec(component_spec.ComponentSpec):
  """Inputs, outputs and parameters of the Optimizer."""

  PARAMETERS = {
    VARIANTS_KEY: component_spec.ExecutionParameter(type=str),
    TARGET_SPARSITY_KEY: component_spec.ExecutionParameter(type=float),
    MAX_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float),
    MIN_AGREEMENT_KEY: component_spec.ExecutionParameter(type=float, optional=True),
    TENSORRT_KEY: component_spec.ExecutionParameter(type=str),
    LATENCY_RUNS_KEY: component_spec.ExecutionParameter(type=int),
    FINE_TUNE_EPOCHS_KEY: component_spec.ExecutionParameter(type=int),
    TASK_KEY: component_spec.ExecutionParameter(type=str),
    LABEL_KEY_KEY: component_spec.ExecutionParameter(type=str),
    MAX_TRAIN_ROWS_KEY: component_spec.ExecutionParameter(type=int),
    MAX_EVAL_ROWS_KEY: component_spec.ExecutionParameter(type=int),
  }
  INPUTS = {
    MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
    EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples),
    SCHEMA_KEY: component_spec.ChannelParameter(type=standard_artifacts.Schema, optional=True),
    TRANSFORM_GRAPH_KEY: component_spec.ChannelParameter(
      type=standard_artifacts.TransformGraph, optional=True
    ),
  }
  OUTPUTS = {
    OPTIMIZED_MODEL_KEY: component_spec.ChannelParameter(type=artifacts.OptimizedModel),
    REPORT_KEY: component_spec.ChannelParameter(type=artifacts.OptimizationReport),
  }
