"""The Optimizer's rows: a sample spread over the whole split, whatever order its files are in."""

import dataclasses
import functools
import os

import numpy as np
import pytest
import tensorflow as tf

from components import columnar
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


def _write_copy(shard_path, values, batch_rows):
  """The ExampleGen's columnar copy of a `_write_sorted` shard, in batches of `batch_rows`."""
  import pyarrow as pa

  path = columnar.file_for(str(shard_path))
  os.makedirs(os.path.dirname(path), exist_ok=True)
  writer = columnar.Writer(functools.partial(open, mode="wb"), path)
  for i in range(0, len(values), batch_rows):
    chunk = pa.array(values[i : i + batch_rows], pa.int64())
    writer.write(columnar.flat_batch([("price", chunk)]))
  writer.close()


def test_a_large_copy_is_sampled_from_every_mth_batch_and_only_those_are_read(
  tmp_path, monkeypatch
):
  split = tmp_path / "Split-train"
  split.mkdir()
  files = []
  for name, values in (("a", list(range(0, 30_000))), ("b", list(range(30_000, 50_000)))):
    _write_sorted(split / f"{name}.gz", values)
    _write_copy(split / f"{name}.gz", values, 1_000)
    files.append(str(split / f"{name}.gz"))
  assert columnar.batch_sizes([columnar.file_for(f) for f in files]) == [1_000] * 50
  monkeypatch.setattr(data_lib, "_READ_ROWS", 5_000)
  whole_reads = []
  open_file = columnar.open_file

  def counting_open(path, first_column_only=False):
    reader = open_file(path, first_column_only)
    if first_column_only:
      return reader

    class Counted:
      num_record_batches = reader.num_record_batches

      def get_batch(self, i):
        whole_reads.append((path, i))
        return reader.get_batch(i)

    return Counted()

  monkeypatch.setattr(columnar, "open_file", counting_open)
  records, info = data_lib._sample_records(files, 1_000, seed=0)
  # 50 batches of 1,000 rows: every 10th batch is read (5,000 rows), every 5th row of those.
  assert (info.of, info.batch_every, info.every, info.rows) == (50_000, 10, 5, 1_000)
  assert len(whole_reads) == 5
  prices = _prices(records)  # Each price is its row's place in the split.
  first_batch = prices.min() // 1_000
  assert {p // 1_000 % 10 for p in prices.tolist()} == {first_batch}
  assert sorted(prices.tolist()) == [
    b * 1_000 + r for b in range(first_batch, 50, 10) for r in range(info.start, 1_000, 5)
  ]
  assert prices.min() < 10_000 and prices.max() >= 40_000  # The whole sorted range.
  shard_records = [r for f in files for r in tf.data.TFRecordDataset(f, "GZIP").as_numpy_iterator()]
  assert [tf.train.Example.FromString(r) for r in records] == [
    tf.train.Example.FromString(shard_records[p]) for p in prices
  ]
  assert info.describe() == (
    "1,000 of 50,000 rows (every 5th record of every 10th record batch, from random starts, "
    "so the sample spans the whole split however its files are sorted)"
  )
  again, _ = data_lib._sample_records(files, 1_000, seed=0)
  assert again == records


def test_a_copy_within_the_read_budget_gives_the_shards_one_stage_sample(tmp_path):
  split = tmp_path / "Split-train"
  split.mkdir()
  _write_sorted(split / "a.gz", range(6_000))
  _write_copy(split / "a.gz", list(range(6_000)), 1_000)
  files = [str(split / "a.gz")]
  records, info = data_lib._sample_records(files, 1_000, seed=2)
  assert (info.of, info.every, info.batch_every) == (6_000, 6, 1)
  assert sorted(_prices(records).tolist()) == list(range(info.start, 6_000, 6))


def test_the_report_says_how_the_eval_rows_were_drawn():
  from components.optimizer import report
  from core import properties

  two_stage = data_lib.SampleInfo(rows=10_000, of=2_000_000, every=5, start=3, batch_every=4)
  one_stage = data_lib.SampleInfo(rows=10_000, of=200_000, every=20, start=3)
  lines = [
    report._sample_line({"sampling": {properties.EVAL_SPLIT: dataclasses.asdict(info)}}, "accuracy")
    for info in (two_stage, one_stage)
  ]
  assert lines == [
    "Eval rows measured: 10,000 of the split's 2,000,000 (every 5th record of every 4th record "
    "batch, from random starts).",
    "Eval rows measured: 10,000 of the split's 200,000 (every 20th record from a random start).",
  ]


def test_two_stage_positions_fall_in_the_batches_drawn_or_are_none(monkeypatch):
  monkeypatch.setattr(data_lib, "_READ_ROWS", 5)
  sizes = [0, 10, 0, 10]  # Rows 0-9 are batch 1's, 10-19 batch 3's.
  seen = set()
  for seed in range(12):
    positions, every, _, batch_every = data_lib._batch_positions(
      sizes, 4, np.random.default_rng(seed)
    )
    assert batch_every == 4 and every in (1, 3)
    assert list(positions) == sorted(positions) and len(positions) <= 4
    assert len({p // 10 for p in positions}) <= 1  # All in batch 1 (rows 0-9) or batch 3.
    seen.add(len(positions))
  assert 0 in seen and len(seen) > 1  # None when the empty batch 0 or 2 was drawn.
