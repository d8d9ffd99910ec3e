"""Executor of DataGate: tonight's statistics against the live version's, then a verdict."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from components import columnar, model_contract
from components.data_gate import gate_lib, leak_check, live_check, spec
from components.data_gate import report as gate_report
from components.data_gate import thresholds as th
from components.nights import nights_lib
from components.serving import history, manifest
from components.serving import nights as nights_log
from core import properties, tasks
from core.errors import UserInputError

_LOG = logging.getLogger(__name__)

ANOMALIES_FILE = "SchemaDiff.pb"
STATISTICS_FILE = "FeatureStats.pb"
# The split compared (the largest, and the one the model learns from) and the one the live
# model is scored on.


class DataGateError(UserInputError):
  """The gate stopped the night; the message names each change and how to accept it.

  Attributes:
    report: the gate's report (JSON).
  """

  def __init__(self, message: str, report: dict[str, Any]):
    super().__init__(message)
    self.report = report


def how_to_accept(serving_dir: str, model_name: str) -> str:
  """The end of a stopped night's line: the two ways to accept the change."""
  return (
    "accept it for the next run with --accept-changes {columns}, or for every night until "
    f"another version goes live with: python pipeline/schedule.py local accept --serving-dir "
    f"{serving_dir} --model-name {model_name} --columns {{columns}} --reason '...'"
  )


class Executor(base_executor.BaseExecutor):
  """Compares, writes the report, records the night's facts, and fails when the gate stops."""

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    self._log_startup(input_dict, output_dict, exec_properties)
    result = artifact_utils.get_single_instance(output_dict[spec.RESULT_KEY])
    examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
    serving_dir, model_name = (
      exec_properties[properties.SERVING_DIR_KEY],
      exec_properties[properties.MODEL_NAME_KEY],
    )
    reference = artifact_utils.get_single_instance(input_dict[spec.REFERENCE_STATISTICS_KEY])
    live = (
      reference.get_int_custom_property(properties.LIVE_VERSION_PROPERTY)
      if properties.live_available(reference)
      else None
    )
    report = self._report(input_dict, exec_properties, live)
    self._write(result, report)
    nights_lib.record_step(
      serving_dir,
      model_name,
      nights_lib.GATE_STEP,
      {
        "report": report.to_json(),
        "live_version": live,
        "spans": _spans(examples),
        "rows": _rows(examples),
      },
      nights_lib.night_id(exec_properties),
    )
    for finding in report.findings:
      _LOG.info("DataGate: %s%s", finding.text, " (accepted)" if finding.accepted else "")
    if not report.passed:
      message = gate_report.stop_message(report, how_to_accept(serving_dir, model_name))
      raise DataGateError(message, report.to_json())
    _LOG.info(
      "DataGate: passed%s.", "" if report.compared else f" without comparing ({report.reason})"
    )

  def _report(
    self, input_dict: dict[str, list[types.Artifact]], props: dict[str, Any], live: int | None
  ) -> gate_report.GateReport:
    reference = artifact_utils.get_single_instance(input_dict[spec.REFERENCE_STATISTICS_KEY])
    thresholds = th.Thresholds.from_json(props.get(spec.THRESHOLDS_KEY))
    if not properties.live_available(reference):
      reason = reference.get_string_custom_property(properties.LIVE_REASON_PROPERTY)
      report = gate_report.not_compared(reason or "nothing was live", live)
      baseline = artifact_utils.get_single_instance(input_dict[spec.BASELINE_KEY])
      if not properties.live_available(baseline):  # Nothing live: a first night.
        for found in _first_night_leaks(input_dict, props, thresholds):
          report = gate_report.with_finding(report, found)
      return report
    accepted = json.loads(props.get(spec.ACCEPT_KEY) or "[]")
    recorded = history.acceptances(
      props[properties.SERVING_DIR_KEY], props[properties.MODEL_NAME_KEY], live
    )
    accepted += [n for n in recorded if n not in accepted]
    examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
    label_key, task = props[spec.LABEL_KEY_KEY], props[spec.TASK_KEY]
    training = json.loads(
      reference.get_string_custom_property(properties.LIVE_TRAINING_DATA_PROPERTY) or "{}"
    )
    tonight = gate_lib.Night(
      _statistics(input_dict[spec.STATISTICS_KEY]),
      _schema(input_dict[spec.SCHEMA_KEY]),
      _label_counts(_label_stats(examples)),
      _span_digests(examples),
    )
    before = gate_lib.Night(
      _statistics([reference]),
      _schema(input_dict[spec.REFERENCE_SCHEMA_KEY]),
      _label_counts(training.get(manifest.TRAINING_LABEL_STATS_FIELD)),
      training.get(manifest.TRAINING_SPAN_DIGESTS_FIELD),
    )
    baseline = artifact_utils.get_single_instance(input_dict[spec.BASELINE_KEY])
    contract = model_contract.read_contract(path_utils.serving_model_dir(baseline.uri))
    report = gate_lib.evaluate(
      tonight,
      before,
      live_version=live,
      label_key=label_key,
      classification=task != tasks.REGRESSION,
      read_columns=_read_columns(contract, before.schema, props),
      thresholds=thresholds,
      accepted=accepted,
      history=_gate_history(props),
      earlier=_earlier_span_digests(props, live),
    )
    report = gate_report.with_acceptances(report, recorded)
    for found in _leak_findings(examples, tonight, before, props, thresholds):
      report = gate_report.with_finding(report, found)
    if properties.live_available(baseline):
      found = live_check.finding(
        path_utils.serving_model_dir(baseline.uri),
        _split_files(examples, properties.EVAL_SPLIT),
        label_key=label_key,
        classification=task != tasks.REGRESSION,
        preprocessing=contract is not None,
        tonight_types=model_contract.schema_types(tonight.schema),
        baseline_types=model_contract.schema_types(before.schema),
        thresholds=thresholds,
        live_version=live,
      )
      if found is not None:
        report = gate_report.with_finding(report, found)
    return report

  def _write(self, result: types.Artifact, report: gate_report.GateReport) -> None:
    result.split_names = artifact_utils.encode_split_names([properties.TRAIN_SPLIT])
    fileio.makedirs(result.uri)
    io_utils.write_string_file(
      os.path.join(result.uri, properties.GATE_REPORT_FILE), json.dumps(report.to_json(), indent=2)
    )
    if report.anomalies is not None:
      split = artifact_utils.get_split_uri([result], properties.TRAIN_SPLIT)
      fileio.makedirs(split)
      io_utils.write_bytes_file(
        os.path.join(split, ANOMALIES_FILE), report.anomalies.SerializeToString()
      )
    result.set_int_custom_property(properties.GATE_PASSED_PROPERTY, int(report.passed))
    result.set_string_custom_property(properties.GATE_SUMMARY_PROPERTY, report.short())


def _gate_history(props: dict[str, Any]) -> list[dict[str, Any] | None]:
  """The gate reports of the nights log, oldest first: each column's normal drift (`bands`).

  A night that read the same spans against the same live version as a later one (a rerun, a
  span's file copied again) measured the same drift: only the latest counts, or five re-reads
  of one span would make a band of five zeros that stops the next honest span.
  """
  records = nights_log.read_records(
    props[properties.SERVING_DIR_KEY], props[properties.MODEL_NAME_KEY]
  )
  latest: dict[Any, int] = {}
  for i, record in enumerate(records):
    gate, spans = record.get("gate"), record.get("spans")
    same = (tuple(spans), gate.get("live_version")) if spans and isinstance(gate, dict) else i
    latest[same] = i
  return [records[i].get("gate") for i in sorted(latest.values())]


def _statistics(artifacts: list[types.Artifact]):
  import tensorflow_data_validation as tfdv

  uri = artifact_utils.get_split_uri(artifacts, properties.TRAIN_SPLIT)
  return tfdv.load_stats_binary(os.path.join(uri, STATISTICS_FILE)).datasets[0]


def _schema(artifacts: list[types.Artifact]):
  uri = artifact_utils.get_single_uri(artifacts)
  return model_contract.read_schema(model_contract.schema_file(uri))


def _label_stats(examples: types.Artifact) -> dict[str, Any] | None:
  if not examples.has_custom_property(properties.EXAMPLES_LABEL_STATS):
    return None
  return json.loads(examples.get_string_custom_property(properties.EXAMPLES_LABEL_STATS))


# Rows of the train split a first night scores each column on (`_first_night_leaks`).
_FIRST_NIGHT_ROWS = 100_000


def _first_night_leaks(
  input_dict: dict[str, list[types.Artifact]], props: dict[str, Any], thresholds: th.Thresholds
) -> list[gate_report.Finding]:
  """Notes of the columns that alone give the label away, on a night with nothing live: every
  column is new then, and a leak (a cause of death beside a death flag) would otherwise reach
  the first version unremarked, scoring 1 on the eval split."""
  examples = artifact_utils.get_single_instance(input_dict[spec.EXAMPLES_KEY])
  schema = _schema(input_dict[spec.SCHEMA_KEY])
  label_key, excluded = props[spec.LABEL_KEY_KEY], _excluded(props)
  names = sorted(f.name for f in schema.feature if f.name != label_key and f.name not in excluded)
  return _scored_alone(examples, props, thresholds, names, _FIRST_NIGHT_ROWS, first_night=True)


def _leak_findings(
  examples: types.Artifact,
  tonight: gate_lib.Night,
  before: gate_lib.Night,
  props: dict[str, Any],
  thresholds: th.Thresholds,
) -> list[gate_report.Finding]:
  """Findings for columns new tonight that give the label away (`leak_check`)."""
  label_key = props[spec.LABEL_KEY_KEY]
  added = leak_check.new_columns(tonight.schema, before.schema, label_key, _excluded(props))
  return _scored_alone(examples, props, thresholds, added)


def _scored_alone(
  examples: types.Artifact,
  props: dict[str, Any],
  thresholds: th.Thresholds,
  names: list[str],
  max_rows: int | None = None,
  first_night: bool = False,
) -> list[gate_report.Finding]:
  """`leak_check.findings` of the columns `names`, read from the train split's columnar copy
  (its first `max_rows` rows, or all); none where the split has no copy (a distributed Beam
  runner)."""
  if not names:
    return []
  files = columnar.complete_files(_split_files(examples, properties.TRAIN_SPLIT), fileio.exists)
  if files is None:
    _LOG.info("DataGate: no columnar copy of the train split; new columns not scored alone.")
    return []
  label_key = props[spec.LABEL_KEY_KEY]
  return leak_check.findings(
    leak_check.read_columns(files, [label_key, *names], max_rows=max_rows),
    label_key=label_key,
    new_columns=names,
    classification=props[spec.TASK_KEY] != tasks.REGRESSION,
    thresholds=thresholds,
    first_night=first_night,
  )


def _excluded(props: dict[str, Any]) -> set[str]:
  """The columns left out of the model (--exclude-columns)."""
  return set(json.loads(props.get(spec.EXCLUDE_COLUMNS_KEY) or "[]"))


def _earlier_span_digests(props: dict[str, Any], live: int | None) -> dict[int, Any]:
  """version -> the span digests it was trained on, for each version kept but the live one."""
  from components.serving import paths, store

  folder = store.folder(
    paths.model_dir(props[properties.SERVING_DIR_KEY], props[properties.MODEL_NAME_KEY])
  )
  out = {}
  for version in folder.versions():
    if version != live:
      training = manifest.training_data(folder.manifest(version) or {})
      out[version] = training.get(manifest.TRAINING_SPAN_DIGESTS_FIELD) or {}
  return out


def _span_digests(examples: types.Artifact) -> dict[str, Any] | None:
  if not examples.has_custom_property(properties.EXAMPLES_SPAN_DIGESTS):
    return None
  return json.loads(examples.get_string_custom_property(properties.EXAMPLES_SPAN_DIGESTS))


def _label_counts(label_stats: dict[str, Any] | None) -> dict[str, int] | None:
  """The train split's label counts, when the ExampleGen counted every value."""
  split = (label_stats or {}).get(properties.TRAIN_SPLIT) or {}
  if split.get("overflow") or not split.get("counts"):
    return None
  return {str(k): int(v) for k, v in split["counts"].items()}


def _read_columns(contract, reference_schema, props: dict[str, Any]) -> list[str]:
  """The columns the live model reads: its contract's, or every column but the excluded."""
  if contract is not None:
    return [c.name for c in model_contract.contract_columns(contract)]
  excluded = _excluded(props)
  return [f.name for f in reference_schema.feature if f.name not in excluded]


def _split_files(examples: types.Artifact, split: str) -> list[str]:
  uri = artifact_utils.get_split_uri([examples], split)
  return sorted(fileio.glob(io_utils.all_files_pattern(uri)))


def _spans(examples: types.Artifact) -> list[int] | None:
  if examples.has_custom_property(properties.EXAMPLES_SPANS):
    raw = examples.get_custom_property(properties.EXAMPLES_SPANS)
    return sorted(int(x) for x in (json.loads(raw) if isinstance(raw, str) else raw) or [])
  return [int(examples.span)] if examples.has_property("span") else None


def _rows(examples: types.Artifact) -> dict[str, int]:
  from core import properties

  out = {}
  for split in artifact_utils.decode_split_names(examples.split_names):
    key = properties.examples_rows(split)
    if examples.has_custom_property(key):
      out[split] = int(examples.get_int_custom_property(key))
  return out
