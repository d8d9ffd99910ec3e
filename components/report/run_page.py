"""Writes one run's report page, report.html, beside its run_summary.json.

Sections: the run, the data, training, evaluation, the Optimizer and the push. Each reads the
summary and the artifacts it points at (`inputs`); a section whose component did not run says
so, so a failed or stopped run gets a page too.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from typing import Any

from components.report import inputs, model_sections, page, run_sections
from core import properties, sources

_LOG = logging.getLogger(__name__)

RUN_PAGE = "report.html"
SUMMARY_FILE = "run_summary.json"
# Each night's page is also kept as <RUN_PAGES_DIR>/<night id>.html: the nights page links them.
RUN_PAGES_DIR = "reports"
_LINKS = (
  ("run", "Run"),
  ("data", "Data"),
  ("training", "Training"),
  ("evaluation", "Evaluation"),
  ("optimizer", "Optimizer"),
  ("push", "Push"),
)


def render_run_page(summary: Mapping[str, Any]) -> str:
  """The page's HTML for a run summary (run_summary.json as a dict)."""

  stats = inputs.statistics(inputs.artifact(summary, sources.STATISTICS).get("uri"))
  reference: dict[str, Any] = {}
  live = inputs.artifact(summary, sources.REFERENCE_STATISTICS)
  if (live.get("properties") or {}).get(properties.LIVE_AVAILABLE_PROPERTY, 1):
    reference = inputs.statistics(live.get("uri"))
  model_run = inputs.artifact(summary, sources.MODEL_RUN).get("uri")
  body = page.join(
    [
      run_sections.run_section(summary),
      run_sections.data_section(
        summary,
        stats,
        reference,
        inputs.gate(summary),
        inputs.quarantine(inputs.artifact(summary, sources.EXAMPLES)),
      ),
      model_sections.training_section(summary, inputs.epoch_history(model_run)),
      model_sections.evaluation_section(
        summary, inputs.evaluation(inputs.artifact(summary, sources.EVALUATION))
      ),
      model_sections.optimizer_section(inputs.variants(summary)),
      model_sections.push_section(summary, inputs.pushed_version(summary)),
    ]
  )
  config = summary.get("config") or {}
  title = f"Run of {config.get('pipeline_name') or 'the pipeline'}: {summary.get('status')}"
  night = (summary.get("night") or {}).get("started") or ""
  subtitle = f"{night} · {config.get('data_root') or ''}".strip(" ·")
  return page.document(title, subtitle, _LINKS, body)


def write_run_page(output_dir: str, summary: Mapping[str, Any] | None = None) -> str:
  """Writes report.html into `output_dir` (and the night's copy under reports/).

  Args:
    output_dir: the run's --output-dir, where run_summary.json is.
    summary: the summary, when the caller holds it; else read from run_summary.json.

  Returns:
    The page's path.
  """
  started = time.perf_counter()
  if summary is None:
    with open(os.path.join(output_dir, SUMMARY_FILE), encoding="utf-8") as f:
      summary = json.load(f)
  # A run's process holds millions of objects (TensorFlow, TFX): a full garbage collection,
  # which the charts' allocations would set off several times, walks them all. The page's own
  # garbage is left to the next collection.
  gc.disable()
  try:
    text = render_run_page(summary)
  finally:
    gc.enable()
  path = os.path.join(output_dir, RUN_PAGE)
  write_page(path, text)
  night = (summary.get("night") or {}).get("night")
  if night:
    write_page(run_page_of(output_dir, night), text)
  _LOG.info("Report page written in %.2f s: %s", time.perf_counter() - started, path)
  return path


def run_page_of(output_dir: str, night: str) -> str:
  """Where the page of one night's run is kept."""
  safe = re.sub(r"[^A-Za-z0-9._-]", "_", night)[:120]
  return os.path.join(output_dir, RUN_PAGES_DIR, f"{safe}.html")


def write_page(path: str, text: str) -> None:
  """Writes whole or not at all: a reader never sees half a page."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = f"{path}.tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)
