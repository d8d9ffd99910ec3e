"""The trainer module of `build_model(hparams)` modules: the default model around their network.

A module that defines only `build_model(hparams)` is trained by this module's `run_fn`: the
DistributedTrainer loads it by its module path (`core.defaults.BUILD_MODEL_RUN_FN`), as it
loads any module, and hands it the module's function as `fn_args.build_model`. Preprocessing,
input, fit, evaluation and export are the default model's; the network between them is theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from components.distributed_trainer.trainer_api import manages_strategy, plans_own_steps
from core import defaults
from models.tabular import runner
from models.tabular.model import Body
from models.tabular.profile import TabularInputError


# The DistributedTrainer will call this function for a module that defines only build_model.
@manages_strategy
@plans_own_steps
def run_fn(fn_args) -> None:
  """Trains the default model with the network that `fn_args.build_model(hparams)` returns.

  Raises:
    TabularInputError: when fn_args carries no build_model.
  """
  build_model = getattr(fn_args, "build_model", None)
  if build_model is None:
    raise TabularInputError(
      "this run_fn trains the network of a build_model(hparams) module and got none; give the "
      "DistributedTrainer the module (module_file=...): it passes build_model as "
      "fn_args.build_model."
    )
  runner.run(fn_args, build_model_adapter(build_model), module_style=defaults.BUILD_MODEL_FN)


def build_model_adapter(build_model_fn: Callable[[dict[str, Any]], Any]) -> Body:
  """Turns a `build_model(hparams)` module function into a model body.

  The module's model takes the preprocessed float32 [batch, hparams['num_features']] vector
  and returns [batch, hparams['num_outputs']]: logits (classification) or the standardized
  value (regression); the model adds the softmax, sigmoid or rescaling.
  """

  def body(x, hparams):
    model = build_model_fn(dict(hparams))
    _check_user_model(model, hparams)
    return model(x)

  return body


def _check_user_model(model, hparams: dict[str, Any]) -> None:
  import tensorflow as tf

  if not isinstance(model, tf.keras.Model):
    raise TabularInputError(
      f"build_model returned {type(model).__name__}; it must return a tf.keras.Model."
    )
  inputs = getattr(model, "inputs", None)
  if not inputs or len(inputs) != 1 or inputs[0].shape[-1] != hparams["num_features"]:
    raise TabularInputError(
      "build_model must return a model with ONE float input of shape "
      f"[batch, {hparams['num_features']}] (hparams['num_features']); got inputs {inputs}."
    )
  if model.outputs[0].shape[-1] != hparams["num_outputs"]:
    raise TabularInputError(
      f"build_model returned {model.outputs[0].shape[-1]} outputs; for a "
      f"{hparams['task']} label it must return hparams['num_outputs']={hparams['num_outputs']}."
    )
