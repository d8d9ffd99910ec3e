"""The default model's run: profile the data, plan the training for its size, train, export.

This is the code behind the default trainer module. It reads the schema for the columns, makes
one pass over the training split for the statistics (profile.py), sizes the run to it
(plan.py), builds a Keras model whose first layers hold the preprocessing (model.py),
trains it under the DistributedTrainer's strategy (or the default strategy in the stock TFX
Trainer) for a budget of epochs that follows the row count, stops early on a held-out slice of
the training split, and exports a SavedModel that serves raw tf.Examples or named column values.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from components import memory, model_contract
from components.distributed_trainer import distributed_trainer_lib as train_lib
from components.distributed_trainer import steps_lib, strategy_lib
from core import defaults, tasks
from models.tabular import history as epoch_history
from models.tabular import mix
from models.tabular.hparams import (
  LEARNING_RATE,
  LINEAR_LEARNING_RATE,
  SHORT_PLAN_STEPS,
  check_hparams,
  ensemble_size_for,
  hidden_units_for,
  learning_rate_for,
)
from models.tabular.inputs import (
  IN_MEMORY_MAX_BYTES,
  arrays_dataset,
  in_memory,
  load_arrays,
  make_dataset,
  memory_estimate,
)
from models.tabular.model import (
  Body,
  build_model,
  compile_model,
  ensemble_members,
  evaluate,
  export_saved_model,
  hidden_layer_name,
  is_plain_member,
  member_suffix,
  names_members,
)
from models.tabular.plan import (
  RunSettings,
  TrainingPlan,
  plan_training,
  prepare,
  settings_from_fn_args,
)
from models.tabular.profile import Profile, TabularInputError, describe_inputs

_LOG = logging.getLogger(__name__)

# The module_style a run of this model records (custom_network's runs record 'build_model').
MODULE_STYLE = "tabular"


# ----------------------------------------------------------------------------- publish, warm start


def publish(export: Callable[[str], None], serving_model_dir: str) -> None:
  """Writes an export into a staging folder beside `serving_model_dir`, then renames it."""
  import tensorflow as tf

  staging = f"{serving_model_dir.rstrip('/')}.staging-{uuid.uuid4().hex}"
  try:
    export(staging)
    if tf.io.gfile.exists(serving_model_dir):
      tf.io.gfile.rmtree(serving_model_dir)
    tf.io.gfile.rename(staging, serving_model_dir)
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)


def load_base(base_model_dir: str):
  """The Keras model of a base SavedModel (the live version) to warm-start from."""
  import tensorflow as tf

  base = tf.keras.models.load_model(base_model_dir, compile=False)
  _LOG.info("Warm start from %s", base_model_dir)
  return base


def hidden_width(model) -> int | None:
  """The width of a default model's hidden layers (its first member's in an ensemble); None for
  a network without them (a build_model module's)."""
  layer = _base_layer(hidden_layer_name(0), {layer.name: layer for layer in model.layers})
  units = getattr(layer, "units", None)
  return int(units) if units else None


def warm_start(model, base) -> tuple[list[str], str]:
  """Copies the weights of same-named, same-shaped layers from a base model (`load_base`).

  Layers whose shapes changed (a new vocabulary, a new class, another width) keep their fresh
  weights. A table that crossed ENSEMBLE_MAX_ROWS between the base's training and this one
  changes between one network and an ensemble (`build_model`): the members built like one
  network then start from the base's network (the simpler ones fresh), and one network from the
  base ensemble's first member.

  Returns:
    The names of the layers that were copied, and a sentence for the run summary saying how
    many of the model's weighted layers that is (and, where hidden layers changed width, that
    they did).
  """
  base_layers = {layer.name: layer for layer in base.layers}
  weighted = [layer for layer in model.layers if layer.weights]
  copied, reshaped, new = [], [], []
  for layer in weighted:
    source = _base_layer(layer.name, base_layers)
    if source is None:
      new.append(layer.name)
      continue
    weights = source.get_weights()
    if [w.shape for w in weights] == [tuple(w.shape) for w in layer.weights]:
      layer.set_weights(weights)
      copied.append(layer.name)
    else:
      reshaped.append(layer.name)
  _LOG.info("Warm start: copied %s; shapes changed: %s; new: %s", copied, reshaped, new)
  note = f"{len(copied)} of {len(weighted)} layers with weights copied from the base model"
  fresh = [f"{len(reshaped)} changed shape ({_some(reshaped)})"] if reshaped else []
  fresh += [f"{len(new)} are new ({_some(new)})"] if new else []
  if fresh:
    note += "; " + " and ".join(fresh) + ", and start fresh"
  if reshaped:
    note += " (new values in a text column, new classes or another width)"
  was, now = hidden_width(base), hidden_width(model)
  if was and now and was != now:
    note += f"; its hidden layers were {was} units wide and are {now} now (--hparams hidden_units)"
  return copied, note


def _some(names: list[str], shown: int = 3) -> str:
  more = f" and {len(names) - shown} more" if len(names) > shown else ""
  return ", ".join(names[:shown]) + more


def _base_layer(name: str, base_layers: dict):
  """The base model's layer for this model's layer `name`: the same name, else the same layer
  of the base's single network (for the members built like it, `member_hparams`'s even ones) or
  of its first member (for a single network)."""
  if name in base_layers:
    return base_layers[name]
  member = re.search(f"{model_contract.MEMBER_SUFFIX_PATTERN}$", name)
  if member is None:
    return base_layers.get(name + member_suffix(0))
  if is_plain_member(int(member.group(1))):
    return base_layers.get(name[: member.start()])
  return None


# ----------------------------------------------------------------------------- run


def run(
  fn_args, body: Body | None = None, module_style: str = MODULE_STYLE
) -> train_lib.TrainResult:
  """Trains and exports the tabular model for a run_fn call.

  Under the DistributedTrainer, `fn_args` carries the strategy built for this process (and
  whether it is the chief); under the stock Trainer the default strategy is used.

  Args:
    fn_args: stock FnArgs or the DistributedTrainer's DistributedFnArgs.
    body: the network on the preprocessed vector; None for `default_body`.
    module_style: recorded on the result ('tabular' or 'build_model').

  Returns:
    This process's TrainResult (also written under model_run_dir).
  """
  settings = settings_from_fn_args(fn_args, module_style == defaults.BUILD_MODEL_FN)
  built = getattr(fn_args, "built_strategy", None) or strategy_lib.default_strategy()
  attempt = int(getattr(fn_args, "attempt", 0) or 0)
  return train(settings, built, body, attempt, module_style)


def train(
  settings: RunSettings,
  built: strategy_lib.BuiltStrategy,
  body: Body | None = None,
  attempt: int = 0,
  module_style: str = MODULE_STYLE,
) -> train_lib.TrainResult:
  """Profiles, plans, builds, fits under `built`, and on the chief evaluates and exports.

  Args:
    settings: what to train on and how.
    built: the strategy of this process.
    body: the network on the preprocessed vector; None for `default_body`.
    attempt: restart count of a surrounding local cluster.
    module_style: recorded on the result.

  Returns:
    This process's TrainResult.
  """
  import tensorflow as tf

  from components import tf_compat

  tf_compat.apply()
  if settings.mixed_precision not in train_lib.MIXED_PRECISION_POLICIES:
    raise TabularInputError(
      f"mixed_precision={settings.mixed_precision!r}; use one of "
      f"{train_lib.MIXED_PRECISION_POLICIES}."
    )
  hparams = check_hparams(settings.hparams, module_style == defaults.BUILD_MODEL_FN)
  settings = dataclasses.replace(settings, hparams=hparams)
  profile, train_files, eval_files = prepare(settings)
  # An ensemble needs a network that names its layers per member (a build_model module's
  # network, or a copied module's older `_body`, is trained as one).
  members = 1
  if names_members(body):
    members = ensemble_size_for(hparams, profile.rows, fixed_steps=bool(settings.train_steps))
  base, kept_width = None, ""
  if settings.base_model:
    base = load_base(settings.base_model)
    width, sized = hidden_width(base), hidden_units_for(profile.rows)
    # A warm start keeps the live network's width where the rows would size it otherwise, so
    # that its hidden layers carry over as the table grows (or shrinks) past a size.
    if hparams["hidden_units"] is None and width and width != sized:
      hparams = {**hparams, "hidden_units": width}
      settings = dataclasses.replace(settings, hparams=hparams)
      kept_width = (
        f"; kept the base model's width of {width} units, where {profile.rows:,} training rows "
        f"would size it {sized} (--hparams hidden_units={sized} resizes it)"
      )
  plan = _plan(settings, built, profile, members, linear=bool(hparams["linear_member"]))
  rate = learning_rate_for(hparams, _plan_steps(settings, plan))
  if hparams["learning_rate"] is None and rate != LEARNING_RATE:
    plan = dataclasses.replace(
      plan,
      reason=f"{plan.reason}; a learning rate of {rate:g}, as {plan.epochs} epochs of "
      f"{plan.steps_per_epoch} steps are under {SHORT_PLAN_STEPS:,} steps",
    )
  hparams = {**hparams, "learning_rate": rate}
  settings = dataclasses.replace(settings, hparams=hparams)
  linear_share = 0.0 if plan.linear is not None else None
  previous_policy = tf.keras.mixed_precision.global_policy()
  if settings.mixed_precision:
    tf.keras.mixed_precision.set_global_policy(settings.mixed_precision)
  try:
    # Same initial weights in every process and run, so runs differ only by the strategy.
    tf.keras.utils.set_random_seed(settings.seed)
    with built.strategy.scope():
      model = build_model(profile, hparams, body, members, settings.seed, linear_share)
      warm, warm_note = warm_start(model, base) if base is not None else ([], "")
      networks = ensemble_members(model)
      for i, network in enumerate(networks):
        rate = LINEAR_LEARNING_RATE if i == members else float(hparams["learning_rate"])
        compile_model(network, profile, rate, settings.steps_per_execution)
    dataset_fn, validation = _training_data(settings, built, profile, plan, train_files)
    # Each member fits on its own, from its own seed's initial weights and shuffle.
    fits = [
      train_lib.fit(
        network,
        built,
        functools.partial(dataset_fn, seed=settings.seed + i),
        _fit_config(settings, plan, attempt, validation, member=i if members > 1 else None),
      )
      for i, network in enumerate(networks)
    ]
    fit = _combined(fits, model)
    if members > 1:
      epochs = [{"epochs_run": f["epochs_run"], "best_epoch": f["best_epoch"]} for f in fits]
      plan = dataclasses.replace(plan, members=tuple(epochs[:members]))
      if linear_share is not None:
        outputs, target = mix.held_out_outputs(networks, validation)
        linear_share, losses = mix.choose_linear_share(
          profile.label.task, outputs[:members], outputs[members], target
        )
        _LOG.info(
          "Linear member's share: %g (held-out loss of each share: %s)", linear_share, losses
        )
        plan = dataclasses.replace(
          plan,
          linear={
            **epochs[members],
            "share": linear_share,
            "held_out_loss": {f"{a:g}": loss for a, loss in losses.items()},
          },
        )
    result = train_lib.TrainResult.under(
      built,
      module_style,
      task=profile.label.task,
      hparams={
        **{k: v for k, v in hparams.items() if isinstance(v, int | float | str | bool)},
        "hidden_units": int(hparams["hidden_units"] or hidden_units_for(profile.rows)),
      },
      warm_started_layers=warm,
      plan={
        **plan.to_json(),
        "inputs": describe_inputs(profile.columns, date_parts=profile.date_parts),
        **({"warm_start": warm_note + kept_width} if warm_note else {}),
      },
      **fit,
    )
    if built.is_chief:
      # An ensemble's chart is its first member's.
      epoch_history.write_history(settings.model_run_dir, getattr(networks[0], "history", None))
      _evaluate_and_publish(model, settings, profile, plan, body, eval_files, result)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  train_lib.write_result(settings.model_run_dir, result)
  # The rows held in memory live as long as the datasets that gather from them.
  del dataset_fn, validation
  memory.release()
  return result


def _combined(fits: list[dict[str, Any]], model) -> dict[str, Any]:
  """One TrainResult's fit fields for an ensemble's members: the first member's epochs (its
  chart is the one kept), every member's steps and seconds, the digest of all the weights."""
  if len(fits) == 1:
    return fits[0]
  seconds = sum(f["train_seconds"] for f in fits)
  return {
    **fits[0],
    "steps_run": sum(f["steps_run"] for f in fits),
    "train_seconds": seconds,
    "train_examples_per_sec": (
      sum(f["train_examples_per_sec"] * f["train_seconds"] for f in fits) / seconds
      if seconds
      else fits[0]["train_examples_per_sec"]
    ),
    "weights_sha256": train_lib.weights_digest(model.get_weights()),
  }


def _plan(
  settings: RunSettings, built, profile: Profile, members: int = 1, linear: bool = False
) -> TrainingPlan:
  """The run's TrainingPlan, checked against the steps `profile_steps` asks to profile."""
  hparams = settings.hparams
  plan = plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    hparams.get("batch_size"),
    settings.num_epochs,
    hparams.get("max_epochs"),
    # Keras cannot run validation under ParameterServerStrategy.
    early_stopping=built.choice.name != defaults.PARAMETER_SERVER,
    stopping_window=int(hparams.get("stopping_window", 1)),
    members=members,
    holdout_by=profile.holdout_group[0] if profile.holdout_group else "",
    linear=linear,
  )
  _LOG.info("Training plan: %s", plan.reason)
  steps_lib.check_profile_steps(settings.profile_steps, plan.epochs * plan.steps_per_epoch)
  return plan


def _plan_steps(settings: RunSettings, plan: TrainingPlan) -> int | None:
  """Steps the data-sized plan gives each network at most; None where the run sets them
  (--train-steps, or hparams max_epochs)."""
  if settings.train_steps or settings.hparams.get("max_epochs"):
    return None
  return plan.epochs * plan.steps_per_epoch


def _fit_config(
  settings: RunSettings, plan: TrainingPlan, attempt: int, validation, member: int | None = None
) -> train_lib.FitConfig:
  """How train_lib.fit runs the plan, scoring `validation` (or nothing) after every epoch.

  An ensemble's member (`member`) backs up into a folder of its own, so that a restarted run
  resumes each member from its own state.
  """
  import tensorflow as tf

  if validation is not None:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    options.autotune.enabled = False  # See tf_compat.without_autotune.
    # Repeated, with as many steps as one pass has batches: Keras needs a step count with
    # steps_per_execution > 1, and every epoch then scores the same held-out rows.
    validation = validation.with_options(options).repeat()
  return train_lib.FitConfig(
    model_run_dir=settings.model_run_dir,
    epochs=plan.epochs,
    steps_per_epoch=plan.steps_per_epoch,
    global_batch_size=plan.batch_size,
    attempt=attempt,
    profile_steps=settings.profile_steps,
    steps_per_execution=settings.steps_per_execution,
    backup_dir=_member_backup_dir(settings, member),
    validation=validation,
    validation_steps=math.ceil(plan.holdout_rows / plan.batch_size) if validation else 0,
    patience=plan.patience,
    smooth_epochs=plan.smooth_epochs,
  )


def _member_backup_dir(settings: RunSettings, member: int | None) -> str | None:
  if member is None:
    return settings.backup_dir
  base = settings.backup_dir
  base = base or train_lib.run_state_dir(settings.model_run_dir, train_lib.BACKUP_DIR)
  return f"{base.rstrip('/')}/member_{member}"


def _evaluate_and_publish(
  model,
  settings: RunSettings,
  profile: Profile,
  plan: TrainingPlan,
  body: Body | None,
  eval_files: list[str],
  result: train_lib.TrainResult,
) -> None:
  """The chief's last steps: scores the eval split into `result` and publishes the SavedModel."""
  # A fresh model outside the strategy scope: evaluation and export need no collectives
  # with the other workers and carry no distribution state.
  started = time.perf_counter()
  share = plan.linear["share"] if plan.linear is not None else None
  plain = build_model(profile, settings.hparams, body, plan.ensemble, linear_share=share)
  plain.set_weights(model.get_weights())
  eval_ds = make_dataset(eval_files, profile, plan.batch_size, training=False)
  if settings.eval_steps:
    eval_ds = eval_ds.take(settings.eval_steps)
  metrics = evaluate(plain, eval_ds, profile.label.task)
  result.eval_metrics = metrics
  result.eval_accuracy = metrics.get("accuracy")
  evaluated = time.perf_counter()
  _LOG.info("Tabular model eval in %.1f s: %s", evaluated - started, metrics)
  publish(lambda d: export_saved_model(plain, profile, d), settings.serving_model_dir)
  _LOG.info("Tabular model exported in %.1f s.", time.perf_counter() - evaluated)


def _training_data(settings, built, profile: Profile, plan: TrainingPlan, train_files):
  """(dataset_fn for fit, held-out batches or None).

  A training split that fits in IN_MEMORY_MAX_BYTES is parsed once and held in memory, so
  epochs after the first cost no reading, decompressing or parsing. Larger ones stream from the
  files every epoch. Parameter-server workers build their input on other
  machines, so they always stream.
  """
  every = profile.holdout_every if plan.holdout_rows else 0
  streamed = (
    built.choice.name == defaults.PARAMETER_SERVER or memory_estimate(profile) > IN_MEMORY_MAX_BYTES
  )
  if not streamed:
    fit_rows, held_rows = load_arrays(train_files, profile, every)
    _LOG.info("Training data in memory: %d fit rows, %d held out.", len(fit_rows), len(held_rows))
    batches = functools.partial(arrays_dataset, fit_rows)
    held = arrays_dataset(held_rows, plan.batch_size, training=False) if every else None
  else:
    part = train_lib.FIT_RECORDS if every else train_lib.ALL_RECORDS
    batches = functools.partial(
      make_dataset,
      train_files,
      profile,
      holdout=part,
      every=every or train_lib.HOLDOUT_EVERY,
      group=profile.holdout_group,
    )
    held = _held_out_in_memory(train_files, profile, plan.batch_size) if every else None

  def dataset_fn(input_context, seed: int = settings.seed):
    # Each input pipeline reads its own shard, at its replicas' share of the global batch.
    return batches(
      input_context.get_per_replica_batch_size(plan.batch_size),
      training=True,
      seed=seed,
      num_shards=input_context.num_input_pipelines,
      shard_index=input_context.input_pipeline_id,
    )

  return dataset_fn, held


def _held_out_in_memory(train_files, profile: Profile, batch_size: int):
  """The held-out slice of the training files, read once and kept as parsed batches."""
  held = make_dataset(
    train_files,
    profile,
    batch_size,
    training=False,
    holdout=train_lib.HOLDOUT_RECORDS,
    every=profile.holdout_every,
    group=profile.holdout_group,
  )
  return in_memory(held, batch_size)


# ----------------------------------------------------------------------------- tuning


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
  base = settings.hparams
  plan = plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    base.get("batch_size"),
    settings.num_epochs,
    20,
  )
  # The trials' default rate is the one the trainer would use on its own plan.
  trainer_plan = plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    base.get("batch_size"),
    settings.num_epochs,
    base.get("max_epochs"),
  )
  base = {**base, "learning_rate": learning_rate_for(base, _plan_steps(settings, trainer_plan))}
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
      "validation_data": held,
      "validation_steps": held_steps,
      "steps_per_epoch": plan.steps_per_epoch,
      "epochs": plan.epochs,
      "verbose": 0,
      "callbacks": callbacks,
    },
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
    return batches(True, train_lib.ALL_RECORDS), batches(False, train_lib.ALL_RECORDS), None
  train = batches(True, train_lib.FIT_RECORDS)
  held = _held_out_in_memory(train_files, profile, plan.batch_size)
  return train, held.repeat(), math.ceil(plan.holdout_rows / plan.batch_size)
