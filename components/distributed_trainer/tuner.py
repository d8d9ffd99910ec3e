"""TFX's stock Tuner, with TensorFlow patches applied in its executor (see tf_compat)."""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.components.tuner import component as stock_tuner_component
from tfx.components.tuner import executor as stock_tuner
from tfx.components.util import udf_utils
from tfx.dsl.components.base import executor_spec
from tfx.types import standard_component_specs

from components import tf_compat
from components.distributed_trainer import steps_lib
from components.distributed_trainer.trainer_api import is_marked, plans_own_steps
from core import defaults


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
    examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
    exec_properties = tuner_properties(exec_properties, examples)
    super().Do(input_dict, output_dict, exec_properties)


def tuner_properties(
  exec_properties: dict[str, Any], examples: list[types.Artifact]
) -> dict[str, Any]:
  """The stock Tuner's properties with the step counts a tuner_fn needs filled in.

  Args:
    exec_properties: the Tuner's execution properties.
    examples: the Examples artifacts the tuner_fn reads (for one pass over the eval split).

  Returns:
    The properties with a positive EvalArgs.num_steps, and a positive TrainArgs.num_steps for
    a tuner_fn that does not plan its own steps (`trainer_api.plans_own_steps`; the default
    model's sizes each trial to the data itself).
  """
  exec_properties, _ = steps_lib.with_eval_steps(
    exec_properties, examples, defaults.GLOBAL_BATCH_SIZE
  )
  # Loaded as the stock executor loads it (it loads it again: TFX reloads a module it imports).
  tuner_fn = udf_utils.get_fn(exec_properties, standard_component_specs.TUNER_FN_KEY)
  if not is_marked(tuner_fn, plans_own_steps):
    # A tuner_fn of the stock contract gets a step count, as the TFX examples set one.
    exec_properties = steps_lib.with_train_steps(exec_properties, defaults.TRAIN_STEPS)
  return exec_properties


class Tuner(stock_tuner_component.Tuner):
  """`tfx.components.Tuner` with TunerExecutor; arguments and outputs are the stock ones."""

  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(TunerExecutor)
