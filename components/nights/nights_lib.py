"""The record of the nights: what each run found, decided and pushed, kept in the serving folder.

A night's facts come from the steps that know them, while it runs: the data gate (spans, rows,
the gate's findings and drift scores) and the Pusher (metrics against the live model, the
blessing, the version pushed). Each records its facts under the night's id in the model
folder. When the night ends, successful or not, whoever ran it closes it: `run_local.py`
after LocalDagRunner returns, the Kubeflow exit handler after the last step, even a failed
one. Closing merges the facts with the outcome into one record and appends it to the nights
log. The serving package keeps the facts and the records (`components.serving.nights`); what
they say is decided here.

The night's id reaches the steps that record it (the DataGate, the Pusher, the RunReport and
Kubeflow's exit task) through the pipeline on Kubeflow: their `night_id` parameter holds the
run's id placeholder, which the orchestrator fills in (`night_id`). `run_local.py` sets it in the
environment (`NIGHT_ID_ENV`) instead. A step run without either (a pipeline driven another way)
records nothing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from components.serving import layout
from components.serving import nights as serving_nights
from core import properties

_LOG = logging.getLogger(__name__)

NIGHT_ID_ENV = "TFXKIT_NIGHT_ID"
# An open night untouched this long was interrupted (nights never overlap).
INTERRUPTED_AFTER_S = 24 * 3600
# Steps that record facts.
GATE_STEP = "gate"
PUSHER_STEP = "pusher"
# Outcomes.
PUSHED = "pushed"
NOT_PUSHED = "not_pushed"
STOPPED = "stopped"
FAILED = "failed"
OUTCOMES = (PUSHED, NOT_PUSHED, STOPPED, FAILED)


def night_id(exec_properties: Mapping[str, Any] | None = None) -> str | None:
  """The id of the night a step runs in, or None outside a night.

  Args:
    exec_properties: the step's execution properties. Their `properties.NIGHT_ID_KEY`, once
      the orchestrator filled it in (a Kubeflow package passes the run's id placeholder), is
      the night; else `NIGHT_ID_ENV` (run_local.py sets it) is.
  """
  value = str((exec_properties or {}).get(properties.NIGHT_ID_KEY) or "").strip()
  if value and "{{" not in value:
    return value
  value = os.environ.get(NIGHT_ID_ENV, "").strip()
  return value or None


def record_step(
  serving_dir: str,
  model_name: str,
  step: str,
  facts: Mapping[str, Any],
  night: str | None = None,
) -> bool:
  """Keeps one step's facts for the night's record; a no-op outside a night.

  Args:
    serving_dir, model_name: the model folder whose nights log gets the record.
    step: GATE_STEP or PUSHER_STEP.
    facts: what the step found, as JSON values.
    night: the night's id (`night_id(exec_properties)`); None: `NIGHT_ID_ENV`'s, if any.

  Returns:
    Whether the facts were written.
  """
  night = night or night_id()
  if night is None:
    return False
  serving_nights.record_facts(serving_dir, model_name, night, step, facts)
  return True


def build_record(
  facts: Mapping[str, Mapping[str, Any]],
  *,
  night: str,
  succeeded: bool,
  error: str,
  started: str,
  ended: str,
  seconds: float | None,
) -> dict[str, Any]:
  """One night's record from its steps' facts and how it ended.

  Args:
    facts: step -> facts (`components.serving.nights.open_facts`).
    night: the night's id.
    succeeded: whether every step succeeded.
    error: the one-line error of a failed night ('' otherwise).
    started, ended: UTC time stamps.
    seconds: how long it ran.
  """
  gate = facts.get(GATE_STEP) or {}
  pusher = facts.get(PUSHER_STEP) or {}
  report = gate.get("report") or None
  if not succeeded:
    stopped = report is not None and report.get("passed") is False
    outcome, line = (STOPPED if stopped else FAILED), error or "failed (see the run's log)"
  elif pusher.get("pushed"):
    outcome, line = PUSHED, f"pushed version {pusher.get('version')}"
  elif pusher:
    outcome, line = NOT_PUSHED, pusher.get("reason") or "not pushed"
  else:
    outcome, line = NOT_PUSHED, "the pipeline ran without a Pusher"
  return {
    "night": night,
    "started": started,
    "ended": ended,
    "seconds": seconds,
    "outcome": outcome,
    "line": line,
    "spans": gate.get("spans") or pusher.get("spans"),
    "rows": gate.get("rows") or pusher.get("rows"),
    "gate": report,
    "metrics": pusher.get("metrics"),
    "blessed": pusher.get("blessed"),
    "version": pusher.get("version") if pusher.get("pushed") else None,
    # The Pusher's is the version live once it ran, pushed or not; a night that stopped or
    # failed before it keeps the one the gate compared with.
    "live_version": (
      pusher["live_version"] if pusher.get("live_version") is not None else gate.get("live_version")
    ),
  }


def close_night(
  serving_dir: str,
  model_name: str,
  night: str,
  *,
  succeeded: bool,
  error: str = "",
  started: str | None = None,
  seconds: float | None = None,
) -> dict[str, Any]:
  """Writes a night's record to the nights log and removes its open facts.

  Returns:
    The record.
  """
  facts = serving_nights.open_facts(serving_dir, model_name, night)
  record = build_record(
    facts,
    night=night,
    succeeded=succeeded,
    error=error,
    started=started or layout.utc_now(),
    ended=layout.utc_now(),
    seconds=seconds,
  )
  serving_nights.append_record(serving_dir, model_name, record)
  serving_nights.close_facts(serving_dir, model_name, night)
  _close_interrupted(serving_dir, model_name)
  return record


def _close_interrupted(serving_dir: str, model_name: str) -> None:
  """Records nights that died before they could close themselves, as failed.

  Nights never overlap (run_local.py holds a lock, a KFP recurring run has max_concurrency 1),
  so an open night whose facts are a day old belongs to a process that was killed.
  """
  for night in serving_nights.stale_nights(serving_dir, model_name, INTERRUPTED_AFTER_S):
    record = build_record(
      serving_nights.open_facts(serving_dir, model_name, night),
      night=night,
      succeeded=False,
      error="the night was interrupted before it ended (its process was killed or lost)",
      started="",
      ended=layout.utc_now(),
      seconds=None,
    )
    serving_nights.append_record(serving_dir, model_name, record)
    serving_nights.close_facts(serving_dir, model_name, night)


def new_night_id() -> str:
  """A fresh id for a night run on this machine (Kubeflow uses the run's own id)."""
  import uuid

  return f"{layout.utc_now().replace(':', '')}-{uuid.uuid4().hex[:8]}"


def end_night(
  serving_dir: str,
  model_name: str,
  night: str,
  *,
  succeeded: bool,
  error: str = "",
  started: str | None = None,
  seconds: float | None = None,
  notify: Sequence[str] = (),
  every_night: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
  """Closes a night and sends its notices: the one ending both runners share.

  Neither step can fail the night: a record that cannot be written is logged (the notices
  still go out and carry it), and a notice that cannot be delivered is retried, then logged.
  A first try that failed or stopped, with nobody to notify and nothing in the model's folder,
  leaves the serving folder as it was: its record is returned, not written. A night that ran
  through is always recorded, pushed or not, so that `schedule.py local history` shows the
  nights whose model was not good enough to push.

  Args:
    serving_dir, model_name: the model's serving folder.
    night: the night's id.
    succeeded: whether every step succeeded.
    error: the one-line error of a failed night.
    started: when it started (UTC time stamp).
    seconds: how long it ran.
    notify: notify_lib targets; failed and stopped nights are reported to them.
    every_night: report pushed and not-pushed nights too.

  Returns:
    (the record, one dict per notice: target, ok, attempts, error).
  """
  if (
    not notify and not succeeded and serving_nights.holds_only_open_nights(serving_dir, model_name)
  ):
    record = _discard_night(
      serving_dir, model_name, night, error=error, started=started, seconds=seconds
    )
    return record, []
  try:
    record = close_night(
      serving_dir,
      model_name,
      night,
      succeeded=succeeded,
      error=error,
      started=started,
      seconds=seconds,
    )
  except Exception as e:  # The folder is unwritable or gone: the notices must still go out.
    _LOG.warning("The night's record could not be written to %s: %s", serving_dir, e)
    record = build_record(
      {},
      night=night,
      succeeded=succeeded,
      error=error,
      started=started or layout.utc_now(),
      ended=layout.utc_now(),
      seconds=seconds,
    )
    record["record_error"] = f"{type(e).__name__}: {e}"
  return record, _send_notices(record, model_name, notify, every_night)


def _discard_night(
  serving_dir: str,
  model_name: str,
  night: str,
  *,
  error: str,
  started: str | None,
  seconds: float | None,
) -> dict[str, Any]:
  """A failed first try's record, built but not written, its open facts removed.

  Returns:
    The record, as `close_night` would have written it.
  """
  record = build_record(
    serving_nights.open_facts(serving_dir, model_name, night),
    night=night,
    succeeded=False,
    error=error,
    started=started or layout.utc_now(),
    ended=layout.utc_now(),
    seconds=seconds,
  )
  try:
    serving_nights.discard(serving_dir, model_name, night)
  except Exception as e:  # Left-over facts are closed as interrupted by a later night.
    _LOG.warning("The night's facts could not be removed from %s: %s", serving_dir, e)
  return record


def _send_notices(
  record: Mapping[str, Any], model_name: str, notify: Sequence[str], every_night: bool
) -> list[dict[str, Any]]:
  """Sends a night's notice to every target, when its outcome is one they are told of.

  Returns:
    One dict per notice: target, ok, attempts, error; [] when none was due.
  """
  deliveries: list[dict[str, Any]] = []
  if notify and (every_night or record["outcome"] in (STOPPED, FAILED)):
    from components.nights import notify_lib

    title, body = message(record, model_name)
    targets = [notify_lib.Target(t) for t in notify]
    failed = record["outcome"] in (STOPPED, FAILED)
    for delivery in notify_lib.send(targets, title, body, failed=failed):
      deliveries.append(dataclasses.asdict(delivery))
  return deliveries


def message(record: Mapping[str, Any], model_name: str) -> tuple[str, str]:
  """(title, body) of a night's notification: the outcome in one line, then the record."""
  title = f"{model_name}: night {record.get('outcome')}: {record.get('line')}"
  body = title + "\n\n" + json.dumps(dict(record), indent=2, sort_keys=True, default=str)
  return title, body
