"""The stock StatisticsGen executor, with an in-process pass where Beam adds only overhead."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from tfx import types
from tfx.components.statistics_gen import executor as stock_statistics_gen
from tfx.components.util import examples_utils, tfxio_utils
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, json_utils, stats_utils

from components import columnar, memory, tf_compat
from components.statistics_gen import statistics_lib

_LOG = logging.getLogger(__name__)


class Executor(stock_statistics_gen.Executor):
  """Writes what the stock StatisticsGen writes, computing it in process when it can.

  When the Beam runner is local (the DirectRunner, which runs the pipeline in this process)
  and the statistics options need nothing only Beam provides (sampling, slicing, lift,
  sharded output, a Beam-only generator), every split's statistics come from TFDV's own
  generators over TFXIO's record batches (`statistics_lib`). The output is the stock one:
  `Split-<name>/FeatureStats.pb` (a binary DatasetFeatureStatisticsList) and the same artifact
  properties, which SchemaGen, ExampleValidator and the TFDV viewers read. Otherwise, and
  whenever a distributed runner is named, the stock Beam pipeline runs.
  """

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    import tensorflow_data_validation as tfdv

    stats_options = tfdv.StatsOptions()
    options_json = exec_properties.get(standard_component_specs.STATS_OPTIONS_JSON_KEY)
    if options_json:
      stats_options = tfdv.StatsOptions.from_json(options_json)
    sample_rates = json_utils.loads(
      exec_properties.get(standard_component_specs.SAMPLE_RATE_BY_SPLIT_KEY, "null")
    )
    decision = statistics_lib.plan(
      tf_compat.beam_pipeline_args(self),
      stats_options,
      bool(exec_properties.get(standard_component_specs.SHARDED_STATS_OUTPUT_KEY, False)),
    )
    if decision.in_process and any(r not in (None, 1.0) for r in (sample_rates or {}).values()):
      decision = statistics_lib.InProcessPlan(False, "sample_rate_by_split samples the rows")
    if not decision.in_process:
      _LOG.info("StatisticsGen on Beam: %s.", decision.reason)
      super().Do(input_dict, output_dict, exec_properties)
      return
    self._log_startup(input_dict, output_dict, exec_properties)
    self._in_process(input_dict, output_dict, exec_properties, stats_options)

  def _in_process(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    stats_options: Any,
  ) -> None:
    import tensorflow_data_validation as tfdv

    examples = artifact_utils.get_single_instance(input_dict[standard_component_specs.EXAMPLES_KEY])
    statistics = artifact_utils.get_single_instance(
      output_dict[standard_component_specs.STATISTICS_KEY]
    )
    split_names = _split_names(examples, exec_properties)
    if not split_names:
      raise ValueError(f"No splits for examples artifact: {examples}")
    statistics.split_names = artifact_utils.encode_split_names(split_names)
    statistics.span = examples.span
    try:
      link = stats_utils.generate_stats_dashboard_link(statistics)
    except Exception:  # As the stock executor: a missing dashboard must not fail the run.
      _LOG.exception("Failed to generate the stats dashboard link.")
      link = ""
    statistics.set_string_custom_property(stock_statistics_gen.STATS_DASHBOARD_LINK, link)
    statistics.set_json_value_custom_property(
      stock_statistics_gen.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
      json_utils.dumps({split: stats_options.sample_rate or 1.0 for split in split_names}),
    )
    schema = input_dict.get(standard_component_specs.SCHEMA_KEY)
    if schema:
      if stats_options.schema:
        raise ValueError(
          "A schema was provided as an input and the stats_options exec_property also "
          "contains a schema value. At most one of these may be set."
        )
      path = io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(schema))
      stats_options.schema = io_utils.SchemaReader().read(path)
    for split in split_names:
      started = time.perf_counter()
      options = tfdv.StatsOptions.from_json(stats_options.to_json())
      if _plain_examples(examples):
        patterns, _ = tfxio_utils.get_file_format_and_patterns([examples], split)
        _LOG.info("Reading from pattern %s for split %s", patterns, split)
        result = statistics_lib.statistics(_record_batches(patterns), options)
      else:
        tfxio = tfxio_utils.get_split_tfxio(
          examples=[examples], split=split, telemetry_descriptors=["StatisticsGen"], schema=None
        )
        result = statistics_lib.split_statistics(tfxio, options)
      output_uri = artifact_utils.get_split_uri([statistics], split)
      fileio.makedirs(output_uri)
      path = os.path.join(output_uri, stock_statistics_gen.DEFAULT_FILE_NAME)
      io_utils.write_bytes_file(path, result.SerializeToString())
      memory.release()
      _LOG.info(
        "Statistics for split %s (%d rows) written to %s in %.2f s, in process.",
        split,
        result.datasets[0].num_examples if result.datasets else 0,
        output_uri,
        time.perf_counter() - started,
      )


def _record_batches(patterns: list[str]):
  """The split's record batches: from its columnar copy where it has a whole one, else decoded
  from its tf.Examples (the same batches either way)."""
  shards = [path for pattern in patterns for path in sorted(fileio.glob(pattern))]
  files = columnar.complete_files(shards, fileio.exists)
  if files is None:
    return statistics_lib.example_record_batches(patterns)
  _LOG.info("Reading the split's columnar copy (%d file(s)).", len(files))
  return columnar.record_batches(files, statistics_lib.BATCH_ROWS)


def _plain_examples(examples: types.Artifact) -> bool:
  """Whether the split files are tf.Examples in TFRecords, which the threaded decoder reads."""
  from tfx.proto import example_gen_pb2

  tf_example = example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE
  return (
    examples_utils.get_payload_format(examples) == tf_example
    and examples_utils.get_file_format(examples) == "tfrecords_gzip"
  )


def _split_names(examples: types.Artifact, exec_properties: dict[str, Any]) -> list[str]:
  """The splits to describe, as the stock executor chooses them."""
  excluded = (
    json_utils.loads(exec_properties.get(standard_component_specs.EXCLUDE_SPLITS_KEY, "null")) or []
  )
  if not isinstance(excluded, list):
    raise ValueError(
      f"exclude_splits in execution properties needs to be a list. Got {type(excluded)} instead."
    )
  if examples.has_custom_property(examples_utils.CUSTOM_SPLIT_PATTERN_PROPERTY_NAME):
    patterns = json_utils.loads(
      examples.get_string_custom_property(examples_utils.CUSTOM_SPLIT_PATTERN_PROPERTY_NAME)
    )
    splits = list(patterns)
  else:
    splits = artifact_utils.decode_split_names(examples.split_names)
  return [s for s in splits if s not in excluded]
