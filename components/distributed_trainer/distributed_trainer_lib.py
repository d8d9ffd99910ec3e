"""The fit loop behind trainer_api.fit: input per strategy, callbacks, backups, speed.

Plain Python on plain values: trainer_api.fit (what modules call) hands it the model, the
strategy and the run state's paths; it knows nothing of columns, TFX artifacts or modules.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from components import storage
from components.distributed_trainer import cluster_profiler
from components.distributed_trainer import early_stopping as stopping
from core import defaults
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)

# The sub-folder of model_run_dir that TensorBoard's logs (and profiles) go to.
TENSORBOARD_DIR = "logs"


class TrainerInputError(UserInputError):
  """Bad data, settings or module for training; the message names the fix."""


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


# Strategies whose held-out rows Keras' own evaluation reads: a parameter-server coordinator
# sends it to the workers, and a TPU's replicas run it on the TPU. The others evaluate in
# `early_stopping.held_out_evaluation`.
_KERAS_VALIDATES = (defaults.PARAMETER_SERVER, defaults.TPU)


def run_fit(
  model,
  built,
  dataset_fn: Callable[[Any], Any],
  config,
  backup_dir: str,
  progress: str,
) -> dict[str, Any]:
  """Fits a compiled model under `built` with BackupAndRestore, TensorBoard and progress.

  Args:
    model: a model compiled inside `built.strategy.scope()`.
    built: the strategy of this process (a trainer_api.BuiltStrategy).
    dataset_fn: input_context -> per-replica training dataset.
    config: a trainer_api.FitConfig: epochs, steps and where the run state goes.
    backup_dir: BackupAndRestore's folder.
    progress: this process's JSON-lines epoch log (trainer_api.progress_path).

  Returns:
    TrainResult fields: initial_epoch, epochs, steps_per_epoch, steps_run, train_seconds,
    train_examples_per_sec, profile_dir, profile_skipped.

  Raises:
    TrainerInputError: when the global batch does not split evenly over the replicas.
  """
  from components.distributed_trainer import steps_lib

  epoch_times: list[float] = []
  logs = os.path.join(config.model_run_dir, TENSORBOARD_DIR)
  early_stopping = _stopping(config)
  validates = bool(early_stopping) and config.validation is not None
  callbacks = _callbacks(built, config, logs, epoch_times, backup_dir, progress, early_stopping)
  if config.warmup_steps:
    callbacks.insert(0, stopping.warm_up(config.warmup_steps))
  keras_validates = validates and built.choice.name in _KERAS_VALIDATES
  if validates and not keras_validates:
    # First, so that every callback after it reads the held-out logs.
    callbacks.insert(0, stopping.held_out_evaluation(config.validation, config.validation_steps))
  _build_optimizer(model, built)
  start = time.perf_counter()
  history = model.fit(
    train_input(built, dataset_fn, config.global_batch_size),
    epochs=config.epochs,
    steps_per_epoch=config.steps_per_epoch,
    validation_data=config.validation if keras_validates else None,
    validation_steps=config.validation_steps if keras_validates else None,
    callbacks=callbacks,
    verbose=0,
  )
  seconds = time.perf_counter() - start
  # history.epoch lists the epochs this fit ran; it starts late after a backup restore.
  initial_epoch = history.epoch[0] if history.epoch else config.epochs
  epochs_run = (history.epoch[-1] + 1) if history.epoch else config.epochs
  best_epoch = None
  if early_stopping and config.stopping is None:
    best_epoch = stopping.kept_epoch(
      history.epoch, history.history, config.smooth_epochs, early_stopping
    )
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
    "profile_dir": os.path.join(logs, "plugins", "profile")
    if config.profile_steps and not skipped
    else None,
    "profile_skipped": skipped,
  }


def _stopping(config) -> list[Any]:
  """The callbacks that end training: `config.stopping`, else early stopping by `patience`."""
  if config.stopping is not None:
    return list(config.stopping)
  if config.validation is not None and config.patience:
    return stopping.callbacks(config.patience, config.smooth_epochs)
  return []


def _build_optimizer(model, built) -> None:
  """Creates the optimizer's variables (Adam's moments) before `fit`, in the strategy's scope.

  Keras creates them inside the first traced training step, and a tf.function that created
  variables is traced once more on its next call: about a second per fit of the default model
  (four fits for a small table's ensemble). Keras' optimizers build once, so `fit` then builds
  nothing, and the steps are the same. Legacy optimizers (`optimizers.legacy`) are left alone.
  """
  import tensorflow as tf

  optimizer = getattr(model, "optimizer", None)
  if isinstance(optimizer, tf.keras.optimizers.Optimizer):
    with built.strategy.scope():
      optimizer.build(model.trainable_variables)


def _callbacks(
  built,
  config,
  logs: str,
  epoch_times: list[float],
  backup_dir: str,
  progress: str,
  early_stopping: list[Any],
) -> list[Any]:
  """Backup, TensorBoard (with the profile of a process alone), progress, a cluster trace and
  `early_stopping`: last, or first where `config.stopping` gave them (a joint fit's members),
  so that a member that has stopped takes its values out of the epoch's logs before
  TensorBoard writes them."""

  from components import tf_compat
  from components.distributed_trainer import steps_lib

  cluster_ports = cluster_profiler.profiler_ports()
  profile_calls = 0
  if config.profile_steps and not cluster_ports:
    profile_calls = steps_lib.profile_calls(
      config.profile_steps, config.steps_per_epoch, config.steps_per_execution
    )
  callbacks = [
    tf_compat.backup_and_restore(
      backup_dir, _backup_every(built, config), stopping.kept_backup(early_stopping)
    ),
    epoch_tensorboard(logs, profile_calls),
    _progress_callback(progress, config.attempt, config.epochs, epoch_times),
  ]
  if config.profile_steps and cluster_ports:
    callbacks.append(
      cluster_profiler.cluster_trace(
        cluster_ports, config.profile_steps, config.steps_per_epoch, logs, built.is_chief
      )
    )
  if config.stopping is not None:
    return early_stopping + callbacks
  return callbacks + early_stopping


def epoch_tensorboard(logs: str, profile_batch=0):
  """Keras' TensorBoard callback, writing the same events for less.

  At its default `update_freq` ('epoch') Keras still calls `tf.summary.scalar` for every logged
  value after every batch with no writer set, so nothing is written: this one hands that hook
  no logs. And each epoch's values go to each writer in one traced call instead of a few eager
  operations per value (an ensemble trained in one pass logs each member's values).
  """
  return _epoch_tensorboard_class()(logs, profile_batch=profile_batch)


@functools.cache
def _epoch_tensorboard_class():
  import tensorflow as tf

  class EpochTensorBoard(tf.keras.callbacks.TensorBoard):
    def on_train_begin(self, logs=None):
      super().on_train_begin(logs)
      self._writes = {}

    def on_train_batch_end(self, batch, logs=None):
      super().on_train_batch_end(batch, logs if self.update_freq != "epoch" else None)

    def on_train_end(self, logs=None):
      self._writes = {}  # the traces hold the writers, which Keras closes now
      super().on_train_end(logs)

    def _log_epoch_metrics(self, epoch, logs):
      # As Keras' own: training values to the train writer, `val_` ones to the validation
      # writer without the prefix, each named `epoch_<name>` at the epoch's step.
      if not logs:
        return
      train = self._collect_learning_rate({k: v for k, v in logs.items() if k[:4] != "val_"})
      if self.write_steps_per_second:
        train["steps_per_second"] = self._compute_steps_per_second()
      held_out = {k[4:]: v for k, v in logs.items() if k[:4] == "val_"}
      step = tf.constant(epoch, tf.int64)
      with tf.summary.record_if(True):
        for writer, values in ((self._train_writer, train), (self._val_writer, held_out)):
          if values:
            with writer.as_default():
              write = self._write(writer, tuple(values))
              write(tf.constant([float(v) for v in values.values()]), step)

    def _write(self, writer, names: tuple[str, ...]):
      # A trace writes to the writer that was the default when it was made: one per writer.
      key = (id(writer), names)
      if key not in self._writes:

        def write(values, step):
          for i, name in enumerate(names):
            tf.summary.scalar("epoch_" + name, values[i], step=step)

        self._writes[key] = tf.function(write)
      return self._writes[key]

  return EpochTensorBoard


def _backup_every(built, config):
  """BackupAndRestore's save_freq: each epoch, or every `config.backup_steps` steps for short
  epochs.

  ParameterServerStrategy takes epoch-level callbacks only, so it always saves per epoch.
  Keras counts save_freq in calls of steps_per_execution steps.
  """
  every = config.backup_steps
  if built.choice.name == defaults.PARAMETER_SERVER or config.steps_per_epoch >= every:
    return "epoch"
  return max(1, every // max(1, config.steps_per_execution))


def _examples_per_sec(epoch_times: Sequence[float], steps: int, batch: int) -> float | None:
  # The first epoch pays for tracing and warm-up; measure the steady state after it.
  steady = list(epoch_times[1:]) or list(epoch_times)
  if not steady or sum(steady) <= 0:
    return None
  return steps * batch * len(steady) / sum(steady)
