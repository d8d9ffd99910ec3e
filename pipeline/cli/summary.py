"""Builds run_summary.json from ML Metadata after a LocalDagRunner run."""

from __future__ import annotations

import json
from typing import Any

from ml_metadata import errors, metadata_store
from ml_metadata.proto import metadata_store_pb2
from tfx.types import standard_component_specs

from components import defaults, properties
from components.data_gate import executor as gate_executor
from components.data_gate import spec as gate_spec
from components.distributed_trainer import constants as model_props
from components.evaluator import floor_lib
from components.evaluator import spec as evaluator_spec
from components.live_model import executor as live_model
from components.live_model import spec as live_model_spec
from components.optimizer import spec as optimizer_spec
from components.optimizer import variant_index
from components.pusher import spec as pusher_spec
from components.report import sources
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
  summary: dict[str, Any] = {
    "status": "failed" if error or any(r["state"] == "failed" for r in runs) else "succeeded",
    "error": error,
    "components": runs,
    "eval_metrics": {},
    "blessed": None,
    "validation": None,
    "pushed": None,
    "optimizer": None,
  }
  trainer = by_name.get(nodes.TRAINER)
  if trainer:
    _add_trainer_part(summary, store, trainer)
  evaluator = by_name.get(nodes.EVALUATOR)
  if evaluator:
    _add_evaluator_part(summary, store, evaluator)
  optimizer = by_name.get(nodes.OPTIMIZER)
  if optimizer:
    report = _output_of_type(store, optimizer["execution_id"], "components.OptimizationReport")
    if report is not None:
      summary["optimizer"] = read_optimizer_report(report.uri)
  pusher = by_name.get(nodes.PUSHER)
  if pusher:
    summary["pushed"] = _pushed_part(summary, store, pusher)
  examples_gen = by_name.get(nodes.CSV_EXAMPLE_GEN)
  if examples_gen:
    # Unknown (None) when ExampleGen failed: nothing was read, new or not.
    summary["new_data"] = {"ran": True, "cached": False}.get(examples_gen["state"])
  summary[sources.ARTIFACTS] = artifact_pointers(store, runs)
  return summary


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
  """Where the outputs the report page reads are, by role (`components.report.sources`).

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
      out[role] = {
        "uri": artifact.uri,
        "properties": {k: _prop(artifact, k) for k in artifact.custom_properties},
      }
  return out


def _add_trainer_part(summary: dict[str, Any], store, trainer: dict[str, Any]) -> None:
  """The strategy, task, classes, plan, hyperparameters, metrics and a profile not taken."""
  model = _output_of_type(store, trainer["execution_id"], "Model")
  if model is None:
    return
  summary["strategy"] = {
    k: _prop(model, k)
    for k in (
      model_props.STRATEGY_PROPERTY,
      model_props.NUM_REPLICAS_PROPERTY,
      model_props.STRATEGY_REASON_PROPERTY,
      model_props.STRATEGY_CHOSEN_BY_PROPERTY,
    )
  }
  summary["task"] = _prop(model, model_props.TASK_PROPERTY)
  classes = _prop(model, model_props.LABEL_CLASSES_PROPERTY)
  summary["label_classes"] = json.loads(classes) if classes else None
  plan = _prop(model, model_props.TRAINING_PLAN_PROPERTY)
  summary["training_plan"] = json.loads(plan) if plan else None
  hparams = _prop(model, model_props.HPARAMS_PROPERTY)
  summary["hparams"] = json.loads(hparams) if hparams else None
  skipped = _prop(model, model_props.PROFILE_SKIPPED_PROPERTY)
  if skipped:
    summary["profile_skipped"] = skipped
  for key, value in json.loads(_prop(model, model_props.EVAL_METRICS_PROPERTY) or "{}").items():
    if key != "examples":
      summary["eval_metrics"][f"trainer_{key}"] = value


def _add_evaluator_part(summary: dict[str, Any], store, evaluator: dict[str, Any]) -> None:
  """The blessing, the floor it was judged by, TFMA's metrics and its validation result."""
  blessing = _output_of_type(store, evaluator["execution_id"], "ModelBlessing")
  evaluation = _output_of_type(store, evaluator["execution_id"], "ModelEvaluation")
  if blessing is not None:
    summary["blessed"] = bool(_prop(blessing, "blessed"))
    skipped = _prop(blessing, evaluator_spec.BASELINE_SKIPPED_PROPERTY)
    if skipped:
      summary["baseline_skipped"] = skipped
    if _prop(blessing, floor_lib.FLOOR_REASON_PROPERTY):
      summary["floor"] = {
        "value": _prop(blessing, floor_lib.FLOOR_PROPERTY),
        "reason": _prop(blessing, floor_lib.FLOOR_REASON_PROPERTY),
      }
  if evaluation is not None:
    summary["eval_metrics"].update(read_tfma_metrics(evaluation.uri))
    summary["validation"] = read_tfma_validation(evaluation.uri)


def _pushed_part(summary: dict[str, Any], store, pusher: dict[str, Any]) -> dict | None:
  """What the Pusher did, and why not when it did not (the Evaluator's reason first)."""
  pushed = _output_of_type(store, pusher["execution_id"], "PushedModel")
  if pushed is None:
    return None
  if pusher["state"] == "cached":
    # Same model, same blessing, same variants as a run that already pushed (or declined).
    was = (
      _version(_prop(pushed, pusher_spec.PUSHED_VERSION_PROPERTY))
      if _prop(pushed, pusher_spec.PUSHED_PROPERTY)
      else None
    )
    return {
      "pushed": False,
      "version": None,
      "path": None,
      "reason": "nothing new to push: the Pusher's inputs are unchanged since an earlier run"
      + (f" (which pushed version {was})" if was else ""),
    }
  result = {
    "pushed": bool(_prop(pushed, pusher_spec.PUSHED_PROPERTY)),
    "version": _version(_prop(pushed, pusher_spec.PUSHED_VERSION_PROPERTY)),
    "path": _prop(pushed, pusher_spec.PUSHED_DESTINATION_PROPERTY),
    "reason": _prop(pushed, pusher_spec.PUSHED_REASON_PROPERTY),
  }
  failures = (summary["validation"] or {}).get("failures")
  if not result["pushed"] and summary["blessed"] is False and failures:
    # The Pusher only sees the blessing; the Evaluator's validation result says why.
    result["pusher_reason"] = result["reason"]
    result["reason"] = "the Evaluator did not bless the model: " + "; ".join(failures)
    result["reason"] += _imbalance_hint(summary)
  return result


# A binary eval split this much one class leaves accuracy little room above always answering it.
IMBALANCED_SHARE = 0.9


def _imbalance_hint(summary: dict[str, Any]) -> str:
  """Why an automatic accuracy floor may be the wrong test for a binary label of rare events."""
  floor = summary.get("floor") or {}
  auc = summary["eval_metrics"].get("auc")
  if summary.get("task") != "binary" or auc is None or floor.get("value") is None:
    return ""
  if not str(floor.get("reason", "")).startswith(floor_lib.AUTO_ACCURACY):
    return ""
  majority = float(floor["value"]) - defaults.AUTO_FLOOR_MARGIN
  if majority < IMBALANCED_SHARE:
    return ""
  return (
    f". About {majority:.0%} of the eval rows are one class, so accuracy can hardly beat always "
    f"answering it; if the model's scores are what you use (AUC {auc:.3g}), set the floor "
    "with --min-accuracy"
  )


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
    return f"{train} train / {evals} eval rows, {unlabeled} without a label{malformed} left out"
  return f"{train} train / {evals} eval rows" + (f", {bad} quarantined" if bad else "")


def _model_line(a) -> str:
  metrics = json.loads(_prop(a, model_props.EVAL_METRICS_PROPERTY) or "{}")
  shown = "".join(f", {k} {v:.4g}" for k, v in metrics.items() if k != "examples")
  task = _prop(a, model_props.TASK_PROPERTY)
  return f"{_prop(a, model_props.STRATEGY_PROPERTY)}" + (f", {task}" if task else "") + shown


def _optimized_line(a) -> str:
  names = json.loads(_prop(a, variant_index.KEY_BLESSED) or "[]")
  return f"{len(names)} variant(s) blessed: {', '.join(names)}" if names else "no variant blessed"


def _pushed_line(a) -> str:
  if _prop(a, pusher_spec.PUSHED_PROPERTY):
    return f"pushed version {_prop(a, pusher_spec.PUSHED_VERSION_PROPERTY)}"
  return f"not pushed: {(_prop(a, pusher_spec.PUSHED_REASON_PROPERTY) or '')[:60]}"


def _live_line(a) -> str:
  if _prop(a, live_model.AVAILABLE_PROPERTY):
    return f"baseline: live version {_prop(a, live_model.LIVE_VERSION_PROPERTY)}"
  return f"no baseline ({_prop(a, live_model.REASON_PROPERTY) or 'nothing was live'})"


# Node id -> (output artifact type, one line from that artifact).
_RESULT_LINES = {
  nodes.CSV_EXAMPLE_GEN: ("Examples", _examples_line),
  nodes.SCHEMA_GEN: ("Schema", lambda a: "schema inferred"),
  nodes.TRANSFORM: ("TransformGraph", lambda a: "transform graph written"),
  nodes.TUNER: ("HyperParameters", lambda a: "best hyper-parameters chosen"),
  nodes.LIVE_MODEL: ("Model", _live_line),
  nodes.DATA_GATE: ("ExampleAnomalies", lambda a: _prop(a, gate_executor.SUMMARY_PROPERTY) or ""),
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


def _version(value):
  """Pushed versions are numeric folder names; report them as integers."""
  return int(value) if isinstance(value, str) and value.isdigit() else value


def read_tfma_metrics(uri: str) -> dict[str, float]:
  """Overall-slice metrics of the candidate model in a TFMA evaluation folder (the diffs
  against the baseline as `<name>_diff_vs_baseline`)."""
  from components.evaluator import evaluation_lib

  metrics = evaluation_lib.read_overall_metrics(uri)
  out = dict(metrics[evaluation_lib.CANDIDATE])
  out.update({f"{k}_{evaluation_lib.DIFF}": v for k, v in metrics[evaluation_lib.DIFF].items()})
  return out


def read_tfma_validation(uri: str) -> dict[str, Any] | None:
  """Whether the candidate passed the Evaluator's thresholds and, if not, why.

  Args:
    uri: The ModelEvaluation artifact folder.

  Returns:
    ``{"ok": bool, "failures": [one sentence per failed check]}``, or None when the
    evaluation holds no validation result.
  """
  import os

  import tensorflow as tf
  import tensorflow_model_analysis as tfma
  from google.protobuf import text_format

  if not tf.io.gfile.glob(os.path.join(uri, "validations*")):
    return None
  result = tfma.load_validation_result(uri)
  failures = []
  for per_slice in result.metric_validations_per_slice:
    columns = [
      f"{k.column}={getattr(k, k.WhichOneof('kind'))}"
      for k in per_slice.slice_key.single_slice_keys
    ]
    where = f" (slice {', '.join(columns)})" if columns else ""
    failures.extend(_failure_text(f) + where for f in per_slice.failures)
  failures.extend(
    f"no examples in slice {text_format.MessageToString(m, as_one_line=True) or 'overall'}"
    for m in result.missing_slices
  )
  if not result.validation_ok and not failures:
    failures.append("TFMA validation failed without a metric failure; see validations.tfrecord")
  return {"ok": bool(result.validation_ok), "failures": failures}


def _failure_text(failure) -> str:
  """One sentence for a failed TFMA threshold, naming the metric, its value and the bound."""
  import tensorflow_model_analysis as tfma

  name = failure.metric_key.name
  value = failure.metric_value.double_value.value
  threshold = failure.metric_threshold
  if threshold.HasField("value_threshold"):
    bounds = threshold.value_threshold
    parts = []
    if bounds.HasField("lower_bound"):
      parts.append(f"lower bound {bounds.lower_bound.value:.4g}")
    if bounds.HasField("upper_bound"):
      parts.append(f"upper bound {bounds.upper_bound.value:.4g}")
    return f"{name} = {value:.4g} is outside the value threshold ({', '.join(parts)})"
  change = threshold.change_threshold
  higher = change.direction == tfma.MetricDirection.HIGHER_IS_BETTER
  parts = []
  if change.HasField("absolute"):
    parts.append(f"absolute {change.absolute.value:+.4g}")
  if change.HasField("relative"):
    parts.append(f"relative {change.relative.value:+.4g}")
  better = "higher" if higher else "lower"
  return (
    f"{name} changed by {value:+.4g} against the last blessed model, beyond the change "
    f"threshold ({', '.join(parts)}; {better} is better)"
  )


def read_optimizer_report(uri: str) -> dict[str, Any] | None:
  """The Optimizer's report.json, or None if it is not there."""
  import os

  import tensorflow as tf

  path = os.path.join(uri, "report.json")
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)
