"""Beam executor of the fast CSV ExampleGen: one Arrow-batched conversion per input file."""

from __future__ import annotations

import glob as glob_lib
import json
import os
from typing import Any

import apache_beam as beam
import tensorflow as tf
from absl import logging
from tfx import types
from tfx.components.example_gen import utils, write_split
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils

from components.example_gen import csv_lib
from components.example_gen.component_spec import (
  ALLOW_NON_FINITE_KEY,
  BLOCK_SIZE_KEY,
  DELIMITER_KEY,
  LABEL_KEY_KEY,
  MAX_BAD_ROW_FRACTION_KEY,
  ROLLING_SPANS_KEY,
  SCHEMA_PATH_KEY,
  UNRESOLVED_INPUT_CONFIG_KEY,
)

QUARANTINE_DIR = "Quarantine"
QUARANTINE_FILE = "bad_rows.csv"
_SUMMARY_DIR = ".unit_results"

# Custom properties recorded on the Examples artifact.
ROWS_PROPERTY_PREFIX = "num_rows_"
BAD_ROWS_PROPERTY = "num_bad_rows"
QUARANTINE_PROPERTY = "quarantine_uri"
COLUMN_TYPES_PROPERTY = "column_types"
SPANS_PROPERTY = "data_spans"


_MIN_CHUNK_BYTES = 4 << 20
_MAX_CHUNK_BYTES = 64 << 20


def _cpu_count() -> int:
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _with_parallel_direct_runner(args: list[str], num_units: int) -> list[str]:
  """Lets Beam's DirectRunner convert units on every core, unless told otherwise.

  Only applies when no other runner and no DirectRunner mode was chosen, and
  when there is more than one unit: worker processes cost a few seconds to start.
  """
  joined = " ".join(args)
  if num_units < 2 or ("--runner" in joined and "DirectRunner" not in joined):
    return args
  if "direct_running_mode" in joined:
    return args
  workers = min(_cpu_count(), num_units)
  return [*args, "--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]


class _ConvertUnit(beam.DoFn):
  """Converts one (index, file, fixed split) unit and emits its JSON result."""

  def __init__(self, options, plan_kwargs, output_dirs, quarantine_dir):
    self._options = options
    self._plan_kwargs = plan_kwargs
    self._output_dirs = output_dirs
    self._quarantine_dir = quarantine_dir

  def process(self, unit):
    index, (path, chunk, start, end), fixed = unit
    plan = csv_lib.SplitPlan(**{**self._plan_kwargs, "fixed": fixed})
    try:
      result = csv_lib.convert_file(
        csv_lib.Chunk(path, chunk, start, end),
        self._options,
        plan,
        self._output_dirs,
        f"data-{index:05d}",
        self._quarantine_dir,
      )
    except csv_lib.CsvInputError as e:
      # DirectRunner worker processes hand exceptions back as RuntimeErrors holding a
      # traceback, so a user error travels as data and `Do` raises it again.
      result = csv_lib.UnitResult(file=path, chunk=chunk, error=str(e))
    yield result.to_json()


def _glob(input_base: str, pattern: str) -> list[str]:
  full = os.path.join(input_base, pattern)
  if "://" in full:
    return sorted(tf.io.gfile.glob(full))
  return sorted(p for p in glob_lib.glob(full) if os.path.isfile(p))


def _window_patterns(unresolved: str, span: int, rolling: int) -> list[tuple[int, str]]:
  """Patterns of the last `rolling` spans up to `span`, oldest first."""
  if rolling <= 1 or utils.SPAN_SPEC not in unresolved:
    return []
  out = []
  for s in range(max(0, span - rolling + 1), span + 1):
    out.append((s, utils.get_pattern_for_span_version(unresolved, True, False, False, s, None)))
  return out


class Executor(BaseExampleGenExecutor):
  """Fast CSV ExampleGen executor.

  Keeps the ExampleGen contract (input/output configs, `Split-<name>/*.gz`,
  payload and file format properties) but replaces the per-record Beam path
  with one Arrow-batched conversion per input file.
  """

  def GetInputSourceToExamplePTransform(self) -> beam.PTransform:
    return _CsvToSerializedExamples

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    input_config = example_gen_pb2.Input()
    proto_utils.json_to_proto(
      exec_properties[standard_component_specs.INPUT_CONFIG_KEY], input_config
    )
    output_config = example_gen_pb2.Output()
    proto_utils.json_to_proto(
      exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], output_config
    )
    examples = artifact_utils.get_single_instance(
      output_dict[standard_component_specs.EXAMPLES_KEY]
    )
    split_names = utils.generate_output_split_names(input_config, output_config)
    input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]

    files, spans = self._plan_files(input_base, input_config, output_config, exec_properties)
    delimiter = exec_properties.get(DELIMITER_KEY) or ","
    types_ = self._column_types(files, exec_properties, delimiter)
    label_key = exec_properties.get(LABEL_KEY_KEY) or None
    if label_key and label_key not in types_:
      raise csv_lib.CsvInputError(
        f"label column {label_key!r} is not in the header of {files[0][0]}; pass one of "
        f"{sorted(types_)} as the label key."
      )
    options = csv_lib.ConvertOptions(
      column_types=types_,
      label_key=label_key,
      allow_non_finite=bool(exec_properties.get(ALLOW_NON_FINITE_KEY)),
      delimiter=delimiter,
      block_size=int(exec_properties.get(BLOCK_SIZE_KEY) or 8 << 20),
    )
    split_config = output_config.split_config
    partition = split_config.partition_feature_name or None
    if partition and partition not in types_:
      raise csv_lib.CsvInputError(
        f"partition_feature_name {partition!r} is not a column; use one of {sorted(types_)}."
      )
    plan_kwargs = {
      "names": tuple(split_names),
      "hash_buckets": tuple(s.hash_buckets for s in split_config.splits),
      "partition_column": partition,
    }
    examples.split_names = artifact_utils.encode_split_names(list(split_names))
    output_dirs = {s: artifact_utils.get_split_uri([examples], s) for s in split_names}
    for d in output_dirs.values():
      tf.io.gfile.makedirs(d)
    quarantine_dir = os.path.join(examples.uri, QUARANTINE_DIR)
    summary_prefix = os.path.join(examples.uri, _SUMMARY_DIR, "unit")

    units = self._plan_units(files)
    self._beam_pipeline_args = _with_parallel_direct_runner(
      list(self._beam_pipeline_args or []), len(units)
    )
    logging.info(
      "Converting %d CSV file(s) in %d unit(s) with column types %s.",
      len(files),
      len(units),
      types_,
    )
    with self._make_beam_pipeline() as pipeline:
      _ = (
        pipeline
        | "Units" >> beam.Create(units)
        | "Distribute" >> beam.Reshuffle()
        | "Convert" >> beam.ParDo(_ConvertUnit(options, plan_kwargs, output_dirs, quarantine_dir))
        | "WriteResults" >> beam.io.WriteToText(summary_prefix, file_name_suffix=".jsonl")
      )

    results = self._read_results(os.path.dirname(summary_prefix))
    self._finish(examples, results, split_names, quarantine_dir, exec_properties, types_, spans)

  @staticmethod
  def _plan_units(files):
    """Cuts files into (index, (path, chunk, start, end), fixed split) units of work."""
    sizes = [tf.io.gfile.stat(path).length for path, _ in files]
    # About four units per core keeps both cores busy without tiny units.
    target = min(_MAX_CHUNK_BYTES, max(_MIN_CHUNK_BYTES, sum(sizes) // (4 * _cpu_count())))
    units = []
    for path, fixed in files:
      for chunk in csv_lib.plan_chunks(path, target):
        units.append((len(units), (path, chunk.index, chunk.start, chunk.end), fixed))
    return units

  def _plan_files(self, input_base, input_config, output_config, exec_properties):
    """Lists (file, fixed split) pairs and the spans they cover."""
    span = int(exec_properties.get(utils.SPAN_PROPERTY_NAME) or 0)
    rolling = int(exec_properties.get(ROLLING_SPANS_KEY) or 1)
    units: list[tuple[str, str | None]] = []
    spans: set[int] = set()
    if output_config.split_config.splits:
      unresolved = exec_properties.get(UNRESOLVED_INPUT_CONFIG_KEY)
      patterns = []
      if unresolved and rolling > 1:
        raw = example_gen_pb2.Input()
        proto_utils.json_to_proto(unresolved, raw)
        patterns = _window_patterns(raw.splits[0].pattern, span, rolling)
      if not patterns:
        patterns = [(span, input_config.splits[0].pattern)]
      for s, pattern in patterns:
        files = _glob(input_base, pattern)
        if files:
          spans.add(s)
        units.extend((f, None) for f in files)
      if not units:
        raise csv_lib.CsvInputError(
          f"no CSV file matches {input_config.splits[0].pattern!r} under {input_base}; "
          "check the data root and the input pattern."
        )
    else:
      spans.add(span)
      for split in input_config.splits:
        files = _glob(input_base, split.pattern)
        if not files:
          raise csv_lib.CsvInputError(
            f"no CSV file matches {split.pattern!r} for split {split.name!r} under "
            f"{input_base}; check the input config."
          )
        units.extend((f, split.name) for f in files)
    return units, sorted(spans)

  def _column_types(self, files, exec_properties, delimiter) -> dict[str, str]:
    header = csv_lib.read_header(files[0][0], delimiter)
    schema_path = exec_properties.get(SCHEMA_PATH_KEY)
    if schema_path:
      from_schema = csv_lib.types_from_schema(schema_path)
      missing = [c for c in header if c not in from_schema]
      if missing:
        raise csv_lib.CsvInputError(
          f"schema {schema_path} has no type for columns {missing}; add them to the schema."
        )
      return {c: from_schema[c] for c in header}
    return csv_lib.infer_column_types([f for f, _ in files], delimiter)

  @staticmethod
  def _read_results(summary_dir: str) -> list[csv_lib.UnitResult]:
    results = []
    for path in sorted(tf.io.gfile.glob(os.path.join(summary_dir, "*"))):
      with tf.io.gfile.GFile(path) as f:
        results.extend(csv_lib.UnitResult.from_json(line) for line in f if line.strip())
    tf.io.gfile.rmtree(summary_dir)
    return results

  def _finish(self, examples, results, split_names, quarantine_dir, exec_properties, types_, spans):
    errors = sorted((r.file, r.chunk, r.error) for r in results if r.error)
    if errors:
      raise csv_lib.CsvInputError(errors[0][2])
    rows = sum(r.rows_read for r in results)
    bad = sum(r.bad_rows for r in results)
    per_split = {s: sum(r.rows_per_split.get(s, 0) for r in results) for s in split_names}
    max_bad = float(exec_properties.get(MAX_BAD_ROW_FRACTION_KEY) or 0.0)
    failing = rows == 0 or bad / rows > max_bad
    quarantine_uri = ""
    parts = sorted(r.quarantine_file for r in results if r.quarantine_file)
    if parts:
      # A failed execution's output folder is deleted by the launcher, so the bad
      # rows of a failing run are kept beside it for the user to inspect.
      quarantine_uri = (
        examples.uri.rstrip("/") + ".quarantine.csv"
        if failing
        else os.path.join(quarantine_dir, QUARANTINE_FILE)
      )
      rows_ = csv_lib.offset_line_numbers(results, list(csv_lib.iter_quarantine_rows(parts)))
      rows_.sort(key=lambda r: (r["file"], r["line"]))
      csv_lib.write_quarantine(quarantine_uri, rows_)
      for p in parts:
        tf.io.gfile.remove(p)
    if rows == 0:
      raise csv_lib.CsvInputError(
        f"the input has a header but no data rows ({', '.join(r.file for r in results)}); "
        "add rows or point the data root at the right files."
      )
    if failing:
      raise csv_lib.CsvInputError(
        f"{bad} of {rows} rows ({bad / rows:.2%}) are malformed, more than the allowed "
        f"{max_bad:.2%}; see {quarantine_uri} and fix those rows or raise the bad-row fraction."
      )
    if bad:
      logging.warning("Quarantined %d of %d rows in %s.", bad, rows, quarantine_uri)
    for split, n in per_split.items():
      if n == 0:
        raise csv_lib.CsvInputError(
          f"split {split!r} received no rows from {rows - bad} good rows; add data or change "
          "the split ratio."
        )

    payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
    if payload:
      examples_utils.set_payload_format(examples, payload)
    file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
    if file_format:
      examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))
    for split, n in per_split.items():
      examples.set_int_custom_property(ROWS_PROPERTY_PREFIX + split, n)
    examples.set_int_custom_property(BAD_ROWS_PROPERTY, bad)
    examples.set_string_custom_property(QUARANTINE_PROPERTY, quarantine_uri)
    examples.set_string_custom_property(COLUMN_TYPES_PROPERTY, json.dumps(types_, sort_keys=True))
    examples.set_string_custom_property(SPANS_PROPERTY, json.dumps(spans))
    logging.info("Examples written: %s rows per split, %d quarantined.", per_split, bad)


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(bytes)
def _CsvToSerializedExamples(
  pipeline: beam.Pipeline, exec_properties: dict[str, Any], split_pattern: str
) -> beam.pvalue.PCollection:
  """Per-record form for callers of the base `GenerateExamplesByBeam`.

  Slower than `Executor.Do`, which writes batches directly; rows that fail
  validation are dropped here, so prefer `Do`.
  """
  input_base = exec_properties[standard_component_specs.INPUT_BASE_KEY]
  files = _glob(input_base, split_pattern)
  delimiter = exec_properties.get(DELIMITER_KEY) or ","
  options = csv_lib.ConvertOptions(
    column_types=csv_lib.infer_column_types(files, delimiter),
    delimiter=delimiter,
    label_key=exec_properties.get(LABEL_KEY_KEY) or None,
  )

  def to_examples(path):
    names = csv_lib.read_header(path, delimiter)
    for raw in csv_lib.iter_raw_batches(path, names, options, lambda *_: None):
      verdict = csv_lib.convert_batch(raw, options)
      if verdict.table is not None:
        from tfx_bsl.coders import example_coder

        yield from example_coder.RecordBatchToExamples(verdict.table)

  return pipeline | "Files" >> beam.Create(files) | "ToExamples" >> beam.FlatMap(to_examples)
