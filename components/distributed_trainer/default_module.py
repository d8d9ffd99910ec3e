"""Default DistributedTrainer module: a small dense classifier for the 8x8 digits data."""

from typing import Any

import tensorflow as tf

# Digits pixels are integer intensities 0..16.
_PIXEL_SCALE = 16.0


# DistributedTrainer will call this function inside strategy.scope(); it compiles the model.
def build_model(hparams: dict[str, Any]) -> tf.keras.Model:
  """Builds an uncompiled MLP taking float32 [batch, num_features], returning probabilities.

  Args:
    hparams: trainer-provided `num_features` and `num_classes`, plus optional
      `hidden_units` (default 64) and `input_scale` (default 16.0).

  Returns:
    An uncompiled tf.keras.Model.
  """
  inputs = tf.keras.Input(shape=(hparams["num_features"],), dtype=tf.float32, name="features")
  x = tf.keras.layers.Rescaling(1.0 / float(hparams.get("input_scale", _PIXEL_SCALE)))(inputs)
  x = tf.keras.layers.Dense(int(hparams.get("hidden_units", 64)), activation="relu")(x)
  logits = tf.keras.layers.Dense(hparams["num_classes"])(x)
  # Softmax in float32 keeps probabilities exact under mixed precision policies.
  outputs = tf.keras.layers.Activation("softmax", dtype="float32", name="probabilities")(logits)
  return tf.keras.Model(inputs, outputs)
