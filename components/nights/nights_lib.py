"""The record of the nights: what each run found, decided and pushed, kept in the serving folder.

A night's facts come from the steps that know them, while it runs: the data gate (spans, rows,
the gate's findings and drift scores) and the Pusher (metrics against the live model, the
blessing, the version pushed). Each writes its facts under the night's id into the model
folder (`.nights-open/<id>/<step>.json`). When the night ends, successful or not, whoever ran
it closes it: `run_local.py` after LocalDagRunner returns, the Kubeflow exit handler after the
last step, even a failed one. Closing merges the facts with the outcome into one record,
appends it to the nights log (`nights.jsonl`, or one object per record under `.nights/` on an
object store) and removes the open folder.

The night's id reaches the steps through the environment (`NIGHT_ID_ENV`): `run_local.py`
sets it, and every Kubeflow step gets it from the run's id (`kubeflow_lib.add_exit_handler`).
A step run without it (a pipeline driven another way) records nothing.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from components import serving_layout, storage
from components.pusher import local_store, object_store_lib

_LOG = logging.getLogger(__name__)

NIGHT_ID_ENV = "TFXKIT_NIGHT_ID"
OPEN_DIR = ".nights-open"
# Steps that record facts.
GATE_STEP = "gate"
PUSHER_STEP = "pusher"
# Outcomes.
PUSHED = "pushed"
NOT_PUSHED = "not_pushed"
STOPPED = "stopped"
FAILED = "failed"
OUTCOMES = (PUSHED, NOT_PUSHED, STOPPED, FAILED)


def night_id() -> str | None:
  """The id of the night this process runs a step of, or None."""
  value = os.environ.get(NIGHT_ID_ENV, "").strip()
  return value or None


def _model_dir(serving_dir: str, model_name: str) -> str:
  if storage.is_remote(serving_dir):
    return posixpath.join(serving_dir.rstrip("/"), model_name)
  return os.path.join(serving_dir, model_name)


def _fileio():
  from tfx.dsl.io import fileio

  return fileio


def record_step(serving_dir: str, model_name: str, step: str, facts: Mapping[str, Any]) -> bool:
  """Keeps one step's facts for the night's record; a no-op outside a night.

  Returns:
    Whether the facts were written.
  """
  night = night_id()
  if night is None:
    return False
  fileio = _fileio()
  folder = posixpath.join(_model_dir(serving_dir, model_name), OPEN_DIR, _safe(night))
  fileio.makedirs(folder)
  path = posixpath.join(folder, f"{step}.json")
  tmp = f"{path}.tmp"
  with fileio.open(tmp, "w") as f:
    f.write(json.dumps(dict(facts), sort_keys=True, default=str))
  fileio.rename(tmp, path, overwrite=True)
  return True


def _safe(night: str) -> str:
  return "".join(c if c.isalnum() or c in "-_.:" else "_" for c in night)[:120]


def open_facts(serving_dir: str, model_name: str, night: str) -> dict[str, dict[str, Any]]:
  """The facts the steps of a night have recorded so far, by step."""
  fileio = _fileio()
  folder = posixpath.join(_model_dir(serving_dir, model_name), OPEN_DIR, _safe(night))
  out: dict[str, dict[str, Any]] = {}
  if not fileio.exists(folder):
    return out
  for entry in fileio.listdir(folder):
    name = entry.rstrip("/")
    if not name.endswith(".json"):
      continue
    try:
      with fileio.open(posixpath.join(folder, name), "r") as f:
        out[name[: -len(".json")]] = json.loads(f.read())
    except (OSError, json.JSONDecodeError):
      continue
  return out


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
    facts: step -> facts (`open_facts`).
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
    "live_version": pusher.get("live_version", gate.get("live_version")),
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
  facts = open_facts(serving_dir, model_name, night)
  record = build_record(
    facts,
    night=night,
    succeeded=succeeded,
    error=error,
    started=started or serving_layout.utc_now(),
    ended=serving_layout.utc_now(),
    seconds=seconds,
  )
  append_record(serving_dir, model_name, record)
  fileio = _fileio()
  folder = posixpath.join(_model_dir(serving_dir, model_name), OPEN_DIR, _safe(night))
  if fileio.exists(folder):
    fileio.rmtree(folder)
  return record


def append_record(serving_dir: str, model_name: str, record: Mapping[str, Any]) -> None:
  """Appends one record to the model's nights log (local file or object-store folder)."""
  base = _model_dir(serving_dir, model_name)
  if storage.is_remote(base):
    object_store_lib.append_history(base, record, name=serving_layout.NIGHTS_DIR)
    return
  os.makedirs(base, exist_ok=True)
  local_store.append_history(base, record, name=serving_layout.NIGHTS_FILE)


def read_records(serving_dir: str, model_name: str) -> list[dict[str, Any]]:
  """The nights' records, oldest first."""
  base = _model_dir(serving_dir, model_name)
  if storage.is_remote(base):
    return object_store_lib.read_history(base, name=serving_layout.NIGHTS_DIR)
  if not os.path.isdir(base):
    return []
  return local_store.read_history(base, name=serving_layout.NIGHTS_FILE)


def new_night_id() -> str:
  """A fresh id for a night run on this machine (Kubeflow uses the run's own id)."""
  import uuid

  return f"{serving_layout.utc_now().replace(':', '')}-{uuid.uuid4().hex[:8]}"


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
  A night with nobody to notify and no model folder yet (a first try that failed) leaves the
  serving folder as it was: its record is returned, not written.

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
  if not notify and not _fileio().exists(_model_dir(serving_dir, model_name)):
    record = build_record(
      open_facts(serving_dir, model_name, night),
      night=night,
      succeeded=succeeded,
      error=error,
      started=started or serving_layout.utc_now(),
      ended=serving_layout.utc_now(),
      seconds=seconds,
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
      started=started or serving_layout.utc_now(),
      ended=serving_layout.utc_now(),
      seconds=seconds,
    )
    record["record_error"] = f"{type(e).__name__}: {e}"
  deliveries: list[dict[str, Any]] = []
  if notify and (every_night or record["outcome"] in (STOPPED, FAILED)):
    from components.nights import notify_lib

    title, body = message(record, model_name)
    targets = [notify_lib.Target(t) for t in notify]
    failed = record["outcome"] in (STOPPED, FAILED)
    for delivery in notify_lib.send(targets, title, body, failed=failed):
      deliveries.append(dataclasses.asdict(delivery))
  return record, deliveries


def message(record: Mapping[str, Any], model_name: str) -> tuple[str, str]:
  """(title, body) of a night's notification: the outcome in one line, then the record."""
  title = f"{model_name}: night {record.get('outcome')}: {record.get('line')}"
  body = title + "\n\n" + json.dumps(dict(record), indent=2, sort_keys=True, default=str)
  return title, body
