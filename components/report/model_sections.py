"""The report page's model sections: training, evaluation, the Optimizer and the push."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.report import charts
from components.report.page import Html, code, esc, fact, figure, note, pairs, section, table, tag

# Keys of an epoch record that are not metrics.
_EPOCH_KEYS = {"event", "epoch", "epochs", "attempt", "loss", "lr", "learning_rate"}


def _member_rows(
  members: Sequence[Mapping[str, Any]], linear: Mapping[str, Any] | None = None
) -> list[tuple[str, Any]]:
  """An ensemble's rows: each network's epochs run and kept (the rows above are the first's),
  and its linear member's, with the share of the output the held-out rows chose for it."""
  if not members:
    return []
  each = ", ".join(f"{m.get('epochs_run', '-')} / {m.get('best_epoch') or '-'}" for m in members)
  rows: list[tuple[str, Any]] = [(f"each of {len(members)} networks: epochs run / kept", each)]
  if linear and "share" in linear:
    losses = ", ".join(
      f"{a}: {loss:.4g}" for a, loss in (linear.get("held_out_loss") or {}).items()
    )
    rows.append(
      (
        "linear model: epochs run / kept",
        f"{linear.get('epochs_run', '-')} / {linear.get('best_epoch') or '-'}",
      )
    )
    rows.append(("linear model's share", fact("training.linear_share", linear["share"])))
    if losses:
      rows.append(("held-out loss by linear share", losses))
  return rows


def training_section(summary: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> Html:
  """The strategy and why, the plan, the epochs run and kept, and loss and metric per epoch."""
  strategy = summary.get("strategy") or {}
  plan = summary.get("training_plan") or {}
  if not strategy and not plan:
    return section("training", "Training", note("the trainer did not finish in this run."))
  parts: list[Any] = [
    pairs(
      [
        ("strategy", fact("strategy", strategy.get("strategy"))),
        ("replicas", strategy.get("num_replicas_in_sync")),
        ("why", strategy.get("strategy_reason")),
        ("chosen by", strategy.get("strategy_chosen_by")),
        ("inputs", plan.get("inputs")),
        ("plan", plan.get("reason")),
        ("epochs (budget)", plan.get("epochs")),
        ("steps per epoch", plan.get("steps_per_epoch")),
        ("batch", plan.get("batch_size")),
        ("rows fit / held out", f"{plan.get('fit_rows', '-')} / {plan.get('holdout_rows', '-')}"),
        ("epochs run", fact("training.epochs_run", plan.get("epochs_run"))),
        ("epoch kept", fact("training.best_epoch", plan.get("best_epoch"))),
        *_member_rows(plan.get("members") or [], plan.get("linear")),
        *([("label", plan["readings"]["reason"])] if plan.get("readings") else []),
        *([("warm start", plan["warm_start"])] if plan.get("warm_start") else []),
      ]
    )
  ]
  if summary.get("profile_skipped"):
    parts.append(note(f"no profile: {summary['profile_skipped']}"))
  if history:
    metric = next(
      (k for k in history[-1] if k not in _EPOCH_KEYS and not k.startswith("val_")), None
    )
    svg = charts.epochs(history, metric, plan.get("best_epoch"))
    caption = "per epoch: training batches and the held-out rows"
    if plan.get("members"):
      caption += f" (the first of {len(plan['members'])} networks)"
    parts.append(figure("epochs", svg, caption))
  else:
    parts.append(note("no per-epoch log (the trainer keeps it only in a local model run folder)."))
  if summary.get("hparams"):
    parts.append(tag("h3", "Hyper-parameters"))
    parts.append(pairs(sorted(summary["hparams"].items())))
  return section("training", "Training", *parts)


def evaluation_section(summary: Mapping[str, Any], evaluation: Mapping[str, Any]) -> Html:
  """The metrics against the live model's, the floor, the verdict, and how predictions fall."""
  metrics = evaluation.get("metrics") or {}
  if not metrics.get("candidate"):
    metrics = (summary.get("night") or {}).get("metrics") or {}
  candidate = metrics.get("candidate") or {}
  if not candidate and summary.get("blessed") is None:
    return section("evaluation", "Evaluation", note("the Evaluator did not run in this run."))
  live, diff = metrics.get("baseline") or {}, metrics.get("diff_vs_baseline") or {}
  rows = [
    [name, fact(f"metric.{name}", value), live.get(name), diff.get(name)]
    for name, value in sorted(candidate.items())
  ]
  floor = summary.get("floor") or {}
  blessed = summary.get("blessed")
  verdict = {True: "blessed", False: "not blessed"}.get(blessed, "-")
  parts: list[Any] = [
    table(["metric", "tonight's model", "live model", "difference"], rows),
    pairs(
      [
        ("floor", floor.get("value")),
        ("floor's reason", floor.get("reason")),
        ("verdict", Html(f'<span class="status">{fact("blessed", blessed, verdict)}</span>')),
      ]
    ),
  ]
  for failure in (summary.get("validation") or {}).get("failures") or []:
    parts.append(note(f"failed: {failure}"))
  if summary.get("baseline_skipped"):
    parts.append(note(f"live version not scored: {summary['baseline_skipped']}"))
  parts.append(_predictions(evaluation.get("predictions"), summary.get("label_classes")))
  return section("evaluation", "Evaluation", *parts)


def _predictions(predictions: Mapping[str, Any] | None, classes: Sequence[Any] | None) -> Html:
  if not predictions:
    return note("no predictions summary (the Evaluator ran on TFMA's Beam pipeline).")
  if predictions.get("task") != "regression" and not predictions.get("matrix"):
    return note("no confusion matrix: too many classes to draw.")
  if predictions.get("matrix"):
    matrix = predictions["matrix"]
    labels = list(classes or [])
    if len(labels) != len(matrix):
      labels = list(range(len(matrix)))
    caption = f"confusion matrix on {predictions.get('rows')} eval rows"
    return figure("confusion", charts.confusion(matrix, labels), caption)
  shown = len(predictions.get("actual") or [])
  caption = f"predicted against actual, {shown} of {predictions.get('rows')} eval rows"
  return figure(
    "predicted-vs-actual",
    charts.predicted_vs_actual(predictions["actual"], predictions["predicted"]),
    caption,
  )


def optimizer_section(report: Mapping[str, Any] | None) -> Html:
  """Each variant's metric, size and latency, blessed or why not, and the chart of them."""
  if not report or not report.get("variants"):
    reason = (report or {}).get("reason") or "the Optimizer built no variant in this run."
    return section("optimizer", "The Optimizer", note(reason))
  metric = str(report.get("metric") or "metric")
  rows, points = [], []
  baseline = report.get("baseline") or {}
  for v in [baseline, *report["variants"]] if baseline else report["variants"]:
    name, is_base = str(v.get("name")), v is baseline
    value = v.get("metric_value", v.get("accuracy"))
    size, gz = v.get("size_bytes"), v.get("gzipped_size_bytes")
    why = v.get("reason") or v.get("gate_reason") or ""
    blessed = "-" if is_base else fact(f"variant.{name}.blessed", bool(v.get("blessed")))
    rows.append(
      [
        name,
        v.get("status"),
        value,
        v.get("agreement"),
        _kb(size),
        _kb(gz),
        v.get("latency_ms_p50"),
        blessed,
        why,
      ]
    )
    if v.get("status") == "ok":
      points.append(
        {
          "name": name,
          "metric": value,
          "kb": _kb(size),
          "ms": v.get("latency_ms_p50"),
          "blessed": v.get("blessed"),
          "baseline": is_base,
        }
      )
  headers = [
    "variant",
    "status",
    metric,
    "agreement",
    "KB",
    "gzip KB",
    "p50 ms",
    "blessed",
    "why not",
  ]
  parts: list[Any] = [table(headers, rows)]
  if points:
    parts.append(
      figure("variants", charts.variants(points, metric), f"size and latency against {metric}")
    )
  if report.get("size_basis"):
    parts.append(note(report["size_basis"]))
  return section("optimizer", "The Optimizer", *parts)


def _kb(size: Any) -> float | None:
  return round(size / 1024, 2) if isinstance(size, int | float) else None


def push_section(summary: Mapping[str, Any], version: Mapping[str, Any]) -> Html:
  """The pushed version, its files and digests, and the calls that score it."""
  pushed = summary.get("pushed") or {}
  if not pushed:
    return section("push", "The push", note("the Pusher did not run in this run."))
  parts: list[Any] = [
    pairs(
      [
        ("pushed", fact("pushed.pushed", bool(pushed.get("pushed")))),
        ("version", fact("pushed.version", pushed.get("version"))),
        ("folder", pushed.get("path")),
        ("why not", pushed.get("reason")),
      ]
    )
  ]
  manifest = version.get("manifest") or {}
  files = manifest.get("files") or {}
  if files:
    parts.append(tag("h3", f"Files ({len(files)})"))
    rows = [
      [path, f.get("size"), Html(f"<code>{esc(f.get('sha256'))}</code>")]
      for path, f in sorted(files.items())
    ]
    parts.append(table(["file", "bytes", "sha256"], rows))
  if pushed.get("pushed"):
    parts += _scoring(summary, pushed, version.get("contract"))
  return section("push", "The push", *parts)


def _scoring(summary: Mapping[str, Any], pushed: Mapping[str, Any], contract: Any) -> list[Html]:
  """curl against TF Serving and a Python call on the SavedModel, on one example row."""
  if contract is None:
    return [note("no model contract: score it with your module's own signature.")]
  row: dict[str, Any] = {}
  for model_input in contract.inputs:
    for column in model_input["columns"]:
      row[column["rows_input"]] = "" if model_input.get("dtype") == "string" else 0.0
  model = (summary.get("config") or {}).get("model_name") or "MODEL"
  body = json.dumps({"signature_name": "rows", "instances": [row]})
  base = str(pushed.get("path") or "").rsplit("/", 1)[0]
  curl = (
    f"# TF Serving with --model_name={model} --model_base_path={base}\n"
    f"curl -s http://localhost:8501/v1/models/{model}:predict -d '{body}'"
  )
  args = ", ".join(f"{k!r}: tf.constant([{v!r}])" for k, v in row.items())
  python = (
    "import tensorflow as tf\n\n"
    f"model = tf.saved_model.load({pushed.get('path')!r})\n"
    "score = model.signatures['rows']\n"
    f"print(score(**{{{args}}})['outputs'].numpy())"
  )
  return [
    tag("h3", "Score it"),
    note(f"output: {getattr(contract, 'output', '')}"),
    code(curl),
    code(python),
  ]
