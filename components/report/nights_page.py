"""The nights page: a model's nights side by side, from the serving folder's nights log.

The metric per night against the live model's, rows per night and span, drift per column over
the nights, and each night's outcome (pushed, not pushed, stopped, failed), linking to the
night's run page where this output folder kept one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from components.report import charts, page, run_page
from components.report.page import Html, esc, fact, figure, note, section, table
from core import properties

NIGHTS_PAGE = "nights.html"
# The metric a night is judged by, by task: the Evaluator's first metric of the candidate.
PRIMARY_METRICS = ("binary_accuracy", "sparse_categorical_accuracy", "mean_squared_error")
# Columns the drift chart draws: those that came closest to their bound on some night.
DRIFT_COLUMNS = 8


def primary_metric(records: Sequence[Mapping[str, Any]]) -> str | None:
  """The first of PRIMARY_METRICS that some night's candidate has."""
  seen = {k for r in records for k in ((r.get("metrics") or {}).get("candidate") or {})}
  return next((m for m in PRIMARY_METRICS if m in seen), None)


def accepted_columns(record: Mapping[str, Any]) -> list[str]:
  """The columns whose changes the night's gate let through, each once (a column can have
  several accepted findings), in the findings' order."""
  findings = (record.get("gate") or {}).get("findings") or []
  return list(dict.fromkeys(f["column"] for f in findings if f.get("accepted")))


def largest_drift(record: Mapping[str, Any]) -> tuple[str, float, float | None] | None:
  """(column, drift, bound) of the column that came closest to its drift bound on the night,
  or None when the gate measured no drift. Columns are measured by different statistics, so
  the largest is the largest share of its own bound."""
  drift = {
    column: d
    for column, d in ((record.get("gate") or {}).get("drift") or {}).items()
    if d.get("value") is not None
  }
  if not drift:
    return None
  column = max(drift, key=lambda c: drift[c]["value"] / (drift[c].get("threshold") or 1))
  return column, float(drift[column]["value"]), drift[column].get("threshold")


def drift_text(record: Mapping[str, Any]) -> str:
  """The largest drift in a few words: 'trip_miles 0.31 (bound 0.1)'; '-' without one."""
  largest = largest_drift(record)
  if largest is None:
    return "-"
  column, value, bound = largest
  return f"{column} {value:.3g}" + (f" (bound {bound:.3g})" if bound is not None else "")


def gate_text(record: Mapping[str, Any]) -> str:
  """What the night's gate decided, in a few words: passed (accepting which columns), stopped
  (by which), first night, not compared; '-' without a gate."""
  gate = record.get("gate")
  if not gate:
    return "-"
  if not gate.get("compared"):
    return "first" if "nothing was live" in (gate.get("reason") or "") else "not compared"
  if not gate.get("passed"):
    stops = sorted({f["column"] for f in gate.get("findings", []) if f["kind"] == "stop"})
    return f"stopped: {', '.join(stops)}"
  accepted = accepted_columns(record)
  return "passed" + (f" (accepted {', '.join(accepted)})" if accepted else "")


def _label(record: Mapping[str, Any]) -> str:
  return str(record.get("started") or record.get("night") or "?")[:16].replace("T", " ")


def _metric_chart(records: Sequence[Mapping[str, Any]], metric: str) -> Html:
  def side(r, name):
    return ((r.get("metrics") or {}).get(name) or {}).get(metric)

  lines = {
    "tonight's model": [side(r, "candidate") for r in records],
    "live model": [side(r, "baseline") for r in records],
  }
  svg = charts.nights_lines([_label(r) for r in records], lines, metric, dashed=["live model"])
  return figure(
    "nights-metric", svg, f"{metric} per night, against the live model on the same rows"
  )


def _rows_chart(records: Sequence[Mapping[str, Any]]) -> Html:
  labels = [
    f"{_label(r)} span {','.join(str(s) for s in r.get('spans') or []) or '-'}" for r in records
  ]
  bars = {
    split: [float((r.get("rows") or {}).get(split) or 0) for r in records]
    for split in (properties.TRAIN_SPLIT, properties.EVAL_SPLIT)
  }
  return figure("nights-rows", charts.nights_bars(labels, bars, "rows"), "rows per night and span")


def _drift_chart(records: Sequence[Mapping[str, Any]]) -> Html | None:
  ratios: dict[str, list[float | None]] = {}
  for i, r in enumerate(records):
    for column, d in ((r.get("gate") or {}).get("drift") or {}).items():
      if d.get("value") is None:
        continue
      ratios.setdefault(column, [None] * len(records))[i] = d["value"] / (d.get("threshold") or 1)
  if not ratios:
    return None
  top = sorted(ratios, key=lambda c: -max(v for v in ratios[c] if v is not None))[:DRIFT_COLUMNS]
  lines = {c: ratios[c] for c in top}
  svg = charts.nights_lines(
    [_label(r) for r in records], lines, "drift / bound", bound=(1.0, "bound (drift = threshold)")
  )
  return figure("nights-drift", svg, "drift per column against the live version's training data")


def _table(
  records: Sequence[Mapping[str, Any]], metric: str | None, links: Mapping[str, str]
) -> Html:
  rows = []
  for i, r in enumerate(records):
    outcome = str(r.get("outcome"))
    candidate = ((r.get("metrics") or {}).get("candidate") or {}).get(metric) if metric else None
    live = ((r.get("metrics") or {}).get("baseline") or {}).get(metric) if metric else None
    href = links.get(str(r.get("night")))
    link = Html(f'<a href="{esc(href)}">run page</a>') if href else "-"
    rows.append(
      [
        _label(r),
        ",".join(str(s) for s in r.get("spans") or []) or "-",
        fact(f"night.{i}.rows.train", (r.get("rows") or {}).get(properties.TRAIN_SPLIT)),
        (r.get("rows") or {}).get(properties.EVAL_SPLIT),
        fact(f"night.{i}.metric", candidate),
        live,
        fact(f"night.{i}.gate", gate_text(r)),
        fact(f"night.{i}.drift", drift_text(r)),
        r.get("version"),
        fact(f"night.{i}.live_version", r.get("live_version")),
        Html(f'<span class="{esc(outcome)}">{fact(f"night.{i}.outcome", outcome)}</span>'),
        fact(f"night.{i}.why", _why(r)),
        link,
      ]
    )
  headers = ["night", "spans", "train rows", "eval rows", metric or "metric", "live model"]
  headers += ["gate", "largest drift", "pushed", "live version"]
  return table([*headers, "outcome", "why", "page"], rows)


def _why(record: Mapping[str, Any]) -> str:
  """The night's line and its notes (a span folder without files, stale data), which a pushed
  or not-pushed night has too."""
  from components.nights import nights_lib

  notes = record.get(nights_lib.NOTES_FIELD) or []
  return "; ".join(str(part) for part in (record.get("line"), *notes) if part)


def render_nights_page(
  records: Sequence[Mapping[str, Any]], model_name: str, where: str, links: Mapping[str, str]
) -> str:
  """The page's HTML for a model's nights (the nights log's records, oldest first).

  Args:
    records: the nights' records.
    model_name: the model.
    where: the serving folder, for the heading.
    links: night id -> the href of its run page.
  """
  metric = primary_metric(records)
  from components.nights import nights_lib

  counts = {o: sum(1 for r in records if r.get("outcome") == o) for o in nights_lib.OUTCOMES}
  summary = ", ".join(
    f"{fact(f'nights.{o}', n)} {esc(o.replace('_', ' '))}" for o, n in counts.items()
  )
  parts: list[Any] = [Html(f"<p>{fact('nights.count', len(records))} nights: {summary}.</p>")]
  if not records:
    parts.append(note("no night recorded yet."))
  else:
    if metric:
      parts.append(_metric_chart(records, metric))
    parts.append(_rows_chart(records))
    drift = _drift_chart(records)
    parts.append(
      drift
      if drift is not None
      else note("no drift measured yet: no night was compared with a live version.")
    )
    parts.append(_table(records, metric, links))
  body = section("nights", "Nights", *parts)
  return page.document(f"Nights of {model_name}", where, [("nights", "Nights")], body)


def write_nights_page(
  path: str,
  records: Sequence[Mapping[str, Any]],
  model_name: str,
  where: str,
  output_dir: str | None = None,
) -> str:
  """Writes the nights page to `path`, linking each night to its run page under `output_dir`
  (the runs' --output-dir) where one was kept.

  Returns:
    The page's path.
  """
  links = {}
  if output_dir:
    for r in records:
      night = str(r.get("night") or "")
      target = run_page.run_page_of(output_dir, night)
      if night and os.path.exists(target):
        links[night] = os.path.relpath(target, os.path.dirname(os.path.abspath(path)))
  text = render_nights_page(records, model_name, where, links)
  run_page.write_page(path, text)
  return path
