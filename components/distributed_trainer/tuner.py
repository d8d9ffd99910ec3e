"""TFX's stock Tuner, with TensorFlow patches applied in its executor (see tf_compat)."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx import v1 as tfx
from tfx.components.tuner import executor as stock_tuner
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components import defaults, tf_compat
from components.distributed_trainer import steps_lib


class TunerExecutor(stock_tuner.Executor):
  """The stock Tuner executor, after `tf_compat.apply()` and a check that keras_tuner uses
  tf_keras (the process must have called `tf_compat.keras_tuner_on_tf_keras()` early).

  An unset eval step count becomes one pass over the eval split at the global batch size, as
  in the DistributedTrainer, so a tuner_fn that passes `fn_args.eval_steps` to `fit` on a
  repeated dataset ends (see steps_lib).
  """

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    tf_compat.apply()
    tf_compat.keras_tuner_on_tf_keras()
    exec_properties, _ = steps_lib.with_eval_steps(
      exec_properties,
      input_dict.get(standard_component_specs.EXAMPLES_KEY) or [],
      defaults.GLOBAL_BATCH_SIZE,
    )
    if exec_properties.get(standard_component_specs.MODULE_FILE_KEY):
      # A user's tuner_fn gets a step count, as the TFX examples set one; the default
      # module's tuner sizes each trial to the data.
      exec_properties = steps_lib.with_train_steps(exec_properties, defaults.TRAIN_STEPS)
    super().Do(input_dict, output_dict, exec_properties)


class Tuner(tfx.components.Tuner):
  """`tfx.components.Tuner` with TunerExecutor; arguments and outputs are the stock ones."""

  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TunerExecutor)
