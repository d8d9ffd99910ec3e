"""The default model's batches streamed from the columnar copy (models/tabular/stream.py)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from components import model_contract
from core import tasks
from models.tabular import inputs as tabular_input
from models.tabular import profile as tabular_profile
from models.tabular import stream
from tests.support import tabular_data as td


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  """400 multiclass training rows in two shards, each with a copy of 64-row record batches."""
  written = td.write_examples(str(tmp_path_factory.mktemp("stream")), "multiclass", 400, 50)
  train = os.path.join(written["examples"], "Split-train")
  td.write_copies(train, written["train"], "multiclass", files=2)
  files = sorted(tf.io.gfile.glob(f"{written['examples']}/Split-train/*"))
  schema = model_contract.read_schema(written["schema"])
  columns = model_contract.columns_from_schema(schema, td.LABEL)
  dtype = model_contract.label_dtype(schema, td.LABEL)
  profile = tabular_profile.profile_data(files, columns, td.LABEL, dtype, tasks.AUTO, None)
  return {**written, "files": files, "profile": profile}


def _batches(dataset, n):
  return list(dataset.take(n).as_numpy_iterator())


def _ratios(batches):
  # `ratio` is a uniform float, distinct in every row: it names the row.
  return np.concatenate([b[0][model_contract.NUMERIC_INPUT][:, 2] for b in batches])


def test_one_pass_is_the_fit_rows_in_a_new_order_each_pass(data):
  profile, files = data["profile"], data["files"]
  assert stream.has_copies(files, profile)
  fit, held = tabular_input.load_arrays(files, profile, 10)
  assert (len(fit), len(held)) == (360, 40)
  ds = stream.stream_dataset(files, profile, 40, seed=3, every=10)
  first, second = _batches(ds, 18)[:9], _batches(ds, 18)[9:]
  assert all(len(b[1]) == 40 for b in first + second)
  # A pass is the fit rows (as the in-memory path holds them), features with their own targets.
  for one in (first, second):
    ratios = _ratios(one)
    np.testing.assert_array_equal(np.sort(ratios), np.sort(fit.features["numeric"][:, 2]))
    by_ratio = dict(zip(fit.features["numeric"][:, 2].tolist(), fit.target.tolist(), strict=True))
    targets = np.concatenate([b[1] for b in one])
    assert [by_ratio[r] for r in ratios.tolist()] == targets.tolist()
  # Shuffled across record batches and files, and again differently in the next pass.
  in_file_order = fit.features["numeric"][:, 2]
  assert not np.array_equal(_ratios(first), in_file_order)
  assert not np.array_equal(_ratios(first), _ratios(second))
  # The same seed draws the same batches; another seed others.
  np.testing.assert_array_equal(_ratios(_batches(ds, 9)), _ratios(first))
  other = stream.stream_dataset(files, profile, 40, seed=4, every=10)
  assert not np.array_equal(_ratios(_batches(other, 9)), _ratios(first))


def test_the_held_out_rows_and_an_ordered_pass_are_those_the_tf_examples_give(data):
  profile, files = data["profile"], data["files"]
  _, held = tabular_input.load_arrays(files, profile, 10)
  copied = stream.held_out_rows(files, profile, 10)
  np.testing.assert_array_equal(copied.target, held.target)
  for name, values in held.features.items():
    assert repr(copied.features[name].tolist()) == repr(values.tolist())
  parsed = list(tabular_input.make_dataset(files, profile, 64, training=False).as_numpy_iterator())
  ordered = list(stream.ordered_dataset(files, profile, 64).as_numpy_iterator())
  assert max(len(b[1]) for b in ordered) == 64
  # The same rows (the tf.Example reader interleaves the two files; the order is not scored).
  ours, theirs = np.argsort(_ratios(ordered)), np.argsort(_ratios(parsed))
  np.testing.assert_array_equal(
    np.concatenate([b[1] for b in ordered])[ours], np.concatenate([b[1] for b in parsed])[theirs]
  )
  for name in parsed[0][0]:
    mine = np.concatenate([b[0][name] for b in ordered])[ours]
    other = np.concatenate([b[0][name] for b in parsed])[theirs]
    assert repr(mine.tolist()) == repr(other.tolist())


def test_shards_split_each_global_batch_between_them(data):
  profile, files = data["profile"], data["files"]
  whole = _batches(stream.stream_dataset(files, profile, 40, seed=3, every=10), 12)
  parts = [
    _batches(
      stream.stream_dataset(files, profile, 20, seed=3, num_shards=2, shard_index=i, every=10),
      12,
    )
    for i in range(2)
  ]
  for step, batch in enumerate(whole):
    halves = np.concatenate([_ratios([parts[0][step]]), _ratios([parts[1][step]])])
    assert sorted(halves.tolist()) == sorted(_ratios([batch]).tolist())


def test_without_a_held_out_slice_every_row_is_streamed(data):
  profile, files = data["profile"], data["files"]
  ratios = _ratios(_batches(stream.stream_dataset(files, profile, 50, seed=1), 8))
  assert sorted(ratios.tolist()) == sorted(float(np.float32(r["ratio"])) for r in data["train"])


def test_a_split_without_a_copy_is_not_streamed_from_one(data, tmp_path):
  written = td.write_examples(str(tmp_path), "multiclass", 50, 10)
  files = tf.io.gfile.glob(f"{written['examples']}/Split-train/*")
  assert not stream.has_copies(files, data["profile"])
