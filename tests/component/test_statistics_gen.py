"""StatisticsGen in process against the stock Beam StatisticsGen, on the same Examples."""

import os

import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx import types
from tfx.components.statistics_gen import executor as stock_executor
from tfx.dsl.components.base import base_beam_executor
from tfx.types import artifact_utils, standard_artifacts
from tfx.types import standard_component_specs as sc

from components.statistics_gen import StatisticsGen, statistics_lib
from components.statistics_gen import executor as our_executor
from tests.support import tabular_data as td

# TFDV's default quantiles sketch (KLL) keeps rank errors under about 1% for these sizes.
RANK_ERROR = 0.01


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
  root = tmp_path_factory.mktemp("stats")
  data = td.write_examples(str(root), "multiclass", train_rows=3000, eval_rows=800)
  artifact = standard_artifacts.Examples()
  artifact.uri = data["examples"]
  artifact.split_names = artifact_utils.encode_split_names(["train", "eval"])
  return artifact, data


def _run(executor_class, examples, out, beam_args=(), **properties):
  statistics = standard_artifacts.ExampleStatistics()
  statistics.uri = str(out)
  context = base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(beam_args))
  props = {sc.EXCLUDE_SPLITS_KEY: "[]", **properties}
  executor_class(context).Do(
    {sc.EXAMPLES_KEY: [examples]}, {sc.STATISTICS_KEY: [statistics]}, props
  )
  return statistics


def _load(statistics: types.Artifact, split: str) -> statistics_pb2.DatasetFeatureStatistics:
  path = os.path.join(artifact_utils.get_split_uri([statistics], split), "FeatureStats.pb")
  with open(path, "rb") as f:
    result = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read())
  [dataset] = result.datasets
  return dataset


@pytest.fixture(scope="module")
def both(examples, tmp_path_factory):
  root = tmp_path_factory.mktemp("both")
  stock = _run(stock_executor.Executor, examples[0], root / "stock")
  ours = _run(our_executor.Executor, examples[0], root / "ours")
  return stock, ours


def test_the_component_is_the_stock_one_with_our_executor():
  from tfx import v1 as tfx

  component = StatisticsGen(examples=types.Channel(type=standard_artifacts.Examples))
  assert isinstance(component, tfx.components.StatisticsGen)
  assert component.id == "StatisticsGen"
  assert component.executor_spec.executor_class is our_executor.Executor


@pytest.mark.parametrize("split", ["train", "eval"])
def test_statistics_equal_the_stock_beam_statistics(both, examples, split):
  stock, ours = (_load(a, split) for a in both)
  assert ours.num_examples == stock.num_examples > 0
  assert ours.name == stock.name
  theirs = {f.path.step[0]: f for f in stock.features}
  mine = {f.path.step[0]: f for f in ours.features}
  assert set(mine) == set(theirs) == {*td.NUMERIC, *td.TEXT, td.LABEL}
  for name, a in mine.items():
    b = theirs[name]
    assert a.type == b.type, name
    if a.HasField("num_stats"):
      x, y = a.num_stats, b.num_stats
      assert x.common_stats.num_non_missing == y.common_stats.num_non_missing, name
      assert x.common_stats.num_missing == y.common_stats.num_missing, name
      assert (x.min, x.max, x.num_zeros) == (y.min, y.max, y.num_zeros), name
      assert x.mean == pytest.approx(y.mean, rel=1e-9), name
      assert x.std_dev == pytest.approx(y.std_dev, rel=1e-6), name
      # Quantiles come from a sketch: each boundary within the sketch's rank error.
      values = sorted(r[name] for r in examples[1][split] if r[name] is not None)
      _same_quantiles(x, y, values)
    else:
      x, y = a.string_stats, b.string_stats
      assert x.common_stats.num_non_missing == y.common_stats.num_non_missing, name
      assert x.common_stats.num_missing == y.common_stats.num_missing, name
      # Fewer distinct values than TFDV's sketches hold: counts are exact on both paths.
      assert x.unique == y.unique, name
      assert [(v.value, v.frequency) for v in x.top_values] == [
        (v.value, v.frequency) for v in y.top_values
      ], name
      assert x.avg_length == pytest.approx(y.avg_length, rel=1e-9), name


def _same_quantiles(x, y, values):
  """Each quantile boundary of ours lies within RANK_ERROR of the stock one's rank."""
  ours = [h for h in x.histograms if h.type == statistics_pb2.Histogram.QUANTILES]
  theirs = [h for h in y.histograms if h.type == statistics_pb2.Histogram.QUANTILES]
  assert len(ours) == len(theirs) == 1
  n = len(values)
  for a, b in zip(ours[0].buckets, theirs[0].buckets, strict=True):
    rank_a = sum(v <= a.high_value for v in values) / n
    rank_b = sum(v <= b.high_value for v in values) / n
    assert abs(rank_a - rank_b) <= 2 * RANK_ERROR


def test_schema_gen_infers_the_same_schema_from_either(both):
  stock, ours = both
  lists = []
  for statistics in (stock, ours):
    path = os.path.join(artifact_utils.get_split_uri([statistics], "train"), "FeatureStats.pb")
    with open(path, "rb") as f:
      lists.append(statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read()))
  a, b = (tfdv.infer_schema(s) for s in lists)
  assert a == b
  assert not tfdv.validate_statistics(lists[1], a).anomaly_info


def test_a_distributed_runner_or_sampling_gets_the_stock_beam_pipeline():
  options = tfdv.StatsOptions()
  assert statistics_lib.plan([], options, False).in_process
  assert statistics_lib.plan(["--runner=DirectRunner"], options, False).in_process
  dataflow = statistics_lib.plan(["--runner", "DataflowRunner", "--project", "p"], options, False)
  assert not dataflow.in_process and "DataflowRunner" in dataflow.reason
  flink = statistics_lib.plan(["--runner=FlinkRunner"], options, False)
  assert not flink.in_process
  sampled = statistics_lib.plan([], tfdv.StatsOptions(sample_rate=0.5), False)
  assert not sampled.in_process and "sample_rate" in sampled.reason
  assert not statistics_lib.plan([], options, True).in_process


def test_the_artifact_properties_are_the_stock_ones(both):
  stock, ours = both
  assert ours.split_names == stock.split_names
  for key in ("sample_rate_by_split",):
    assert ours.get_json_value_custom_property(key) == stock.get_json_value_custom_property(key)
  assert ours.has_custom_property("stats_dashboard_link")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_threaded_decoding_yields_the_tfxio_batches_in_order(examples, monkeypatch, threads):
  """Batch for batch the same rows as TFExampleRecord.RecordBatches, however many threads."""
  from tfx_bsl.tfxio import dataset_options, tf_example_record

  monkeypatch.setattr(statistics_lib, "BATCH_ROWS", 700)
  pattern = [os.path.join(artifact_utils.get_split_uri([examples[0]], "train"), "*")]
  options = dataset_options.RecordBatchesOptions(batch_size=700, shuffle=False, num_epochs=1)
  expected = list(tf_example_record.TFExampleRecord(pattern).RecordBatches(options))
  got = list(statistics_lib.example_record_batches(pattern, threads))
  assert len(got) == len(expected) == 5  # 3,000 rows: four of 700 and one of 200.
  for ours, theirs in zip(got, expected, strict=True):
    assert ours.equals(theirs)


def test_only_gzipped_tf_examples_take_the_threaded_decoder(examples):
  from tfx.proto import example_gen_pb2

  artifact = standard_artifacts.Examples()
  artifact.uri = examples[0].uri
  assert our_executor._plain_examples(artifact)
  artifact.set_string_custom_property(
    "payload_format", example_gen_pb2.PayloadFormat.Name(example_gen_pb2.FORMAT_PARQUET)
  )
  assert not our_executor._plain_examples(artifact)
  artifact = standard_artifacts.Examples()
  artifact.set_string_custom_property("file_format", "tfrecords")
  assert not our_executor._plain_examples(artifact)
