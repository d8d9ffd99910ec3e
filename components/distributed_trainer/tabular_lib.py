"""The default model's run: profile the data, plan the training for its size, train, export.

This is the code behind the default trainer module. It reads the schema for the columns, makes
one pass over the training split for the statistics (tabular_profile), builds a Keras model
whose first layers hold the preprocessing (tabular_model), trains it under the
DistributedTrainer's strategy (or the default strategy in the stock TFX Trainer) for a budget
of epochs that follows the row count, stops early on a held-out slice of the training split,
and exports a SavedModel that serves raw tf.Examples or named column values.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from collections.abc import Callable
from typing import Any

from components import defaults, memory, model_contract, tasks
from components.distributed_trainer import distributed_trainer_lib as train_lib
from components.distributed_trainer import steps_lib, strategy_lib
from components.distributed_trainer.tabular_model import (
  IN_MEMORY_MAX_BYTES,
  Body,
  arrays_dataset,
  build_model,
  check_hparams,
  compile_model,
  evaluate,
  export_saved_model,
  hidden_units_for,
  in_memory,
  load_arrays,
  make_dataset,
  memory_estimate,
)
from components.distributed_trainer.tabular_profile import (
  Profile,
  TabularInputError,
  profile_data,
)

_LOG = logging.getLogger(__name__)

# Examples the default plan reads per run at most (epochs = budget / rows, within bounds).
EXAMPLE_BUDGET = 2_000_000
MIN_EPOCHS = 3
MAX_EPOCHS = 200


# ----------------------------------------------------------------------------- plan


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
  """How long and in what steps the default model trains.

  Attributes:
    batch_size: global examples per step.
    epochs: the most epochs fit runs.
    steps_per_epoch: steps per epoch.
    patience: epochs without a better held-out loss before stopping (0: no early stopping).
    fit_rows: training rows the model fits on (all but the held-out slice).
    holdout_rows: training rows held out for early stopping (0 without it).
    reason: one sentence for the summary.
  """

  batch_size: int
  epochs: int
  steps_per_epoch: int
  patience: int
  fit_rows: int
  holdout_rows: int
  reason: str

  def to_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self)


def auto_batch_size(rows: int) -> int:
  """64 up to 16k rows, then doubling every 4x rows, up to 1024."""
  batch = 64
  while batch < 1024 and rows > batch * 256:
    batch *= 2
  return batch


def plan_training(
  rows: int,
  holdout_rows: int,
  train_steps: int | None,
  batch_size: int | None,
  num_epochs: int,
  max_epochs: int | None = None,
  early_stopping: bool = True,
) -> TrainingPlan:
  """Sizes the training to the data, or follows `--train-steps`.

  By default: a batch that grows with the rows (`auto_batch_size`), at most
  EXAMPLE_BUDGET / rows epochs (within MIN_EPOCHS..MAX_EPOCHS), stopped early when the loss
  on a held-out tenth of the training rows has not improved for `patience` epochs. With
  `train_steps`: exactly that many steps over `num_epochs` epochs, on every training row.

  Args:
    rows: training rows.
    holdout_rows: rows of the held-out slice (`Profile.holdout_rows`).
    train_steps: --train-steps, or None for the data-sized plan.
    batch_size: hparams batch_size, or None for the automatic one.
    num_epochs: epochs a fixed step count is split into.
    max_epochs: hparams max_epochs, or None for the budget.
    early_stopping: False where it cannot run (ParameterServerStrategy).

  Returns:
    The TrainingPlan.
  """
  batch = int(batch_size or auto_batch_size(rows))
  if train_steps:
    epochs = max(1, min(num_epochs, train_steps))
    per_epoch = math.ceil(train_steps / epochs)
    reason = f"--train-steps {train_steps}: {epochs} epochs of {per_epoch} steps of {batch}"
    return TrainingPlan(batch, epochs, per_epoch, 0, rows, 0, reason)
  holdout = holdout_rows if early_stopping and holdout_rows >= 2 else 0
  fit_rows = rows - holdout
  epochs = int(max_epochs or min(MAX_EPOCHS, max(MIN_EPOCHS, math.ceil(EXAMPLE_BUDGET / rows))))
  per_epoch = max(1, math.ceil(fit_rows / batch))
  # A held-out loss is noisy from epoch to epoch: patience of at least 10 epochs (a fifth of the
  # budget, at most 20) lets the learning-rate cuts act before training stops.
  patience = max(10, min(20, epochs // 5)) if holdout else 0
  reason = f"up to {epochs} epochs of {per_epoch} steps of {batch} on {fit_rows} rows"
  if patience:
    reason += f", stopping after {patience} epochs without a better loss on {holdout} held-out rows"
  return TrainingPlan(batch, epochs, per_epoch, patience, fit_rows, holdout, reason)


# ----------------------------------------------------------------------------- settings


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


def warm_start(model, base_model_dir: str) -> list[str]:
  """Copies the weights of same-named, same-shaped layers from a base SavedModel.

  Layers whose shapes changed (a new vocabulary, a new class) keep their fresh weights.

  Returns:
    Names of the layers that were copied.
  """
  import tensorflow as tf

  from components import preprocessing_layers  # noqa: F401  (registers the layers)

  base = tf.keras.models.load_model(base_model_dir, compile=False)
  base_layers = {layer.name: layer for layer in base.layers}
  copied = []
  for layer in model.layers:
    source = base_layers.get(layer.name)
    if source is None or not layer.weights:
      continue
    weights = source.get_weights()
    if [w.shape for w in weights] == [tuple(w.shape) for w in layer.weights]:
      layer.set_weights(weights)
      copied.append(layer.name)
  _LOG.info("Warm start from %s: copied %s", base_model_dir, copied)
  return copied


@dataclasses.dataclass
class RunSettings:
  """What a run needs besides the data, read from FnArgs and custom_config.

  Attributes:
    train_files: training file patterns.
    eval_files: evaluation file patterns.
    schema_path: schema.pbtxt.
    serving_model_dir: where the SavedModel goes.
    model_run_dir: TensorBoard logs, backups, progress and results.
    label_key: the label column.
    task: tasks.AUTO or a task.
    exclude_columns: columns not to learn from.
    hparams: hyper-parameters (DEFAULT_HPARAMS overridden by config, then by the Tuner).
    train_steps: optimizer steps (--train-steps), or None for the data-sized plan.
    eval_steps: eval batches (0 or None: the whole split).
    num_epochs: epochs a fixed step count is split into.
    steps_per_execution: steps per compiled call.
    mixed_precision: '', 'mixed_float16' or 'mixed_bfloat16'.
    base_model: SavedModel to warm-start from, or None.
    seed: shuffle and initialisation seed.
    profile_steps: (first, last) steps to profile with TensorBoard, or None.
    backup_dir: BackupAndRestore's folder; None: inside model_run_dir.
  """

  train_files: list[str]
  eval_files: list[str]
  schema_path: str
  serving_model_dir: str
  model_run_dir: str
  label_key: str
  task: str = tasks.AUTO
  exclude_columns: tuple[str, ...] = ()
  hparams: dict[str, Any] = dataclasses.field(default_factory=dict)
  train_steps: int | None = None
  eval_steps: int | None = None
  num_epochs: int = defaults.NUM_EPOCHS
  steps_per_execution: int = defaults.STEPS_PER_EXECUTION
  mixed_precision: str = ""
  base_model: str | None = None
  seed: int = train_lib.DEFAULT_SHUFFLE_SEED
  profile_steps: tuple[int, int] | None = None
  backup_dir: str | None = None


def settings_from_fn_args(fn_args, allow_extra_hparams: bool = False) -> RunSettings:
  """Reads RunSettings from stock FnArgs (or the DistributedTrainer's, which add more).

  custom_config keys: label_key, task, exclude_columns, hparams, profile_steps. Tuner output
  (`fn_args.hyperparameters`, a keras_tuner config) overrides hparams.
  """
  custom = dict(getattr(fn_args, "custom_config", None) or {})
  hparams = dict(custom.get("hparams") or {})
  tuned = getattr(fn_args, "hyperparameters", None)
  if tuned:
    hparams.update(tuned.get("values", tuned))
  if not getattr(fn_args, "schema_path", None):
    raise TabularInputError(
      "the default trainer module needs the schema; wire schema=schema_gen.outputs['schema']."
    )
  profile_steps = custom.get("profile_steps")
  return RunSettings(
    train_files=list(fn_args.train_files),
    eval_files=list(fn_args.eval_files),
    schema_path=fn_args.schema_path,
    serving_model_dir=fn_args.serving_model_dir,
    model_run_dir=fn_args.model_run_dir,
    label_key=custom.get("label_key", defaults.LABEL_KEY),
    task=custom.get("task") or tasks.AUTO,
    exclude_columns=tuple(custom.get("exclude_columns") or ()),
    hparams=check_hparams(hparams, allow_extra_hparams),
    train_steps=int(fn_args.train_steps) if fn_args.train_steps else None,
    eval_steps=fn_args.eval_steps or None,
    num_epochs=int(getattr(fn_args, "num_epochs", defaults.NUM_EPOCHS)),
    steps_per_execution=int(getattr(fn_args, "steps_per_execution", defaults.STEPS_PER_EXECUTION)),
    mixed_precision=getattr(fn_args, "mixed_precision", "") or "",
    base_model=getattr(fn_args, "base_model", None),
    seed=int(custom.get("seed", train_lib.DEFAULT_SHUFFLE_SEED)),
    profile_steps=tuple(profile_steps) if profile_steps else None,
    backup_dir=getattr(fn_args, "backup_dir", None),
  )


def prepare(settings: RunSettings) -> tuple[Profile, list[str], list[str]]:
  """Reads the schema and profiles the training split.

  Returns:
    (profile, training files, eval files).
  """
  schema = model_contract.read_schema(settings.schema_path)
  columns = model_contract.columns_from_schema(schema, settings.label_key, settings.exclude_columns)
  dtype = model_contract.label_dtype(schema, settings.label_key)
  train_files = train_lib.list_files(settings.train_files)
  eval_files = train_lib.list_files(settings.eval_files)
  profile = profile_data(
    train_files, columns, settings.label_key, dtype, settings.task, settings.hparams, settings.seed
  )
  _LOG.info(
    "Tabular model: task=%s, %d columns (%d dates, %d embedded), %d training rows, classes=%s",
    profile.label.task,
    len(columns),
    sum(1 for s in profile.columns if s.date),
    sum(1 for s in profile.columns if len(s.vocabulary) > int(settings.hparams["one_hot_max"])),
    profile.rows,
    list(profile.label.classes)[:20],
  )
  return profile, train_files, eval_files


# ----------------------------------------------------------------------------- run


def run(
  fn_args, body: Body | None = None, module_style: str = defaults.MODULE_STYLE_TABULAR
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
  module_style: str = defaults.MODULE_STYLE_TABULAR,
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
  hparams = settings.hparams
  plan = plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    hparams.get("batch_size"),
    settings.num_epochs,
    hparams.get("max_epochs"),
    early_stopping=built.choice.name != strategy_lib.PARAMETER_SERVER,
  )
  _LOG.info("Training plan: %s", plan.reason)
  steps_lib.check_profile_steps(settings.profile_steps, plan.epochs * plan.steps_per_epoch)
  previous_policy = tf.keras.mixed_precision.global_policy()
  if settings.mixed_precision:
    tf.keras.mixed_precision.set_global_policy(settings.mixed_precision)
  try:
    # Same initial weights in every process and run, so runs differ only by the strategy.
    tf.keras.utils.set_random_seed(settings.seed)
    with built.strategy.scope():
      model = build_model(profile, hparams, body)
      warm = warm_start(model, settings.base_model) if settings.base_model else []
      compile_model(model, profile, float(hparams["learning_rate"]), settings.steps_per_execution)
    dataset_fn, validation = _training_data(settings, built, profile, plan, train_files)
    if validation is not None:
      options = tf.data.Options()
      options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
      # Repeated, with as many steps as one pass has batches: Keras needs a step count with
      # steps_per_execution > 1, and every epoch then scores the same held-out rows.
      validation = validation.with_options(options).repeat()
    fit = train_lib.fit(
      model,
      built,
      dataset_fn,
      train_lib.FitConfig(
        model_run_dir=settings.model_run_dir,
        epochs=plan.epochs,
        steps_per_epoch=plan.steps_per_epoch,
        global_batch_size=plan.batch_size,
        attempt=attempt,
        profile_steps=settings.profile_steps,
        steps_per_execution=settings.steps_per_execution,
        backup_dir=settings.backup_dir,
        validation=validation,
        validation_steps=math.ceil(plan.holdout_rows / plan.batch_size) if validation else 0,
        patience=plan.patience,
      ),
    )
    result = train_lib.TrainResult(
      strategy=built.choice.name,
      strategy_reason=built.choice.reason,
      num_replicas_in_sync=built.num_replicas_in_sync,
      task_type=built.task_type,
      task_index=built.task_index,
      is_chief=built.is_chief,
      module_style=module_style,
      task=profile.label.task,
      hparams={
        **{k: v for k, v in hparams.items() if isinstance(v, int | float | str | bool)},
        "hidden_units": int(hparams["hidden_units"] or hidden_units_for(profile.rows)),
      },
      warm_started_layers=warm,
      plan=plan.to_json(),
      **fit,
    )
    if built.is_chief:
      # A fresh model outside the strategy scope: evaluation and export need no collectives
      # with the other workers and carry no distribution state.
      plain = build_model(profile, hparams, body)
      plain.set_weights(model.get_weights())
      eval_ds = make_dataset(eval_files, profile, plan.batch_size, training=False)
      if settings.eval_steps:
        eval_ds = eval_ds.take(settings.eval_steps)
      metrics = evaluate(plain, eval_ds, profile.label.task)
      result.eval_metrics = metrics
      result.eval_accuracy = metrics.get("accuracy")
      _LOG.info("Tabular model eval: %s", metrics)
      publish(lambda d: export_saved_model(plain, profile, d), settings.serving_model_dir)
  finally:
    tf.keras.mixed_precision.set_global_policy(previous_policy)
  train_lib.write_result(settings.model_run_dir, result)
  # The rows held in memory live as long as the datasets that gather from them.
  del dataset_fn, validation
  memory.release()
  return result


def _training_data(settings, built, profile: Profile, plan: TrainingPlan, train_files):
  """(dataset_fn for fit, held-out batches or None).

  A training split that fits in IN_MEMORY_MAX_BYTES is parsed once and held in memory, so
  epochs after the first cost no reading, decompressing or parsing. Larger ones stream from the
  files every epoch. Parameter-server workers build their input on other
  machines, so they always stream.
  """
  every = profile.holdout_every if plan.holdout_rows else 0
  streamed = (
    built.choice.name == strategy_lib.PARAMETER_SERVER
    or memory_estimate(profile) > IN_MEMORY_MAX_BYTES
  )
  if not streamed:
    fit_rows, held_rows = load_arrays(train_files, profile, every)
    _LOG.info("Training data in memory: %d fit rows, %d held out.", len(fit_rows), len(held_rows))

    def from_memory(input_context):
      return arrays_dataset(
        fit_rows,
        input_context.get_per_replica_batch_size(plan.batch_size),
        training=True,
        seed=settings.seed,
        num_shards=input_context.num_input_pipelines,
        shard_index=input_context.input_pipeline_id,
      )

    held = arrays_dataset(held_rows, plan.batch_size, training=False) if every else None
    return from_memory, held
  part = train_lib.FIT_RECORDS if every else train_lib.ALL_RECORDS

  def from_files(input_context):
    return make_dataset(
      train_files,
      profile,
      input_context.get_per_replica_batch_size(plan.batch_size),
      training=True,
      seed=settings.seed,
      num_shards=input_context.num_input_pipelines,
      shard_index=input_context.input_pipeline_id,
      holdout=part,
      every=every or train_lib.HOLDOUT_EVERY,
    )

  held = None
  if every:
    held = in_memory(
      make_dataset(
        train_files,
        profile,
        plan.batch_size,
        training=False,
        holdout=train_lib.HOLDOUT_RECORDS,
        every=every,
      ),
      plan.batch_size,
    )
  return from_files, held


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
  space = keras_tuner.HyperParameters()
  width = base["hidden_units"] or hidden_units_for(profile.rows)
  space.Choice("hidden_units", sorted({64, 128, 256, 512, int(width)}), default=int(width))
  space.Int("num_layers", 1, 3, default=int(base["num_layers"]))
  space.Choice("learning_rate", [3e-4, 1e-3, 3e-3], default=float(base["learning_rate"]))
  space.Choice("dropout", [0.0, 0.1, 0.3], default=float(base["dropout"]))
  plan = plan_training(
    profile.rows,
    profile.holdout_rows,
    settings.train_steps,
    base.get("batch_size"),
    settings.num_epochs,
    20,
  )

  def build(hp):
    model = build_model(profile, {**base, **hp.values}, body)
    compile_model(model, profile, float(hp.get("learning_rate")), settings.steps_per_execution)
    return model

  objective = keras_tuner.Objective(
    "val_rmse" if profile.label.task == tasks.REGRESSION else "val_accuracy",
    "min" if profile.label.task == tasks.REGRESSION else "max",
  )
  tuner = keras_tuner.RandomSearch(
    build,
    objective=objective,
    max_trials=int(max_trials or custom.get("tune_trials") or 10),
    hyperparameters=space,
    directory=fn_args.working_dir,
    project_name="tabular",
    seed=settings.seed,
  )
  holdout = plan.holdout_rows > 0
  train = make_dataset(
    train_files,
    profile,
    plan.batch_size,
    training=True,
    holdout=train_lib.FIT_RECORDS if holdout else train_lib.ALL_RECORDS,
    every=profile.holdout_every,
  )
  held = make_dataset(
    train_files,
    profile,
    plan.batch_size,
    training=False,
    holdout=train_lib.HOLDOUT_RECORDS if holdout else train_lib.ALL_RECORDS,
    every=profile.holdout_every,
  )
  held = in_memory(held, plan.batch_size) if holdout else held
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
      "validation_data": held.repeat() if holdout else held,
      "validation_steps": math.ceil(plan.holdout_rows / plan.batch_size) if holdout else None,
      "steps_per_epoch": plan.steps_per_epoch,
      "epochs": plan.epochs,
      "verbose": 0,
      "callbacks": callbacks,
    },
  )
