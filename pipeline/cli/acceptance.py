"""Accepting a data change: `schedule.py local accept` and `unaccept`, and `--accept-changes`.

A name accepted must be one the data gate can find a change in: a column of the live version's
training schema or of tonight's data (for `accept`, the columns the last night's gate named;
for run_local.py's `--accept-changes`, the input files' headers), or `:row_count`,
`:repeated_data` or `all`. Anything else is refused in one line naming the nearest column, and
nothing is recorded. An acceptance records why, who (user and host) and when; `unaccept` takes
it back, recorded the same way, in the serving folder's history (`components.serving.history`).
"""

from __future__ import annotations

import difflib
import getpass
import os
import socket
from collections.abc import Collection, Iterable, Sequence

from components.data_gate import thresholds as th
from core.errors import UserInputError

# Names that are no column: the dataset checks, and every change at once.
SPECIAL_NAMES = (th.ROW_COUNT, th.REPEATED_DATA, th.ALL)
TONIGHT = "tonight's data"


def who() -> dict[str, str]:
  """{"user", "host"} of whoever runs the command ('' where either cannot be told)."""
  try:
    user = getpass.getuser()
  except (OSError, KeyError, ImportError):  # No login name and no passwd entry (containers).
    user = ""
  try:
    host = socket.gethostname()
  except OSError:
    host = ""
  return {"user": user, "host": host}


def check_names(names: Sequence[str], columns: Collection[str], where: str) -> None:
  """Refuses names that are neither special nor one of `columns`.

  Args:
    names: the names to accept.
    columns: the columns there are.
    where: where `columns` come from, e.g. "live version 3 of 'taxi' or in tonight's data".

  Raises:
    UserInputError: one line naming each unknown name and the nearest column, e.g. "no column
      'trip_mils' in live version 3 of 'taxi' or in tonight's data; did you mean 'trip_miles'?"
  """
  unknown = [n for n in names if n not in SPECIAL_NAMES and n not in columns]
  if not unknown:
    return
  known = sorted(set(columns))
  line = f"no column {' or '.join(repr(n) for n in unknown)} in {where}"
  hints = []
  for name in unknown:
    close = difflib.get_close_matches(name, known, n=1)
    if close:
      hints.append(repr(close[0]) + (f" for {name!r}" if len(unknown) > 1 else ""))
  if hints:
    raise UserInputError(f"{line}; did you mean {', '.join(hints)}?")
  special = ", ".join(SPECIAL_NAMES)
  if not known:
    raise UserInputError(f"{line}; only {special} can be accepted there.")
  shown = ", ".join(repr(c) for c in known[:8]) + (", ..." if len(known) > 8 else "")
  raise UserInputError(
    f"{line}; pass one of the {len(known)} columns there ({shown}) or {special}."
  )


def _live_where(model_name: str, version: int, schema: list[str] | None) -> str:
  kept = "" if schema is not None else ", which kept no training schema,"
  return f"live version {version} of {model_name!r}{kept}"


def night_columns(serving_dir: str, model_name: str) -> list[str]:
  """The columns the last night the data gate compared named: its drift and its findings."""
  from components.serving import nights

  for record in reversed(nights.read_records(serving_dir, model_name)):
    gate = record.get("gate") or {}
    findings = [f.get("column") for f in gate.get("findings") or []]
    names = [*(gate.get("drift") or {}), *findings]
    if names:
      return [n for n in names if isinstance(n, str)]
  return []


def accept(serving_dir: str, model_name: str, columns: Sequence[str], reason: str) -> int:
  """Records accepted data changes against the live version and says what that means.

  Raises:
    UserInputError: for no column, no reason, nothing live, or a name that is no column (then
      nothing is recorded).
  """
  from components.serving import history, live
  from components.serving.paths import PusherError

  names = th.parse_accepted(columns)
  if not names:
    raise UserInputError("pass --columns: the columns whose changes are deliberate (or all).")
  if not reason.strip():
    raise UserInputError("pass --reason: one sentence on why the change is deliberate.")

  def check(current: live.LiveVersion) -> None:
    if all(n in SPECIAL_NAMES for n in names):
      return
    schema = live.training_columns(current)
    where = f"{_live_where(model_name, current.version, schema)} or in {TONIGHT}"
    check_names(names, {*(schema or []), *night_columns(serving_dir, model_name)}, where)

  by = who()
  try:
    entry = history.record_acceptance(
      serving_dir, model_name, names, reason.strip(), who=by, check=check
    )
  except PusherError as e:
    raise UserInputError(str(e)) from None
  print(
    f"Accepted changes to {', '.join(names)} against live version {entry['live_version']} of "
    f"{model_name!r} ({_by(by)}: {reason.strip()}): the data gate lets them through until "
    "another version goes live, or until taken back with: python pipeline/schedule.py local "
    f"unaccept --serving-dir {serving_dir} --model-name {model_name} --columns "
    f"{','.join(names)} (recorded in the serving folder's history)."
  )
  return 0


def unaccept(serving_dir: str, model_name: str, columns: Sequence[str]) -> int:
  """Withdraws accepted data changes against the live version; `all` withdraws every one.

  Raises:
    UserInputError: for no column, nothing live, or a name not accepted (naming what is).
  """
  from components.serving import history
  from components.serving.paths import PusherError

  names = th.parse_accepted(columns)
  if not names:
    raise UserInputError(
      "pass --columns: the accepted columns to take back, or all to take back every one."
    )
  by = who()
  try:
    entry = history.record_withdrawal(
      serving_dir, model_name, None if th.ALL in names else names, who=by
    )
  except PusherError as e:
    raise UserInputError(str(e)) from None
  print(
    f"Took back the acceptance of {', '.join(entry['columns'])} against live version "
    f"{entry['live_version']} of {model_name!r} ({_by(by)}): from the next night the data gate "
    "stops such changes again (recorded in the serving folder's history)."
  )
  return 0


def _by(by: dict[str, str]) -> str:
  return "by " + ("@".join(p for p in (by["user"], by["host"]) if p) or "an unknown user")


def check_flag(
  values: Sequence[str],
  files: Iterable[str],
  delimiter: str,
  serving_dir: str,
  model_name: str,
) -> None:
  """Refuses `--accept-changes` names that are no column of tonight's input files (their
  headers) nor of the live version's training schema.

  Args:
    values: the `--accept-changes` flags.
    files: tonight's input files.
    delimiter: their field delimiter.
    serving_dir, model_name: where the live version is.

  Raises:
    CheckError: one line naming the flag, each unknown name and the nearest column.
  """
  wanted = [n for n in th.parse_accepted(values) if n not in SPECIAL_NAMES]
  if not wanted:
    return
  from components.example_gen import csv_read

  header: set[str] = set()
  for path in files:
    header.update(csv_read.read_header(path, delimiter))
    if all(n in header for n in wanted):
      return
  # A column gone from tonight's data is still one the live version was trained on.
  from components import storage
  from components.serving import live

  current = None
  if storage.is_remote(serving_dir) or os.path.isdir(os.path.join(serving_dir, model_name)):
    current = live.live_version(serving_dir, model_name)
  where = TONIGHT
  columns = set(header)
  if current is not None:
    schema = live.training_columns(current)
    columns.update(schema or [])
    where = f"{_live_where(model_name, current.version, schema)} or in {TONIGHT}"
  from pipeline.cli.checks import CheckError

  try:
    check_names(wanted, columns, where)
  except UserInputError as e:
    raise CheckError(f"--accept-changes: {e}") from None
