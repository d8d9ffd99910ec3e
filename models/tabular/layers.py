"""Keras layers that put a tabular model's preprocessing inside the model itself.

They are registered with Keras, so `tf.keras.models.load_model` rebuilds a saved model as the
same functional model (which pruning, quantization and conversion need) once this module is
imported. Their ops are chosen to convert: comparisons, `where`, arithmetic, a static hash
table and one_hot are TFLite builtins, and tf2onnx maps them to ONNX (and ONNX-ML) ops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from core import written_numbers
from models.tabular import date_text, text_columns
from models.tabular.text_columns import WORD_SEPARATORS, YMD

# Saved models store the registered names (`tfx_pipeline_kit>NumericBins`), so they stay the same
# wherever this module lives: models saved before it moved into models/ still load.
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
  `may_be_missing`. A column not so marked (it had no gaps in training) still gets the mean
  for a missing value, without an indicator: a request that leaves a value out gets a
  prediction, not NaN.
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
    # x != x holds exactly for NaN; unlike is_nan it is a builtin op of every runtime.
    missing = tf.math.not_equal(x, x)
    filled = tf.where(missing, mean, x)
    values = tf.clip_by_value((filled - mean) * scale, -CLIP_SIGMA, CLIP_SIGMA)
    if not self._missing_index:
      return values
    indicators = tf.cast(tf.gather(missing, self._missing_index, axis=1), tf.float32)
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


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class WordsMultiHot(tf.keras.layers.Layer):
  """Multi-hot encodes free text by its words against a word vocabulary.

  Input: tf.string [batch, 1]. Output: float32 [batch, V + 1 (+ 1)]: 1 for each vocabulary word
  the cell holds, 1 in the next slot when it holds any other word, and, when `missing_slot` is
  set, 1 in the last for an empty cell. A job title "Registered Nurse, ICU" and "nurse" share
  the word "nurse", which a whole-value vocabulary would keep apart. Splitting text needs
  TensorFlow string ops, so TFLite runs this layer with Select TF ops and ONNX cannot convert
  it.
  """

  def __init__(self, vocabulary: Sequence[str], missing_slot: bool = False, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.vocabulary = [str(v) for v in vocabulary]
    self.missing_slot = bool(missing_slot)
    self._other = len(self.vocabulary)
    self._depth = len(self.vocabulary) + 1
    # Padding ("") looks up to a slot past the encoded ones, so it sets none of them.
    keys = [*self.vocabulary, ""]
    values = [*range(len(self.vocabulary)), self._depth]
    self._table = tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
        tf.constant(keys, tf.string), tf.constant(values, tf.int64)
      ),
      default_value=self._other,
    )

  def call(self, inputs):
    text = tf.reshape(inputs, [-1])
    spaced = tf.strings.regex_replace(tf.strings.lower(text), WORD_SEPARATORS, " ")
    # Leading and trailing separators leave empty words, which look up as padding. The split's
    # sparse form, not tf.strings.split's ragged one: building row partitions adds a
    # DenseBincount, which TFLite's int8 converter cannot take (tflite.INT8_CRASHING_OPS).
    indices, values, _ = tf.raw_ops.StringSplitV2(input=spaced, sep=" ")
    # Each word adds 1 at (its row, its slot), padding in a last slot that is dropped. The
    # words are never laid out as a [batch, words, slots] grid: one cell of 50,000 words in a
    # batch of 256 made that grid 14 GB.
    slots = tf.stack([indices[:, 0], self._table.lookup(values)], axis=1)
    rows = tf.shape(text, out_type=tf.int64)[0]
    hits = tf.scatter_nd(slots, tf.ones(tf.shape(values), tf.float32), [rows, self._depth + 1])
    encoded = tf.minimum(hits[:, : self._depth], 1.0)
    if not self.missing_slot:
      return encoded
    empty = tf.cast(tf.equal(text, ""), tf.float32)
    return tf.concat([encoded, tf.expand_dims(empty, 1)], axis=1)

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], self._depth + int(self.missing_slot)])

  def get_config(self):
    return {
      **super().get_config(),
      "vocabulary": self.vocabulary,
      "missing_slot": self.missing_slot,
    }


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class NumericBins(tf.keras.layers.Layer):
  """Piecewise-linear encoding of numbers over quantile bins (a quantile transform).

  Input: float32 [batch, n] (NaN for missing; it is imputed with `fill`). Output: float32
  [batch, n * b]: for column j and bin t with edges lo < hi, `clip((x - lo) / (hi - lo), 0, 1)`,
  i.e. 0 below the bin, 1 above it and the position inside it. With edges at the training
  quantiles every bin holds about as many rows, so a heavy tail or a skew takes no more of the
  input than the bulk does, and the network sees where a value ranks, as gradient-boosted
  trees do. Columns with fewer bins are padded with constant-0 bins. Arithmetic, min and max
  only: TFLite builtins and ONNX ops, and bounded to [0, 1] for int8.
  """

  def __init__(self, edges: Sequence[Sequence[float]], fill: Sequence[float], **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.edges = [[float(e) for e in column] for column in edges]
    self.fill = [float(v) for v in fill]
    self._bins = max([len(e) - 1 for e in self.edges] + [1])
    lo = np.zeros((len(self.edges), self._bins), np.float32)
    inv = np.zeros((len(self.edges), self._bins), np.float32)
    for j, column in enumerate(self.edges):
      for t in range(len(column) - 1):
        lo[j, t] = column[t]
        inv[j, t] = 1.0 / (column[t + 1] - column[t])
    self._lo = lo
    self._inv = inv

  def call(self, inputs):
    x = tf.cast(inputs, tf.float32)
    x = tf.where(tf.math.not_equal(x, x), tf.constant(np.asarray(self.fill, np.float32)), x)
    scaled = (tf.expand_dims(x, -1) - tf.constant(self._lo)) * tf.constant(self._inv)
    encoded = tf.minimum(tf.maximum(scaled, 0.0), 1.0)
    return tf.reshape(encoded, [-1, len(self.edges) * self._bins])

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], len(self.edges) * self._bins])

  def get_config(self):
    return {**super().get_config(), "edges": self.edges, "fill": self.fill}


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class TextNumber(tf.keras.layers.Layer):
  """Reads a text column of numbers written for people ("$1,200.50", "12.5%", "(3,400)").

  Input: tf.string [batch, 1]. Output: float32 [batch, 1], the number as
  `written_numbers.parse_number` reads it, NaN for any other cell (empty, NA, a word), which
  NumericPreprocessing and NumericBins then read as missing. TensorFlow string ops: TFLite runs
  it with Select TF ops, and ONNX cannot convert it.
  """

  def call(self, inputs):
    text = tf.reshape(inputs, [-1])
    valid = tf.strings.regex_full_match(text, written_numbers.NUMBER_PATTERN)
    kept = tf.strings.regex_replace(text, written_numbers.NOT_NUMBER_CHARACTERS, "")
    value = tf.strings.to_number(tf.where(valid, kept, "0"), tf.float32)
    value = tf.where(tf.strings.regex_full_match(text, r".*\(.*"), -value, value)
    return tf.reshape(tf.where(valid, value, float("nan")), [-1, 1])

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], 1])


# Date cells the model parses: year-month-day with '-', '/' or '.', zero-padded, optionally
# followed by 'T' or ' ' and hours and minutes ("2012-01-01", "2012/01/01 13:45:00").
DATE_PATTERN = r"\d{4}[-/.]\d{2}[-/.]\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d*)?)?.*)?"


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class DateFeatures(tf.keras.layers.Layer):
  """Expands a date (or date-time) text column into numbers a network can use.

  Input: tf.string [batch, 1] in DATE_PATTERN's layout, or with `order` MDY or DMY month or day
  first ("3/14/2012", "14.03.2012"; `text_columns.parse_date`). Output: float32 [batch, 8 or
  10, plus one per bin]: the date as days since `day_mean`, scaled by `day_scale` and clipped (the
  trend); month, day of week and day of year as (sin, cos) pairs (the seasons, without a jump at
  new year); the hour as (sin, cos) when `with_time`; with `edges` (increasing, in the trend's
  scaled days), the trend's piecewise-linear encoding over those bins, as NumericBins encodes a
  number, so a series can bend where its rows say; and a 0/1 indicator for an empty or
  unparsable cell, which otherwise reads as `day_mean`. The calendar arithmetic is
  integer-exact (Howard Hinnant's days_from_civil). Parsing text needs TensorFlow string ops,
  so TFLite runs this layer with Select TF ops and ONNX cannot convert it.
  """

  def __init__(
    self,
    day_mean: float,
    day_scale: float,
    with_time: bool,
    edges: Sequence[float] = (),
    order: str = YMD,
    **kwargs,
  ):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)
    self.day_mean = float(day_mean)
    self.day_scale = float(day_scale) if day_scale > 0 else 1.0
    self.with_time = bool(with_time)
    self.edges = [float(e) for e in edges] if len(edges) >= 2 else []
    if order not in text_columns.DATE_ORDERS:
      raise ValueError(f"order must be one of {text_columns.DATE_ORDERS}, got {order!r}")
    self.order = order

  @staticmethod
  def _days_from_civil(y, m, d):
    # In int32: the constants (719468, 146097) are beyond float16, whose TFLite conversion
    # stores float constants as float16 and turned them into infinity.
    y = y - tf.cast(m <= 2, tf.int32)
    era = tf.math.floordiv(y, 400)
    yoe = y - era * 400
    mp = tf.math.floormod(m + 9, 12)
    doy = tf.math.floordiv(153 * mp + 2, 5) + d - 1
    doe = yoe * 365 + tf.math.floordiv(yoe, 4) - tf.math.floordiv(yoe, 100) + doy
    return era * 146097 + doe - 719468

  def call(self, inputs):
    text = date_text.normalized(tf.reshape(inputs, [-1]), self.order)
    valid = tf.strings.regex_full_match(text, DATE_PATTERN)
    # A date alone reads as midnight; the suffix keeps every substring below in range.
    text = tf.strings.join([tf.where(valid, text, "1970-01-01"), " 00:00"])

    def number(start, length, dtype=tf.int32):
      return tf.strings.to_number(tf.strings.substr(text, start, length), dtype)

    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    # A month past 12 or a day past 31 is no date (a day-first cell in a month-first column).
    valid = valid & (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31)
    hour = None
    if self.with_time:
      hour = number(11, 2, tf.float32) + number(14, 2, tf.float32) / 60.0
    return self._encode(year, month, day, hour, valid)

  def _encode(self, year, month, day, hour, valid):
    """The output for int32 [batch] year, month and day, float32 [batch] hours (None without
    a time), and bool [batch] `valid` (False: an empty or unreadable cell)."""
    days = self._days_from_civil(year, month, day)
    ones = tf.ones_like(year)
    day_of_year = tf.cast(days - self._days_from_civil(year, ones, ones), tf.float32)
    weekday = tf.cast(tf.math.floormod(days + 4, 7), tf.float32)  # 1970-01-01: a Thursday (4).
    month = tf.cast(month, tf.float32)
    # Days since the mean, whole days in int32 and the fraction apart: the mean (about 20,000
    # for recent dates) would lose 8 days as a float16 constant.
    whole = math.floor(self.day_mean)
    since = tf.cast(days - whole, tf.float32) - (self.day_mean - whole)
    turn = 2.0 * np.pi
    trend = tf.clip_by_value(since / self.day_scale, -CLIP_SIGMA, CLIP_SIGMA)
    parts = [
      trend,
      tf.sin(turn * (month - 1.0) / 12.0),
      tf.cos(turn * (month - 1.0) / 12.0),
      tf.sin(turn * weekday / 7.0),
      tf.cos(turn * weekday / 7.0),
      tf.sin(turn * day_of_year / 365.25),
      tf.cos(turn * day_of_year / 365.25),
    ]
    if hour is not None:
      parts += [tf.sin(turn * hour / 24.0), tf.cos(turn * hour / 24.0)]
    valid_f = tf.expand_dims(tf.cast(valid, tf.float32), -1)
    columns = [tf.stack(parts, axis=1)]
    if self.edges:
      lo = np.asarray(self.edges[:-1], np.float32)
      inv = 1.0 / np.diff(np.asarray(self.edges, np.float64)).astype(np.float32)
      binned = (tf.expand_dims(trend, -1) - tf.constant(lo)) * tf.constant(inv)
      columns.append(tf.minimum(tf.maximum(binned, 0.0), 1.0))
    # One concat, not an unstack of the bins: int8 conversion quantizes an unstack (its output
    # takes its input's scale whatever layer it is in), and that turned the bins into noise.
    return tf.concat([tf.concat(columns, axis=1) * valid_f, 1.0 - valid_f], axis=1)

  def compute_output_shape(self, input_shape):
    bins = max(len(self.edges) - 1, 0)
    return tf.TensorShape([input_shape[0], (10 if self.with_time else 8) + bins])

  def get_config(self):
    return {
      **super().get_config(),
      "day_mean": self.day_mean,
      "day_scale": self.day_scale,
      "with_time": self.with_time,
      "edges": self.edges,
      "order": self.order,
    }


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class DatePartsFeatures(DateFeatures):
  """A date spelled by number columns (year, month and day; date_parts.py), read as
  DateFeatures reads a date column.

  Input: the model's float32 [batch, n] numbers, raw (NaN: missing). `columns` are the
  positions of the year, month and day among them, the day -1 where there is none (the first
  of each month). Output: DateFeatures' without a time. A row whose parts are missing, not
  whole numbers, or out of range (a month past 12, a day past 31) reads as invalid; a day past
  its month's end (31 April) runs into the next month. Only arithmetic, so TFLite's builtin ops
  and ONNX run it.
  """

  def __init__(
    self,
    columns: Sequence[int],
    day_mean: float,
    day_scale: float,
    edges: Sequence[float] = (),
    **kwargs,
  ):
    super().__init__(day_mean, day_scale, False, edges, **kwargs)
    self.columns = [int(c) for c in columns]
    if len(self.columns) != 3 or min(self.columns[:2]) < 0:
      raise ValueError(f"columns must be the year, month and day positions, got {columns}")

  def call(self, inputs):
    # The float input meets only a cast and a comparison, which int8 conversion keeps in
    # float; the columns are sliced from int32 and bool tensors, which it does not quantize. A
    # slice of the float input (or a select on it) would be quantized, with the scale of every
    # number column together, which loses the months and days.
    x = tf.cast(inputs, tf.float32)
    # A value that is not a whole number, or past int32 (infinity, NaN), does not come back
    # from the cast unchanged; what the cast made of it is never read.
    whole = tf.cast(x, tf.int32)
    unreadable = tf.math.not_equal(tf.cast(whole, tf.float32), x)
    ones = tf.ones_like(whole[:, 0])
    valid = tf.cast(ones, tf.bool)
    parts = []
    for at, (low, high) in zip(self.columns, ((1, 9999), (1, 12), (1, 31)), strict=True):
      if at < 0:  # No day column: the first of the month.
        parts.append(ones)
        continue
      value = whole[:, at]
      fits = tf.math.logical_and(value >= low, value <= high)
      valid = tf.math.logical_and(valid, tf.math.logical_and(fits, ~unreadable[:, at]))
      parts.append(value)
    year, month, day = (
      tf.where(valid, value, fill) for value, fill in zip(parts, (1970, 1, 1), strict=True)
    )
    return self._encode(year, month, day, None, valid)

  def get_config(self):
    config = {**super().get_config(), "columns": list(self.columns)}
    config.pop("with_time")
    config.pop("order")
    return config


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class WeightedMean(tf.keras.layers.Layer):
  """The weighted mean of its inputs (an ensemble's outputs), with weights fixed in its config.

  An input whose weight is 0 takes no part in the output, so a converter drops what only it
  needs. Input: a list of float32 tensors of one shape. Output: their weighted mean.
  """

  def __init__(self, shares: Sequence[float], **kwargs):
    super().__init__(**kwargs)
    total = float(sum(shares))
    if total <= 0 or min(shares) < 0:
      raise ValueError(f"shares must be at least 0 with a positive sum, got {list(shares)}")
    self.shares = [float(s) / total for s in shares]

  def call(self, inputs):
    pairs = zip(inputs, self.shares, strict=True)
    terms = [tf.cast(x, tf.float32) * share for x, share in pairs if share]
    return tf.add_n(terms) if len(terms) > 1 else terms[0]

  def get_config(self):
    return {**super().get_config(), "shares": self.shares}


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class BothReadings(tf.keras.layers.Layer):
  """A count label's two readings from one head of `classes` + 1 units: the classes'
  probabilities (a softmax over the first units), then the quantity in the label's units (the
  last unit, which learns the standardized label).

  Output: float32 [batch, classes + 1].
  """

  def __init__(self, classes: int, mean: float, std: float, **kwargs):
    super().__init__(**kwargs)
    self.classes, self.mean, self.std = int(classes), float(mean), float(std)

  def call(self, inputs):
    x = tf.cast(inputs, tf.float32)
    probabilities = tf.nn.softmax(x[:, : self.classes], axis=-1)
    value = x[:, self.classes :] * self.std + self.mean
    return tf.concat([probabilities, value], axis=-1)

  def get_config(self):
    return {**super().get_config(), "classes": self.classes, "mean": self.mean, "std": self.std}


@tf.keras.utils.register_keras_serializable(package=_PACKAGE)
class KeptReading(tf.keras.layers.Layer):
  """One reading of BothReadings' output: the probabilities of the first `classes` columns, or
  (`quantity`) the value in the last column."""

  def __init__(self, classes: int, quantity: bool, **kwargs):
    super().__init__(**kwargs)
    self.classes, self.quantity = int(classes), bool(quantity)

  def call(self, inputs):
    return inputs[:, self.classes :] if self.quantity else inputs[:, : self.classes]

  def get_config(self):
    return {**super().get_config(), "classes": self.classes, "quantity": self.quantity}
