"""Training under a tf.distribute strategy: input per strategy, fit with backups, run records.

Plain Python on plain values: modules that manage their strategy (the default model,
models/tabular) and tests call it; it knows nothing of columns or TFX artifacts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from components import storage
from components.distributed_trainer import cluster_profiler, strategy_lib
from components.distributed_trainer import early_stopping as stopping
from core import defaults
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)

DEFAULT_SHUFFLE_SEED = 42
MIXED_PRECISION_POLICIES = ("", "mixed_float16", "mixed_bfloat16")

# Sub-folders of model_run_dir that the trainer owns.
RUN_STATE_DIR = "distributed_trainer"
BACKUP_DIR = "backup"
_PROGRESS_DIR = "progress"
_RESULTS_DIR = "results"
TENSORBOARD_DIR = "logs"
_SHUFFLE_BUFFER = 10_000


class TrainerInputError(UserInputError):
  """Bad data, settings or module for training; the message names the fix."""


def list_files(file_patterns: Sequence[str]) -> list[str]:
  """Expands glob patterns (local or any tf.io.gfile URI) to a sorted file list.

  Raises:
    TrainerInputError: when nothing matches.
  """
  import tensorflow as tf

  files = sorted({f for pattern in file_patterns for f in tf.io.gfile.glob(pattern)})
  if not files:
    raise TrainerInputError(
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
  strategy_chosen_by: str = strategy_lib.CHOSEN_BY_TRAINER
  trainer_strategy: str | None = None

  @classmethod
  def under(cls, built, module_style: str, **fields: Any) -> TrainResult:
    """A result of training under `built` (a BuiltStrategy): its strategy and task filled in."""
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


def _progress_callback(path: str, attempt: int, epochs: int, epoch_times: list[float]):
  """Epoch-level callback (no batch hooks, so ParameterServerStrategy accepts it).

  Events always go to the log; on a local model_run_dir they are also appended to `path`
  (object stores such as gs:// cannot append, and only local runs get restarted by us).
  """
  import tensorflow as tf

  local = not storage.is_remote(path)
  if local:
    os.makedirs(os.path.dirname(path), exist_ok=True)

  class _Progress(tf.keras.callbacks.Callback):
    """Records epoch begin/end; listed after BackupAndRestore so an 'end' is backed up."""

    def __init__(self):
      super().__init__()
      self._start = 0.0

    def _write(self, event: str, epoch: int, logs=None) -> None:
      metrics = {k: round(float(v), 6) for k, v in (logs or {}).items()}
      _LOG.info("%s %d/%d (attempt %d) %s", event, epoch + 1, epochs, attempt, metrics or "")
      if not local:
        return
      with open(path, "a") as f:
        record = {"event": event, "epoch": epoch, "epochs": epochs, "attempt": attempt}
        f.write(json.dumps({**record, **metrics}) + "\n")
        f.flush()
        os.fsync(f.fileno())

    def on_epoch_begin(self, epoch, logs=None):
      self._start = time.perf_counter()
      self._write("epoch_begin", epoch)

    def on_epoch_end(self, epoch, logs=None):
      epoch_times.append(time.perf_counter() - self._start)
      self._write("epoch_end", epoch, logs)

  return _Progress()


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
    steps_per_execution: steps per compiled call of the model (Keras' batch hooks run once per
      call, so the profile covers whole calls around the steps).
    backup_dir: BackupAndRestore's folder; None: `<model_run_dir>/distributed_trainer/backup`.
    validation: a held-out dataset of (features, target) batches, or None.
    validation_steps: batches of `validation` per evaluation.
    patience: with `validation`, epochs without a better validation loss before training
      stops (the best epoch's weights are kept); the learning rate is cut by 3 after a
      quarter as many. 0: no early stopping.
    smooth_epochs: epochs whose validation losses are averaged for those decisions (1: each
      epoch alone; see early_stopping.py).
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


def train_input(built, dataset_fn: Callable[[Any], Any], global_batch_size: int):
  """What `model.fit` takes for this strategy.

  ParameterServerStrategy needs a DatasetCreator (each worker builds its own pipeline); the
  other strategies take `distribute_datasets_from_function`.

  Raises:
    TrainerInputError: when the global batch does not split evenly over the replicas.
  """
  import tensorflow as tf

  replicas = built.num_replicas_in_sync
  if global_batch_size % replicas:
    raise TrainerInputError(
      f"global_batch_size={global_batch_size} does not divide over {replicas} replicas; pass a "
      f"multiple of {replicas}."
    )
  if built.choice.name == defaults.PARAMETER_SERVER:
    return tf.keras.utils.experimental.DatasetCreator(dataset_fn)
  return built.strategy.distribute_datasets_from_function(dataset_fn)


def fit(model, built, dataset_fn: Callable[[Any], Any], config: FitConfig) -> dict[str, Any]:
  """Fits a compiled model under `built` with BackupAndRestore, TensorBoard and progress.

  Args:
    model: a model compiled inside `built.strategy.scope()`.
    built: the strategy of this process.
    dataset_fn: input_context -> per-replica training dataset.
    config: epochs, steps and where the run state goes.

  Returns:
    TrainResult fields: initial_epoch, epochs, steps_per_epoch, steps_run, train_seconds,
    train_examples_per_sec, weights_sha256, profile_dir, profile_skipped.
  """
  from components.distributed_trainer import steps_lib

  epoch_times: list[float] = []
  logs = os.path.join(config.model_run_dir, TENSORBOARD_DIR)
  early_stopping = (
    stopping.callbacks(config.patience, config.smooth_epochs)
    if config.validation is not None and config.patience
    else []
  )
  callbacks = _callbacks(built, config, logs, epoch_times) + early_stopping
  start = time.perf_counter()
  history = model.fit(
    train_input(built, dataset_fn, config.global_batch_size),
    epochs=config.epochs,
    steps_per_epoch=config.steps_per_epoch,
    validation_data=config.validation if early_stopping else None,
    validation_steps=config.validation_steps if early_stopping else None,
    callbacks=callbacks,
    verbose=0,
  )
  seconds = time.perf_counter() - start
  # history.epoch lists the epochs this fit ran; it starts late after a backup restore.
  initial_epoch = history.epoch[0] if history.epoch else config.epochs
  epochs_run = (history.epoch[-1] + 1) if history.epoch else config.epochs
  best_epoch = None
  if early_stopping:
    best_epoch = stopping.kept_epoch(history.epoch, history.history, config.smooth_epochs)
  skipped = steps_lib.profile_not_reached(
    config.profile_steps, epochs_run * config.steps_per_epoch, epochs_run, config.epochs
  )
  if skipped:
    _LOG.warning("No profile: %s", skipped)
  return {
    "initial_epoch": initial_epoch,
    "epochs": config.epochs,
    "epochs_run": epochs_run,
    "best_epoch": best_epoch,
    "steps_per_epoch": config.steps_per_epoch,
    "steps_run": len(history.epoch) * config.steps_per_epoch,
    "train_seconds": seconds,
    "train_examples_per_sec": _examples_per_sec(
      epoch_times, config.steps_per_epoch, config.global_batch_size
    ),
    "weights_sha256": weights_digest(model.get_weights()),
    "profile_dir": os.path.join(logs, "plugins", "profile")
    if config.profile_steps and not skipped
    else None,
    "profile_skipped": skipped,
  }


def _callbacks(built, config: FitConfig, logs: str, epoch_times: list[float]) -> list[Any]:
  """Backup, TensorBoard (with the profile of a process alone), progress and a cluster trace."""
  import tensorflow as tf

  from components import tf_compat
  from components.distributed_trainer import steps_lib

  cluster_ports = cluster_profiler.profiler_ports()
  profile_calls = 0
  if config.profile_steps and not cluster_ports:
    profile_calls = steps_lib.profile_calls(
      config.profile_steps, config.steps_per_epoch, config.steps_per_execution
    )
  progress = progress_path(config.model_run_dir, built.task_type, built.task_index)
  callbacks = [
    tf_compat.backup_and_restore(
      config.backup_dir or run_state_dir(config.model_run_dir, BACKUP_DIR),
      _backup_every(built, config),
    ),
    tf.keras.callbacks.TensorBoard(logs, profile_batch=profile_calls),
    _progress_callback(progress, config.attempt, config.epochs, epoch_times),
  ]
  if config.profile_steps and cluster_ports:
    callbacks.append(
      cluster_profiler.cluster_trace(
        cluster_ports, config.profile_steps, config.steps_per_epoch, logs, built.is_chief
      )
    )
  return callbacks


# Short epochs are backed up every this many steps instead of after each epoch: a checkpoint
# costs about as much as 20 small steps.
BACKUP_STEPS = 200


def _backup_every(built, config: FitConfig):
  """BackupAndRestore's save_freq: each epoch, or every BACKUP_STEPS steps for short epochs.

  ParameterServerStrategy takes epoch-level callbacks only, so it always saves per epoch.
  Keras counts save_freq in calls of steps_per_execution steps.
  """
  if built.choice.name == defaults.PARAMETER_SERVER or config.steps_per_epoch >= BACKUP_STEPS:
    return "epoch"
  return max(1, BACKUP_STEPS // max(1, config.steps_per_execution))


def weights_digest(weights: Sequence[Any]) -> str:
  digest = hashlib.sha256()
  for w in weights:
    digest.update(w.tobytes())
  return digest.hexdigest()


def _examples_per_sec(epoch_times: Sequence[float], steps: int, batch: int) -> float | None:
  # The first epoch pays for tracing and warm-up; measure the steady state after it.
  steady = list(epoch_times[1:]) or list(epoch_times)
  if not steady or sum(steady) <= 0:
    return None
  return steps * batch * len(steady) / sum(steady)
