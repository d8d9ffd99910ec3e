"""The report page's first two sections: the run (components, times, error) and its data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components.report import charts, inputs
from components.report.page import Html, esc, fact, figure, join, note, pairs, section, table, tag
from core import missing_values, properties, sources

SPLITS = (properties.TRAIN_SPLIT, properties.EVAL_SPLIT)


def run_section(summary: Mapping[str, Any]) -> Html:
  """Status, what failed and why, and each component's state and time."""
  status = str(summary.get("status") or "unknown")
  config = summary.get("config") or {}
  night = summary.get("night") or {}
  parts: list[Any] = [
    pairs(
      [
        ("status", Html(f'<span class="status {esc(status)}">{fact("status", status)}</span>')),
        ("seconds", fact("seconds", summary.get("seconds"))),
        ("night", night.get("night")),
        ("outcome", night.get("line") or night.get("outcome")),
        ("data", config.get("data_root")),
        ("label", config.get("label_key")),
        ("task", _task(summary, config)),
        ("pipeline root", config.get("pipeline_root")),
        ("serving folder", config.get("serving_dir")),
        ("log", summary.get("log")),
      ]
    )
  ]
  if summary.get("error"):
    parts.append(Html(f'<p class="error">error: {fact("error", summary["error"])}</p>'))
  if summary.get("cleanup"):
    parts.append(note(f"cleaned up after a killed run: {summary['cleanup']}"))
  rows = []
  for c in summary.get("components") or []:
    name, state = c.get("name"), str(c.get("state"))
    rows.append(
      [
        name,
        Html(f'<span class="{esc(state)}">{fact(f"component.{name}.state", state)}</span>'),
        fact(f"component.{name}.seconds", c.get("seconds")),
        c.get("execution_id"),
      ]
    )
  parts.append(tag("h3", "Components"))
  if rows:
    parts.append(table(["component", "state", "seconds", "execution"], rows))
  else:
    parts.append(note(summary.get("components_note") or "no component ran."))
  for notice in summary.get("notifications") or []:
    ok = "notified" if notice.get("ok") else f"could not notify ({notice.get('error')})"
    parts.append(note(f"{ok}: {notice.get('target')}"))
  return section("run", "The run", *parts)


def _task(summary: Mapping[str, Any], config: Mapping[str, Any]) -> str | None:
  """The task, and why the label reads as it (the rule that decided, or --task)."""
  task = summary.get("task") or config.get("task")
  why = config.get("task_reason")
  return f"{task} ({why})" if task and why else task


def data_section(
  summary: Mapping[str, Any],
  stats: Mapping[str, Mapping[str, inputs.Column]],
  reference: Mapping[str, Mapping[str, inputs.Column]],
  gate: Mapping[str, Any],
  quarantined: Mapping[str, Any],
) -> Html:
  """Rows per split, quarantined rows, the data gate and one line per column."""
  examples = inputs.artifact(summary, sources.EXAMPLES).get("properties") or {}
  counts = [
    (f"{split} rows", fact(f"rows.{split}", examples.get(properties.examples_rows(split))))
    for split in SPLITS
  ]
  left_out = [("quarantined rows", fact("quarantined", quarantined.get("count")))]
  if quarantined.get("unlabeled"):
    tokens = missing_values.label_tokens_note(quarantined.get("tokens") or {})
    shown = f"{quarantined['unlabeled']:,}" + (f" ({tokens})" if tokens else "")
    left_out.append(("of them without a label", fact("unlabeled", quarantined["unlabeled"], shown)))
  parts: list[Any] = [pairs([*counts, *left_out])]
  if quarantined.get("first"):
    parts.append(tag("h3", "Quarantined rows (first)"))
    rows = [[r["line"], r["reason"], r["row"]] for r in quarantined["first"]]
    parts.append(table(["line", "reason", "row"], rows))
    parts.append(note(f"all of them: {quarantined.get('file')}"))
  parts.append(_gate_part(gate))
  if not stats:
    parts.append(note("no statistics: StatisticsGen did not run in this run."))
    return section("data", "The data", *parts)
  parts.append(_legend(bool(reference)))
  parts.append(_columns_table(stats, reference, gate.get("drift") or {}))
  return section("data", "The data", *parts)


def _gate_part(gate: Mapping[str, Any]) -> Html:
  if not gate:
    return note("data gate: no report in this run.")
  if not gate.get("compared"):
    return note(f"data gate: nothing compared ({gate.get('reason')}).")
  verdict = "passed" if gate.get("passed") else "stopped the night"
  head = note(
    f"data gate {verdict}, against live version {gate.get('live_version')}'s training data."
  )
  rows = [
    [f.get("column"), f.get("kind"), f.get("text"), "yes" if f.get("accepted") else ""]
    for f in gate.get("findings") or []
  ]
  if not rows:
    return head
  return join([head, table(["column", "kind", "finding", "accepted"], rows)])


def _legend(with_live: bool) -> Html:
  items = [(charts.TRAIN, "tonight's train"), (charts.EVAL, "tonight's eval")]
  if with_live:
    items.append((charts.LIVE, "live version's train (outline)"))
  keys = "".join(f'<span class="sw" style="background:{c}"></span>{esc(t)}' for c, t in items)
  return Html(f'<p class="key">histograms and top values, as shares of each split: {keys}</p>')


def _columns_table(
  stats: Mapping[str, Mapping[str, inputs.Column]],
  reference: Mapping[str, Mapping[str, inputs.Column]],
  drift: Mapping[str, Mapping[str, Any]],
) -> Html:
  names = list(dict.fromkeys(n for split in stats.values() for n in split))
  live = reference.get(properties.TRAIN_SPLIT) or {}
  rows = []
  for name in names:
    per_split = [stats.get(s, {}).get(name) for s in SPLITS]
    first = next(c for c in per_split if c is not None)
    d = drift.get(name) or {}
    rows.append(
      [
        Html(f"<b>{esc(name)}</b>"),
        first.type,
        *(_split_cell(c) for c in per_split),
        _values_cell(first),
        figure(f"column:{name}", _column_chart(per_split, live.get(name))),
        f"{d['value']:.3g} of {d['threshold']:.3g}" if d.get("value") is not None else "-",
      ]
    )
  headers = ["column", "type", "train: missing, distinct", "eval: missing, distinct"]
  return table([*headers, "values (train)", "distribution", "drift vs live"], rows, "columns")


def _split_cell(column: inputs.Column | None) -> str:
  if column is None:
    return "-"
  distinct = "" if column.distinct is None else f", {column.distinct} distinct"
  return f"{column.missing:.1%} missing{distinct}"


def _values_cell(column: inputs.Column) -> str:
  if column.top:
    total = sum(c for _, c in column.top) or 1
    return "; ".join(
      f"{v} ({c / column.rows if column.rows else c / total:.0%})" for v, c in column.top
    )
  if column.mean is None:
    return "-"
  return f"mean {column.mean:.4g}, {column.low:.4g} to {column.high:.4g}"


def _column_chart(per_split: Sequence[inputs.Column | None], live: inputs.Column | None) -> str:
  """Tonight's splits filled, the live version's training data as an outline."""
  first = next(c for c in per_split if c is not None)
  series = []
  styles = [(charts.TRAIN, True), (charts.EVAL, True), (charts.LIVE, False)]
  categories = [v for v, _ in first.top]
  for column, (color, filled) in zip([*per_split, live], styles, strict=True):
    if column is None:
      continue
    if categories:
      counts = dict(column.top)
      shares = [counts.get(v, 0) / (column.rows or 1) for v in categories]
      series.append((list(range(len(categories) + 1)), shares, color, filled))
    elif column.counts:
      total = sum(column.counts) or 1
      series.append((column.edges, [c / total for c in column.counts], color, filled))
  return charts.histogram(series)
