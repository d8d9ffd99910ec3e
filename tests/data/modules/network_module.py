"""A module that defines only `build_model(hparams)`: its network, trained inside the default
model (preprocessing, input, fit, evaluation and export are the project's).

It reads `num_features` and `num_outputs` from hparams, and its own `width` (passed with
`--hparams width=N`), as docs/transform-and-tuner.md describes such modules.
"""

import tensorflow as tf


def build_model(hparams):
  features = tf.keras.Input(shape=(hparams["num_features"],), name="features")
  x = tf.keras.layers.Dense(int(hparams.get("width", 16)), activation="tanh")(features)
  return tf.keras.Model(features, tf.keras.layers.Dense(hparams["num_outputs"])(x))
