"""trainer_api.fit's loop on one device: the training step traced once, the held-out rows
evaluated without Keras' per-epoch `evaluate`, and the same weights as Keras' own `fit`."""

import numpy as np
import pytest
import tensorflow as tf

from components.distributed_trainer import strategy_lib, trainer_api


def _rows():
  rng = np.random.default_rng(3)
  x = rng.normal(size=(96, 3)).astype("float32")
  y = (x @ np.array([1.0, -2.0, 0.5], "float32"))[:, None] + 0.3 * rng.normal(size=(96, 1))
  return x, y.astype("float32")


def _model(built):
  tf.keras.utils.set_random_seed(0)
  with built.strategy.scope():
    model = tf.keras.Sequential(
      [tf.keras.Input((3,)), tf.keras.layers.Dense(16, "relu"), tf.keras.layers.Dense(1)]
    )
    model.compile(tf.keras.optimizers.Adam(0.02), "mse", steps_per_execution=4)
  return model


@pytest.fixture(scope="module")
def built():
  return strategy_lib.build_strategy("one_device", tf_config={}, tpu_available=False)


def test_the_training_step_is_traced_once_and_trains_as_keras_fit_does(built, tmp_path):
  x, y = _rows()

  def batches(_=None):
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16, drop_remainder=True)

  model = _model(built)
  config = trainer_api.FitConfig(
    model_run_dir=str(tmp_path / "run"), epochs=6, steps_per_epoch=6, global_batch_size=16
  )
  trainer_api.fit(model, built, batches, config)
  # Adam's moments are built before the fit: a step that creates variables is traced twice.
  assert model.train_tf_function.experimental_get_tracing_count() == 1

  plain = _model(built)
  plain.fit(
    built.strategy.distribute_datasets_from_function(batches),
    epochs=6,
    steps_per_epoch=6,
    verbose=0,
  )
  assert plain.train_tf_function.experimental_get_tracing_count() == 2
  for got, expected in zip(model.get_weights(), plain.get_weights(), strict=True):
    np.testing.assert_array_equal(got, expected)


def test_held_out_rows_are_evaluated_without_keras_evaluate(built, tmp_path):
  x, y = _rows()
  model = _model(built)

  def refuse(*args, **kwargs):
    raise AssertionError("Keras' own evaluation ran")

  model.evaluate = refuse
  held = tf.data.Dataset.from_tensor_slices((x[:40], y[:40] + 5.0)).batch(16)
  config = trainer_api.FitConfig(
    model_run_dir=str(tmp_path / "run"),
    epochs=50,
    steps_per_epoch=4,
    global_batch_size=16,
    validation=held,
    patience=2,
  )
  fit = trainer_api.fit(
    model, built, lambda _: tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16), config
  )
  # Held-out targets shifted by 5 stop improving early, so early stopping ends the fit.
  assert fit["epochs_run"] < 50
  assert 1 <= fit["best_epoch"] <= fit["epochs_run"]
