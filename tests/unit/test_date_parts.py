"""A date spelled by number columns: found by the profile, read inside the model and its
TFLite and ONNX conversions as a date column is read."""

import dataclasses
import datetime

import numpy as np
import pytest
import tensorflow as tf

from components import model_contract
from models.tabular import date_parts, layers
from models.tabular import model as tabular_model
from models.tabular import profile as tabular_profile
from tests.support import tabular_data as td

DAYS = [datetime.date(2013, 1, 1) + datetime.timedelta(days=7 * i) for i in range(60)]


def _parts(days, **extra) -> dict[str, np.ndarray]:
  columns = {
    "year": np.array([d.year for d in days], float),
    "month": np.array([d.month for d in days], float),
    "day": np.array([d.day for d in days], float),
  }
  return {**columns, **extra}


def test_year_month_and_day_columns_are_one_date_with_the_days_they_spell():
  [found] = date_parts.find_date_parts(_parts(DAYS, hour=np.arange(60.0)), numeric_bins=16)
  assert (found.year, found.month, found.day, found.name) == (
    "year",
    "month",
    "day",
    "year/month/day",
  )
  days = np.array([(d - datetime.date(1970, 1, 1)).days for d in DAYS], float)
  assert found.stats.day_mean == pytest.approx(days.mean())
  assert found.stats.day_scale == pytest.approx(days.std())
  assert not found.stats.with_time
  assert len(found.stats.edges) == 60  # a series of 60 days, under its 128 bins: one edge each
  assert date_parts.find_date_parts(_parts(DAYS), numeric_bins=0)[0].stats.edges == ()
  # Each day in 3 rows (not a series): bins only where the sample stands for enough rows a day.
  repeated = {name: np.tile(values, 3) for name, values in _parts(DAYS).items()}
  [few] = date_parts.find_date_parts(repeated, numeric_bins=16)
  [many] = date_parts.find_date_parts(repeated, numeric_bins=16, rows=1800)
  assert few.stats.edges == () and len(many.stats.edges) == 60


def test_prefixes_name_separate_dates_and_a_day_is_optional():
  parts = _parts(DAYS)
  columns = {
    "Birth_Year": parts["year"],
    "birth_month": parts["month"],
    "birth_day": parts["day"],
    "Year": parts["year"] - 1,
    "Month": parts["month"],
    "salmon": parts["month"],  # ends in "mon", but there is no "salyear"
  }
  first, second = date_parts.find_date_parts(columns)
  assert first.columns == ("Birth_Year", "birth_month", "birth_day")
  assert second.columns == ("Year", "Month") and second.day is None
  assert second.stats.day_mean < first.stats.day_mean - 300  # a year earlier, on the 1st


@pytest.mark.parametrize(
  "change",
  [
    lambda c: c.pop("year"),  # a month and a day alone name no date
    lambda c: c.pop("month"),
    lambda c: c.update(month=c["month"] + 0.5),  # not whole numbers
    lambda c: c.update(year=np.full(60, np.nan)),  # never present
  ],
)
def test_columns_that_do_not_spell_dates_are_left_as_numbers(change):
  columns = _parts(DAYS)
  change(columns)
  assert date_parts.find_date_parts(columns) == ()


@pytest.mark.parametrize(
  "day",
  [
    lambda d: d * 7,  # days past 31: a day count, not a day of the month
    lambda d: np.arange(60.0) % 7 + 1,  # 1..7: days of the week
    lambda d: np.arange(60.0) % 7,  # 0..6: days of the week, 0 no day of any month
  ],
)
def test_a_day_column_that_is_no_day_of_the_month_is_left_out_of_the_date(day):
  columns = _parts(DAYS)
  columns["day"] = day(columns["day"])
  [found] = date_parts.find_date_parts(columns)
  assert found.columns == ("year", "month") and found.day is None
  firsts = [(datetime.date(d.year, d.month, 1) - datetime.date(1970, 1, 1)).days for d in DAYS]
  assert found.stats.day_mean == pytest.approx(np.mean(firsts))


def test_a_monthly_table_whose_days_are_all_the_first_keeps_its_day_column():
  days = [datetime.date(2000 + i // 12, i % 12 + 1, 1) for i in range(60)]
  assert date_parts.find_date_parts(_parts(days))[0].day == "day"
  # A week's days of the month in few rows can still be a date's days.
  assert date_parts.find_date_parts(_parts(DAYS[:7]))[0].day == "day"


def test_a_few_unreadable_or_missing_rows_still_make_a_date():
  columns = _parts(DAYS)
  columns["day"][0] = 30.0  # 30 January is fine
  columns["month"][1] = np.nan  # missing rows are not counted against the date
  columns["day"][2] = 31.0
  columns["month"][2] = 2.0  # 31 February: one bad row of 59, under the 5% allowed
  assert len(date_parts.find_date_parts(columns)) == 1
  columns["month"][3] = columns["month"][4] = 13.0  # three bad rows of 59: over 5%
  [without_day] = date_parts.find_date_parts(columns)  # but two without the day: under it
  assert without_day.day is None
  columns["month"][5] = 13.0  # and three without the day
  assert date_parts.find_date_parts(columns) == ()


def _layer_inputs():
  rows = [(2013, 1, 1), (2013, 2, 28), (2012, 2, 29), (1999, 12, 31), (2024, 7, 4)]
  bad = [(np.nan, 3, 4), (2013, 13, 1), (2013, 2, 0), (2013, 2.5, 1), (2013, np.inf, 1)]
  values = np.array([(y, m, d, 5.0) for y, m, d in rows + bad], np.float32)
  texts = [f"{y:04d}-{m:02d}-{d:02d}" for y, m, d in rows] + [""] * len(bad)
  return values, texts


def test_the_layer_reads_the_parts_as_date_features_read_the_same_date_as_text():
  values, texts = _layer_inputs()
  edges = (-2.0, -0.3, 0.0, 0.4, 1.5)
  from_parts = layers.DatePartsFeatures([0, 1, 2], 15800.4, 2000.0, edges)(values).numpy()
  from_text = layers.DateFeatures(15800.4, 2000.0, False, edges)(tf.constant([[t] for t in texts]))
  np.testing.assert_allclose(from_parts, from_text.numpy(), atol=1e-6)
  # The bad rows read as an empty date cell: every feature 0, the missing indicator 1.
  assert (from_parts[5:, :-1] == 0).all() and (from_parts[5:, -1] == 1).all()
  # Without a day column, each row is the first of its month.
  no_day = layers.DatePartsFeatures([0, 1, -1], 15800.4, 2000.0, edges)(values).numpy()
  firsts = [f"{t[:8]}01" if t else "" for t in texts]
  expected = layers.DateFeatures(15800.4, 2000.0, False, edges)(tf.constant([[t] for t in firsts]))
  np.testing.assert_allclose(no_day[:5], expected.numpy()[:5], atol=1e-6)


def test_the_layer_round_trips_its_config_and_refuses_missing_positions():
  layer = layers.DatePartsFeatures([3, 0, -1], 100.0, 10.0, (0.0, 1.0), name="d")
  config = layer.get_config()
  assert config["columns"] == [3, 0, -1] and "with_time" not in config
  again = layers.DatePartsFeatures.from_config(config)
  values = np.array([[2, 99.0, 0.0, 2020.0]], np.float32)
  np.testing.assert_array_equal(again(values).numpy(), layer(values).numpy())
  with pytest.raises(ValueError, match="year, month and day positions"):
    layers.DatePartsFeatures([-1, 0, 1], 100.0, 10.0)


def test_tflite_builtin_ops_and_onnx_run_the_layer(tmp_path):
  """Only arithmetic: TFLite converts it without Select TF ops, and tf2onnx exports it."""
  import onnxruntime

  from components.optimizer.formats import onnx as onnx_format

  values, _ = _layer_inputs()
  inputs = tf.keras.Input(shape=(4,), dtype=tf.float32, name="numbers")
  edges = (-2.0, -0.3, 0.0, 0.4, 1.5)
  model = tf.keras.Model(
    inputs, layers.DatePartsFeatures([0, 1, 2], 15800.4, 2000.0, edges)(inputs)
  )
  expected = model(values).numpy()
  converter = tf.lite.TFLiteConverter.from_keras_model(model)
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  runner = tf.lite.Interpreter(model_content=converter.convert()).get_signature_runner()
  [name] = runner.get_input_details()
  [got] = runner(**{name: values}).values()
  np.testing.assert_allclose(got, expected, atol=1e-5)
  path = str(tmp_path / "date_parts.onnx")
  onnx_format.to_onnx(model, path)
  session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
  [got] = session.run(None, {session.get_inputs()[0].name: values})
  np.testing.assert_allclose(got, expected, atol=1e-5)


def test_every_member_of_an_ensemble_reads_the_date(tmp_path):
  data = td.write_examples(str(tmp_path / "regression"), "regression", train_rows=200, eval_rows=50)
  schema = model_contract.read_schema(data["schema"])
  profile = tabular_profile.profile_data(
    tf.io.gfile.glob(f"{data['examples']}/Split-train/*"),
    model_contract.columns_from_schema(schema, td.LABEL),
    td.LABEL,
    model_contract.label_dtype(schema, td.LABEL),
  )
  assert profile.date_parts == ()  # age, income and ratio spell no date
  numeric = [s.column.name for s in profile.columns if s.column.kind == model_contract.NUMERIC]
  stats = date_parts.find_date_parts(_parts(DAYS))[0].stats
  dated = dataclasses.replace(
    profile, date_parts=(date_parts.DateParts("ratio", "age", None, stats),)
  )
  assert "dates: ratio/age (0 bins)" in tabular_profile.describe_inputs(
    dated.columns, date_parts=dated.date_parts
  )
  model = tabular_model.build_model(dated, {}, members=2, seed=1, linear_share=0.5)
  found = [layer for layer in model.layers if isinstance(layer, layers.DatePartsFeatures)]
  # Two networks and the linear member, each with its own copy.
  assert sorted(layer.name for layer in found) == [
    f"date_parts_0{tabular_model.member_suffix(i)}" for i in range(3)
  ]
  assert {tuple(layer.columns) for layer in found} == {
    (numeric.index("ratio"), numeric.index("age"), -1)
  }
  out = model.predict(td.model_inputs(data["eval"], text=("city", "color")), verbose=0)
  assert np.isfinite(out).all()


def test_int8_conversion_keeps_the_date_exact(tmp_path):
  """The Optimizer's int8 variant keeps preprocessing in float, but TFLite quantizes a slice
  of the float input whatever layer it is in (with one scale for every number column, which
  lost the months and days): the layer slices int32 and bool tensors only."""
  from components.optimizer.formats import tflite as tflite_format

  rng = np.random.default_rng(0)
  rows = 300
  numbers = np.stack(
    [
      rng.integers(1, 13, rows),
      rng.integers(1, 29, rows),
      rng.integers(1992, 2004, rows),
      rng.uniform(100, 2000, rows),
    ],
    axis=1,
  ).astype(np.float32)
  inputs = tf.keras.Input(shape=(4,), dtype=tf.float32, name="numeric")
  standardized = layers.NumericPreprocessing(
    numbers.mean(0), numbers.std(0), [False] * 4, name="numeric_preprocessing"
  )(inputs)
  edges = tuple(np.linspace(-1.5, 1.5, 20))
  dates = layers.DatePartsFeatures([2, 0, 1], 10000.0, 1000.0, edges, name="date_parts_0")(inputs)
  x = tf.keras.layers.Concatenate(name=model_contract.PREPROCESSED_LAYER)([standardized, dates])
  x = tf.keras.layers.Dense(16, activation="relu")(tf.keras.layers.Dense(16)(x))
  model = tf.keras.Model({"numeric": inputs}, tf.keras.layers.Dense(1)(x))
  model.save(str(tmp_path / "saved"), save_format="tf")
  float_layers = tflite_format.preprocessing_layers(model)
  assert "date_parts_0" in float_layers
  content, _ = tflite_format.to_tflite(
    str(tmp_path / "saved"),
    tflite_format.INT8,
    lambda: ({"numeric": numbers[i : i + 1]} for i in range(100)),
    float_layers=float_layers,
  )
  runner = tf.lite.Interpreter(model_content=content).get_signature_runner()
  [name] = runner.get_input_details()
  got = np.concatenate(
    [next(iter(runner(**{name: numbers[i : i + 1]}).values())) for i in range(60)]
  )
  expected = model.predict(numbers[:60], verbose=0)
  # int8 of the network alone: a few percent of the outputs' size. Months and days read at the
  # input's int8 scale (about 8 units a step here) put it at 100% and more.
  assert np.abs(got - expected).max() < 0.1 * np.abs(expected).mean()
