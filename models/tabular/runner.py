"""The default model's run: profile the data, plan the training for its size, train, export.

This is the code behind the default trainer module. It reads the schema for the columns, makes
one pass over the training split for the statistics (profile.py), sizes the run to it
(plan.py), builds a Keras model whose first layers hold the preprocessing (model.py), warm
started from the live version where there is one (base_model.py),
trains it under the DistributedTrainer's strategy (or the default strategy in the stock TFX
Trainer) for a budget of epochs that follows the row count, stops early on a held-out slice of
the training split, and exports a SavedModel that serves raw tf.Examples or named column values
(export.py). The Tuner's search over the same model is tuning.py.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
from typing import Any

from components import memory
from components.distributed_trainer import trainer_api
from core import defaults, tasks
from models.tabular import history as epoch_history
from models.tabular import joint_fit, mix, readings, stream
from models.tabular.base_model import keep_width, load_base, warm_start
from models.tabular.export import evaluate_and_publish
from models.tabular.hparams import (
  LINEAR_LEARNING_RATE,
  SHORT_PLAN_LEARNING_RATE,
  SHORT_PLAN_STEPS,
  check_hparams,
  ensemble_size_for,
  hidden_units_for,
  learning_rate_for,
  warmup_steps_for,
)
from models.tabular.inputs import (
  IN_MEMORY_MAX_BYTES,
  arrays_dataset,
  held_out_in_memory,
  load_arrays,
  make_dataset,
  memory_estimate,
)
from models.tabular.model import Body, build_model, compile_model, ensemble_members, names_members
from models.tabular.plan import (
  RunSettings,
  TrainingPlan,
  plan_steps,
  plan_training,
  prepare,
  settings_from_fn_args,
)
from models.tabular.profile import Profile, TabularInputError, describe_inputs

_LOG = logging.getLogger(__name__)

# The module_style a run of this model records (custom_network's runs record 'build_model').
MODULE_STYLE = "tabular"


# ----------------------------------------------------------------------------- run


def run(
  fn_args, body: Body | None = None, module_style: str = MODULE_STYLE
) -> trainer_api.TrainResult:
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
  built = getattr(fn_args, "built_strategy", None) or trainer_api.default_strategy()
  attempt = int(getattr(fn_args, "attempt", 0) or 0)
  return train(settings, built, body, attempt, module_style)


def train(
  settings: RunSettings,
  built: trainer_api.BuiltStrategy,
  body: Body | None = None,
  attempt: int = 0,
  module_style: str = MODULE_STYLE,
) -> trainer_api.TrainResult:
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
  if settings.mixed_precision not in trainer_api.MIXED_PRECISION_POLICIES:
    raise TabularInputError(
      f"mixed_precision={settings.mixed_precision!r}; use one of "
      f"{trainer_api.MIXED_PRECISION_POLICIES}."
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
    hparams, kept_width = keep_width(hparams, profile.rows, base)
    settings = dataclasses.replace(settings, hparams=hparams)
  settings, plan = _sized_plan(settings, built, profile, members)
  profile = _with_readings(settings, profile, plan)
  previous_policy = tf.keras.mixed_precision.global_policy()
  if settings.mixed_precision:
    tf.keras.mixed_precision.set_global_policy(settings.mixed_precision)
  try:
    model, networks, warm, warm_note = _build(settings, built, profile, body, members, plan, base)
    dataset_fn, validation = _training_data(settings, built, profile, plan, train_files)
    fits, fit, history = _fit(
      settings, built, model, networks, dataset_fn, validation, plan, attempt
    )
    plan, kept = _after_fit(plan, fits, networks, validation, profile, members)
    warm_start_note = warm_note + kept_width if warm_note else ""
    served = readings.kept_profile(profile, kept) if kept is not None else profile
    result = _result(built, module_style, settings, served, plan, warm, warm_start_note, fit)
    if built.is_chief:
      # An ensemble's chart is its first member's.
      epoch_history.write_history(settings.model_run_dir, history)
      evaluate_and_publish(model, settings, profile, plan, body, eval_files, result, kept)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  trainer_api.write_result(settings.model_run_dir, result)
  # The rows held in memory live as long as the datasets that gather from them.
  del dataset_fn, validation
  memory.release()
  return result


def _sized_plan(
  settings: RunSettings, built, profile: Profile, members: int
) -> tuple[RunSettings, TrainingPlan]:
  """The run's plan, and the settings with the learning rate its steps call for.

  Where the data-sized plan is short (`learning_rate_for`) and hparams set no rate, the plan's
  sentence names the larger rate.
  """
  hparams = settings.hparams
  plan = _plan(settings, built, profile, members, linear=bool(hparams["linear_member"]))
  steps = plan_steps(settings, plan)
  rate = learning_rate_for(hparams, steps, plan.batch_size)
  if hparams["learning_rate"] is None and rate == SHORT_PLAN_LEARNING_RATE:
    plan = dataclasses.replace(
      plan,
      reason=f"{plan.reason}; a learning rate of {rate:g}, as {plan.epochs} epochs of "
      f"{plan.steps_per_epoch} steps are under {SHORT_PLAN_STEPS:,} steps",
    )
  total = plan.epochs * plan.steps_per_epoch
  warmup = warmup_steps_for(hparams, plan.batch_size, total, plan.steps_per_epoch)
  if warmup:
    plan = dataclasses.replace(
      plan,
      warmup_steps=warmup,
      reason=f"{plan.reason}; a learning rate of {rate:.3g} for batches of {plan.batch_size}, "
      f"reached over the first {warmup} steps",
    )
  return dataclasses.replace(settings, hparams={**hparams, "learning_rate": rate}), plan


def _build(
  settings: RunSettings,
  built,
  profile: Profile,
  body: Body | None,
  members: int,
  plan: TrainingPlan,
  base,
) -> tuple[Any, list, list[str], str]:
  """The model built under `built`'s scope, warm-started from `base`, each network compiled.

  Returns:
    (the model, its networks (`ensemble_members`), the layers warm-started, the warm-start
    note: both empty without a base).
  """
  import tensorflow as tf

  hparams = settings.hparams
  linear_share = 0.0 if plan.linear is not None else None
  # Same initial weights in every process and run, so runs differ only by the strategy.
  tf.keras.utils.set_random_seed(settings.seed)
  with built.strategy.scope():
    model = build_model(profile, hparams, body, members, settings.seed, linear_share)
    warm, warm_note = warm_start(model, base) if base is not None else ([], "")
    networks = ensemble_members(model)
    for i, network in enumerate(networks):
      rate = LINEAR_LEARNING_RATE if i == members else float(hparams["learning_rate"])
      compile_model(network, profile, rate, settings.steps_per_execution)
  return model, networks, warm, warm_note


def _with_readings(settings: RunSettings, profile: Profile, plan: TrainingPlan) -> Profile:
  """The profile, set to train both readings of a count (readings.py) where they apply and the
  plan holds out the rows that choose between them."""
  both = readings.applies(profile, settings.task, settings.count_readings)
  return dataclasses.replace(profile, readings=both and plan.holdout_rows > 0)


def _after_fit(
  plan: TrainingPlan, fits, networks, validation, profile: Profile, members: int
) -> tuple[TrainingPlan, tasks.Readings | None]:
  """The plan with what the held-out rows chose after training (each member's epochs, the
  linear member's share, a count's reading), and the reading kept (None: not a count)."""
  held_out = None
  if profile.readings or (members > 1 and plan.linear is not None):
    # One pass over the held-out rows serves the linear member's share and the reading.
    held_out = mix.held_out_outputs(networks, validation)
  if members > 1:
    plan = _ensemble_plan(plan, fits, held_out, profile, members)
  kept = _kept_reading(plan, held_out, profile, members)
  if kept is not None:
    plan = dataclasses.replace(plan, readings={**kept.to_json(), "reason": kept.describe()})
  return plan, kept


def _kept_reading(
  plan: TrainingPlan, held_out, profile: Profile, members: int
) -> tasks.Readings | None:
  """For a count trained both ways, how each reading did on the held-out rows (`held_out`:
  `mix.held_out_outputs`; the winner is the one served); None for other labels."""
  if not profile.readings:
    return None
  outputs, target = held_out
  linear = outputs[members] if plan.linear is not None and len(outputs) > members else None
  share = plan.linear["share"] if linear is not None else 0.0
  kept = readings.errors(mix.combined(outputs[:members], linear, share), target, profile)
  _LOG.info("Count label: %s", kept.describe())
  return kept


def _ensemble_plan(
  plan: TrainingPlan, fits: list[dict[str, Any]], held_out, profile: Profile, members: int
) -> TrainingPlan:
  """The plan with each member's epochs, and the linear member's share that the held-out
  rows' outputs (`held_out`: `mix.held_out_outputs`) chose, with the held-out loss of each
  share."""
  epochs = [{"epochs_run": f["epochs_run"], "best_epoch": f["best_epoch"]} for f in fits]
  plan = dataclasses.replace(plan, members=tuple(epochs[:members]))
  if plan.linear is None:
    return plan
  outputs, target = held_out
  loss = readings.held_out_loss(profile) if profile.readings else None
  share, losses = mix.choose_linear_share(
    profile.label.task, outputs[:members], outputs[members], target, loss=loss
  )
  _LOG.info("Linear member's share: %g (held-out loss of each share: %s)", share, losses)
  return dataclasses.replace(
    plan,
    linear={
      **epochs[members],
      "share": share,
      "held_out_loss": {f"{a:g}": loss for a, loss in losses.items()},
    },
  )


def _result(
  built,
  module_style: str,
  settings: RunSettings,
  profile: Profile,
  plan: TrainingPlan,
  warm: list[str],
  warm_start_note: str,
  fit: dict[str, Any],
) -> trainer_api.TrainResult:
  """This process's TrainResult: the fit's fields, the hyper-parameters and the plan."""
  hparams = settings.hparams
  return trainer_api.TrainResult.under(
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
      "inputs": describe_inputs(
        profile.columns, date_parts=profile.date_parts, row_numbers=profile.row_numbers
      ),
      **({"warm_start": warm_start_note} if warm_start_note else {}),
    },
    **fit,
  )


def _fit(settings: RunSettings, built, model, networks, dataset_fn, validation, plan, attempt):
  """Fits the networks: (each one's fit fields, the run's fit fields, the first one's History).

  Each member trains from its own seed's initial weights and shuffle: in one pass where
  `joint_fit` applies, else one fit after another.
  """
  seeds = [settings.seed + i for i in range(len(networks))]
  if joint_fit.applies(built, len(networks), settings.mixed_precision, plan.warmup_steps):
    config = _fit_config(settings, plan, attempt, validation)
    runs, fit, history = joint_fit.fit(networks, built, dataset_fn, seeds, config)
    return runs, {**fit, "weights_sha256": trainer_api.weights_digest(model.get_weights())}, history
  fits = [
    trainer_api.fit(
      network,
      built,
      functools.partial(dataset_fn, seed=seed),
      _fit_config(settings, plan, attempt, validation, member=i if len(networks) > 1 else None),
    )
    for i, (network, seed) in enumerate(zip(networks, seeds, strict=True))
  ]
  return fits, _combined(fits, model), getattr(networks[0], "history", None)


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
    "weights_sha256": trainer_api.weights_digest(model.get_weights()),
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
  trainer_api.check_profile_steps(settings.profile_steps, plan.epochs * plan.steps_per_epoch)
  return plan


def _fit_config(
  settings: RunSettings, plan: TrainingPlan, attempt: int, validation, member: int | None = None
) -> trainer_api.FitConfig:
  """How trainer_api.fit runs the plan, scoring `validation` (or nothing) after every epoch.

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
  return trainer_api.FitConfig(
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
    warmup_steps=plan.warmup_steps,
  )


def _member_backup_dir(settings: RunSettings, member: int | None) -> str | None:
  if member is None:
    return settings.backup_dir
  base = settings.backup_dir
  base = base or trainer_api.run_state_dir(settings.model_run_dir, trainer_api.BACKUP_DIR)
  return f"{base.rstrip('/')}/member_{member}"


def _training_data(settings, built, profile: Profile, plan: TrainingPlan, train_files):
  """(dataset_fn for fit, held-out batches or None).

  A training split that fits in IN_MEMORY_MAX_BYTES is parsed once and held in memory, so
  epochs after the first cost no reading, decompressing or parsing. Larger ones stream from the
  files every epoch: from the ExampleGen's columnar copy where there is one (`stream.py`), else
  parsing the tf.Examples. Parameter-server workers build their input on other machines, so
  they always stream from the tf.Examples.
  """
  every = profile.holdout_every if plan.holdout_rows else 0
  streamed = (
    built.choice.name == defaults.PARAMETER_SERVER or memory_estimate(profile) > IN_MEMORY_MAX_BYTES
  )
  if not streamed:
    fit_rows, held_rows = load_arrays(train_files, profile, every)
    _LOG.info("Training data in memory: %d fit rows, %d held out.", len(fit_rows), len(held_rows))
    batches = functools.partial(arrays_dataset, fit_rows, training=True)
    held = arrays_dataset(held_rows, plan.batch_size, training=False) if every else None
  elif built.choice.name != defaults.PARAMETER_SERVER and stream.has_copies(train_files, profile):
    # Too large for memory: every epoch reads the columnar copy again, with no parsing.
    batches = functools.partial(stream.stream_dataset, train_files, profile, every=every)
    held_rows = stream.held_out_rows(train_files, profile, every) if every else None
    held = arrays_dataset(held_rows, plan.batch_size, training=False) if held_rows else None
    _LOG.info("Training data streamed from the columnar copy, %d rows held out.", plan.holdout_rows)
  else:
    part = trainer_api.FIT_RECORDS if every else trainer_api.ALL_RECORDS
    batches = functools.partial(
      make_dataset,
      train_files,
      profile,
      holdout=part,
      training=True,
      every=every or trainer_api.HOLDOUT_EVERY,
      group=profile.holdout_group,
    )
    held = held_out_in_memory(train_files, profile, plan.batch_size) if every else None

  def dataset_fn(input_context, seed: int = settings.seed):
    # Each input pipeline reads its own shard, at its replicas' share of the global batch.
    return batches(
      input_context.get_per_replica_batch_size(plan.batch_size),
      seed=seed,
      num_shards=input_context.num_input_pipelines,
      shard_index=input_context.input_pipeline_id,
    )

  return dataset_fn, held
