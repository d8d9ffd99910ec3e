"""Builds run_summary.json from ML Metadata after a LocalDagRunner run."""

from __future__ import annotations

import functools
import json
from typing import Any

from ml_metadata import errors, metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.types import standard_component_specs

from components import storage
from components.artifact_files import variant_index
from components.data_gate import spec as gate_spec
from components.live_model import spec as live_model_spec
from components.optimizer import spec as optimizer_spec
from components.report import facts
from core import missing_values, properties, sources
from pipeline.definition import nodes

_STATES = {
  metadata_store_pb2.Execution.COMPLETE: "ran",
  metadata_store_pb2.Execution.CACHED: "cached",
  metadata_store_pb2.Execution.FAILED: "failed",
  metadata_store_pb2.Execution.RUNNING: "failed",  # killed or interrupted
  metadata_store_pb2.Execution.CANCELED: "failed",
}


def _prop(message, key: str):
  """Returns a custom property's Python value, or None."""
  if key not in message.custom_properties:
    return None
  v = message.custom_properties[key]
  kind = v.WhichOneof("value")
  if kind == "struct_value":
    from google.protobuf import json_format

    return json_format.MessageToDict(v.struct_value)
  return getattr(v, kind) if kind else None


def component_runs(
  store: metadata_store.MetadataStore, pipeline_name: str, since_ms: int
) -> list[dict[str, Any]]:
  """Executions of this pipeline started at or after `since_ms`, one per component.

  Returns:
    Dicts with name, state (ran, cached or failed), seconds and execution id,
    in start order.
  """
  runs = []
  for ctx in store.get_contexts_by_type("node"):
    if not ctx.name.startswith(pipeline_name + "."):
      continue
    node = ctx.name[len(pipeline_name) + 1 :]
    execs = [
      e for e in store.get_executions_by_context(ctx.id) if e.create_time_since_epoch >= since_ms
    ]
    if not execs:
      continue
    e = max(execs, key=lambda x: x.id)
    runs.append(
      {
        "name": node,
        "state": _STATES.get(e.last_known_state, "unknown"),
        "seconds": round((e.last_update_time_since_epoch - e.create_time_since_epoch) / 1000, 2),
        "execution_id": e.id,
        "_start": e.create_time_since_epoch,
      }
    )
  runs.sort(key=lambda r: (r["_start"], r["execution_id"]))
  for r in runs:
    del r["_start"]
  return runs


def _outputs(store, execution_id: int) -> list:
  events = store.get_events_by_execution_ids([execution_id])
  ids = [e.artifact_id for e in events if e.type in (e.OUTPUT, e.DECLARED_OUTPUT)]
  return store.get_artifacts_by_id(ids) if ids else []


def _output_of_type(store, execution_id: int, type_name: str):
  try:
    type_id = store.get_artifact_type(type_name).id
  except errors.NotFoundError:  # no artifact of that type was ever registered
    return None
  arts = [a for a in _outputs(store, execution_id) if a.type_id == type_id]
  # LiveModel has two Model outputs; its line describes the baseline.
  arts.sort(key=lambda a: "/baseline/" not in a.uri)
  return arts[0] if arts else None


def build_summary(
  store: metadata_store.MetadataStore, pipeline_name: str, since_ms: int, error: str | None
) -> dict[str, Any]:
  """Assembles status, per-component states, eval metrics and the push result."""
  runs = component_runs(store, pipeline_name, since_ms)
  by_name = {r["name"]: r for r in runs}

  def output(node: str, type_name: str):
    run = by_name.get(node)
    return _output_of_type(store, run["execution_id"], type_name) if run else None

  def getter(artifact):
    return None if artifact is None else (lambda k: _prop(artifact, k))

  evaluation = output(nodes.EVALUATOR, "ModelEvaluation")
  report = output(nodes.OPTIMIZER, "components.OptimizationReport")
  summary = facts.summary_of(
    status="failed" if error or any(r["state"] == "failed" for r in runs) else "succeeded",
    error=error,
    components=runs,
    model=getter(output(nodes.TRAINER, "Model")),
    blessing=getter(output(nodes.EVALUATOR, "ModelBlessing")),
    evaluation_uri=evaluation.uri if evaluation is not None else None,
    report_uri=report.uri if report is not None else None,
    pushed=getter(output(nodes.PUSHER, "PushedModel")),
    pushed_cached=(by_name.get(nodes.PUSHER) or {}).get("state") == "cached",
  )
  examples_gen = by_name.get(nodes.CSV_EXAMPLE_GEN)
  if examples_gen:
    # Unknown (None) when ExampleGen failed: nothing was read, new or not.
    summary["new_data"] = {"ran": True, "cached": False}.get(examples_gen["state"])
  unseen = _eval_only_classes(output(nodes.CSV_EXAMPLE_GEN, "Examples"), summary)
  if unseen:
    summary["eval_only_classes"] = unseen
  summary[sources.ARTIFACTS] = artifact_pointers(store, runs)
  return summary


def _eval_only_classes(examples, summary: dict[str, Any]) -> dict[str, int]:
  """Eval rows per label value the model has no class for (one the train split lacks): the
  model cannot answer it, so those rows count as wrong. {} for a regression or where unknown."""
  classes = summary.get("label_classes")
  if examples is None or not classes or summary.get("task") == "regression":
    return {}
  raw = _prop(examples, properties.EXAMPLES_LABEL_STATS)
  try:
    counts = (json.loads(raw) if raw else {}).get(properties.EVAL_SPLIT, {}).get("counts") or {}
  except (ValueError, AttributeError):
    return {}
  known = {str(c) for c in classes}
  return {
    value: n
    for value, n in sorted(counts.items())
    if value.strip() and value.strip() not in known and not missing_values.is_missing(value)
  }


# The artifacts the report page reads: role in run_summary.json -> (node, output key).
_POINTED_AT = {
  sources.EXAMPLES: (nodes.CSV_EXAMPLE_GEN, standard_component_specs.EXAMPLES_KEY),
  sources.STATISTICS: (nodes.STATISTICS_GEN, standard_component_specs.STATISTICS_KEY),
  sources.REFERENCE_STATISTICS: (nodes.LIVE_MODEL, live_model_spec.REFERENCE_STATISTICS_KEY),
  sources.GATE: (nodes.DATA_GATE, gate_spec.RESULT_KEY),
  sources.MODEL_RUN: (nodes.TRAINER, standard_component_specs.MODEL_RUN_KEY),
  sources.EVALUATION: (nodes.EVALUATOR, standard_component_specs.EVALUATION_KEY),
  sources.OPTIMIZED_MODEL: (nodes.OPTIMIZER, optimizer_spec.OPTIMIZED_MODEL_KEY),
}


def artifact_pointers(store, runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
  """Where the outputs the report page reads are, by role (`core.sources`).

  Returns:
    role -> {"uri", "properties"} (the artifact's custom properties as plain values), for
    the components of this run that wrote or reused (cached) that output.
  """
  by_name = {r["name"]: r for r in runs}
  out: dict[str, dict[str, Any]] = {}
  for role, (node, key) in _POINTED_AT.items():
    run = by_name.get(node)
    if run is None:
      continue
    events = store.get_events_by_execution_ids([run["execution_id"]])
    ids = [
      e.artifact_id
      for e in events
      if e.type in (e.OUTPUT, e.DECLARED_OUTPUT) and any(s.key == key for s in e.path.steps)
    ]
    for artifact in store.get_artifacts_by_id(ids[:1]) if ids else []:
      out[role] = sources.pointer(
        artifact.uri, artifact.custom_properties, functools.partial(_prop, artifact)
      )
  return out


def _examples_line(a) -> str:
  keys = (
    properties.examples_rows(properties.TRAIN_SPLIT),
    properties.examples_rows(properties.EVAL_SPLIT),
  )
  train, evals, bad, unlabeled = (
    _prop(a, k) for k in (*keys, properties.EXAMPLES_BAD_ROWS, properties.EXAMPLES_UNLABELED_ROWS)
  )
  if unlabeled:
    malformed = f" and {bad - unlabeled} bad" if bad - unlabeled else ""
    tokens = missing_values.label_tokens_note(
      json.loads(_prop(a, properties.EXAMPLES_UNLABELED_TOKENS) or "{}")
    )
    tokens = f" ({tokens})" if tokens else ""
    return (
      f"{train} train / {evals} eval rows, {unlabeled} without a label{malformed} left out{tokens}"
    )
  return f"{train} train / {evals} eval rows" + (f", {bad} quarantined" if bad else "")


def _model_line(a) -> str:
  metrics = json.loads(_prop(a, properties.EVAL_METRICS_PROPERTY) or "{}")
  shown = "".join(f", {k} {v:.4g}" for k, v in metrics.items() if k != "examples")
  task = _prop(a, properties.TASK_PROPERTY)
  return f"{_prop(a, properties.STRATEGY_PROPERTY)}" + (f", {task}" if task else "") + shown


def _optimized_line(a) -> str:
  names = json.loads(_prop(a, variant_index.KEY_BLESSED) or "[]")
  return f"{len(names)} variant(s) blessed: {', '.join(names)}" if names else "no variant blessed"


def _pushed_line(a) -> str:
  if _prop(a, properties.PUSHED_PROPERTY):
    return f"pushed version {_prop(a, properties.PUSHED_VERSION_PROPERTY)}"
  return f"not pushed: {(_prop(a, properties.PUSHED_REASON_PROPERTY) or '')[:60]}"


def _live_line(a) -> str:
  if _prop(a, properties.LIVE_AVAILABLE_PROPERTY):
    return f"baseline: live version {_prop(a, properties.LIVE_VERSION_PROPERTY)}"
  return f"no baseline ({_prop(a, properties.LIVE_REASON_PROPERTY) or 'nothing was live'})"


# Node id -> (output artifact type, one line from that artifact).
_RESULT_LINES = {
  nodes.CSV_EXAMPLE_GEN: ("Examples", _examples_line),
  nodes.SCHEMA_GEN: ("Schema", lambda a: "schema inferred"),
  nodes.TRANSFORM: ("TransformGraph", lambda a: "transform graph written"),
  nodes.TUNER: ("HyperParameters", lambda a: "best hyper-parameters chosen"),
  nodes.LIVE_MODEL: ("Model", _live_line),
  nodes.DATA_GATE: ("ExampleAnomalies", lambda a: _prop(a, properties.GATE_SUMMARY_PROPERTY) or ""),
  nodes.TRAINER: ("Model", _model_line),
  nodes.EVALUATOR: ("ModelBlessing", lambda a: "blessed" if _prop(a, "blessed") else "not blessed"),
  nodes.OPTIMIZER: ("components.OptimizedModel", _optimized_line),
  nodes.PUSHER: ("PushedModel", _pushed_line),
}


def result_line(
  store: metadata_store.MetadataStore, pipeline_name: str, node: str, since_ms: int
) -> str:
  """One line saying what a finished component produced, for the live table."""
  run = {r["name"]: r for r in component_runs(store, pipeline_name, since_ms)}.get(node)
  if run is None or node not in _RESULT_LINES:
    return ""
  type_name, line = _RESULT_LINES[node]
  artifact = _output_of_type(store, run["execution_id"], type_name)
  return line(artifact) if artifact is not None else ""


def reused_gate_facts(summary: dict[str, Any]) -> dict[str, Any] | None:
  """The night's gate facts (as the DataGate records them) from the gate this run reused from
  KFP's or TFX's cache: its report, read from its result artifact, and the spans and rows of
  the Examples it judged. None where the run has no such outputs or they cannot be read.

  A night whose DataGate comes from the cache records no gate facts of its own. After a night
  killed past its gate, `nights_lib.use_carried_gate` takes that night's; after one that failed
  later (its trainer ran out of disk), this reads them, so that a night that pushed on that gate
  shows it in its record (it showed none).
  """
  pointers = summary.get(sources.ARTIFACTS) or {}
  gate, examples = pointers.get(sources.GATE), pointers.get(sources.EXAMPLES)
  if not gate or not examples:
    return None
  path = f"{gate['uri'].rstrip('/')}/{properties.GATE_REPORT_FILE}"
  try:
    with storage.files(path).open(path, "r") as f:
      report = json.load(f)
  except (OSError, ValueError):
    return None
  values = examples.get("properties") or {}
  spans = values.get(properties.EXAMPLES_SPANS)
  spans = json.loads(spans) if isinstance(spans, str) else spans
  rows = {
    split: int(values[properties.examples_rows(split)])
    for split in (properties.TRAIN_SPLIT, properties.EVAL_SPLIT)
    if values.get(properties.examples_rows(split)) is not None
  }
  return {
    "report": report,
    "live_version": report.get("live_version"),
    "spans": sorted(int(s) for s in spans) if spans else None,
    "rows": rows,
  }
