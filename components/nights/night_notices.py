"""A night's notices: the message of its record, sent to the --notify targets and the heartbeat.

`nights_lib.end_night` calls these once the night's record is built; a night ended badly when
its outcome is one of `nights_lib.BAD_OUTCOMES`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.nights import nights_lib, notify_lib


def send(
  record: Mapping[str, Any], model_name: str, notify: Sequence[str], *, every_night: bool
) -> list[dict[str, Any]]:
  """Sends a night's notice to every target, when it is one they are told of: a night that
  ended badly or noted something of its data (a span folder without files), or any night with
  `every_night`.

  Returns:
    One dict per notice: target, ok, attempts, error; [] when none was due.
  """
  failed = _failed(record)
  if not notify or not (every_night or failed or record.get(nights_lib.NOTES_FIELD)):
    return []
  title, body = message(record, model_name)
  targets = [notify_lib.Target(t) for t in notify]
  return [dataclasses.asdict(d) for d in notify_lib.send(targets, title, body, failed=failed)]


def ping(heartbeat: str, record: Mapping[str, Any], model_name: str) -> list[dict[str, Any]]:
  """Pings the heartbeat target at a night's end: its URL, or its URL + '/fail' (the failure
  signal of healthchecks-style dead man's switches) when the night did not end well.

  Returns:
    [the delivery, under the target's printable label], or [] without a heartbeat.
  """
  if not heartbeat:
    return []
  target = notify_lib.Target(heartbeat)
  failed = _failed(record)
  label = f"heartbeat {target.label()}" + (" (fail)" if failed else "")
  try:
    url = notify_lib.resolve_url(target)
  except notify_lib.NotifyError as e:
    return [{"target": label, "ok": False, "attempts": 0, "error": str(e)}]
  if failed:
    base, query = url.split("?", 1) if "?" in url else (url, "")
    url = base.rstrip("/") + "/fail" + (f"?{query}" if query else "")
  title, body = message(record, model_name)
  (delivery,) = notify_lib.send([notify_lib.Target(url)], title, body, failed=failed)
  return [{**dataclasses.asdict(delivery), "target": label}]


def message(record: Mapping[str, Any], model_name: str) -> tuple[str, str]:
  """(title, body) of a night's notification: the outcome in one line, then the record."""
  title = f"{model_name}: night {nights_lib.outcome_line(record)}"
  body = title + "\n\n" + json.dumps(dict(record), indent=2, sort_keys=True, default=str)
  return title, body


def _failed(record: Mapping[str, Any]) -> bool:
  return record["outcome"] in nights_lib.BAD_OUTCOMES
