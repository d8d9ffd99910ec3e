"""Default trainer module: a tabular model for any CSV, written to the stock TFX module contract.

Copy this file to start a module of your own: `run_fn` and `tuner_fn` are what TFX's Trainer,
this project's DistributedTrainer and TFX's Tuner call. The network on top of the model's
preprocessing is `_body`; change it, and keep its inputs and outputs:

  - in: the preprocessed float32 [batch, hparams['num_features']] vector (numbers imputed,
    standardized and binned at their quantiles, missing indicators added; text one-hot encoded
    or embedded; dates as trend and seasons; see models.tabular.model.build_model);
  - out: [batch, hparams['num_outputs']] logits (classification) or the standardized value
    (regression), as `model.default_body` returns them; the model adds the softmax, the
    sigmoid, or the rescaling to the label's units;
  - `suffix`: appended to the names of the layers it names. Under 50,000 training rows the
    model averages several copies of the network (`--hparams ensemble_size`), each named with
    its own suffix; a `_body` without this parameter is trained as one network.

Hyper-parameters come from the pipeline's `--hparams key=value,...` (custom_config['hparams'])
and, with `--tune`, from the Tuner's best trial. Importing this module registers the model's
Keras layers, so a reader that imports it (the Optimizer) loads the saved model as this model.
"""

from typing import Any

from components.distributed_trainer.trainer_api import manages_strategy, plans_own_steps
from models.tabular import model, runner, tuning


def _body(x, hparams: dict[str, Any], suffix: str = ""):
  return model.default_body(x, hparams, suffix)


# TFX Trainer (and the DistributedTrainer) will call this function.
@manages_strategy
@plans_own_steps
def run_fn(fn_args) -> None:
  """Profiles the training split, builds preprocessing + network, trains and exports."""
  runner.run(fn_args, _body)


# TFX Tuner will call this function.
@plans_own_steps
def tuner_fn(fn_args):
  """Searches width, depth and learning rate; `--tune-trials` bounds the trials."""
  return tuning.tuner_fn(fn_args, _body)
