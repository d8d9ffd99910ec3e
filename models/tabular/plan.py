"""What a run of the default model trains on and for how long: settings, data profile, plan."""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

from components import model_contract
from components.distributed_trainer import trainer_api
from core import defaults, properties, tasks
from models.tabular.hparams import LINEAR_SHARES, check_hparams
from models.tabular.profile import Profile, TabularInputError, hold_out_by_group, profile_data

_LOG = logging.getLogger(__name__)

# Examples the default plan reads per run at most (epochs = budget / rows, within bounds).
EXAMPLE_BUDGET = 2_000_000
MIN_EPOCHS = 3
MAX_EPOCHS = 200
# The automatic batch's largest size (`auto_batch_size`).
MAX_AUTO_BATCH = 8192
# Fit rows of one epoch at most. Past them an epoch is a round of this many rows, so that early
# stopping and the learning-rate cuts judge the held-out loss every ROUND_ROWS rows, not once per
# pass, and training stops after ROUND_PATIENCE_ROWS rows without a better held-out loss.
ROUND_ROWS = 250_000
ROUND_PATIENCE_ROWS = 1_000_000
# Examples a data-sized plan reads at most, whatever MIN_EPOCHS says: on ten million rows,
# passes after the first
# add little that a larger batch's steps have not already learned.
MAX_EXAMPLES = 8_000_000
# Fewest held-out rows early stopping judges by. Below it (training splits under about 100
# rows) the held-out loss is noise: on statsmodels' 51-row statecrime table, 3 held-out rows
# kept the weights of epoch 1, whose RMSE was worse than always predicting the mean.
MIN_HOLDOUT_ROWS = 10


# ----------------------------------------------------------------------------- plan


@dataclasses.dataclass(frozen=True)
class TrainingPlan:
  """How long and in what steps the default model trains.

  Attributes:
    batch_size: global examples per step.
    epochs: the most epochs fit runs.
    steps_per_epoch: steps per epoch.
    patience: epochs without a better held-out loss before stopping (0: no early stopping).
    smooth_epochs: epochs whose held-out losses are averaged for stopping and the epoch kept.
    ensemble: networks trained from different seeds (in one pass where `joint_fit` applies, else
      one after another) and averaged (1: one).
    members: after training, each ensemble member's epochs_run and best_epoch.
    warmup_steps: steps of the learning rate's linear warm-up (0: none;
      `hparams.warmup_steps_for`).
    linear: the ensemble's linear member (`mix`), None without one: {} in the plan, then
      its epochs_run, best_epoch, the share of the output the held-out slice chose and the
      held-out loss of each share tried.
    readings: for a count trained both as classes and as a quantity (readings.py), each
      reading's held-out error, the winner and the summary's sentence; None otherwise.
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
  smooth_epochs: int = 1
  ensemble: int = 1
  members: tuple[dict[str, Any], ...] = ()
  linear: dict[str, Any] | None = None
  warmup_steps: int = 0
  readings: dict[str, Any] | None = None

  def to_json(self) -> dict[str, Any]:
    out = dataclasses.asdict(self)
    if not self.warmup_steps:
      del out["warmup_steps"]
    if self.readings is None:
      del out["readings"]
    if self.ensemble == 1:  # A single network's plan reads as before ensembles existed.
      del out["ensemble"], out["members"]
    else:
      out["members"] = list(self.members)
    if self.linear is None:
      del out["linear"]
    return out


def auto_batch_size(rows: int) -> int:
  """64 up to 16k rows, then doubling every 2x rows, up to MAX_AUTO_BATCH (at 2.1M rows).

  A larger batch costs less per row (one step's fixed cost over more rows, larger matrix
  products); its learning rate grows with it (`hparams.learning_rate_for`).
  """
  batch = 64
  while batch < MAX_AUTO_BATCH and rows > batch * 256:
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
  stopping_window: int = 1,
  members: int = 1,
  holdout_by: str = "",
  linear: bool = False,
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
    stopping_window: hparams stopping_window: epochs whose held-out losses are averaged for
      stopping and the epoch kept (1: each epoch's own).
    members: networks of the ensemble, each trained to this plan (`hparams.ensemble_size_for`).
    holdout_by: the column whose whole groups are held out (`Profile.holdout_group`), if any.
    linear: add the ensemble's linear member (hparams linear_member); it needs a held-out
      slice to choose its share, so it is planned only with early stopping and `members` > 1.

  Returns:
    The TrainingPlan.
  """
  batch = int(batch_size or auto_batch_size(rows))
  if train_steps:
    return _fixed_steps_plan(rows, train_steps, batch, num_epochs, members)
  holdout = holdout_rows if early_stopping and holdout_rows >= MIN_HOLDOUT_ROWS else 0
  fit_rows = rows - holdout
  epochs = int(max_epochs or min(MAX_EPOCHS, max(MIN_EPOCHS, math.ceil(EXAMPLE_BUDGET / rows))))
  per_epoch = max(1, math.ceil(fit_rows / batch))
  # A held-out loss is noisy from epoch to epoch: patience of at least 10 epochs (a fifth of the
  # budget, at most 20) lets the learning-rate cuts act before training stops.
  patience = max(10, min(20, epochs // 5))
  rounds = ""
  if not max_epochs and fit_rows > ROUND_ROWS:
    epochs, per_epoch, patience, rounds = _rounds(epochs * fit_rows, fit_rows, batch)
  patience = patience if holdout else 0
  reason = f"up to {epochs} epochs of {per_epoch} steps of {batch}{rounds} on {fit_rows} rows"
  smooth = max(1, int(stopping_window)) if patience else 1
  if patience:
    reason += f", stopping after {patience} epochs without a better loss on {holdout} held-out rows"
    if holdout_by:
      reason += f" (whole groups of {holdout_by!r}, as the eval split)"
    if smooth > 1:
      reason += f" (the mean loss of {smooth} epochs)"
  elif early_stopping and holdout_rows:
    reason += f" (no early stopping: {holdout_rows} held-out rows are too few to judge by)"
  with_linear = linear and members > 1 and patience > 0
  reason += _ensemble_clause(members, with_linear)
  return TrainingPlan(
    batch,
    epochs,
    per_epoch,
    patience,
    fit_rows,
    holdout,
    reason,
    smooth,
    ensemble=members,
    linear={} if with_linear else None,
  )


def _rounds(examples: int, fit_rows: int, batch: int) -> tuple[int, int, int, str]:
  """A large table's plan in rounds of ROUND_ROWS rows: (rounds, steps per round, patience in
  rounds, the clause for the plan's sentence), reading at most MAX_EXAMPLES examples (or one
  pass, if that is more) of the `examples` that whole passes would read."""
  examples = min(examples, max(MAX_EXAMPLES, fit_rows))
  per_round = math.ceil(ROUND_ROWS / batch)
  rounds = math.ceil(examples / (per_round * batch))
  patience = math.ceil(ROUND_PATIENCE_ROWS / (per_round * batch))
  clause = f" ({per_round * batch:,} rows each, {examples / fit_rows:.3g} passes)"
  return rounds, per_round, patience, clause


def _fixed_steps_plan(
  rows: int, train_steps: int, batch: int, num_epochs: int, members: int
) -> TrainingPlan:
  """`--train-steps`: exactly that many steps over `num_epochs` epochs, on every training row."""
  epochs = max(1, min(num_epochs, train_steps))
  per_epoch = math.ceil(train_steps / epochs)
  reason = f"--train-steps {train_steps}: {epochs} epochs of {per_epoch} steps of {batch}"
  if members > 1:
    reason += f", for each of {members} networks from different seeds, averaged"
  return TrainingPlan(batch, epochs, per_epoch, 0, rows, 0, reason, ensemble=members)


def _ensemble_clause(members: int, with_linear: bool) -> str:
  """What the data-sized plan's sentence says of an ensemble (and its linear member), or ""."""
  if members <= 1:
    return ""
  clause = (
    f"; {members} networks from different seeds, every other one with a hidden layer fewer "
    "and no quantile bins on numbers, their outputs averaged"
  )
  if with_linear:
    clause += (
      ", and a linear model whose share of the output the held-out rows choose "
      f"({', '.join(f'{a:g}' for a in LINEAR_SHARES)})"
    )
  return clause


def plan_steps(settings: RunSettings, plan: TrainingPlan) -> int | None:
  """Steps the data-sized plan gives each network at most; None where the run sets them
  (--train-steps, or hparams max_epochs)."""
  if settings.train_steps or settings.hparams.get("max_epochs"):
    return None
  return plan.epochs * plan.steps_per_epoch


# ----------------------------------------------------------------------------- settings


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
    split_column: the column train and eval were split by (--split-column): early stopping
      holds out whole groups of it; None: every `holdout_every`-th record.
    count_readings: the pipeline decided before the run that the label is a count read both
      as classes and as a quantity (`tasks.reads_both`).
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
  seed: int = trainer_api.DEFAULT_SHUFFLE_SEED
  profile_steps: tuple[int, int] | None = None
  backup_dir: str | None = None
  split_column: str | None = None
  count_readings: bool = False


def settings_from_fn_args(fn_args, allow_extra_hparams: bool = False) -> RunSettings:
  """Reads RunSettings from stock FnArgs (or the DistributedTrainer's, which add more).

  custom_config keys: label_key, task, exclude_columns, hparams, profile_steps, split_column.
  Tuner output (`fn_args.hyperparameters`, a keras_tuner config) overrides hparams.
  """
  custom = dict(getattr(fn_args, "custom_config", None) or {})
  hparams = dict(custom.get(properties.HPARAMS_CONFIG) or {})
  tuned = getattr(fn_args, "hyperparameters", None)
  if tuned:
    hparams.update(tuned.get("values", tuned))
  if not getattr(fn_args, "schema_path", None):
    raise TabularInputError(
      "the default trainer module needs the schema; wire schema=schema_gen.outputs['schema']."
    )
  profile_steps = custom.get(properties.PROFILE_STEPS_CONFIG)
  return RunSettings(
    train_files=list(fn_args.train_files),
    eval_files=list(fn_args.eval_files),
    schema_path=fn_args.schema_path,
    serving_model_dir=fn_args.serving_model_dir,
    model_run_dir=fn_args.model_run_dir,
    label_key=custom.get(properties.LABEL_KEY_CONFIG, defaults.LABEL_KEY),
    task=custom.get(properties.TASK_CONFIG) or tasks.AUTO,
    exclude_columns=tuple(custom.get(properties.EXCLUDE_COLUMNS_CONFIG) or ()),
    hparams=check_hparams(hparams, allow_extra_hparams),
    train_steps=int(fn_args.train_steps) if fn_args.train_steps else None,
    eval_steps=fn_args.eval_steps or None,
    num_epochs=int(getattr(fn_args, "num_epochs", defaults.NUM_EPOCHS)),
    steps_per_execution=int(getattr(fn_args, "steps_per_execution", defaults.STEPS_PER_EXECUTION)),
    mixed_precision=getattr(fn_args, "mixed_precision", "") or "",
    base_model=getattr(fn_args, "base_model", None),
    seed=int(custom.get(properties.SEED_CONFIG, trainer_api.DEFAULT_SHUFFLE_SEED)),
    profile_steps=tuple(profile_steps) if profile_steps else None,
    backup_dir=getattr(fn_args, "backup_dir", None),
    split_column=custom.get(properties.SPLIT_COLUMN_CONFIG) or None,
    count_readings=bool(custom.get(properties.READINGS_CONFIG)),
  )


def prepare(settings: RunSettings) -> tuple[Profile, list[str], list[str]]:
  """Reads the schema and profiles the training split.

  Returns:
    (profile, training files, eval files).
  """
  schema = model_contract.read_schema(settings.schema_path)
  columns = model_contract.columns_from_schema(schema, settings.label_key, settings.exclude_columns)
  dtype = model_contract.label_dtype(schema, settings.label_key)
  train_files = trainer_api.list_files(settings.train_files)
  eval_files = trainer_api.list_files(settings.eval_files)
  profile = profile_data(
    train_files, columns, settings.label_key, dtype, settings.task, settings.hparams, settings.seed
  )
  if settings.split_column:
    profile = _hold_out_groups(profile, train_files, schema, settings.split_column)
  _LOG.info(
    "Tabular model: task=%s, %d columns (%d dates, %d free text, %d embedded), %d training rows, "
    "classes=%s",
    profile.label.task,
    len(columns),
    sum(1 for s in profile.columns if s.date),
    sum(1 for s in profile.columns if s.free_text),
    sum(1 for s in profile.columns if len(s.vocabulary) > int(settings.hparams["one_hot_max"])),
    profile.rows,
    list(profile.label.classes)[:20],
  )
  return profile, train_files, eval_files


def _hold_out_groups(profile: Profile, train_files: list[str], schema, column: str) -> Profile:
  """The profile with early stopping's held-out slice made of whole groups of `column` (the
  split column), where that gives a slice to judge by.

  Rows of one group (a person's years, a store's days) resemble each other more than other
  rows. With some of a group's rows in the fit part and the rest held out, the held-out loss
  rewards learning the groups, and keeps falling after the model has stopped getting better on
  the eval split's unseen groups: on AER's PSID7682 (595 people, 7 years each, split by person)
  a held-out slice of every 10th record left the RMSE 5.5% behind HistGradientBoosting, and a
  slice of whole people 2.5% ahead. It falls back to the records' places when the column is
  not in the data (a Transform's output) or its groups put under MIN_HOLDOUT_ROWS rows, or over
  3 times the slice's share, in the slice (a few large groups).
  """
  try:
    group = (column, model_contract.label_dtype(schema, column))
  except model_contract.ContractError:
    _LOG.warning("Held out by record: the split column %r is not in the training data.", column)
    return profile
  grouped = hold_out_by_group(profile, train_files, group)
  held, most = grouped.holdout_rows, 3 * profile.rows // profile.holdout_every
  if held < MIN_HOLDOUT_ROWS or held > most:
    _LOG.warning(
      "Held out by record: the groups of %r put %d of %d rows in the held-out slice.",
      column,
      held,
      profile.rows,
    )
    return profile
  _LOG.info("Held out by %r: %d rows of whole groups.", column, held)
  return grouped
