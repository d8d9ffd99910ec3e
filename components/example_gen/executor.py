"""Beam executor of the fast CSV ExampleGen: one Arrow-batched conversion per unit of input."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from typing import Any

import apache_beam as beam
from tfx import types
from tfx.components.example_gen import driver, utils, write_split
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components import beam_args, tf_compat
from components.example_gen import csv_convert, csv_read, example_gen_lib, io_lib, merge_lib
from components.example_gen.spec import (
  ALLOW_NON_FINITE_KEY,
  BLOCK_SIZE_KEY,
  DELIMITER_KEY,
  KEEP_LABEL_TOKENS_KEY,
  LABEL_KEY_KEY,
  LENIENT_COLUMNS_KEY,
  MAX_BAD_ROW_FRACTION_KEY,
  ROLLING_SPANS_KEY,
  SCHEMA_PATH_KEY,
  UNRESOLVED_INPUT_CONFIG_KEY,
)
from core import properties

_LOG = logging.getLogger(__name__)


# A custom property recorded on the Examples artifact (the others are core.properties').
COLUMN_TYPES_PROPERTY = "column_types"


def _proto(json_text: str, message):
  proto_utils.json_to_proto(json_text, message)
  return message


def _plan_job(exec_properties: dict[str, Any], unresolved_config: str) -> example_gen_lib.Job:
  """Unpacks the execution properties into plain values and plans the execution with them."""
  input_config = _proto(
    exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input()
  )
  output_config = _proto(
    exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output()
  )
  split_config = output_config.split_config
  return example_gen_lib.plan_job(
    exec_properties[standard_component_specs.INPUT_BASE_KEY],
    [(s.name, s.pattern) for s in input_config.splits],
    utils.generate_output_split_names(input_config, output_config),
    [s.hash_buckets for s in split_config.splits],
    span=int(exec_properties.get(utils.SPAN_PROPERTY_NAME) or 0),
    rolling=int(exec_properties.get(ROLLING_SPANS_KEY) or 1),
    unresolved_pattern=_proto(unresolved_config, example_gen_pb2.Input()).splits[0].pattern,
    delimiter=exec_properties.get(DELIMITER_KEY) or ",",
    label_key=exec_properties.get(LABEL_KEY_KEY) or None,
    partition_column=split_config.partition_feature_name or None,
    schema_path=exec_properties.get(SCHEMA_PATH_KEY),
    block_size=int(exec_properties.get(BLOCK_SIZE_KEY) or csv_read.DEFAULT_BLOCK_BYTES),
    allow_non_finite=bool(exec_properties.get(ALLOW_NON_FINITE_KEY)),
    keep_label_tokens=bool(exec_properties.get(KEEP_LABEL_TOKENS_KEY)),
    lenient_columns=json.loads(exec_properties.get(LENIENT_COLUMNS_KEY) or "[]"),
  )


class Executor(BaseExampleGenExecutor):
  """Fast CSV ExampleGen executor.

  Keeps the ExampleGen contract (input/output configs, `Split-<name>/*.gz`,
  payload and file format properties, span/version/fingerprint) but replaces
  the per-record Beam path with one Arrow-batched conversion per unit.
  """

  def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
    raise NotImplementedError(
      "this CsvExampleGen writes its splits itself in Executor.Do and has no per-record "
      "transform; run the component, or call Executor.Do."
    )

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Plans the input, infers or reads the column types, converts, and records the outcome.

    Raises:
      csv_errors.CsvInputError: for input a user can fix, in one sentence naming the fix.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    examples = artifact_utils.get_single_instance(
      output_dict[standard_component_specs.EXAMPLES_KEY]
    )
    unresolved_config = exec_properties.get(UNRESOLVED_INPUT_CONFIG_KEY) or exec_properties.get(
      standard_component_specs.INPUT_CONFIG_KEY
    )
    resolved = example_gen_lib.resolve_without_driver(exec_properties)
    if resolved is not None:
      exec_properties = resolved
      driver.update_output_artifact(exec_properties, examples.mlmd_artifact)
    job = _plan_job(exec_properties, unresolved_config)
    # The columnar copy serves the in-process passes downstream, which step aside for a
    # distributed runner (components/columnar.py).
    copy = not beam_args.distributed_runner(tf_compat.beam_pipeline_args(self))
    job = dataclasses.replace(job, options=dataclasses.replace(job.options, columnar_copy=copy))
    split_names = list(job.split_plan.names)
    examples.split_names = artifact_utils.encode_split_names(split_names)
    output_dirs = {s: artifact_utils.get_split_uri([examples], s) for s in split_names}
    results_dir = os.path.join(examples.uri, merge_lib.RESULTS_DIR)
    self._convert(
      job, output_dirs, os.path.join(examples.uri, merge_lib.QUARANTINE_DIR), results_dir
    )
    results = merge_lib.read_results(results_dir)
    outcome = merge_lib.merge_results(
      results,
      split_names,
      float(exec_properties.get(MAX_BAD_ROW_FRACTION_KEY) or 0.0),
      examples.uri,
      label_key=job.options.label_key,
    )
    if outcome.bad_rows:
      _LOG.warning(
        "Quarantined %d of %d rows (%d of them only for an empty label) in %s.",
        outcome.bad_rows,
        outcome.rows,
        outcome.unlabeled_rows,
        outcome.quarantine_uri,
      )
    self._record(examples, exec_properties, outcome, job.options.column_types, job.files.spans)
    if job.options.digest_lines:
      examples.set_string_custom_property(
        properties.EXAMPLES_SPAN_DIGESTS,
        json.dumps(example_gen_lib.span_digests(results, job.files), sort_keys=True),
      )

  def _convert(self, job: example_gen_lib.Job, output_dirs, quarantine_dir, results_dir) -> None:
    """Converts every unit in a Beam pipeline; each unit's result lands under `results_dir`."""
    for d in output_dirs.values():
      io_lib.makedirs(d)
    total_bytes = sum(io_lib.size(p) for p in job.files.paths)
    tf_compat.set_beam_pipeline_args(
      self,
      example_gen_lib.direct_runner_args(
        tf_compat.beam_pipeline_args(self), len(job.units), total_bytes
      ),
    )
    _LOG.info(
      "Converting %d CSV file(s) in %d unit(s) with column types %s.",
      len(job.files.files),
      len(job.units),
      job.options.column_types,
    )
    convert = csv_convert.ConvertUnitFn(
      job.options, job.split_plan, output_dirs, quarantine_dir, results_dir
    )
    io_lib.makedirs(results_dir)
    with self._make_beam_pipeline() as pipeline:
      units = pipeline | "Units" >> beam.Create(job.units)
      if len(job.units) > 1:  # Spreads the units over the runner's workers.
        units = units | "Distribute" >> beam.Reshuffle()
      _ = units | "Convert" >> beam.ParDo(convert)

  @staticmethod
  def _record(examples, exec_properties, outcome, column_types, spans) -> None:
    payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
    if payload:
      examples_utils.set_payload_format(examples, payload)
    file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
    if file_format:
      examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))
    for split, n in outcome.rows_per_split.items():
      examples.set_int_custom_property(properties.EXAMPLES_ROWS_PREFIX + split, n)
    examples.set_int_custom_property(properties.EXAMPLES_BAD_ROWS, outcome.bad_rows)
    examples.set_int_custom_property(properties.EXAMPLES_UNLABELED_ROWS, outcome.unlabeled_rows)
    if outcome.unlabeled_tokens:
      examples.set_string_custom_property(
        properties.EXAMPLES_UNLABELED_TOKENS, json.dumps(outcome.unlabeled_tokens)
      )
    examples.set_string_custom_property(properties.EXAMPLES_QUARANTINE, outcome.quarantine_uri)
    examples.set_string_custom_property(
      COLUMN_TYPES_PROPERTY, json.dumps(column_types, sort_keys=True)
    )
    examples.set_string_custom_property(properties.EXAMPLES_SPANS, json.dumps(list(spans)))
    if outcome.label_stats:
      examples.set_string_custom_property(
        properties.EXAMPLES_LABEL_STATS, json.dumps(outcome.label_stats, sort_keys=True)
      )
    _LOG.info(
      "Examples written: %s rows per split, %d quarantined.",
      outcome.rows_per_split,
      outcome.bad_rows,
    )
