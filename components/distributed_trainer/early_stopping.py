"""Early stopping on the held-out slice: when to stop, which epoch's weights to keep.

Training stops once the held-out loss has not improved for `patience` epochs, and keeps the
weights of the best epoch. With a window (the default model's `stopping_window`), both follow
the mean loss of the last `window` epochs instead, for held-out slices so small that one
epoch's loss is mostly noise: a minimum that lasts, not a lucky epoch.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

import numpy as np

# The logged value both callbacks monitor: Keras' own held-out loss, or its moving mean.
VAL_LOSS = "val_loss"
VAL_LOSS_MEAN = "val_loss_mean"


@functools.cache
def _mean_callback_class():
  import tensorflow as tf

  class HeldOutMean(tf.keras.callbacks.Callback):
    """Adds VAL_LOSS_MEAN, the mean held-out loss of the last `window` epochs, to the logs.

    Keras hands every callback the same logs dict in list order, so the callbacks after this
    one (EarlyStopping, ReduceLROnPlateau, History) see the mean.
    """

    def __init__(self, window: int):
      super().__init__()
      self.window = window
      self._losses: collections.deque = collections.deque(maxlen=window)

    def on_train_begin(self, logs=None):
      self._losses.clear()

    def on_epoch_end(self, epoch, logs=None):
      if logs is not None and VAL_LOSS in logs:
        self._losses.append(float(logs[VAL_LOSS]))
        logs[VAL_LOSS_MEAN] = float(np.mean(self._losses))

  return HeldOutMean


def callbacks(patience: int, window: int = 1) -> list[Any]:
  """[HeldOutMean (window > 1), EarlyStopping, ReduceLROnPlateau] on the held-out loss.

  Args:
    patience: epochs without a better (mean) held-out loss before training stops; the best
      epoch's weights are kept.
    window: epochs whose held-out losses are averaged; 1 judges each epoch alone. With a
      window, no epoch before the first full window is kept.

  The learning rate drops a third after a quarter of the patience without a better held-out
  loss, so a noisy plateau is settled by smaller steps before training stops (on the 54k-row
  diamonds table: RMSE 585 against 602 when it waited half the patience).

  The three keep their state in variables (`kept`), which a backup saves with the model
  (`kept_backup`), so that a fit restored from a backup goes on with the best loss, the
  patience spent, the cooldown, the window and the best weights that it had, instead of
  starting them again.
  """
  mean_class, stopping_class, plateau_class = _kept_classes()
  smoothed = window > 1
  monitor = VAL_LOSS_MEAN if smoothed else VAL_LOSS
  mean = [mean_class(window)] if smoothed else []
  return [
    *mean,
    stopping_class(
      monitor=monitor,
      patience=patience,
      restore_best_weights=True,
      start_from_epoch=window - 1 if smoothed else 0,
    ),
    plateau_class(monitor=monitor, factor=1 / 3, patience=max(1, patience // 4), min_lr=1e-5),
  ]


def kept_epoch(
  epochs: list[int], history: dict[str, list[float]], window: int = 1, callbacks: Any = ()
) -> int | None:
  """The 1-based epoch whose weights EarlyStopping kept, from Keras' History; None without it.

  The first of equal losses, as EarlyStopping keeps only a strictly better one; with a window,
  among the epochs from the first full window on (all of them when none got there). For a fit
  that resumed from a backup with its `callbacks`' state, the epoch their EarlyStopping kept,
  which may come before the resume and so before the History's first epoch.
  """
  for callback in callbacks:
    if getattr(callback, "resumed", False) and getattr(callback, "best_weights", None) is not None:
      return int(callback.best_epoch) + 1
  losses = history.get(VAL_LOSS_MEAN if window > 1 else VAL_LOSS)
  if not losses or not epochs:
    return None
  judged = [i for i, e in enumerate(epochs[: len(losses)]) if e >= window - 1]
  judged = judged or list(range(len(losses)))
  best = min(judged, key=lambda i: (losses[i], i))
  return epochs[best] + 1


@functools.cache
def _kept_state_class():
  """The mix-in that keeps a callback's state in variables (`Kept`)."""
  import tensorflow as tf

  class Kept(tf.Module):
    """A callback's state as variables: whether an epoch recorded it, its numbers, and the
    best weights EarlyStopping holds (one variable per model weight)."""

    def __init__(self, numbers: int, weights: Any = ()):
      super().__init__()
      self.recorded = tf.Variable(False, trainable=False)
      self.numbers = tf.Variable(np.zeros(numbers), dtype=tf.float64, trainable=False)
      self.best_weights = [
        tf.Variable(np.zeros(w.shape, w.dtype.as_numpy_dtype), trainable=False) for w in weights
      ]

  class KeptState:
    """Writes the callback's state (`_numbers`) to its `kept` variables after each epoch, and
    reads it back before the first epoch of a fit whose backup restored them (`resumed`)."""

    kept = None
    resumed = False

    def _make_kept(self, numbers: int, weights: Any = ()) -> None:
      if self.kept is None:
        self.kept = Kept(numbers, weights)

    def on_train_begin(self, logs=None):
      super().on_train_begin(logs)
      self._read = False

    def on_epoch_begin(self, epoch, logs=None):
      # The backup restores the variables in its own on_train_begin, whatever the order.
      if not self._read:
        self._read = True
        if bool(self.kept.recorded.numpy()):
          self.resumed = True
          self._load([float(v) for v in self.kept.numbers.numpy()])
      super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
      super().on_epoch_end(epoch, logs)
      self.kept.numbers.assign(self._numbers())
      self.kept.recorded.assign(True)

  return KeptState


@functools.cache
def _kept_classes():
  """(HeldOutMean, EarlyStopping, ReduceLROnPlateau), each keeping its state in variables."""
  import tensorflow as tf

  KeptState = _kept_state_class()

  class KeptMean(KeptState, _mean_callback_class()):
    def set_model(self, model):
      super().set_model(model)
      self._make_kept(1 + self.window)

    def _numbers(self):
      losses = list(self._losses)
      return [len(losses), *losses, *[0.0] * (self.window - len(losses))]

    def _load(self, numbers):
      self._losses.clear()
      self._losses.extend(numbers[1 : 1 + int(numbers[0])])

  class KeptEarlyStopping(KeptState, tf.keras.callbacks.EarlyStopping):
    def set_model(self, model):
      super().set_model(model)
      self._make_kept(5, model.weights if self.restore_best_weights else ())

    def _numbers(self):
      has_best = self.best_weights is not None
      return [self.wait, self.stopped_epoch, self.best, self.best_epoch, has_best]

    def _load(self, numbers):
      self.wait, self.stopped_epoch, self.best_epoch = (int(numbers[i]) for i in (0, 1, 3))
      self.best = numbers[2]
      if numbers[4]:
        self.best_weights = [v.numpy() for v in self.kept.best_weights]

    def on_epoch_end(self, epoch, logs=None):
      before = self.best_weights
      super().on_epoch_end(epoch, logs)
      if self.best_weights is not None and self.best_weights is not before:
        for variable, value in zip(self.kept.best_weights, self.best_weights, strict=True):
          variable.assign(value)

  class KeptPlateau(KeptState, tf.keras.callbacks.ReduceLROnPlateau):
    def set_model(self, model):
      super().set_model(model)
      self._make_kept(3)

    def _numbers(self):
      return [self.wait, self.best, self.cooldown_counter]

    def _load(self, numbers):
      self.wait, self.best, self.cooldown_counter = int(numbers[0]), numbers[1], int(numbers[2])

  return KeptMean, KeptEarlyStopping, KeptPlateau


def kept_backup(callbacks: Any) -> Any:
  """The BackupAndRestore class for a fit with these `callbacks` (`tf_compat.backup_and_restore`
  takes it): one that saves their `kept` state in every backup, or None when none of them is
  of `callbacks`. A callback that runs callbacks of its own (a joint fit's members, whose
  callbacks are made when training begins) lists them as its `callbacks`."""
  if not any(isinstance(c, _kept_state_class()) or hasattr(c, "callbacks") for c in callbacks):
    return None
  return functools.partial(_kept_backup_class(), kept=list(callbacks))


def _kept_of(callbacks: Any) -> list[Any]:
  """The `kept` state of `callbacks` and of the callbacks they run, in order."""
  out = []
  for callback in callbacks:
    if getattr(callback, "kept", None) is not None:
      out.append(callback.kept)
    out.extend(_kept_of(getattr(callback, "callbacks", ())))
  return out


@functools.cache
def _kept_backup_class():
  import tensorflow as tf

  class KeptBackup(tf.keras.callbacks.BackupAndRestore):
    """Backs up the callbacks' `kept` state too. A backup that falls on an epoch's last batch
    (or at its end) is taken when the next epoch begins, once the epoch's end has updated
    that state: Keras resumes such a backup at the next epoch, so it must hold the state the
    callbacks had then."""

    def __init__(self, backup_dir, save_freq="epoch", kept=()):
      super().__init__(backup_dir, save_freq=save_freq)
      self._kept_callbacks = list(kept)
      self._due = None

    def on_train_begin(self, logs=None):
      super().on_train_begin(logs)
      # Attached after the restore: a checkpoint restores what is attached to it later.
      checkpoint = self._training_state.read_checkpoint_manager.checkpoint
      checkpoint.kept_callbacks = _kept_of(self._kept_callbacks)
      self._due = None

    def _backup(self, epoch, batch=0):
      steps = (self.params or {}).get("steps") or 0  # None: an epoch of unknown length
      if self.save_freq == "epoch" or batch == steps - 1:
        self._due = (epoch, batch)
        return
      super()._backup(epoch, batch)

    def on_epoch_begin(self, epoch, logs=None):
      if self._due is not None:
        super()._backup(*self._due)
        self._due = None
      super().on_epoch_begin(epoch, logs)

  return KeptBackup


def warm_up(steps: int) -> Any:
  """A callback that raises the learning rate linearly from rate / steps to the compiled rate
  over the first `steps` optimizer steps (counted by the optimizer, so a run restored from a
  backup goes on where it was). Keras calls batch hooks once per compiled call, so the rate
  moves in steps_per_execution steps."""
  import tensorflow as tf

  class WarmUp(tf.keras.callbacks.Callback):
    def __init__(self):
      super().__init__()
      self._rate = None

    def on_train_begin(self, logs=None):
      self._rate = float(tf.keras.backend.get_value(self.model.optimizer.learning_rate))

    def on_train_batch_begin(self, batch, logs=None):
      done = int(tf.keras.backend.get_value(self.model.optimizer.iterations))
      if done <= steps:
        rate = self._rate * min(1.0, (done + 1) / steps)
        tf.keras.backend.set_value(self.model.optimizer.learning_rate, rate)

  return WarmUp()


def held_out_evaluation(validation: Any, steps: int | None = None) -> Any:
  """A callback that adds Keras' validation logs (VAL_LOSS and `val_` + each metric) at the end
  of each epoch, as `fit(validation_data=...)` does, from one iterator kept for the whole fit.

  Keras' own evaluation starts a new iterator over the held-out rows every epoch (on one device,
  about 70 ms before the first row), and so does a dataset looped over inside a tf.function:
  on a small table that is more than the epoch's training (27 of the 48 s that the digits' four
  networks trained). This one starts one iterator over the held-out batches, repeated, when
  training begins, takes one pass of them per epoch, and runs the model's own `test_step` on
  each in every replica, so the numbers are Keras': the same loss and metric objects over the
  same batches. Every replica sees every held-out batch, which leaves their mean as it is.
  When training ends it lets go of the batches, the iterator and its traced function.

  List it before the callbacks that read the held-out logs. For one device and the mirrored
  strategies (ParameterServerStrategy and TPUStrategy keep Keras' own).

  Args:
    validation: a finite dataset of (features, target) batches, the same ones on every pass.
    steps: batches of it per evaluation (None or 0: all).
  """
  import tensorflow as tf

  if not steps and validation.cardinality() == tf.data.INFINITE_CARDINALITY:
    raise ValueError("held-out batches that repeat without end need `steps`")
  return _held_out_class()(validation.take(steps) if steps else validation)


@functools.cache
def _held_out_class():
  """The callback class of `held_out_evaluation`, made once. A class made per call, closing
  over the held-out dataset, kept the trainer's rows alive after training at 1,000,000 rows
  (docs/performance.md); made once, holding the dataset only until training ends, it does not."""
  import tensorflow as tf

  class HeldOutEvaluation(tf.keras.callbacks.Callback):
    def __init__(self, one_pass):
      super().__init__()
      self._one_pass = one_pass
      self._batches = None
      self._evaluate = None

    def __deepcopy__(self, memo):
      # keras_tuner copies the callbacks for every trial. The held-out dataset holds a graph,
      # which cannot be copied, and a trial only reads it: the copies share it.
      return type(self)(self._one_pass)

    def on_train_begin(self, logs=None):
      count = int(self._one_pass.cardinality())
      if count < 0:  # unknown: counted once
        count = int(self._one_pass.reduce(0, lambda n, _: n + 1))
      self._batches = iter(self._one_pass.repeat())
      self._evaluate = _one_pass_function(self.model, count)

    def on_epoch_end(self, epoch, logs=None):
      # The epoch's training logs are numbers already; Keras resets the metrics before each
      # epoch and before each evaluation alike.
      results = self._evaluate(self._batches)
      if logs is not None:
        logs.update({f"val_{name}": float(value) for name, value in results.items()})

    def on_train_end(self, logs=None):
      self._one_pass = self._batches = self._evaluate = None

  return HeldOutEvaluation


def _one_pass_function(model, count: int):
  """One traced call per evaluation: the metrics reset, `count` batches of the iterator through
  the model's `test_step` in every replica, and the metrics' results (`get_metrics_result`).
  The last batch may be shorter: one trace serves both sizes. One call instead of a call per
  batch and eager resets and reads of every metric variable, which cost more than the batches
  themselves on a small table."""
  import tensorflow as tf

  strategy = model.distribute_strategy

  @tf.function
  def evaluate(iterator):
    for metric in model.metrics:
      metric.reset_state()
    for _ in tf.range(count):
      strategy.run(model.test_step, args=(next(iterator),))
    return model.get_metrics_result()

  return evaluate
