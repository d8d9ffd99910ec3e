"""ComponentSpec and key constants of the Optimizer component."""

from tfx.types import component_spec, standard_artifacts

from components.optimizer import artifacts

# Inputs.
MODEL_KEY = "model"
EXAMPLES_KEY = "examples"
SCHEMA_KEY = "schema"
# Outputs.
OPTIMIZED_MODEL_KEY = "optimized_model"
REPORT_KEY = "report"
# Parameters.
VARIANTS_KEY = "variants"  # JSON list of variant names.
TARGET_SPARSITY_KEY = "target_sparsity"
MAX_ACCURACY_DROP_KEY = "max_accuracy_drop"
TENSORRT_KEY = "tensorrt"
LATENCY_RUNS_KEY = "latency_runs"
FINE_TUNE_EPOCHS_KEY = "fine_tune_epochs"
INT8_FALLBACK_KEY = "int8_fallback"  # 0 or 1.
MAX_TRAIN_ROWS_KEY = "max_train_rows"
MAX_EVAL_ROWS_KEY = "max_eval_rows"

# Splits of the Examples artifact the Optimizer reads.
TRAIN_SPLIT = "train"
EVAL_SPLIT = "eval"
# Sub-folder of the Model artifact with the Keras copy (see the pipeline's model layout).
KERAS_MODEL_DIR = "Format-Keras"


class OptimizerSpec(component_spec.ComponentSpec):
  """Inputs, outputs and parameters of the Optimizer."""

  PARAMETERS = {
    VARIANTS_KEY: component_spec.ExecutionParameter(type=str),
    TARGET_SPARSITY_KEY: component_spec.ExecutionParameter(type=float),
    MAX_ACCURACY_DROP_KEY: component_spec.ExecutionParameter(type=float),
    TENSORRT_KEY: component_spec.ExecutionParameter(type=str),
    LATENCY_RUNS_KEY: component_spec.ExecutionParameter(type=int),
    FINE_TUNE_EPOCHS_KEY: component_spec.ExecutionParameter(type=int),
    INT8_FALLBACK_KEY: component_spec.ExecutionParameter(type=int),
    MAX_TRAIN_ROWS_KEY: component_spec.ExecutionParameter(type=int),
    MAX_EVAL_ROWS_KEY: component_spec.ExecutionParameter(type=int),
  }
  INPUTS = {
    MODEL_KEY: component_spec.ChannelParameter(type=standard_artifacts.Model),
    EXAMPLES_KEY: component_spec.ChannelParameter(type=standard_artifacts.Examples),
    SCHEMA_KEY: component_spec.ChannelParameter(type=standard_artifacts.Schema, optional=True),
  }
  OUTPUTS = {
    OPTIMIZED_MODEL_KEY: component_spec.ChannelParameter(type=artifacts.OptimizedModel),
    REPORT_KEY: component_spec.ChannelParameter(type=artifacts.OptimizationReport),
  }
