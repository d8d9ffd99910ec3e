"""`schedule.py local history`: the nights as a table (`accept` and `unaccept` are in
acceptance.py).

`history --html PATH` also writes the nights page (components.report.nights_page).

It reads the serving folder, local or on an object store, through the component that owns it
(`components.serving.nights` for the nights log).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from components import storage
from components.nights import nights_lib
from components.report import nights_page
from core.errors import UserInputError
from core.properties import EVAL_SPLIT, TRAIN_SPLIT


def model_name_in(serving_dir: str, given: str | None, output_dir: str | None = None) -> str:
  """The model whose nights are meant: `given`, or the only model under a local folder.

  Args:
    serving_dir: the serving folder.
    given: --model-name, if passed.
    output_dir: --output-dir, if passed: its run_summary.json tells a missing serving folder
      apart from runs that failed before anything could be recorded.

  Raises:
    UserInputError: naming --model-name when it cannot be told.
  """
  if given and (storage.is_remote(serving_dir) or not os.path.isdir(serving_dir)):
    return given
  if given:
    names = _model_folders(serving_dir)
    if names and given not in names:
      raise UserInputError(
        f"{serving_dir} holds no model {given!r} (it holds {', '.join(names)}); pass one of "
        "those to --model-name."
      )
    return given
  if storage.is_remote(serving_dir):
    raise UserInputError(f"pass --model-name: which model under {serving_dir}?")
  if not os.path.isdir(serving_dir):
    last = _last_run(output_dir)
    if last:
      raise UserInputError(
        f"{serving_dir} does not exist: no night is recorded yet, because {last}; a first try "
        "that fails is not recorded. Fix that and run again."
      )
    raise UserInputError(
      f"{serving_dir} does not exist: no night has run with this serving folder yet (pass "
      "--serving-dir, or the --output-dir of your runs)."
    )
  names = _model_folders(serving_dir)
  if len(names) != 1:
    shown = ", ".join(names) or "none"
    raise UserInputError(
      f"{serving_dir} holds {len(names)} models ({shown}); pass --model-name NAME."
    )
  return names[0]


def _started(record: Mapping[str, Any]) -> str:
  """When a night started, as the table shows it: '2026-11-26 01:00:00'."""
  return str(record.get("started") or "")[:19].replace("T", " ")


def _model_folders(serving_dir: str) -> list[str]:
  return sorted(e.name for e in os.scandir(serving_dir) if e.is_dir() and e.name[0] != ".")


def _summary(output_dir: str | None) -> dict[str, Any]:
  """The last run's run_summary.json in `output_dir` ({} without one)."""
  if not output_dir:
    return {}
  try:
    with open(os.path.join(output_dir, "run_summary.json"), encoding="utf-8") as f:
      summary = json.load(f)
  except (OSError, ValueError):
    return {}
  return summary if isinstance(summary, dict) else {}


def run_target(output_dir: str | None) -> tuple[str | None, str | None]:
  """(serving folder, model name) the last run in `output_dir` used, from its summary's
  configuration ((None, None) where it has none): a run given --serving-dir records its nights
  there, not under the output folder."""
  config = _summary(output_dir).get("config")
  if not isinstance(config, dict):
    return None, None
  return config.get("serving_dir") or None, config.get("model_name") or None


def _last_run(output_dir: str | None) -> str:
  """How the last run in `output_dir` ended badly, from its run_summary.json ('' if it has none
  or did not end badly)."""
  path = os.path.join(output_dir or "", "run_summary.json")
  night = _summary(output_dir).get("night")
  if not isinstance(night, dict) or not night.get("outcome"):
    return ""
  if night["outcome"] not in nights_lib.BAD_OUTCOMES:
    return ""
  when = _started(night)
  line = nights_lib.outcome_line(night).rstrip(".")
  return f"the last run in {output_dir} ({when}) ended {line} (see {path})"


def _metric(record: Mapping[str, Any]) -> tuple[str, str]:
  metrics = record.get("metrics") or {}
  candidate, diff = metrics.get("candidate") or {}, metrics.get("diff_vs_baseline") or {}
  for name in nights_page.PRIMARY_METRICS:
    if name in candidate:
      value = f"{candidate[name]:.4g}"
      if name in diff:
        value += f" ({diff[name]:+.3g} vs live)"
      return name.replace("sparse_categorical_", "").replace("binary_", ""), value
  return "", "-"


def rows(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
  """One row of plain text per night, oldest first, with its notes (a list)."""
  out = []
  for r in records:
    name, value = _metric(r)
    spans = r.get("spans") or []
    counts = r.get("rows") or {}
    out.append(
      {
        "night": _started(r),
        "spans": ",".join(str(s) for s in spans) or "-",
        "rows": f"{counts.get(TRAIN_SPLIT, '-')}/{counts.get(EVAL_SPLIT, '-')}" if counts else "-",
        "gate": nights_page.gate_text(r),
        "drift": nights_page.drift_text(r),
        "metric": f"{name} {value}".strip(),
        "blessed": {True: "yes", False: "no"}.get(r.get("blessed"), "-"),
        "pushed": str(r["version"]) if r.get("version") is not None else "-",
        "live": str(r.get("live_version") if r.get("live_version") is not None else "-"),
        "outcome": str(r.get("outcome")),
        "owner": str(r.get("owner") or "-"),
        "seconds": f"{r['seconds']:.0f}" if isinstance(r.get("seconds"), int | float) else "-",
        "line": str(r.get("line") or ""),
        nights_lib.NOTES_FIELD: list(r.get(nights_lib.NOTES_FIELD) or []),
      }
    )
  return out


def print_history(serving_dir: str, model_name: str, *, as_json: bool, last: int | None) -> int:
  """Prints the nights of a model, as a table or as JSON lines."""
  from components.serving import nights

  records = nights.read_records(serving_dir, model_name)
  if last:
    records = records[-last:]
  if as_json:
    for record in records:
      print(json.dumps(record, sort_keys=True))
    return 0
  if not records:
    print(f"No nights recorded for {model_name!r} under {serving_dir} yet.")
    return 0
  from rich.console import Console
  from rich.table import Table

  table = Table(title=f"Nights of {model_name!r} ({serving_dir})", show_edge=False)
  shown = rows(records)
  columns = ("night", "spans", "rows", "gate", "drift", "metric", "blessed", "pushed", "live")
  columns += ("outcome",)
  # Output folders sharing one serving folder (a night that failed before it opened has none).
  if len({row["owner"] for row in shown} - {"-"}) > 1:
    columns += ("owner",)
  headers = {"rows": "rows train/eval", "drift": "largest drift", "owner": "run from"}
  for column in (*columns, "seconds"):
    table.add_column(headers.get(column, column), overflow="fold")
  for row in shown:
    table.add_row(*(row[c] for c in (*columns, "seconds")))
  console = Console(width=160)
  console.print(table)
  for row in shown:
    if row["outcome"] not in ("pushed", "not_pushed") or row[nights_lib.NOTES_FIELD]:
      console.print(f"{row['night']}: {nights_lib.outcome_line(row)}", soft_wrap=True)
  return 0


def write_html(
  serving_dir: str,
  model_name: str,
  path: str,
  output_dir: str | None = None,
  last: int | None = None,
) -> str:
  """Writes the nights page of a model to `path`, each night linking to its run page where the
  runs' `output_dir` kept one.

  Returns:
    The page's path.
  """
  from components.serving import nights

  records = nights.read_records(serving_dir, model_name)
  if last:
    records = records[-last:]
  path = os.path.abspath(path)
  if os.path.isdir(path):
    raise UserInputError(
      f"--html {path} is a folder; pass the page's file, e.g. {os.path.join(path, 'nights.html')}."
    )
  try:
    return nights_page.write_nights_page(path, records, model_name, serving_dir, output_dir)
  except OSError as e:
    raise UserInputError(
      f"cannot write the nights page to {path} ({e.strerror or e}); pass --html a path in a "
      "folder you can write to."
    ) from None
