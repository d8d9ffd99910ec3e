"""The DistributedTrainer's published API: what a trainer module (its run_fn) may use.

As TFX's trainer modules rely on tfx/components/trainer/fn_args_utils.py, a module this trainer
runs relies on this file and on nothing else of the trainer's (models/ imports only this):
- marks on a module's functions (`manages_strategy`, `plans_own_steps`, `is_marked`);
- the strategy a run_fn is given (`fn_args.built_strategy`, a `BuiltStrategy`; under the stock
  Trainer `default_strategy()`), and who chose the one that trained (`CHOSEN_BY_*`);
- the training files (`list_files`, `record_dataset`), whole or as early stopping's fit part
  and held-out slice (`*_RECORDS`, `holdout_every`, `held_out_groups`);
- fitting with backups, TensorBoard and a progress log (`FitConfig`, `fit`, `check_profile_steps`,
  `MIXED_PRECISION_POLICIES`, `weights_digest`; a module's own fit: `held_out_evaluation`,
  `stopping_callbacks`, `kept_epoch`);
- the process's `TrainResult`, which a run_fn managing its strategy writes (`write_result`) and
  the trainer reads back, and the trainer's folder of model_run_dir (`run_state_dir`, `BACKUP_DIR`).

fn_args' fields beyond stock FnArgs are user_module.DistributedFnArgs'. Choosing the strategy
(strategy_lib), clusters (launch, worker, tfjob_*) and the executor are the trainer's own and
may change. Plain Python at import: TensorFlow loads when a function runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from components.distributed_trainer import distributed_trainer_lib, early_stopping
from core import defaults
from core.errors import UserInputError

# ----------------------------------------------------------------------------- marks


def manages_strategy(fn):
  """Marks a run_fn that builds its model under `fn_args.built_strategy` itself.

  The DistributedTrainer then calls it outside the strategy's scope, so the function can, for
  example, build an undistributed copy of the model for evaluation and export on the chief.
  Stock run_fns (unmarked) run inside the scope, as TensorFlow's distribution guides show.
  A marked run_fn writes this process's TrainResult (`write_result`), which the trainer reads
  back.
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


# ----------------------------------------------------------------------------- the strategy

# The strategy of a process that nobody chose one for (the stock TFX Trainer).
DEFAULT = "default"
# Who decided the strategy that trained (recorded on the Model artifact).
CHOSEN_BY_TRAINER = "trainer"
CHOSEN_BY_MODULE = "module"


@dataclasses.dataclass(frozen=True)
class StrategyChoice:
  """The concrete strategy picked for this process and why.

  Attributes:
    name: one of ONE_DEVICE, MIRRORED, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, TPU.
    reason: one human-readable sentence recorded on the model artifact.
  """

  name: str
  reason: str


@dataclasses.dataclass
class BuiltStrategy:
  """A constructed strategy with what was chosen and why.

  Attributes:
    strategy: the tf.distribute.Strategy.
    choice: the StrategyChoice it came from.
    cluster_coordinator: the ClusterCoordinator for PARAMETER_SERVER, else None.
    is_chief: whether this process exports.
    task_type: TF_CONFIG task type ('chief' without a cluster).
    task_index: TF_CONFIG task index.
    num_workers: training processes in the cluster (chief + workers; 1 without a cluster).
  """

  strategy: Any
  choice: StrategyChoice
  cluster_coordinator: Any = None
  is_chief: bool = True
  task_type: str = "chief"
  task_index: int = 0
  num_workers: int = 1

  @property
  def num_replicas_in_sync(self) -> int:
    return int(self.strategy.num_replicas_in_sync)


def default_strategy() -> BuiltStrategy:
  """The strategy in effect when no DistributedTrainer built one (e.g. the stock Trainer)."""
  import tensorflow as tf

  return BuiltStrategy(
    strategy=tf.distribute.get_strategy(),
    choice=StrategyChoice(DEFAULT, "no strategy was chosen: TensorFlow's default strategy"),
  )


# ----------------------------------------------------------------------------- the records

DEFAULT_SHUFFLE_SEED = 42
_SHUFFLE_BUFFER = 10_000


def list_files(file_patterns: Sequence[str]) -> list[str]:
  """Expands glob patterns (local or any tf.io.gfile URI) to a sorted file list.

  Raises:
    TrainerInputError: when nothing matches.
  """
  import tensorflow as tf

  files = sorted({f for pattern in file_patterns for f in tf.io.gfile.glob(pattern)})
  if not files:
    raise distributed_trainer_lib.TrainerInputError(
      f"no input files match {list(file_patterns)}; check the Examples artifact and the splits."
    )
  return files


# Which records of the training files a dataset reads: all of them, or, for early stopping,
# the fit part and the held-out part (every `holdout_every`-th record of each file: a tenth,
# or fewer past HOLDOUT_MAX_ROWS held-out rows).
ALL_RECORDS = "all"
FIT_RECORDS = "fit"
HOLDOUT_RECORDS = "holdout"
HOLDOUT_EVERY = 10
HOLDOUT_MAX_ROWS = 20_000


def holdout_every(rows: int) -> int:
  """Every how many records one is held out: 10, or more so that at most HOLDOUT_MAX_ROWS are."""
  return max(HOLDOUT_EVERY, -(-rows // HOLDOUT_MAX_ROWS))


# With a group column (the pipeline's --split-column, as (name, dtype)), the held-out slice is
# the rows whose group a salted hash puts in it instead, so that no group has rows on both
# sides: early stopping then judges by unseen groups, as the eval split does. The salt keeps the
# choice apart from the ExampleGen's split by the same column.
_GROUP_SALT = "holdout/"
# Records parsed at a time to find their group.
_GROUP_BATCH = 1024


def held_out_groups(values, every: int):
  """Whether each row with these group values is in the held-out slice (a [rows] bool tensor).

  Args:
    values: a [rows] tensor or array of the group column (numbers are hashed as text).
    every: the slice holds out about one group in `every` (`holdout_every`).
  """
  import tensorflow as tf

  values = tf.convert_to_tensor(values)
  if values.dtype != tf.string:
    values = tf.strings.as_string(values)
  bucket = tf.strings.to_hash_bucket_fast(tf.strings.join([_GROUP_SALT, values]), every)
  return tf.equal(bucket, every - 1)


def _records(
  files: Sequence[str],
  holdout: str,
  every: int = HOLDOUT_EVERY,
  group: tuple[str, str] | None = None,
):
  import tensorflow as tf

  from components import model_contract

  compression = "GZIP" if files[0].endswith(".gz") else ""
  if holdout == ALL_RECORDS:
    return tf.data.TFRecordDataset(
      list(files), compression_type=compression, num_parallel_reads=min(len(files), 4)
    )
  held = holdout == HOLDOUT_RECORDS

  def by_group(records):
    values = model_contract.parse_label(records, *group)
    return tf.boolean_mask(records, tf.equal(held_out_groups(values, every), held))

  def split(path):
    ds = tf.data.TFRecordDataset(path, compression_type=compression)
    if group:
      return ds.batch(_GROUP_BATCH).map(by_group).unbatch()
    # The record's place in its file decides, so every worker and rerun agrees.
    ds = ds.enumerate().filter(lambda i, _: tf.equal(i % every == every - 1, held))
    return ds.map(lambda _, record: record)

  return tf.data.Dataset.from_tensor_slices(list(files)).interleave(
    split, cycle_length=min(len(files), 4), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True
  )


def record_dataset(
  files: Sequence[str],
  batch_size: int,
  *,
  training: bool,
  seed: int = DEFAULT_SHUFFLE_SEED,
  num_shards: int = 1,
  shard_index: int = 0,
  holdout: str = ALL_RECORDS,
  every: int = HOLDOUT_EVERY,
  group: tuple[str, str] | None = None,
):
  """Batches of serialized records from gzipped TFRecord files, sharded for one pipeline.

  Training datasets repeat, shuffle and drop the last partial batch. With several input
  pipelines they are sharded by file when there are enough files; otherwise every pipeline
  reads the same seeded shuffle and keeps every num_shards-th record, so the union of the
  per-replica batches of one step equals the global batch a single worker would draw.

  Args:
    files: TFRecord files (GZIP when they end in .gz).
    batch_size: batch size of this pipeline (per replica under a strategy).
    training: repeat/shuffle/drop_remainder for training; one ordered pass otherwise.
    seed: shuffle seed, identical on every worker.
    num_shards: number of input pipelines.
    shard_index: index of this pipeline.
    holdout: ALL_RECORDS, FIT_RECORDS (all but the held-out slice) or HOLDOUT_RECORDS.
    every: with FIT_RECORDS or HOLDOUT_RECORDS, every how many records of a file one is held
      out (`holdout_every`).
    group: (column, dtype) whose values choose the held-out rows instead, about one group in
      `every` (`held_out_groups`); None: the records' places.

  Returns:
    A tf.data.Dataset of [batch] tf.string tensors.
  """
  files = list(files)
  shard_records = training and num_shards > 1
  if shard_records and len(files) >= num_shards:
    files = files[shard_index::num_shards]
    shard_records = False
  ds = _records(files, holdout, every, group)
  if training:
    ds = ds.repeat().shuffle(_SHUFFLE_BUFFER, seed=seed)
    if shard_records:
      ds = ds.shard(num_shards, shard_index)
  return ds.batch(batch_size, drop_remainder=training)


# ----------------------------------------------------------------------------- the fit

MIXED_PRECISION_POLICIES = ("", "mixed_float16", "mixed_bfloat16")


@dataclasses.dataclass(frozen=True)
class FitConfig:
  """How `fit` runs.

  Attributes:
    model_run_dir: the ModelRun uri (TensorBoard logs, backup, progress).
    epochs: fit epochs (BackupAndRestore saves after each).
    steps_per_epoch: steps per epoch.
    global_batch_size: examples per step over all replicas.
    attempt: restart count of a surrounding local cluster.
    profile_steps: (first, last) training steps to profile, 1-based and inclusive, or None.
    steps_per_execution: steps per compiled call (Keras' batch hooks run once per call).
    backup_dir: BackupAndRestore's folder; None: `<model_run_dir>/distributed_trainer/backup`.
    validation: a held-out dataset of (features, target) batches, or None.
    validation_steps: batches of `validation` per evaluation.
    patience: with `validation`, epochs without a better validation loss before training
      stops (the best epoch's weights are kept); the learning rate is cut by 3 after a
      quarter as many. 0: no early stopping.
    smooth_epochs: epochs whose validation losses are averaged for those decisions (1: each
      epoch alone; see early_stopping.py).
    warmup_steps: steps over which the learning rate rises to the compiled one (0: none).
    stopping: callbacks that stop training in place of `patience`'s, after the held-out
      evaluation (an ensemble trained in one pass stops each member on its own).
    backup_steps: steps between backups where an epoch is shorter.
  """

  model_run_dir: str
  epochs: int
  steps_per_epoch: int
  global_batch_size: int = defaults.GLOBAL_BATCH_SIZE
  attempt: int = 0
  profile_steps: tuple[int, int] | None = None
  steps_per_execution: int = 1
  backup_dir: str | None = None
  validation: Any = None
  validation_steps: int = 0
  patience: int = 0
  smooth_epochs: int = 1
  warmup_steps: int = 0
  stopping: Any = None
  backup_steps: int = defaults.BACKUP_STEPS


def fit(
  model, built: BuiltStrategy, dataset_fn: Callable[[Any], Any], config: FitConfig
) -> dict[str, Any]:
  """Fits a compiled model under `built` with BackupAndRestore, TensorBoard and progress.

  The loop itself is distributed_trainer_lib.run_fit's; this names the run state it keeps.

  Args:
    model: a model compiled inside `built.strategy.scope()`.
    built: the strategy of this process.
    dataset_fn: input_context -> per-replica training dataset.
    config: epochs, steps and where the run state goes.

  Returns:
    TrainResult fields: initial_epoch, epochs, steps_per_epoch, steps_run, train_seconds,
    train_examples_per_sec, weights_sha256, profile_dir, profile_skipped. Raises
    TrainerInputError when the global batch does not split evenly over the replicas.
  """
  backup_dir = config.backup_dir or run_state_dir(config.model_run_dir, BACKUP_DIR)
  progress = progress_path(config.model_run_dir, built.task_type, built.task_index)
  fields = distributed_trainer_lib.run_fit(model, built, dataset_fn, config, backup_dir, progress)
  return {**fields, "weights_sha256": weights_digest(model.get_weights())}


held_out_evaluation = early_stopping.held_out_evaluation  # `fit` adds it for FitConfig.validation
# One network's early stopping (`patience`), and the epoch it kept: a module's own stopping.
stopping_callbacks, kept_epoch = early_stopping.callbacks, early_stopping.kept_epoch


def weights_digest(weights: Sequence[Any]) -> str:
  """The sha256 of a model's weights (`model.get_weights()`), equal where the weights are."""
  digest = hashlib.sha256()
  for w in weights:
    digest.update(w.tobytes())
  return digest.hexdigest()


def check_profile_steps(profile_steps: Sequence[int] | None, total_steps: int) -> None:
  """Refuses a profile range the run will not reach.

  Args:
    profile_steps: (first, last) training steps, 1-based and inclusive, or None.
    total_steps: optimizer steps the run takes.

  Raises:
    UserInputError: when the range is empty or ends after the last step.
  """
  if not profile_steps:
    return
  first, last = (int(s) for s in profile_steps)
  if first < 1 or last < first:
    raise UserInputError(
      f"--profile-steps {first},{last} is not a range of training steps; pass FIRST,LAST with "
      "1 <= FIRST <= LAST."
    )
  if last > total_steps:
    raise UserInputError(
      f"--profile-steps {first},{last} ends after the last training step of this run "
      f"({total_steps}); pass a range between 1 and {total_steps} or raise --train-steps."
    )


# ----------------------------------------------------------------------------- the result

# Sub-folders of model_run_dir that the trainer owns.
RUN_STATE_DIR = "distributed_trainer"
BACKUP_DIR = "backup"
_PROGRESS_DIR = "progress"
_RESULTS_DIR = "results"


@dataclasses.dataclass
class TrainResult:
  """What one training process reports (written as JSON under model_run_dir).

  Attributes:
    strategy: chosen strategy name.
    strategy_reason: why it was chosen.
    num_replicas_in_sync: replicas of the strategy.
    task_type: TF_CONFIG task type.
    task_index: TF_CONFIG task index.
    is_chief: whether this process exported.
    module_style: 'run_fn', 'build_model', or what a module managing its strategy records
      (the default model: 'tabular').
    task: 'binary', 'multiclass' or 'regression' when the trainer knows it.
    hparams: the hyper-parameters the model was built with (modules that record them).
    eval_accuracy: accuracy on the eval split (chief, classification), else None.
    eval_metrics: the chief's eval metrics (accuracy, or rmse and mae; examples).
    initial_epoch: first epoch this process ran (> 0 after a BackupAndRestore resume).
    epochs: epochs of the fit.
    steps_per_epoch: steps per epoch.
    steps_run: optimizer steps this process ran (fewer than epochs x steps after a resume).
    train_seconds: wall time of fit.
    train_examples_per_sec: global examples per second after the first epoch.
    weights_sha256: digest of the trained weights (equal on all MWMS workers).
    warm_started_layers: layers whose weights came from the base model.
    profile_dir: where a TensorBoard profile of the requested steps was written.
    profile_skipped: why no profile was written although one was asked for (training stopped
      before the range; `steps_lib.profile_not_reached`), else None.
    epochs_run: the last epoch fit ran (early stopping ends it before `epochs`).
    best_epoch: the epoch whose weights were kept (best validation loss), with early stopping.
    plan: what the trainer chose for the data (batch size, epoch budget, patience, rows).
    strategy_chosen_by: 'trainer' (the rule table or --strategy) or 'module' (run_fn built
      and entered a strategy of its own, which then trained).
    trainer_strategy: the trainer's choice, recorded also when the module's replaced it.
  """

  strategy: str
  strategy_reason: str
  num_replicas_in_sync: int
  task_type: str
  task_index: int
  is_chief: bool
  module_style: str
  task: str | None = None
  hparams: dict[str, Any] = dataclasses.field(default_factory=dict)
  eval_accuracy: float | None = None
  eval_metrics: dict[str, float] = dataclasses.field(default_factory=dict)
  initial_epoch: int | None = None
  epochs: int | None = None
  steps_per_epoch: int | None = None
  steps_run: int | None = None
  train_seconds: float | None = None
  train_examples_per_sec: float | None = None
  weights_sha256: str | None = None
  warm_started_layers: list[str] = dataclasses.field(default_factory=list)
  profile_dir: str | None = None
  profile_skipped: str | None = None
  epochs_run: int | None = None
  best_epoch: int | None = None
  plan: dict[str, Any] = dataclasses.field(default_factory=dict)
  strategy_chosen_by: str = CHOSEN_BY_TRAINER
  trainer_strategy: str | None = None

  @classmethod
  def under(cls, built: BuiltStrategy, module_style: str, **fields: Any) -> TrainResult:
    """A result of training under `built`: its strategy and task filled in."""
    return cls(
      strategy=built.choice.name,
      strategy_reason=built.choice.reason,
      num_replicas_in_sync=built.num_replicas_in_sync,
      task_type=built.task_type,
      task_index=built.task_index,
      is_chief=built.is_chief,
      module_style=module_style,
      **fields,
    )


def run_state_dir(model_run_dir: str, *parts: str) -> str:
  """Returns a path inside the trainer's own folder of model_run_dir."""
  return os.path.join(model_run_dir, RUN_STATE_DIR, *parts)


def result_path(model_run_dir: str, task_type: str, task_index: int) -> str:
  """Returns where the process (task_type, task_index) writes its TrainResult."""
  return run_state_dir(model_run_dir, _RESULTS_DIR, f"{task_type}-{task_index}.json")


def progress_path(model_run_dir: str, task_type: str, task_index: int) -> str:
  """Returns the JSON-lines epoch log of the process (task_type, task_index)."""
  return run_state_dir(model_run_dir, _PROGRESS_DIR, f"{task_type}-{task_index}.jsonl")


def write_result(model_run_dir: str, result: TrainResult) -> str:
  """Writes a TrainResult atomically and returns its path."""
  import tensorflow as tf

  path = result_path(model_run_dir, result.task_type, result.task_index)
  tf.io.gfile.makedirs(os.path.dirname(path))
  tmp = f"{path}.tmp-{uuid.uuid4().hex}"
  with tf.io.gfile.GFile(tmp, "w") as f:
    f.write(json.dumps(dataclasses.asdict(result), indent=2, sort_keys=True))
  tf.io.gfile.rename(tmp, path, overwrite=True)
  return path


def read_result(path: str) -> TrainResult:
  """Reads a TrainResult written by `write_result`."""
  import tensorflow as tf

  with tf.io.gfile.GFile(path) as f:
    return TrainResult(**json.loads(f.read()))
