"""The default model's tuner_fn: a keras_tuner search scored on the held-out slice."""

from __future__ import annotations

import math
from typing import Any

from components.distributed_trainer import trainer_api
from core import tasks
from models.tabular.hparams import hidden_units_for, learning_rate_for
from models.tabular.inputs import held_out_in_memory, make_dataset
from models.tabular.model import Body, build_model, compile_model
from models.tabular.plan import (
  TrainingPlan,
  plan_steps,
  plan_training,
  prepare,
  settings_from_fn_args,
)
from models.tabular.profile import Profile


def tuner_fn(fn_args, body: Body | None = None, max_trials: int | None = None):
  """A keras_tuner RandomSearch over width, depth and learning rate (stock Tuner contract).

  Each trial trains on the training split but its held-out slice for the data-sized plan's
  epochs (at most 20), and is scored on the held-out slice; the eval split stays for the
  Evaluator.

  Args:
    fn_args: the stock Tuner's FnArgs (custom_config as for `run`, plus `tune_trials`).
    body: the network of build_model modules; None for `default_body`.
    max_trials: trials to run; default custom_config['tune_trials'] or 10.

  Returns:
    tfx.components.TunerFnResult.
  """
  import keras_tuner
  import tensorflow as tf
  from tfx import v1 as tfx

  settings = settings_from_fn_args(fn_args)
  custom = dict(getattr(fn_args, "custom_config", None) or {})
  profile, train_files, _ = prepare(settings)
  base = dict(settings.hparams)
  plan = _plan(settings, profile, base, 20)
  # The trials' default rate is the one the trainer would use on its own plan.
  trainer_plan = _plan(settings, profile, base, base.get("max_epochs"))
  base["learning_rate"] = learning_rate_for(
    base, plan_steps(settings, trainer_plan), trainer_plan.batch_size
  )
  space = _search_space(base, profile.rows)

  def build(hp):
    model = build_model(profile, {**base, **hp.values}, body)
    compile_model(model, profile, float(hp.get("learning_rate")), settings.steps_per_execution)
    return model

  regression = profile.label.task == tasks.REGRESSION
  tuner = keras_tuner.RandomSearch(
    build,
    objective=keras_tuner.Objective(
      "val_rmse" if regression else "val_accuracy", "min" if regression else "max"
    ),
    max_trials=int(max_trials or custom.get("tune_trials") or 10),
    hyperparameters=space,
    directory=fn_args.working_dir,
    project_name="tabular",
    seed=settings.seed,
  )
  train, held, held_steps = _tuning_data(train_files, profile, plan)
  callbacks = [tf.keras.callbacks.TerminateOnNaN()]
  validation = {"validation_data": held}
  if held_steps:
    # The held-out slice, through one iterator for the whole trial, first so that the callbacks
    # after it (the tuner's own among them) read its logs. Scoring on every row stays Keras'.
    callbacks.insert(0, trainer_api.held_out_evaluation(held, held_steps))
    validation = {}
  if plan.patience:
    callbacks.append(
      tf.keras.callbacks.EarlyStopping(
        "val_loss", patience=plan.patience, restore_best_weights=True
      )
    )
  return tfx.components.TunerFnResult(
    tuner=tuner,
    fit_kwargs={
      "x": train,
      **validation,
      "steps_per_epoch": plan.steps_per_epoch,
      "epochs": plan.epochs,
      "verbose": 0,
      "callbacks": callbacks,
    },
  )


def _plan(settings, profile, base: dict, max_epochs: int | None):
  """The data-sized plan of `base`'s batch, up to `max_epochs` (None: the budget's)."""
  return plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    base.get("batch_size"),
    settings.num_epochs,
    max_epochs,
  )


def _search_space(base: dict[str, Any], rows: int):
  """The trials' choices, each with the configured value as its default."""
  import keras_tuner

  space = keras_tuner.HyperParameters()
  width = base["hidden_units"] or hidden_units_for(rows)
  space.Choice("hidden_units", sorted({64, 128, 256, 512, int(width)}), default=int(width))
  space.Int("num_layers", 1, 3, default=int(base["num_layers"]))
  space.Choice("learning_rate", [3e-4, 1e-3, 3e-3], default=float(base["learning_rate"]))
  space.Choice("dropout", [0.0, 0.1, 0.3], default=float(base["dropout"]))
  return space


def _tuning_data(train_files, profile: Profile, plan: TrainingPlan):
  """(training batches, scoring batches, scoring steps or None) for the trials.

  With a held-out slice the trials fit on the other rows and are scored on it, held in memory
  and repeated, so every epoch scores the same rows. Without one they fit on, and are scored
  on, every training row.
  """

  def batches(training: bool, part: str):
    return make_dataset(
      train_files,
      profile,
      plan.batch_size,
      training=training,
      holdout=part,
      every=profile.holdout_every,
      group=profile.holdout_group,
    )

  if not plan.holdout_rows:
    return batches(True, trainer_api.ALL_RECORDS), batches(False, trainer_api.ALL_RECORDS), None
  train = batches(True, trainer_api.FIT_RECORDS)
  held = held_out_in_memory(train_files, profile, plan.batch_size)
  return train, held.repeat(), math.ceil(plan.holdout_rows / plan.batch_size)
