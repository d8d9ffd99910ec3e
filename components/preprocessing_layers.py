"""Keras layers that put a tabular model's preprocessing inside the model itself.

They are registered with Keras, so `tf.keras.models.load_model` rebuilds a saved model as the
same functional model (which pruning, quantization and conversion need) once this module is
imported. Their ops are chosen to convert: comparisons, `where` and arithmetic are TFLite
builtins and ONNX standard ops, and text is matched against the vocabulary by equality
instead of a hash table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import tensorflow as tf

_PACKAGE = "tfx_pipeline_kit"


# Standardized values are clipped to this many standard deviations. Every column then spans
# the same range, which an int8 tensor shared by all columns needs (one scale for all), and a
# rare extreme value cannot dominate the first layer.
CLIP_SIGMA = 5.0


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class NumericPreprocessing(tf.keras.layers.Layer):
  """Imputes missing numbers (NaN) with the mean, adds missing indicators, standardizes.

  Input: float32 [batch, n]. Output: float32 [batch, n + m], the n standardized values
  (clipped to +-CLIP_SIGMA) followed by one 0/1 indicator for each of the m columns marked
  `may_be_missing`.
  """

  def __init__(
    self,
    mean: Sequence[float],
    std: Sequence[float],
    may_be_missing: Sequence[bool],
    **kwargs,
  ):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.mean = [float(v) for v in mean]
    self.std = [float(v) if v > 0 else 1.0 for v in std]
    self.may_be_missing = [bool(v) for v in may_be_missing]
    self._missing_index = [i for i, flag in enumerate(self.may_be_missing) if flag]

  def call(self, inputs):
    x = tf.cast(inputs, tf.float32)
    mean = tf.constant(np.asarray(self.mean, np.float32))
    scale = tf.constant(1.0 / np.asarray(self.std, np.float32))
    if not self._missing_index:
      return tf.clip_by_value((x - mean) * scale, -CLIP_SIGMA, CLIP_SIGMA)
    # x != x holds exactly for NaN; unlike is_nan it is a builtin op of every runtime.
    missing = tf.math.not_equal(x, x)
    filled = tf.where(missing, mean, x)
    indicators = tf.cast(tf.gather(missing, self._missing_index, axis=1), tf.float32)
    values = tf.clip_by_value((filled - mean) * scale, -CLIP_SIGMA, CLIP_SIGMA)
    return tf.concat([values, indicators], axis=1)

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], len(self.mean) + len(self._missing_index)])

  def get_config(self):
    return {
      **super().get_config(),
      "mean": self.mean,
      "std": self.std,
      "may_be_missing": self.may_be_missing,
    }


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class CategoryOneHot(tf.keras.layers.Layer):
  """One-hot encodes text against a vocabulary, with out-of-vocabulary and missing slots.

  Input: tf.string [batch, 1]. Output: float32 [batch, V + 1 (+ 1)]: one column per
  vocabulary entry, one for any other value, and, when `missing_slot` is set, one for a missing
  value (the empty string).
  """

  def __init__(self, vocabulary: Sequence[str], missing_slot: bool = False, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.vocabulary = [str(v) for v in vocabulary]
    self.missing_slot = bool(missing_slot)

  def call(self, inputs):
    hits = []
    if self.vocabulary:
      vocab = tf.constant(self.vocabulary, dtype=tf.string)
      hits.append(tf.cast(tf.equal(inputs, vocab), tf.float32))
    missing = tf.cast(tf.equal(inputs, ""), tf.float32) if self.missing_slot else None
    known = tf.reduce_sum(hits[0], axis=1, keepdims=True) if hits else tf.zeros_like(
      tf.cast(tf.equal(inputs, ""), tf.float32)
    )
    other = 1.0 - known - (missing if missing is not None else 0.0)
    columns = [*hits, other] + ([missing] if missing is not None else [])
    return tf.concat(columns, axis=1)

  def compute_output_shape(self, input_shape):
    width = len(self.vocabulary) + 1 + int(self.missing_slot)
    return tf.TensorShape([input_shape[0], width])

  def get_config(self):
    return {
      **super().get_config(),
      "vocabulary": self.vocabulary,
      "missing_slot": self.missing_slot,
    }
