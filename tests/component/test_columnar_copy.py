"""The ExampleGen's columnar copy: the rows of its tf.Examples, read as TFXIO decodes them."""

import csv
import glob
import math
import os
import shutil

import numpy as np
import pyarrow as pa
import pytest
from google.protobuf import json_format
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as sc

from components import columnar
from components.example_gen import executor as example_gen_executor
from components.statistics_gen import executor as statistics_executor
from components.statistics_gen import statistics_lib
from tests.support.example_gen_runs import exec_properties, run_executor, write_messy_csv

SPLITS = ("train", "eval")


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
  """Our ExampleGen's output for two messy CSV files: two shards per split, each with its copy.

  The files hold ints, floats with NaN and infinities, text with empty cells, quotes and
  newlines, a sparse column and a column empty in every row (a Feature with no kind).
  """
  root = tmp_path_factory.mktemp("columnar")
  data = root / "in"
  data.mkdir()
  write_messy_csv(data / "a.csv", rows=3000)
  write_messy_csv(data / "b.csv", rows=1700)
  artifact = run_executor(
    example_gen_executor.Executor, exec_properties(data, allow_non_finite=1), root / "out"
  )
  artifact.split_names = artifact_utils.encode_split_names(list(SPLITS))
  return artifact


@pytest.fixture(scope="module")
def reordered(tmp_path_factory):
  """The same two files, the second with its columns in the reverse order."""
  root = tmp_path_factory.mktemp("reordered")
  data = root / "in"
  data.mkdir()
  write_messy_csv(data / "a.csv", rows=3000)
  write_messy_csv(root / "b.csv", rows=1700)
  with open(root / "b.csv", newline="") as f, open(data / "b.csv", "w", newline="") as out:
    csv.writer(out).writerows(row[::-1] for row in csv.reader(f))
  artifact = run_executor(
    example_gen_executor.Executor, exec_properties(data, allow_non_finite=1), root / "out"
  )
  artifact.split_names = artifact_utils.encode_split_names(list(SPLITS))
  return artifact


def _shards(artifact, split):
  return sorted(glob.glob(os.path.join(artifact_utils.get_split_uri([artifact], split), "*")))


@pytest.mark.parametrize("split", SPLITS)
@pytest.mark.parametrize("files", ["same columns", "columns reordered"])
def test_the_copy_yields_the_decoded_batches_batch_for_batch(
  examples, reordered, files, split, monkeypatch
):
  """Batches of 700 rows that run across the two shards: equal to tfx_bsl's decoded ones,
  also where the two CSV files hold their columns in different orders (which failed)."""
  examples = examples if files == "same columns" else reordered
  shards = _shards(examples, split)
  assert len(shards) == 2 and all(s.endswith(".gz") for s in shards)
  files = columnar.complete_files(shards, os.path.exists)
  assert files is not None
  monkeypatch.setattr(statistics_lib, "BATCH_ROWS", 700)
  decoded = list(statistics_lib.example_record_batches(shards, threads=1))
  copied = list(columnar.record_batches(files, 700))
  assert len(copied) == len(decoded) > 2
  for ours, theirs in zip(copied, decoded, strict=True):
    assert ours.schema == theirs.schema
    assert all(_same(ours.column(n), theirs.column(n)) for n in ours.schema.names)
  # The copy reads the same through the object-store path (each file read whole by gfile).
  monkeypatch.setattr(columnar.storage, "is_remote", lambda path: True)
  remote = list(columnar.record_batches(files, 700))
  for a, b in zip(remote, copied, strict=True):
    assert all(_same(a.column(n), b.column(n)) for n in a.schema.names)


def _same(ours, theirs) -> bool:
  """Arrays equal, NaN equal to NaN (Arrow's equals holds NaN unequal to itself)."""
  if ours.equals(theirs):
    return True
  if not pa.types.is_large_list(ours.type) or not pa.types.is_floating(ours.type.value_type):
    return False
  return (
    ours.offsets.equals(theirs.offsets)
    and ours.is_valid().equals(theirs.is_valid())
    and np.array_equal(ours.values.to_numpy(), theirs.values.to_numpy(), equal_nan=True)
  )


def _statistics(artifact, out) -> dict[str, statistics_pb2.DatasetFeatureStatisticsList]:
  statistics = standard_artifacts.ExampleStatistics()
  statistics.uri = str(out)
  context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=[])
  statistics_executor.Executor(context).Do(
    {sc.EXAMPLES_KEY: [artifact]}, {sc.STATISTICS_KEY: [statistics]}, {sc.EXCLUDE_SPLITS_KEY: "[]"}
  )
  result = {}
  for split in SPLITS:
    path = os.path.join(artifact_utils.get_split_uri([statistics], split), "FeatureStats.pb")
    with open(path, "rb") as f:
      result[split] = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read())
  return result


def test_statistics_from_the_copy_equal_those_from_the_tf_examples(examples, tmp_path):
  from_copy = _statistics(examples, tmp_path / "copy")
  without = standard_artifacts.Examples()
  without.uri = str(tmp_path / "examples")
  without.split_names = examples.split_names
  shutil.copytree(examples.uri, without.uri)
  shutil.rmtree(os.path.join(without.uri, columnar.FOLDER))
  decoded = _statistics(without, tmp_path / "decoded")
  for split in SPLITS:
    assert from_copy[split].datasets[0].num_examples > 1000
    ours, theirs = (
      json_format.MessageToDict(_without_tie_order(x[split])) for x in (from_copy, decoded)
    )
    _assert_close(ours, theirs, split)


def _assert_close(ours, theirs, where: str) -> None:
  """Equal, numbers to 1e-9 relative: TFDV's float sums differ in their last bits from run to
  run over the same batches (a standard deviation of 817.34935 differed in its 9th digit)."""
  if isinstance(ours, dict):
    assert sorted(ours) == sorted(theirs), where
    for key in ours:
      _assert_close(ours[key], theirs[key], f"{where}.{key}")
  elif isinstance(ours, list):
    assert len(ours) == len(theirs), where
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
      _assert_close(a, b, f"{where}[{i}]")
  elif isinstance(ours, float) and isinstance(theirs, float):
    assert math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12), (where, ours, theirs)
  else:
    assert ours == theirs, (where, ours, theirs)


def _without_tie_order(stats: statistics_pb2.DatasetFeatureStatisticsList):
  """The statistics with each text column's top values reduced to their counts.

  TFDV's in-memory generators order (and cut) text values of equal count differently from run
  to run, whatever the batches: two passes over the same tf.Examples differ there too.
  """
  out = statistics_pb2.DatasetFeatureStatisticsList()
  out.CopyFrom(stats)
  for feature in out.datasets[0].features:
    if feature.HasField("string_stats"):
      text = feature.string_stats
      top = sorted(v.frequency for v in text.top_values)
      ranks = sorted(b.sample_count for b in text.rank_histogram.buckets)
      del text.top_values[:]
      del text.rank_histogram.buckets[:]
      text.top_values.extend(statistics_pb2.StringStatistics.FreqAndValue(frequency=f) for f in top)
      buckets = (statistics_pb2.RankHistogram.Bucket(sample_count=c) for c in ranks)
      text.rank_histogram.buckets.extend(buckets)
  return out


def test_a_split_whose_copy_is_incomplete_is_decoded(examples, tmp_path, monkeypatch):
  shutil.copytree(examples.uri, tmp_path / "examples")
  shards = sorted(glob.glob(str(tmp_path / "examples" / "Split-train" / "*")))
  assert statistics_executor._record_batches(shards).__name__ == "record_batches"
  os.remove(columnar.file_for(shards[1]))
  decoded = object()
  monkeypatch.setattr(statistics_lib, "example_record_batches", lambda patterns: decoded)
  assert statistics_executor._record_batches(shards) is decoded


def test_the_copy_lies_outside_the_folders_stock_components_read(examples):
  for split in SPLITS:
    folder = artifact_utils.get_split_uri([examples], split)
    shards = sorted(os.listdir(folder))
    assert all(name.endswith(".gz") for name in shards)
    copies = os.listdir(os.path.dirname(columnar.file_for(os.path.join(folder, shards[0]))))
    assert sorted(copies) == ["data-00000.arrow", "data-00001.arrow"]


def test_no_copy_is_written_when_not_asked(tmp_path):
  from components.example_gen import csv_convert, example_gen_lib

  data = tmp_path / "in"
  data.mkdir()
  write_messy_csv(data / "a.csv", rows=200)
  job = example_gen_lib.plan_job(str(data), [("single_split", "*")], ["train", "eval"], [2, 1])
  assert not job.options.columnar_copy
  out = {s: str(tmp_path / "out" / f"Split-{s}") for s in ("train", "eval")}
  csv_convert.convert_file(
    job.units[0].chunk, job.options, job.split_plan, out, "data-00000", str(tmp_path / "q")
  )
  assert os.listdir(out["train"]) == ["data-00000.gz"]
  assert not os.path.exists(tmp_path / "out" / columnar.FOLDER)


def test_the_trainer_reads_the_same_arrays_from_the_copy_as_from_the_tf_examples(examples):
  """models/tabular/read.py: model inputs and raw labels from the copy equal parse_columns' and
  parse_label's, gaps included (an int column with empty cells, floats with NaN and
  infinities, 12-digit ints, text with empty cells)."""
  from components.model_contract import Column
  from core.column_types import STORED_FLOAT32, STORED_INT64, STORED_STRING
  from models.tabular import read as tabular_read

  columns = [
    Column("sparse", STORED_INT64),
    Column("oddfloat", STORED_FLOAT32),
    Column("id", STORED_INT64),
    Column("text", STORED_STRING),
    Column("mixed", STORED_FLOAT32),
  ]
  for path in _shards(examples, "train"):
    assert os.path.exists(columnar.file_for(path))
    copied = list(tabular_read.file_batches(path, columns, "label", STORED_INT64))
    parsed = list(tabular_read._parsed(path, columns, "label", STORED_INT64))
    assert len(copied) == len(parsed) >= 1
    for (features, label), (want_features, want_label) in zip(copied, parsed, strict=True):
      np.testing.assert_array_equal(label, want_label)
      assert sorted(features) == sorted(want_features)
      for name, values in features.items():
        assert values.dtype == want_features[name].dtype, name
        np.testing.assert_array_equal(values, want_features[name])  # NaN equals NaN here.


def test_the_trainer_parses_the_tf_examples_without_a_copy_that_fits(examples, tmp_path):
  from components.model_contract import Column
  from core.column_types import STORED_FLOAT32, STORED_INT64
  from models.tabular import read as tabular_read

  path = _shards(examples, "train")[0]
  # The copy holds `sparse` as int64: asked for as a float column, it does not serve.
  assert tabular_read.copy_of(path, [("sparse", STORED_FLOAT32)]) is None
  assert tabular_read.copy_of(path, [("no_such_column", STORED_INT64)]) is None
  assert tabular_read.copy_of(path, [("sparse", STORED_INT64)]) is not None
  alone = tmp_path / "Split-train" / "data-00000.gz"
  alone.parent.mkdir()
  shutil.copy(path, alone)
  columns = [Column("sparse", STORED_INT64)]
  parsed = list(tabular_read.file_batches(str(alone), columns, "label", STORED_INT64))
  copied = list(tabular_read.file_batches(path, columns, "label", STORED_INT64))
  assert sum(len(label) for _, label in parsed) == sum(len(label) for _, label in copied) > 1000


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
  """Our ExampleGen's output for a CSV of ints, floats and text, each with empty cells."""
  root = tmp_path_factory.mktemp("clean")
  data = root / "in"
  data.mkdir()
  rng = np.random.default_rng(0)
  lines = ["count,price,city,label"]
  for i in range(2500):
    count = "" if i % 7 == 0 else str(int(rng.integers(0, 50)))
    price = "" if i % 11 == 0 else f"{rng.uniform(0, 100):.3f}"
    city = "" if i % 13 == 0 else f"c{int(rng.integers(0, 9))}"
    lines.append(f"{count},{price},{city},{i % 3}")
  (data / "data.csv").write_text("\n".join(lines) + "\n")
  artifact = run_executor(example_gen_executor.Executor, exec_properties(data), root / "out")
  artifact.split_names = artifact_utils.encode_split_names(list(SPLITS))
  return artifact


def _records(shards):
  import tensorflow as tf

  dataset = tf.data.TFRecordDataset(shards, compression_type="GZIP")
  return [tf.train.Example.FromString(r) for r in dataset.as_numpy_iterator()]


def test_rows_sampled_from_the_copy_are_the_shards_records(clean):
  import tensorflow as tf

  shards = _shards(clean, "train")
  records = _records(shards)
  positions = np.array([0, 3, 100, 101, len(records) // 2, len(records) - 1])
  sampled = columnar.sampled_examples(columnar.complete_files(shards, os.path.exists), positions)
  assert [tf.train.Example.FromString(r) for r in sampled] == [records[i] for i in positions]
  assert any(
    not f.HasField("kind") or not getattr(f, f.WhichOneof("kind")).value
    for r in (records[i] for i in positions)
    for f in r.features.feature.values()
  )


def test_the_optimizer_draws_the_same_sample_from_the_copy_as_from_the_shards(clean, monkeypatch):
  import tensorflow as tf

  from components.optimizer import data_lib

  shards = _shards(clean, "train")
  from_copy, info = data_lib._sample_records(shards, 300, seed=5)
  monkeypatch.setattr(columnar, "complete_files", lambda files, exists: None)
  from_shards, shard_info = data_lib._sample_records(shards, 300, seed=5)
  assert info == shard_info and (info.rows, info.every) == (270, 6)  # 1,624 rows
  assert [tf.train.Example.FromString(r) for r in from_copy] == [
    tf.train.Example.FromString(r) for r in from_shards
  ]


def test_a_copy_with_a_column_of_no_values_is_not_sampled(examples):
  shards = _shards(examples, "train")
  assert columnar.sampled_examples(columnar.complete_files(shards, os.path.exists), [0, 5]) is None
