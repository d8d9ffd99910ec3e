"""What a run's artifacts say, as the plain values run_summary.json and the report page hold.

Each function takes what one artifact offers: a property getter (`name -> value or None`, from
an ML Metadata artifact or a TFX one) and, where files are read, the artifact's folder. The
local summary (`pipeline/cli/summary.py`, from ML Metadata) and the Kubeflow report step
(`components.report.executor`, from its input artifacts) share them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from components.artifact_files import evaluation_metrics
from core import defaults, floors, properties

Getter = Callable[[str], Any]
# A binary eval split this much one class leaves accuracy little room above always answering it.
IMBALANCED_SHARE = 0.9
# From this majority share on, the hint is given too when the model's scores rank the rows
# (AUC at least RANKING_AUC) and still miss the floor: carData's Arrests, 84% released, AUC 0.74,
# accuracy 0.834 against a 0.848 floor.
RANKED_SHARE = 0.8
RANKING_AUC = 0.6


def tfx_getter(artifact) -> Getter:
  """The property getter of a TFX artifact: custom properties as Python values."""

  def get(name: str) -> Any:
    if not artifact.has_custom_property(name):
      return None
    value = artifact.get_custom_property(name)
    return value.to_dict() if hasattr(value, "to_dict") else value

  return get


def summary_of(
  *,
  status: str,
  error: str | None,
  components: list[dict[str, Any]],
  model: Getter | None,
  blessing: Getter | None,
  evaluation_uri: str | None,
  report_uri: str | None,
  pushed: Getter | None,
  pushed_cached: bool = False,
) -> dict[str, Any]:
  """The summary's facts from the artifacts a run left, each None where its step did not run.

  Args:
    status, error, components: how the run went, by the caller's lights.
    model: the trainer's Model's property getter.
    blessing: the Evaluator's ModelBlessing's.
    evaluation_uri: the Evaluator's ModelEvaluation folder.
    report_uri: the Optimizer's OptimizationReport folder.
    pushed: the Pusher's PushedModel's.
    pushed_cached: whether the Pusher's execution was an earlier run's (cached).
  """
  summary: dict[str, Any] = {
    "status": status,
    "error": error,
    "components": components,
    "eval_metrics": {},
    "blessed": None,
    "validation": None,
    "pushed": None,
    "optimizer": None,
  }
  if model is not None:
    trainer = trainer_facts(model)
    summary["eval_metrics"].update(trainer.pop("trainer_metrics"))
    summary.update(trainer)
  if blessing is not None:
    summary.update(blessing_facts(blessing))
  if evaluation_uri is not None:
    summary["eval_metrics"].update(read_tfma_metrics(evaluation_uri))
    summary["validation"] = evaluation_metrics.read_validation(evaluation_uri)
  if report_uri is not None:
    summary["optimizer"] = read_optimizer_report(report_uri)
  if pushed is not None:
    summary["pushed"] = pushed_facts(pushed, pushed_cached, summary)
  return summary


def trainer_facts(prop: Getter) -> dict[str, Any]:
  """From the trainer's Model: strategy, task, classes, plan, hyper-parameters, metrics."""
  out: dict[str, Any] = {
    "strategy": {
      k: prop(k)
      for k in (
        properties.STRATEGY_PROPERTY,
        properties.NUM_REPLICAS_PROPERTY,
        properties.STRATEGY_REASON_PROPERTY,
        properties.STRATEGY_CHOSEN_BY_PROPERTY,
      )
    },
    "task": prop(properties.TASK_PROPERTY),
  }
  for key, name in (
    ("label_classes", properties.LABEL_CLASSES_PROPERTY),
    ("training_plan", properties.TRAINING_PLAN_PROPERTY),
    ("hparams", properties.HPARAMS_PROPERTY),
  ):
    raw = prop(name)
    out[key] = json.loads(raw) if raw else None
  skipped = prop(properties.PROFILE_SKIPPED_PROPERTY)
  if skipped:
    out["profile_skipped"] = skipped
  metrics = json.loads(prop(properties.EVAL_METRICS_PROPERTY) or "{}")
  out["trainer_metrics"] = {f"trainer_{k}": v for k, v in metrics.items() if k != "examples"}
  return out


def blessing_facts(prop: Getter) -> dict[str, Any]:
  """From the Evaluator's ModelBlessing: blessed, the floor it was judged by, a skipped baseline."""
  out: dict[str, Any] = {"blessed": bool(prop("blessed"))}
  skipped = prop(properties.BASELINE_SKIPPED_PROPERTY)
  if skipped:
    out["baseline_skipped"] = skipped
  check = prop(properties.QUANTITY_CHECK_PROPERTY)
  if check:
    out["quantity_check"] = check
  if prop(properties.FLOOR_REASON_PROPERTY):
    out["floor"] = {
      "value": prop(properties.FLOOR_PROPERTY),
      "reason": prop(properties.FLOOR_REASON_PROPERTY),
    }
  return out


def pushed_facts(prop: Getter, cached: bool, summary: dict[str, Any]) -> dict[str, Any]:
  """What the Pusher did, and why not when it did not (the Evaluator's reason first).

  Args:
    prop: the PushedModel's property getter.
    cached: whether the Pusher's execution was cached (an earlier run's push).
    summary: the summary so far (its blessing, validation and metrics explain a refusal).
  """
  if cached:
    # Same model, same blessing, same variants as a run that already pushed (or declined).
    was = (
      _version(prop(properties.PUSHED_VERSION_PROPERTY))
      if prop(properties.PUSHED_PROPERTY)
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
    "pushed": bool(prop(properties.PUSHED_PROPERTY)),
    "version": _version(prop(properties.PUSHED_VERSION_PROPERTY)),
    "path": prop(properties.PUSHED_DESTINATION_PROPERTY),
    "reason": prop(properties.PUSHED_REASON_PROPERTY),
  }
  failures = (summary.get("validation") or {}).get("failures")
  if not result["pushed"] and summary.get("blessed") is False and failures:
    # The Pusher only sees the blessing; the Evaluator's validation result says why.
    result["pusher_reason"] = result["reason"]
    result["reason"] = "the Evaluator did not bless the model: " + "; ".join(failures)
    result["reason"] += imbalance_hint(summary)
  return result


def imbalance_hint(summary: dict[str, Any]) -> str:
  """Why an automatic accuracy floor may be the wrong test for a binary label of rare events."""
  floor = summary.get("floor") or {}
  auc = (summary.get("eval_metrics") or {}).get("auc")
  if summary.get("task") != "binary" or auc is None or floor.get("value") is None:
    return ""
  if not str(floor.get("reason", "")).startswith(floors.AUTO_ACCURACY):
    return ""
  majority = float(floor["value"]) - defaults.AUTO_FLOOR_MARGIN
  ranked = majority >= RANKED_SHARE and float(auc) >= RANKING_AUC
  if majority < IMBALANCED_SHARE and not ranked:
    return ""
  return (
    f". About {majority:.0%} of the eval rows are one class, so accuracy can hardly beat always "
    f"answering it; if the model's scores are what you use (AUC {auc:.3g}), set the floor "
    "with --min-accuracy"
  )


def _version(value):
  """Pushed versions are numeric folder names; report them as integers."""
  return int(value) if isinstance(value, str) and value.isdigit() else value


def read_tfma_metrics(uri: str) -> dict[str, float]:
  """Overall-slice metrics of the candidate model in a TFMA evaluation folder (the diffs
  against the baseline as `<name>_diff_vs_baseline`)."""
  metrics = evaluation_metrics.read_overall_metrics(uri)
  out = dict(metrics[evaluation_metrics.CANDIDATE])
  out.update(
    {f"{k}_{evaluation_metrics.DIFF}": v for k, v in metrics[evaluation_metrics.DIFF].items()}
  )
  return out


def read_optimizer_report(uri: str) -> dict[str, Any] | None:
  """The Optimizer's report.json, or None if it is not there."""
  import os

  import tensorflow as tf

  path = os.path.join(uri, "report.json")
  if not tf.io.gfile.exists(path):
    return None
  with tf.io.gfile.GFile(path) as f:
    return json.load(f)
