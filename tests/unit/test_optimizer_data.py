"""The Optimizer's rows: a sample spread over the whole split, whatever order its files are in."""

import numpy as np
import pytest
import tensorflow as tf

from components.optimizer import data_lib


def _write_sorted(path, values):
  """A gzipped TFRecord file of tf.Examples with one int feature, in the given order."""
  with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
    for v in values:
      example = tf.train.Example()
      example.features.feature["price"].int64_list.value.append(int(v))
      writer.write(example.SerializeToString())


def _prices(records):
  return np.array(
    [tf.train.Example.FromString(r).features.feature["price"].int64_list.value[0] for r in records]
  )


def test_a_sample_of_a_sorted_split_spans_it_and_any_head_of_it_does_too(tmp_path):
  # Two files sorted by price, as a CSV sorted by its label would be split into them.
  _write_sorted(tmp_path / "a.gz", range(0, 30_000))
  _write_sorted(tmp_path / "b.gz", range(30_000, 50_000))
  files = [str(tmp_path / "a.gz"), str(tmp_path / "b.gz")]
  records, info = data_lib._sample_records(files, 2_000, seed=0)
  assert info.of == 50_000 and info.every == 25 and info.rows == len(records) == 2_000
  prices = _prices(records)
  assert len(set(prices.tolist())) == 2_000
  # Every 25th record from a random start below 25: an even spread over the whole range.
  assert sorted(prices.tolist()) == list(range(info.start, 50_000, 25))
  # int8 calibration takes the head of the sample: it must see the whole range, not the
  # smallest prices (as the first 200 rows of the file would be).
  head = prices[:200]
  assert head.min() < 2_500 and head.max() > 47_500
  assert np.mean(head) == pytest.approx(25_000, rel=0.1)
  # Deterministic for a seed.
  again, _ = data_lib._sample_records(files, 2_000, seed=0)
  assert again == records


def test_a_split_smaller_than_the_cap_is_read_whole(tmp_path):
  _write_sorted(tmp_path / "a.gz", range(300))
  records, info = data_lib._sample_records([str(tmp_path / "a.gz")], 10_000, seed=3)
  assert (info.rows, info.of, info.every, info.start) == (300, 300, 1, 0)
  assert sorted(_prices(records).tolist()) == list(range(300))
  assert info.describe() == "all 300 rows"


def test_text_features_reach_number_inputs_as_numbers_with_empty_cells_missing():
  # A column SchemaGen saw no value of is bytes in the schema; the model reads it as numbers.
  text = tf.constant([[b""], [b" 17031081800 "], [b"3"]])
  ints = data_lib.as_input("tract", text, tf.TensorSpec([None, 1], tf.int64))
  assert ints.dtype == tf.int64 and ints.numpy()[:, 0].tolist() == [0, 17031081800, 3]
  floats = data_lib.as_input("tract", text, tf.TensorSpec([None, 1], tf.float32)).numpy()[:, 0]
  assert np.isnan(floats[0]) and floats[2] == 3.0
  same = tf.constant([[1.5]])
  assert data_lib.as_input("x", same, tf.TensorSpec([None, 1], tf.float32)) is same
  assert data_lib.as_input("x", same, tf.TensorSpec([None, 1], tf.int32)).numpy()[0, 0] == 1


def test_a_text_feature_that_is_not_a_number_skips_the_optimizer_with_its_reason():
  with pytest.raises(data_lib.UnmeasurableModelError, match="input 'company' takes int32"):
    data_lib.as_input(
      "company", tf.constant([[b"Taxi Affiliation"]]), tf.TensorSpec([None, 1], tf.int32)
    )
