"""Early stopping on a held-out slice: each epoch's loss, or the mean of the last few."""

import copy

import numpy as np
import pytest
import tensorflow as tf

from components.distributed_trainer import early_stopping


def _regression():
  """A tiny regression: (x, y, its noisy held-out rows as (x, y), a compiled seeded model)."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 3)).astype("float32")
  y = (x @ np.array([1.0, -2.0, 0.5], "float32"))[:, None]
  x_val = rng.normal(size=(8, 3)).astype("float32")
  y_val = (x_val @ np.array([1.0, -2.0, 0.5], "float32"))[:, None] + rng.normal(size=(8, 1))
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input((3,)), tf.keras.layers.Dense(1)])
  model.compile(tf.keras.optimizers.Adam(0.05), "mse")
  return x, y, (x_val, y_val.astype("float32")), model


def _fit(window: int, patience: int = 4, epochs: int = 40):
  """Fits a tiny regression on noisy held-out rows; returns (model, History, weights by epoch)."""
  x, y, held_out, model = _regression()
  weights = {}
  keep = tf.keras.callbacks.LambdaCallback(
    on_epoch_end=lambda epoch, logs: weights.update({epoch: model.get_weights()})
  )
  history = model.fit(
    x,
    y,
    validation_data=held_out,
    epochs=epochs,
    batch_size=16,
    verbose=0,
    callbacks=[*early_stopping.callbacks(patience, window), keep],
  )
  return model, history, weights


@pytest.mark.parametrize("window", [1, 5])
def test_the_kept_weights_are_those_of_the_epoch_reported(window):
  model, history, weights = _fit(window)
  kept = early_stopping.kept_epoch(history.epoch, history.history, window)
  assert kept is not None and kept >= window
  for got, expected in zip(model.get_weights(), weights[kept - 1], strict=True):
    np.testing.assert_array_equal(got, expected)


def test_a_window_judges_the_mean_of_the_last_epochs():
  _, history, _ = _fit(window=5)
  losses = history.history[early_stopping.VAL_LOSS]
  means = history.history[early_stopping.VAL_LOSS_MEAN]
  expected = [np.mean(losses[max(0, i - 4) : i + 1]) for i in range(len(losses))]
  np.testing.assert_allclose(means, expected, rtol=1e-6)


def test_kept_epoch_skips_epochs_before_the_first_full_window():
  history = {early_stopping.VAL_LOSS_MEAN: [0.1, 0.2, 0.5, 0.4, 0.3, 0.35]}
  # Epoch 1's mean (0.1) is lowest but averages one loss; from the third epoch on (window 3),
  # the fifth is best.
  assert early_stopping.kept_epoch(list(range(6)), history, window=3) == 5
  assert early_stopping.kept_epoch(list(range(6)), {"val_loss": [3.0, 1.0, 1.0]}) == 2
  assert early_stopping.kept_epoch([], history, window=3) is None
  # After a restore from a backup the history starts late, and every epoch is judged.
  assert early_stopping.kept_epoch([50, 51], {"val_loss_mean": [0.2, 0.1]}, window=3) == 52


def _classifier_fit(strategy, held_out: bool, steps: int | None = None, copied: bool = False):
  """Three classes from 4 numbers, fit with early stopping on 50 held-out rows in batches of 16
  (the last one short), through Keras' validation or `held_out_evaluation` (`copied`: deep copies
  of the callbacks, as keras_tuner makes for each trial); returns (History, weights)."""
  rng = np.random.default_rng(1)
  x = rng.normal(size=(160, 4)).astype("float32")
  y = (x[:, 0] + 0.5 * rng.normal(size=160) > 0).astype("int64") + (x[:, 1] > 1)
  train = tf.data.Dataset.from_tensor_slices((x[:110], y[:110])).batch(16).repeat()
  validation = tf.data.Dataset.from_tensor_slices((x[110:], y[110:])).batch(16)
  tf.keras.utils.set_random_seed(0)
  with strategy.scope():
    model = tf.keras.Sequential(
      [tf.keras.Input((4,)), tf.keras.layers.Dense(32, "relu"), tf.keras.layers.Dense(3, "softmax")]
    )
    model.compile(
      tf.keras.optimizers.Adam(0.05),
      "sparse_categorical_crossentropy",
      metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )
  stop = early_stopping.callbacks(patience=3)
  if held_out:
    stop = [early_stopping.held_out_evaluation(validation, steps), *stop]

    def refuse(*args, **kwargs):
      raise AssertionError("Keras' own evaluation ran")

    model.evaluate = refuse
  if copied:
    stop = copy.deepcopy(stop)
  history = model.fit(
    train,
    epochs=30,
    steps_per_epoch=5,
    validation_data=None if held_out else validation,
    validation_steps=None if held_out else steps,
    callbacks=stop,
    verbose=0,
  )
  return history, model.get_weights()


@pytest.mark.parametrize(
  "strategy",
  [tf.distribute.OneDeviceStrategy("/cpu:0"), tf.distribute.MirroredStrategy(["/cpu:0"])],
  ids=["one_device", "mirrored"],
)
@pytest.mark.parametrize("steps", [None, 2], ids=["every batch", "2 batches"])
def test_held_out_evaluation_logs_and_stops_as_keras_validation_does(strategy, steps):
  keras_history, keras_weights = _classifier_fit(strategy, held_out=False, steps=steps)
  history, weights = _classifier_fit(strategy, held_out=True, steps=steps)
  assert history.epoch == keras_history.epoch
  assert len(history.epoch) < 30, "early stopping should have ended the fit"
  for key in ("val_loss", "val_accuracy", "loss", "lr"):
    assert history.history[key] == keras_history.history[key], key
  for got, expected in zip(weights, keras_weights, strict=True):
    np.testing.assert_array_equal(got, expected)


def test_held_out_evaluation_copied_for_a_tuner_trial_stops_as_the_original():
  # keras_tuner deep-copies a trial's callbacks; the held-out dataset's graph cannot be copied,
  # so --tune with the default model failed in the Tuner (FatalValueError) on every table.
  strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
  original, original_weights = _classifier_fit(strategy, held_out=True)
  history, weights = _classifier_fit(strategy, held_out=True, copied=True)
  assert history.history == original.history
  for got, expected in zip(weights, original_weights, strict=True):
    np.testing.assert_array_equal(got, expected)


def test_held_out_evaluation_needs_steps_for_batches_without_end():
  batches = tf.data.Dataset.from_tensor_slices((np.ones((4, 2)), np.ones(4))).batch(2).repeat()
  with pytest.raises(ValueError, match="need `steps`"):
    early_stopping.held_out_evaluation(batches)
  assert early_stopping.held_out_evaluation(batches, steps=2) is not None


def _resumable_fit(backup_dir, kept: bool, kill_at: int | None = None):
  """`_regression` fitted in order (window 3, patience 4), backed up at each epoch's last
  batch; raises _Killed at the end of epoch `kill_at`. Returns (first epoch run, epochs run,
  kept epoch, weights)."""
  from components import tf_compat

  x, y, held_out, model = _regression()
  callbacks = early_stopping.callbacks(4, 3)
  backup_class = early_stopping.kept_backup(callbacks) if kept else None
  backup = tf_compat.backup_and_restore(str(backup_dir), 4, backup_class)  # 4 steps an epoch

  def kill(epoch, logs):
    if epoch == kill_at:
      raise _Killed()

  history = model.fit(
    x,
    y,
    validation_data=held_out,
    epochs=60,
    batch_size=16,
    shuffle=False,
    verbose=0,
    callbacks=[backup, *callbacks, tf.keras.callbacks.LambdaCallback(on_epoch_end=kill)],
  )
  kept_epoch = early_stopping.kept_epoch(history.epoch, history.history, 3, callbacks)
  return history.epoch[0], history.epoch[-1] + 1, kept_epoch, model.get_weights()


class _Killed(Exception):
  pass


def test_a_fit_resumed_from_a_backup_stops_and_keeps_as_the_whole_fit_did(tmp_path):
  """The stopping callbacks' state (best loss, patience spent, cooldown, window, best weights)
  is saved in the backups: killed after its best epoch and resumed, the fit stops at the same
  epoch and keeps the same weights as the fit that ran through. Without it, the resumed fit
  started its patience again, ran 4 epochs more and kept a later epoch."""
  whole = _resumable_fit(tmp_path / "whole", kept=True)
  assert whole[:3] == (0, 19, 15)
  for kept in (True, False):
    with pytest.raises(_Killed):
      _resumable_fit(tmp_path / str(kept), kept, kill_at=17)
    resumed = _resumable_fit(tmp_path / str(kept), kept)
    if kept:
      # Resumed at epoch 18's start, as the last backup before the kill was taken there.
      assert resumed[:3] == (17, 19, 15), resumed[:3]
      for got, expected in zip(resumed[3], whole[3], strict=True):
        np.testing.assert_array_equal(got, expected)
    else:
      assert resumed[:3] == (18, 23, 19), resumed[:3]
