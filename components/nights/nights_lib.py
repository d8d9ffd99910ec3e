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

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from components.serving import layout
from components.serving import live as serving_live
from components.serving import nights as serving_nights
from core import properties

_LOG = logging.getLogger(__name__)

NIGHT_ID_ENV = "TFXKIT_NIGHT_ID"
# Who runs the night: run_local.py sets "<host>:<output folder>"; on Kubeflow it is "kubeflow".
# Nights of one owner never overlap (run_local.py holds the output folder's lock, a KFP
# recurring run has max_concurrency 1), so its open nights are dead when its next one begins.
NIGHT_OWNER_ENV = "TFXKIT_NIGHT_OWNER"
KUBEFLOW_OWNER = "kubeflow"
# Another owner's open night untouched this long was interrupted too.
INTERRUPTED_AFTER_S = 24 * 3600
# Steps that record facts; NIGHT_STEP is the night's own: who runs it, since when.
NIGHT_STEP = "night"
GATE_STEP = "gate"
PUSHER_STEP = "pusher"
# What the runner noticed of the data before the run (a newer span folder without files); the
# record's NOTES_FIELD lists it, and a night with notes is notified whatever its outcome.
DATA_STEP = "data"
NOTES_FIELD = "notes"
_CARRIED_GATE_STEP = "gate_carried"  # An interrupted night's gate facts (`use_carried_gate`).
# Outcomes.
PUSHED = "pushed"
NOT_PUSHED = "not_pushed"
STOPPED = "stopped"
FAILED = "failed"
TIMED_OUT = "timed_out"
SKIPPED = "skipped"
INTERRUPTED = "interrupted"
OUTCOMES = (PUSHED, NOT_PUSHED, STOPPED, FAILED, TIMED_OUT, SKIPPED, INTERRUPTED)
# Outcomes that are notified to every target, not only with --notify-every-night.
BAD_OUTCOMES = (STOPPED, FAILED, TIMED_OUT, SKIPPED, INTERRUPTED)


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


def night_owner(exec_properties: Mapping[str, Any] | None = None) -> str:
  """Who runs the night a step runs in: `NIGHT_OWNER_ENV`'s value (run_local.py sets it), else
  KUBEFLOW_OWNER when the orchestrator filled in the step's night id."""
  owner = os.environ.get(NIGHT_OWNER_ENV, "").strip()
  if owner:
    return owner
  value = str((exec_properties or {}).get(properties.NIGHT_ID_KEY) or "").strip()
  return KUBEFLOW_OWNER if value and "{{" not in value else ""


def local_owner(output_dir: str) -> str:
  """The owner of the nights run_local.py runs in `output_dir` on this machine."""
  import socket

  return f"{socket.gethostname()}:{os.path.abspath(output_dir)}"


def begin_night(serving_dir: str, model_name: str, night: str, owner: str) -> list[dict[str, Any]]:
  """Opens a night: closes the owner's earlier open nights as interrupted, then records who
  runs this one and since when.

  The caller proves that the owner's earlier nights are dead: run_local.py holds the output
  folder's lock, Kubeflow's recurring run never runs two at once.

  Returns:
    The records of the interrupted nights it closed.
  """
  closed = close_interrupted(serving_dir, model_name, owner=owner, keep=night)
  import socket

  facts = {"owner": owner, "host": socket.gethostname(), "pid": os.getpid()}
  serving_nights.record_facts(
    serving_dir, model_name, night, NIGHT_STEP, {**facts, "started": layout.utc_now()}
  )
  # The gate of an interrupted night is this one's too if tonight's gate is its cached run.
  gated = [r for r in closed if r.get("owner") == owner and r.get("gate") is not None]
  if gated:
    last = gated[-1]
    carried = {k: last.get(k) for k in ("live_version", "spans", "rows")}
    serving_nights.record_facts(
      serving_dir, model_name, night, _CARRIED_GATE_STEP, {**carried, "report": last["gate"]}
    )
  return closed


def use_carried_gate(serving_dir: str, model_name: str, night: str) -> bool:
  """Takes the gate facts `begin_night` carried from an interrupted night as this night's, when
  this night recorded none: its DataGate was that night's run, cached (same data, same live
  version). The caller knows it was cached.

  Returns:
    Whether the carried facts were taken.
  """
  facts = serving_nights.open_facts(serving_dir, model_name, night)
  if GATE_STEP in facts or _CARRIED_GATE_STEP not in facts:
    return False
  serving_nights.record_facts(serving_dir, model_name, night, GATE_STEP, facts[_CARRIED_GATE_STEP])
  return True


def record_step(
  serving_dir: str,
  model_name: str,
  step: str,
  facts: Mapping[str, Any],
  night: str | None = None,
  owner: str = "",
) -> bool:
  """Keeps one step's facts for the night's record; a no-op outside a night.

  A night's first facts from a step, where nothing opened the night before (Kubeflow's first
  recording step), open it with `begin_night` for `owner`.

  Args:
    serving_dir, model_name: the model folder whose nights log gets the record.
    step: GATE_STEP or PUSHER_STEP.
    facts: what the step found, as JSON values.
    night: the night's id (`night_id(exec_properties)`); None: `NIGHT_ID_ENV`'s, if any.
    owner: who runs it (`night_owner(exec_properties)`); "": `NIGHT_OWNER_ENV`'s, if any.

  Returns:
    Whether the facts were written.
  """
  night = night or night_id()
  if night is None:
    return False
  # A night id given while the environment names none came from the orchestrator (the step's
  # `night_id` parameter): a Kubeflow night.
  orchestrated = not os.environ.get(NIGHT_ID_ENV, "").strip()
  owner = owner or night_owner() or (KUBEFLOW_OWNER if orchestrated else "")
  if owner and not serving_nights.open_facts(serving_dir, model_name, night):
    begin_night(serving_dir, model_name, night, owner)
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
  notes = (facts.get(DATA_STEP) or {}).get(NOTES_FIELD)
  return {
    "night": night,
    "owner": (facts.get(NIGHT_STEP) or {}).get("owner"),
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
    **({NOTES_FIELD: list(notes)} if notes else {}),
  }


def _ending_record(
  facts: Mapping[str, Mapping[str, Any]],
  night: str,
  *,
  succeeded: bool,
  error: str,
  started: str | None,
  seconds: float | None,
  outcome: str | None = None,
  owner: str = "",
) -> dict[str, Any]:
  """The record of a night ending now.

  `outcome` (TIMED_OUT, SKIPPED, INTERRUPTED) overrides the facts'. Where the caller knows no
  start, the night's own (`begin_night`'s) is taken, and the seconds from it; `owner` names a
  night that never opened (one that failed its up-front checks).
  """
  opened = facts.get(NIGHT_STEP) or {}
  ended = layout.utc_now()
  started = started or opened.get("started") or ended
  if seconds is None and opened.get("started") == started:
    seconds = _seconds_between(started, ended)
  record = build_record(
    facts,
    night=night,
    succeeded=succeeded,
    error=error,
    started=started,
    ended=ended,
    seconds=seconds,
  )
  if outcome is not None:
    record.update(outcome=outcome, line=error or outcome)
  record["owner"] = record["owner"] or owner or None
  return record


def _seconds_between(started: str, ended: str) -> float | None:
  begin, end = layout.parse_utc(started), layout.parse_utc(ended)
  return (end - begin).total_seconds() if begin and end else None


def close_night(
  serving_dir: str,
  model_name: str,
  night: str,
  *,
  succeeded: bool,
  error: str = "",
  started: str | None = None,
  seconds: float | None = None,
  outcome: str | None = None,
  owner: str = "",
) -> dict[str, Any]:
  """Writes a night's record to the nights log and removes its open facts.

  A night that ended before its gate or Pusher said which version was live (it failed its
  checks, its ExampleGen or its time limit) gets the one live as it ends: it pushed nothing.

  Args:
    outcome: TIMED_OUT, SKIPPED or INTERRUPTED, which the facts cannot tell; None: from the
      facts.
    owner: who ran a night that never opened (`_ending_record`).

  Returns:
    The record.
  """
  facts = serving_nights.open_facts(serving_dir, model_name, night)
  record = _ending_record(
    facts,
    night,
    succeeded=succeeded,
    error=error,
    started=started,
    seconds=seconds,
    outcome=outcome,
    owner=owner,
  )
  if record["live_version"] is None and not facts.get(PUSHER_STEP):
    try:
      live = serving_live.live_version(serving_dir, model_name)
    except Exception as e:  # A view of the record: it must not keep the record unwritten.
      _LOG.warning("The live version of %s could not be read: %s", serving_dir, e)
      live = None
    record["live_version"] = live.version if live is not None else None
  serving_nights.append_record(serving_dir, model_name, record)
  serving_nights.close_facts(serving_dir, model_name, night)
  close_interrupted(serving_dir, model_name)
  return record


def close_interrupted(
  serving_dir: str, model_name: str, owner: str = "", keep: str | None = None
) -> list[dict[str, Any]]:
  """Records nights that died before they could close themselves, as interrupted.

  An open night of `owner` (other than `keep`) is closed at once: the caller proves it dead.
  Any other open night is closed once its facts are INTERRUPTED_AFTER_S old. A version the
  night published (found by its facts, or by its time in the serving folder when the process
  died between publishing and recording) is named in its record, so that every pushed version
  has one night record.

  Returns:
    The records written.
  """
  closed = []
  stale = set(serving_nights.stale_nights(serving_dir, model_name, INTERRUPTED_AFTER_S))
  for night in serving_nights.open_nights(serving_dir, model_name):
    if night == keep:
      continue
    facts = serving_nights.open_facts(serving_dir, model_name, night)
    mine = bool(owner) and (facts.get(NIGHT_STEP) or {}).get("owner") == owner
    if not (mine or night in stale):
      continue
    started = (facts.get(NIGHT_STEP) or {}).get("started", "")
    record = build_record(
      facts,
      night=night,
      succeeded=False,
      error="",
      started=started,
      ended=layout.utc_now(),
      seconds=None,
    )
    line = "interrupted: its process was killed or lost before the night ended"
    record.update(outcome=INTERRUPTED, line=line)
    if record.get("version") is None and started:
      pushed = _unrecorded_versions(serving_dir, model_name, started)
      if pushed:
        record.update(version=pushed[-1], line=f"{line}, after it pushed version {pushed[-1]}")
    serving_nights.append_record(serving_dir, model_name, record)
    serving_nights.close_facts(serving_dir, model_name, night)
    closed.append(record)
  return closed


def _unrecorded_versions(serving_dir: str, model_name: str, since: str) -> list[int]:
  """Versions pushed at or after `since` (a UTC time stamp) that no night record names."""
  from components.serving import manifest, versions

  named = {r.get("version") for r in serving_nights.read_records(serving_dir, model_name)}
  return [
    row["version"]
    for row in versions.describe_versions(serving_dir, model_name)
    if row.get("event") == manifest.PUSH_EVENT
    and str(row.get("created_at") or "") >= since
    and row["version"] not in named
  ]


def outcome_line(record: Mapping[str, Any]) -> str:
  """'<outcome>: <line>', once: a line that starts with its outcome's words ("timed out: ...",
  "pushed version 2") is not prefixed again; the record's notes follow it ("(and span-3/ holds
  no *.csv file ...)")."""
  outcome, line = str(record.get("outcome")), str(record.get("line") or "")
  notes = record.get(NOTES_FIELD)
  tail = f" (and {'; '.join(notes)})" if notes else ""
  if line.lower().startswith((outcome.replace("_", " "), outcome)):
    return line + tail
  return f"{outcome}: {line}{tail}"


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
  outcome: str | None = None,
  heartbeat: str = "",
  owner: str = "",
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
    outcome: TIMED_OUT or SKIPPED (the facts cannot tell those); None: from the facts.
    heartbeat: a notify_lib target pinged at the end of every night, its URL with '/fail'
      appended when the night did not end well ('' for none).
    owner: who ran it, for a night that ended before it opened (its up-front checks failed).

  Returns:
    (the record, one dict per notice: target, ok, attempts, error).
  """
  from components.nights import night_notices  # apprise, only where a night ends

  if (
    outcome is None
    and not notify
    and not succeeded
    and serving_nights.holds_only_open_nights(serving_dir, model_name)
  ):
    record = _discard_night(
      serving_dir, model_name, night, error=error, started=started, seconds=seconds
    )
    return record, night_notices.ping(heartbeat, record, model_name)
  ending = {
    "succeeded": succeeded,
    "error": error,
    "started": started,
    "seconds": seconds,
    "outcome": outcome,
    "owner": owner,
  }
  try:
    record = close_night(serving_dir, model_name, night, **ending)
  except Exception as e:  # The folder is unwritable or gone: the notices must still go out.
    _LOG.warning("The night's record could not be written to %s: %s", serving_dir, e)
    record = _ending_record({}, night, **ending)
    record["record_error"] = f"{type(e).__name__}: {e}"
  notices = night_notices.send(record, model_name, notify, every_night=every_night)
  return record, notices + night_notices.ping(heartbeat, record, model_name)


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
  facts = serving_nights.open_facts(serving_dir, model_name, night)
  record = _ending_record(
    facts, night, succeeded=False, error=error, started=started, seconds=seconds
  )
  try:
    serving_nights.discard(serving_dir, model_name, night)
  except Exception as e:  # Left-over facts are closed as interrupted by a later night.
    _LOG.warning("The night's facts could not be removed from %s: %s", serving_dir, e)
  return record
