"""The trainer's TensorBoard callback writes what Keras' own writes at its default update_freq."""

import numpy as np
import tensorflow as tf

from components.distributed_trainer import distributed_trainer_lib as lib
from tests.support import tensorboard_events


def _fit(callback, monkeypatch) -> int:
  """Fits a tiny model for 3 epochs of 4 batches with `callback`; returns how often Keras'
  callbacks' tf.summary.scalar ran eagerly."""
  from tf_keras.src import callbacks as keras_callbacks

  summary = keras_callbacks.tf.summary  # the module Keras' callbacks call
  calls = []
  scalar = summary.scalar

  def counted(*args, **kwargs):
    calls.append(args[0])
    return scalar(*args, **kwargs)

  monkeypatch.setattr(summary, "scalar", counted)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 3)).astype("float32")
  y = x.sum(axis=1, keepdims=True)
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
  model.compile(tf.keras.optimizers.Adam(0.05), "mse", metrics=["mae"])
  # Keras calls every callback's batch hooks once one of them has some: in the trainer,
  # BackupAndRestore saving every so many batches.
  batches = tf.keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: None)
  model.fit(
    x, y, validation_data=(x, y), epochs=3, batch_size=16, verbose=0, callbacks=[callback, batches]
  )
  monkeypatch.undo()
  return len(calls)


def test_the_same_epoch_events_as_keras_tensorboard_with_no_batch_calls(tmp_path, monkeypatch):
  keras_calls = _fit(tf.keras.callbacks.TensorBoard(str(tmp_path / "keras")), monkeypatch)
  ours_calls = _fit(lib.epoch_tensorboard(str(tmp_path / "ours")), monkeypatch)
  keras, ours = (
    tensorboard_events.scalars(str(tmp_path / "keras")),
    tensorboard_events.scalars(str(tmp_path / "ours")),
  )
  assert {tag for _, tag, _, _ in ours} >= {"epoch_loss", "epoch_mae"}
  assert ours == keras
  # Keras calls tf.summary.scalar eagerly for 2 values after each of 12 batches (writing
  # nothing), and at each of 3 epochs for 6 values: 2 of training, 2 held-out, and 2 that its
  # evaluation writes against the iterations. Ours makes only those last ones; the epochs'
  # values go through one traced call per writer.
  assert (keras_calls, ours_calls) == (24 + 3 * 6, 3 * 2)
