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
  """
  import tensorflow as tf

  smoothed = window > 1
  monitor = VAL_LOSS_MEAN if smoothed else VAL_LOSS
  mean = [_mean_callback_class()(window)] if smoothed else []
  return [
    *mean,
    tf.keras.callbacks.EarlyStopping(
      monitor=monitor,
      patience=patience,
      restore_best_weights=True,
      start_from_epoch=window - 1 if smoothed else 0,
    ),
    tf.keras.callbacks.ReduceLROnPlateau(
      monitor=monitor, factor=1 / 3, patience=max(1, patience // 4), min_lr=1e-5
    ),
  ]


def kept_epoch(epochs: list[int], history: dict[str, list[float]], window: int = 1) -> int | None:
  """The 1-based epoch whose weights EarlyStopping kept, from Keras' History; None without it.

  The first of equal losses, as EarlyStopping keeps only a strictly better one; with a window,
  among the epochs from the first full window on (all of them when none got there).
  """
  losses = history.get(VAL_LOSS_MEAN if window > 1 else VAL_LOSS)
  if not losses or not epochs:
    return None
  judged = [i for i, e in enumerate(epochs[: len(losses)]) if e >= window - 1]
  judged = judged or list(range(len(losses)))
  best = min(judged, key=lambda i: (losses[i], i))
  return epochs[best] + 1


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
