"""Keras layers that put a tabular model's preprocessing inside the model itself.

They are registered with Keras, so `tf.keras.models.load_model` rebuilds a saved model as the
same functional model (which pruning, quantization and conversion need) once this module is
imported. Their ops are chosen to convert: comparisons, `where`, arithmetic, a static hash
table and one_hot are TFLite builtins, and tf2onnx maps them to ONNX (and ONNX-ML) ops.
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
  value (the empty string). The lookup is a static hash table, which TFLite runs with builtin
  ops (HASHTABLE_FIND) and tf2onnx turns into ONNX-ML's CategoryMapper; the one-hot is an
  integer equality, which quantizes exactly.
  """

  def __init__(self, vocabulary: Sequence[str], missing_slot: bool = False, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.vocabulary = [str(v) for v in vocabulary]
    self.missing_slot = bool(missing_slot)
    keys = self.vocabulary + ([""] if self.missing_slot else [])
    self._other = len(self.vocabulary)
    self._depth = len(self.vocabulary) + 1 + int(self.missing_slot)
    self._table = None
    if keys:
      values = [*range(len(self.vocabulary)), *([self._other + 1] if self.missing_slot else [])]
      self._table = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
          tf.constant(keys, tf.string), tf.constant(values, tf.int64)
        ),
        default_value=self._other,
      )

  def call(self, inputs):
    text = tf.reshape(inputs, [-1, 1])
    if self._table is None:
      return tf.ones([tf.shape(text)[0], 1], tf.float32)
    # Equality against a range instead of tf.one_hot: TFLite's int8 ONE_HOT quantizes its on
    # and off values with different parameters (the off value reads back as 0.5).
    index = self._table.lookup(text)
    return tf.cast(tf.equal(index, tf.range(self._depth, dtype=tf.int64)), tf.float32)

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], self._depth])

  def get_config(self):
    return {
      **super().get_config(),
      "vocabulary": self.vocabulary,
      "missing_slot": self.missing_slot,
    }
