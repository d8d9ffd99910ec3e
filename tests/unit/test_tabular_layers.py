"""The preprocessing layers: imputation, indicators, clipping, one-hot slots, saving and cloning."""

import numpy as np
import pytest
import tensorflow as tf

from models.tabular import layers


def test_numeric_imputes_the_mean_adds_indicators_and_standardizes():
  layer = layers.NumericPreprocessing([10.0, 0.0, 5.0], [2.0, 1.0, 0.0], [True, False, True])
  x = np.array([[12.0, 1.0, np.nan], [np.nan, -1.0, 5.0]], np.float32)
  out = layer(x).numpy()
  # Three standardized values, then one indicator per column that may be missing.
  assert out.shape == (2, 5)
  np.testing.assert_allclose(out[0], [1.0, 1.0, 0.0, 0.0, 1.0])
  # A missing value becomes the mean (standardized: 0) and raises its indicator.
  np.testing.assert_allclose(out[1], [0.0, -1.0, 0.0, 1.0, 0.0])
  # A zero standard deviation is taken as 1, so a constant column stays finite.
  assert layer.std == [2.0, 1.0, 1.0]
  assert layer.compute_output_shape(tf.TensorShape([None, 3])).as_list() == [None, 5]


def test_numeric_without_missing_columns_has_no_indicators():
  layer = layers.NumericPreprocessing([0.0], [1.0], [False])
  assert layer(np.array([[0.5]], np.float32)).numpy().tolist() == [[0.5]]


def test_a_number_missing_only_at_serving_time_gets_the_mean_not_nan():
  # Ecdat's PSID: educatn had no gap in the train split and one in eval, whose prediction was
  # NaN (the Trainer's RMSE NaN, ONNX parity failed on it, and TF Serving would answer NaN).
  for may_be_missing in ([False, False], [True, False]):
    layer = layers.NumericPreprocessing([10.0, 0.0], [2.0, 1.0], may_be_missing)
    out = layer(np.array([[12.0, np.nan], [np.nan, 3.0]], np.float32)).numpy()
    np.testing.assert_allclose(out[:, :2], [[1.0, 0.0], [0.0, 3.0]])
    assert out.shape == (2, 2 + sum(may_be_missing))
  # Only the column that had gaps in training keeps its indicator.
  np.testing.assert_allclose(out[:, 2], [0.0, 1.0])


def test_numeric_clips_extreme_values_to_five_sigma():
  layer = layers.NumericPreprocessing([0.0, 0.0], [1.0, 1.0], [False, False])
  out = layer(np.array([[1e9, -7.0]], np.float32)).numpy()
  np.testing.assert_allclose(out, [[layers.CLIP_SIGMA, -layers.CLIP_SIGMA]])
  assert layers.CLIP_SIGMA == 5.0


def test_category_one_hot_vocabulary_oov_and_missing_slots():
  layer = layers.CategoryOneHot(["red", "green"], missing_slot=True)
  out = layer(tf.constant([["green"], ["purple"], [""], ["red"]])).numpy()
  # Columns: red, green, any other value, missing.
  np.testing.assert_array_equal(out, [[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]])
  assert out.dtype == np.float32
  without = layers.CategoryOneHot(["red", "green"])
  # Without a missing slot an empty value is just another unseen value.
  out = without(tf.constant([[""], ["red"]])).numpy()
  np.testing.assert_array_equal(out, [[0, 0, 1], [1, 0, 0]])


def test_category_one_hot_with_an_empty_vocabulary_is_a_constant():
  layer = layers.CategoryOneHot([])
  assert layer(tf.constant([["a"], ["b"]])).numpy().tolist() == [[1.0], [1.0]]


def _model():
  numeric = tf.keras.Input((2,), name="numeric")
  color = tf.keras.Input((1,), dtype=tf.string, name="text_color")
  x = tf.keras.layers.Concatenate()(
    [
      layers.NumericPreprocessing([1.0, 100.0], [1.0, 50.0], [True, False], name="num")(numeric),
      layers.CategoryOneHot(["red", "blue"], missing_slot=True, name="color")(color),
    ]
  )
  outputs = tf.keras.layers.Dense(3, activation="softmax", name="head")(x)
  return tf.keras.Model({"numeric": numeric, "text_color": color}, outputs)


INPUTS = {
  "numeric": np.array([[np.nan, 120.0], [3.0, 1e6]], np.float32),
  "text_color": np.array([[b"blue"], [b""]], dtype=object),
}


@pytest.fixture(scope="module")
def model():
  tf.keras.utils.set_random_seed(0)
  return _model()


def test_saved_model_loads_back_as_the_same_functional_model(tmp_path, model):
  expected = model.predict(INPUTS, verbose=0)
  model.save(str(tmp_path / "saved"), save_format="tf")
  loaded = tf.keras.models.load_model(str(tmp_path / "saved"), compile=False)
  assert isinstance(loaded, tf.keras.Model) and loaded.__class__.__name__ == "Functional"
  assert isinstance(loaded.get_layer("num"), layers.NumericPreprocessing)
  assert isinstance(loaded.get_layer("color"), layers.CategoryOneHot)
  assert loaded.get_layer("color").get_config()["vocabulary"] == ["red", "blue"]
  np.testing.assert_allclose(loaded.predict(INPUTS, verbose=0), expected, atol=1e-6)
  # h5 (what the Optimizer's pruned variant writes) rebuilds the same model too.
  model.save(str(tmp_path / "model.h5"))
  from_h5 = tf.keras.models.load_model(str(tmp_path / "model.h5"), compile=False)
  np.testing.assert_allclose(from_h5.predict(INPUTS, verbose=0), expected, atol=1e-6)


def test_clone_model_rebuilds_the_layers_from_their_config(model):
  clone = tf.keras.models.clone_model(model)
  clone.set_weights(model.get_weights())
  assert clone.get_layer("num") is not model.get_layer("num")
  np.testing.assert_allclose(
    clone.predict(INPUTS, verbose=0), model.predict(INPUTS, verbose=0), atol=1e-6
  )


def test_words_multi_hot_marks_the_words_each_cell_holds():
  words = layers.WordsMultiHot(["nurse", "owner", "teacher"], missing_slot=True)
  texts = [["Registered Nurse, ICU"], ["owner/teacher; owner"], [""], ["clerk"], [" ,; "]]
  np.testing.assert_array_equal(
    words(tf.constant(texts)).numpy(),
    [[1, 0, 0, 1, 0], [0, 1, 1, 0, 0], [0, 0, 0, 0, 1], [0, 0, 0, 1, 0], [0, 0, 0, 0, 0]],
  )
  assert words(tf.zeros([0, 1], tf.string)).shape == (0, 5)


def test_words_multi_hot_takes_a_cell_of_a_hundred_thousand_words():
  """A [rows, words, slots] grid for this batch was 102 GB; TensorFlow refused it (OOM), and a
  14 GB one failed a real run's Optimizer on a table with one long notes cell."""
  vocabulary = [f"w{i}" for i in range(1000)]
  words = layers.WordsMultiHot(vocabulary)
  long_cell = " ".join(vocabulary * 100)
  encoded = words(tf.constant([[long_cell], *[["w1 w1 other"]] * 255])).numpy()
  assert encoded.shape == (256, 1001)
  np.testing.assert_array_equal(encoded[0], [1.0] * 1000 + [0.0])
  np.testing.assert_array_equal(encoded[1:, [1, 1000]], np.ones((255, 2)))
  assert encoded[1:].sum() == 255 * 2


def test_date_features_survive_tflite_float16():
  """float16 conversion stores float constants as float16; the calendar must not use any
  beyond its range (719468 and 146097 became infinity, and every output went wrong)."""
  inputs = tf.keras.Input(shape=(1,), dtype=tf.string)
  edges = (-2.0, -0.5, 0.0, 0.7, 3.0)
  model = tf.keras.Model(inputs, layers.DateFeatures(20123.9, 3650.0, True, edges)(inputs))
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  converter.target_spec.supported_types = [tf.float16]
  converter.target_spec.supported_ops = [
    tf.lite.OpsSet.TFLITE_BUILTINS,
    tf.lite.OpsSet.SELECT_TF_OPS,
  ]
  runner = tf.lite.Interpreter(model_content=converter.convert()).get_signature_runner()
  texts = ["1901-03-04", "1970-01-01 00:00", "2012/02/29 13:45", "2099.12.31", "", "nope"]
  [name] = runner.get_input_details()
  [got] = runner(**{name: np.array([[t.encode()] for t in texts], dtype=object)}).values()
  expected = model(tf.constant([[t] for t in texts])).numpy()
  np.testing.assert_allclose(got, expected, atol=0.01)


def test_words_multi_hot_survives_tflite_with_select_ops():
  """Free text is cut into words with TF string ops: TFLite runs them as Select TF ops."""
  from components.optimizer.formats import tflite as tflite_format

  inputs = tf.keras.Input(shape=(1,), dtype=tf.string)
  words = layers.WordsMultiHot(["nurse", "owner", "teacher"], missing_slot=True)(inputs)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(2)(words))
  graph = tf.function(model).get_concrete_function(tf.TensorSpec([None, 1], tf.string)).graph
  # None of the ops that make the Optimizer skip its int8 variants.
  assert not {op.type for op in graph.get_operations()} & set(tflite_format.INT8_CRASHING_OPS)
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.optimizations = [tf.lite.Optimize.DEFAULT]
  converter.target_spec.supported_ops = [
    tf.lite.OpsSet.TFLITE_BUILTINS,
    tf.lite.OpsSet.SELECT_TF_OPS,
  ]
  runner = tf.lite.Interpreter(model_content=converter.convert()).get_signature_runner()
  texts = ["Registered Nurse", "owner, teacher", "", "clerk"]
  [name] = runner.get_input_details()
  [got] = runner(**{name: np.array([[t.encode()] for t in texts], dtype=object)}).values()
  expected = model(tf.constant([[t] for t in texts])).numpy()
  np.testing.assert_allclose(got, expected, atol=0.02)


def test_text_number_reads_each_cell_as_the_profile_does_and_survives_tflite():
  """The profile decides a column from `text_columns.parse_number`; the served model reads
  its cells with TensorFlow string ops, TFLite's as Select TF ops: all three must agree."""
  from models.tabular import text_columns

  texts = ["$1,200.50", "-12.5%", "(3,400)", "12 €", "1e5", " 7 ", "12,5", "NA", "", "12 kg"]
  inputs = tf.keras.Input(shape=(1,), dtype=tf.string)
  model = tf.keras.Model(inputs, layers.TextNumber()(inputs))
  expected = [text_columns.parse_number(t) for t in texts]
  expected = np.array([[np.nan if v is None else v] for v in expected], np.float32)
  np.testing.assert_allclose(model(tf.constant([[t] for t in texts])).numpy(), expected)
  np.testing.assert_allclose(_tflite_with_select_ops(model, texts), expected)


@pytest.mark.parametrize(
  ("order", "cells"),
  [
    ("mdy", ["3/14/2012", "12/25/2012 13:45", "1-2-2013", "07.04.2014", "", "14/3/2012"]),
    ("dmy", ["14/3/2012", "25/12/2012 13:45", "2-1-2013", "04.07.2014", "", "3/14/2012"]),
  ],
)
def test_dates_with_the_year_last_read_as_the_same_dates_year_first(order, cells):
  """Month or day first, one or two digits: read as `text_columns.parse_date` reads them, the
  last cell (a month past 12) as unreadable, in the model and in TFLite alike."""
  iso = ["2012-03-14", "2012-12-25 13:45", "2013-01-02", "2014-07-04", "", "nope"]
  inputs = tf.keras.Input(shape=(1,), dtype=tf.string)
  layer = layers.DateFeatures(15800.0, 900.0, True, (-1, 0, 1), order)
  model = tf.keras.Model(inputs, layer(inputs))
  reference = layers.DateFeatures(15800.0, 900.0, True, (-1, 0, 1))
  expected = reference(tf.constant([[c] for c in iso])).numpy()
  np.testing.assert_allclose(model(tf.constant([[c] for c in cells])).numpy(), expected, atol=1e-6)
  again = layers.DateFeatures.from_config(layer.get_config())
  assert again.order == order
  np.testing.assert_allclose(_tflite_with_select_ops(model, cells), expected, atol=1e-5)


@pytest.mark.parametrize(
  ("order", "cells", "iso"),
  [
    # Excel's short US date: the year in two digits, read as POSIX's %y reads it.
    (
      "mdy",
      ["03/13/86", "1/2/05", "12/31/68 10:30", "12/31/69", "00/12/86"],
      ["1986-03-13", "2005-01-02", "2068-12-31 10:30", "1969-12-31", "nope"],
    ),
    ("dmy", ["13/03/86", "2/1/05"], ["1986-03-13", "2005-01-02"]),
  ],
)
def test_two_digit_years_read_as_the_profile_reads_them(order, cells, iso):
  """pmdarima's msft with Excel's short US dates ('03/13/86') was read as words, not dates."""
  from models.tabular import text_columns

  assert text_columns.date_order([c for c in cells if c[:1].isdigit()]) == order
  for cell, date in zip(cells, iso, strict=True):
    parsed = text_columns.parse_date(cell, order)
    assert (parsed and parsed[0].isoformat()) == (date[:10] if date != "nope" else None), cell
  inputs = tf.keras.Input(shape=(1,), dtype=tf.string)
  model = tf.keras.Model(
    inputs, layers.DateFeatures(15800.0, 900.0, True, (-1, 0, 1), order)(inputs)
  )
  reference = layers.DateFeatures(15800.0, 900.0, True, (-1, 0, 1))
  expected = reference(tf.constant([[c] for c in iso])).numpy()
  np.testing.assert_allclose(model(tf.constant([[c] for c in cells])).numpy(), expected, atol=1e-6)
  np.testing.assert_allclose(_tflite_with_select_ops(model, cells), expected, atol=1e-5)


def _tflite_with_select_ops(model, texts):
  """The model, converted to TFLite with Select TF ops, run on one text column of `texts`."""
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.target_spec.supported_ops = [
    tf.lite.OpsSet.TFLITE_BUILTINS,
    tf.lite.OpsSet.SELECT_TF_OPS,
  ]
  runner = tf.lite.Interpreter(model_content=converter.convert()).get_signature_runner()
  [name] = runner.get_input_details()
  [got] = runner(**{name: np.array([[t.encode()] for t in texts], dtype=object)}).values()
  return got
