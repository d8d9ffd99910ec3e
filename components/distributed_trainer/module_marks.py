"""Marks a trainer module may put on its functions: its public hooks into the DistributedTrainer.

Open to any module (the default model, models/tabular/module.py, uses both); plain Python, so
modules and the Tuner import it without TensorFlow.
"""

from collections.abc import Callable


def manages_strategy(fn):
  """Marks a run_fn that builds its model under `fn_args.built_strategy` itself.

  The DistributedTrainer then calls it outside the strategy's scope, so the function can, for
  example, build an undistributed copy of the model for evaluation and export on the chief.
  Stock run_fns (unmarked) run inside the scope, as TensorFlow's distribution guides show.
  A marked run_fn writes this process's TrainResult (`distributed_trainer_lib.write_result`),
  which the trainer reads back.
  """
  fn.manages_strategy = True
  return fn


def plans_own_steps(fn):
  """Marks a run_fn or tuner_fn that sizes its training itself when given no step count.

  Unmarked functions get `fn_args.train_steps` = defaults.TRAIN_STEPS when the pipeline sets
  none, as the stock Trainer's examples set one; marked ones get None and choose (the default
  model sizes its epochs to the rows).
  """
  fn.plans_own_steps = True
  return fn


def is_marked(fn: Callable, mark: Callable) -> bool:
  """Whether `fn` carries `mark` (`manages_strategy` or `plans_own_steps`)."""
  return bool(getattr(fn, mark.__name__, False))
