"""`schedule.py local install|list|remove|run-now|status|night`: one output folder's cron job.

- install: checks everything about the new entry (the schedule fires within a year, the job's
  run_local.py flags, the interpreter, the time limit) before the crontab is read, then writes
  it atomically; on any error the crontab stays byte for byte as it was.
- run-now: runs the installed line's command now, as cron would: /bin/sh, cron's bare
  environment plus the crontab's own variable lines, the same lock, log and exit status.
- status: one line on the last night; non-zero when a night the schedule expected is missing
  (its run time plus a grace has passed with no night begun) or the last night did not end well.
- night: what the crontab line runs (`night_job.run_night`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from components import storage
from pipeline.cli import night_job
from pipeline.cli.scheduling import cron
from pipeline.cli.scheduling import crontab as crontab_lib
from pipeline.definition.config import REPO_ROOT

# Beside the job's output: what install wrote (the schedule, its time limit, when).
SCHEDULE_FILE = "schedule.json"
DEFAULT_GRACE = "1h"
# What cron puts in a job's environment (Debian's cron: HOME, LOGNAME, PATH, SHELL).
CRON_PATH = "/usr/bin:/bin"
_ASSIGNMENT = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")


def add_flags(local: argparse.ArgumentParser) -> None:
  """The flags of these actions (the nights actions' flags are schedule.py's own)."""
  local.add_argument(
    "--time-limit",
    default=night_job.DEFAULT_TIME_LIMIT,
    help="install, night: stop a night past this long and record it as timed out (default: "
    "%(default)s; e.g. 90m, 6h, 1d)",
  )
  local.add_argument(
    "--grace",
    default=DEFAULT_GRACE,
    help="status: how late a night may begin before it counts as missing (default: %(default)s)",
  )


def run(args: argparse.Namespace, run_local_args: list[str], output_dir: str, job: str) -> int:
  """Runs install, list, remove, run-now, status or night for `job` in `output_dir`."""
  where = args.crontab_file or "your crontab"
  if args.action == "install":
    return _install(args, run_local_args, output_dir, job, where)
  if args.action == "night":
    limit = night_job.parse_duration(args.time_limit)
    return night_job.run_night(output_dir, job, limit, run_local_args, python=args.python)
  text = crontab_lib.read_crontab(args.crontab_file)
  if args.action == "list":
    return _list(text, job, where)
  if args.action == "remove":
    return _remove(args, text, output_dir, job, where)
  entry = _installed(text, job, where)
  if args.action == "run-now":
    return _run_now(text, entry, output_dir)
  return _status(args, entry, output_dir)


def _list(text: str, job: str, where: str) -> int:
  entries = crontab_lib.list_entries(text)
  if not entries:
    print(f"No tfx-pipeline-kit entries in {where}.")
  for entry in entries:
    note = ""
    if not entry.line:
      note = "disabled (its block holds no active line: install again to restore it)"
    elif entry.legacy:
      note = " (old one-line entry: run install again to turn it into a block)"
    print(f"{'*' if entry.job == job else ' '} {entry.job}: {entry.schedule}{note}")
    if entry.line:
      print(f"    {entry.line}")
  return 0


def _remove(args: argparse.Namespace, text: str, output_dir: str, job: str, where: str) -> int:
  new_text, removed = crontab_lib.remove_entry(text, job)
  if not removed:
    print(f"Nothing to remove: {where} has no {job!r} entry.")
    return 0
  crontab_lib.write_crontab(args.crontab_file, new_text)
  pathlib.Path(output_dir, SCHEDULE_FILE).unlink(missing_ok=True)
  print(f"Removed {job!r} from {where}.")
  return 0


def _installed(text: str, job: str, where: str) -> crontab_lib.CrontabEntry:
  entries = crontab_lib.find_entries(text, job)
  if not entries:
    raise cron.ScheduleError(
      f"{where} has no {job!r} entry; install it first (schedule.py local install --cron ...)."
    )
  if not entries[0].line:
    raise cron.ScheduleError(
      f"the {job!r} block in {where} holds no active line (its line was commented out?), so "
      "cron runs no night of it; install it again (schedule.py local install --cron ...), or "
      "remove it."
    )
  return entries[0]


def _install(
  args: argparse.Namespace, run_local_args: list[str], output_dir: str, job: str, where: str
) -> int:
  if not args.cron:
    raise cron.ScheduleError("local install needs --cron, e.g. --cron '0 2 * * *'.")
  spec = cron.parse_cron(args.cron, seconds_field=args.seconds_field)
  if spec.five_field is None:
    raise cron.ScheduleError(
      f"{args.cron!r} needs a seconds field other than 0, which the system cron lacks."
    )
  night_job.parse_duration(args.time_limit)
  args.python = args.python or str(REPO_ROOT / ".venv" / "bin" / "python")
  if not os.access(args.python, os.X_OK):
    raise cron.ScheduleError(
      f"Interpreter {args.python} not found; create the repo's .venv or pass --python PATH."
    )
  run_local_args = _absolute_paths(run_local_args)
  _check_run_local_args(output_dir, run_local_args)
  command = crontab_lib.crontab_command(
    repo_root=str(REPO_ROOT),
    python=args.python,
    output_dir=output_dir,
    job_name=job,
    run_local_args=run_local_args,
    time_limit=args.time_limit,
  )
  next_runs = cron.describe_next_runs(spec, local_cron=True)
  text = crontab_lib.read_crontab(args.crontab_file)
  _refuse_another_folders_job(text, job, output_dir, where)
  new_text = crontab_lib.install_entry(text, spec.five_field, command, job)
  for name in _notify_env_names(run_local_args):
    print(
      f"warning: cron starts the job with an almost empty environment, so --notify env:{name} "
      f"finds {name} only if the crontab sets it; --notify file:PATH (mode 600) needs nothing."
    )
  _write_schedule_file(output_dir, job, spec.five_field, args.time_limit, new_text == text)
  if new_text != text:
    crontab_lib.write_crontab(args.crontab_file, new_text)
  print(f"Schedule {spec.source!r}: cron {spec.five_field!r} in the system's local time zone")
  print("Next runs:")
  for line in next_runs:
    print(f"  {line}")
  state = "Installed" if new_text != text else "Already installed, unchanged:"
  print(
    f"{state} {job!r} in {where} (the lines from '{crontab_lib.BLOCK_BEGIN}{job}' to "
    f"'{crontab_lib.BLOCK_END}{job}'); each night may run "
    f"{night_job.describe_duration(night_job.parse_duration(args.time_limit))}; logs go to "
    f"{output_dir}/logs/nightly.log. Try it now: schedule.py local run-now --output-dir "
    f"{shlex.quote(output_dir)}{_crontab_flag(args)}"
  )
  return 0


def _crontab_flag(args: argparse.Namespace) -> str:
  flags = f" --crontab-file {shlex.quote(args.crontab_file)}" if args.crontab_file else ""
  return flags + (f" --job-name {args.job_name}" if args.job_name else "")


# What schedule.json says of the entry, besides when it was installed.
_SCHEDULE_KEYS = ("job", "cron", "time_limit")


def _write_schedule_file(
  output_dir: str, job: str, five_field: str, time_limit: str, unchanged: bool
) -> None:
  """Writes the job's schedule.json. An install that changes nothing keeps the time of the one
  before: `status` counts missed nights from it, and a configuration tool that installs again
  every hour would otherwise silence that check."""
  path = pathlib.Path(output_dir, SCHEDULE_FILE)
  path.parent.mkdir(parents=True, exist_ok=True)
  installed = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
  facts = {"job": job, "cron": five_field, "time_limit": time_limit, "installed_at": installed}
  try:
    before = json.loads(path.read_text())
  except (OSError, ValueError):
    before = None
  same = isinstance(before, dict) and all(before.get(k) == facts[k] for k in _SCHEDULE_KEYS)
  if unchanged and same and before.get("installed_at"):
    facts["installed_at"] = before["installed_at"]
  tmp = path.with_name(f".{path.name}.tmp")
  tmp.write_text(json.dumps(facts, indent=2) + "\n")
  tmp.replace(path)


def _notify_env_names(run_local_args: Sequence[str]) -> list[str]:
  """The environment variables the job's --notify env:NAME targets read."""
  names = []
  for i, arg in enumerate(run_local_args):
    value = arg.partition("=")[2] if arg.startswith("--notify=") else None
    if arg == "--notify" and i + 1 < len(run_local_args):
      value = run_local_args[i + 1]
    if value and value.startswith("env:"):
      names.append(value[len("env:") :])
  return names


# run_local.py flags that name a local path or an object-store URI.
_PATH_FLAGS = (
  "--data-root",
  "--module-file",
  "--transform-module",
  "--schema",
  "--serving-dir",
  "--pipeline-root",
)


def _absolute_paths(run_local_args: Sequence[str]) -> list[str]:
  """The job's flags with relative paths made absolute from the folder install runs in, as
  --output-dir is: cron runs the job from the repository root, where `data/x` was the
  repository's (the flags take no abbreviations, so each path flag is spelled in full)."""

  def absolute(value: str) -> str:
    return value if not value or storage.is_remote(value) else os.path.abspath(value)

  out = list(run_local_args)
  for i, arg in enumerate(out):
    flag, equals, value = arg.partition("=")
    if flag not in _PATH_FLAGS:
      continue
    if equals:
      out[i] = f"{flag}={absolute(value)}"
    elif i + 1 < len(out):
      out[i + 1] = absolute(out[i + 1])
  return out


def _check_run_local_args(output_dir: str, run_local_args: Sequence[str]) -> None:
  """Checks the nightly job's run_local.py flags now, with run_local.py's own checks.

  The job runs from the repository root, so what is still relative (a path in a flag that is
  not in _PATH_FLAGS) is checked from there too. A misspelt flag or a bad value is refused at
  install time instead of failing every night.

  Raises:
    UserInputError: one line naming the fix.
  """
  from pipeline.cli import local as run_local

  parser = run_local.build_parser(prog="schedule.py local install -- (run_local.py options)")
  args = parser.parse_args(["--output-dir", output_dir, *run_local_args])
  here = os.getcwd()
  os.chdir(REPO_ROOT)
  try:
    run_local.check_args(args)
  finally:
    os.chdir(here)


# ----------------------------------------------------------------------------- run-now


def cron_environment(crontab_text: str, before_line: int) -> dict[str, str]:
  """The environment cron gives a job: HOME, LOGNAME, USER, SHELL, PATH, then the crontab's
  own NAME=value lines above the job's line, in order."""
  import getpass

  env = {
    "HOME": os.path.expanduser("~"),
    "LOGNAME": getpass.getuser(),
    "USER": getpass.getuser(),
    "SHELL": "/bin/sh",
    "PATH": CRON_PATH,
  }
  for line in crontab_text.split("\n")[:before_line]:
    match = _ASSIGNMENT.match(line)
    if match and not line.lstrip().startswith("#"):
      value = match.group(2)
      if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1]
      env[match.group(1)] = value
  return env


def _run_now(text: str, entry: crontab_lib.CrontabEntry, output_dir: str) -> int:
  command = crontab_lib.cron_command_of(entry.line)
  if not command:
    raise cron.ScheduleError(f"The {entry.job!r} entry has no command; install it again.")
  body = next(i for i in range(entry.first, entry.last + 1) if text.split("\n")[i] == entry.line)
  env = cron_environment(text, body)
  log = pathlib.Path(output_dir, "logs", night_job.LOG_NAME)
  size = log.stat().st_size if log.is_file() else 0
  print(f"Running {entry.job!r} now, as cron would (/bin/sh, cron's environment): {command}")
  sys.stdout.flush()
  code = subprocess.run(["/bin/sh", "-c", command], env=env, cwd=env["HOME"], check=False)
  if log.is_file():
    with open(log, "rb") as f:
      f.seek(size if log.stat().st_size >= size else 0)
      tail = f.read().decode("utf-8", "replace").splitlines()[-25:]
    print(*(f"  {line}" for line in tail), sep="\n")
  print(f"The night ended with exit status {code.returncode}; its log: {log}")
  return code.returncode


# ----------------------------------------------------------------------------- status


def _refuse_another_folders_job(text: str, job: str, output_dir: str, where: str) -> None:
  """Installing a job replaces the entry of its name: one that runs another output folder is
  not silently dropped (two folders installed under one --job-name left only the second)."""
  for entry in crontab_lib.find_entries(text, job):
    words = shlex.split(crontab_lib.cron_command_of(entry.line))
    flag = words.index("--output-dir") if "--output-dir" in words[:-1] else None
    theirs = words[flag + 1] if flag is not None else None
    if theirs is not None and os.path.abspath(theirs) != os.path.abspath(output_dir):
      raise cron.ScheduleError(
        f"{where} already has a job {job!r} for --output-dir {theirs}; pass another --job-name "
        f"(or leave it out for one of its own), or remove that job first (schedule.py local "
        f"remove --output-dir {theirs} --job-name {job})."
      )


def _run_local_args_of(entry: crontab_lib.CrontabEntry) -> tuple[list[str], str]:
  """(run_local.py's flags, the time limit) of an installed line; older lines had no limit."""
  words = shlex.split(crontab_lib.cron_command_of(entry.line))
  limit = night_job.DEFAULT_TIME_LIMIT
  if "--time-limit" in words:
    limit = words[words.index("--time-limit") + 1]
  if "--" in words:  # `... local night ... -- ARGS >> LOG 2>&1`
    args = words[words.index("--") + 1 :]
    return args[: len(args) - 1 - args[::-1].index(">>")] if ">>" in args else args, limit
  script = "pipeline/run_local.py"  # An entry from before `local night`: `... ARGS >> LOG ...`
  args = words[words.index(script) + 1 :] if script in words else []
  return args[: args.index(">>")] if ">>" in args else args, limit


def _status(args: argparse.Namespace, entry: crontab_lib.CrontabEntry, output_dir: str) -> int:
  from components.nights import nights_lib
  from pipeline.cli import local as run_local

  run_local_args, limit = _run_local_args_of(entry)
  parsed = run_local.build_parser().parse_args(["--output-dir", output_dir, *run_local_args])
  serving, model, _ = run_local.night_target(parsed, pathlib.Path(output_dir))
  grace = datetime.timedelta(seconds=night_job.parse_duration(args.grace, "--grace"))
  owner = nights_lib.local_owner(output_dir)
  last = _last_night(serving, model, owner)
  installed = _installed_at(output_dir)
  spec = cron.parse_cron(entry.schedule)
  now = datetime.datetime.now(datetime.timezone.utc)
  due = cron.previous_run(spec, now - grace, local_cron=True)
  seen = max([t for t in (last and last["at"], installed) if t is not None], default=None)
  if due is not None and (seen is None or seen < due - datetime.timedelta(minutes=1)):
    print(f"error: {entry.job}: {_missed(spec, seen, last, due)} (grace "
          f"{night_job.describe_duration(grace.total_seconds())}); see {output_dir}/logs/"
          "nightly.log and check that cron runs.", file=sys.stderr)  # fmt: skip
    return 1
  if last is None:
    print(f"{entry.job}: installed, no night yet; the first is due {_next(spec)}.")
    return 0
  good = last["outcome"] in (nights_lib.PUSHED, nights_lib.NOT_PUSHED, "running")
  line = (
    f"{entry.job}: last night {last['at']:%Y-%m-%d %H:%M UTC}: "
    f"{nights_lib.outcome_line(last).rstrip('.')}; "
    f"{_live_since(serving, model, last)}next due {_next(spec)} (limit {limit})."
  )
  print(line if good else f"error: {line}", file=sys.stdout if good else sys.stderr)
  return 0 if good else 1


def _missed(spec: cron.CronSpec, seen, last: dict | None, due) -> str:
  """'no night since ...; the schedule ... expected N, the last at ...' for a status error."""
  if seen is None:
    since = "ever"
  elif last is not None and seen == last["at"]:
    since = f"since {seen:%Y-%m-%d %H:%M UTC}"
  else:
    since = f"since the job was installed at {seen:%Y-%m-%d %H:%M UTC}"
  count = 1
  if seen is not None:
    runs = cron.next_runs(spec, _MISSED_SHOWN + 1, start=seen, tz=cron.cron_zone())
    count = sum(1 for when in runs if when <= due)
  more = "+" if count > _MISSED_SHOWN else ""
  what = f"{count}{more} nights" if count > 1 else "one"
  return (
    f"no night {since}; the schedule {spec.source!r} expected {what}, the last at "
    f"{due:%Y-%m-%d %H:%M UTC}"
  )


# The most missed runs `status` counts.
_MISSED_SHOWN = 99


def _live_since(serving: str, model: str, last: dict) -> str:
  """'live now: version N; ' where the serving folder serves another version than the last
  night left live (a rollback since, a version folder removed by hand), else ''."""
  from components.serving import live, manifest

  try:
    current = live.live_version(serving, model)
  except Exception:  # A view: an unreadable folder leaves the line as it was.
    return ""
  now = current.version if current else None
  if now == last.get("live_version"):
    return ""
  if current is None:
    return "nothing is live now; "
  rollback = current.manifest.get(manifest.ROLLBACK_FIELD) or {}
  to = f", a rollback to version {rollback['to']}" if rollback.get("to") is not None else ""
  return f"live now: version {now}{to}; "


def _next(spec: cron.CronSpec) -> str:
  return cron.describe_next_runs(spec, count=1, local_cron=True)[0]


def _installed_at(output_dir: str) -> datetime.datetime | None:
  try:
    facts = json.loads(pathlib.Path(output_dir, SCHEDULE_FILE).read_text())
    return datetime.datetime.fromisoformat(facts["installed_at"])
  except (OSError, ValueError, KeyError, TypeError):
    return None


def _open_night_state(facts: dict[str, Any]) -> dict[str, str]:
  """outcome and line of a night still open: running, or interrupted where it was run on this
  machine by a process that is gone (killed without a record; the next night closes it)."""
  import socket

  pid = facts.get("pid")
  if facts.get("host") == socket.gethostname() and isinstance(pid, int):
    try:
      os.kill(pid, 0)
    except ProcessLookupError:
      line = f"its process ({pid}) is gone without a record; the next night records it"
      return {"outcome": "interrupted", "line": line}
    except PermissionError:  # Another user's process of that number: alive.
      pass
  return {"outcome": "running", "line": "still running"}


def _last_night(serving: str, model: str, owner: str) -> dict[str, Any] | None:
  """The owner's latest night, recorded or still running: at (when it began), outcome, line.
  Records written before nights had owners count as the owner's."""
  from components.nights import nights_lib
  from components.serving import layout
  from components.serving import nights as serving_nights

  found = []
  try:
    records = serving_nights.read_records(serving, model)
    running = {
      night: serving_nights.open_facts(serving, model, night).get(nights_lib.NIGHT_STEP) or {}
      for night in serving_nights.open_nights(serving, model)
    }
  except Exception:  # No model folder yet: no night has run.
    return None
  for record in records:
    if record.get("owner") in (None, owner):
      at = layout.parse_utc(record.get("started")) or layout.parse_utc(record.get("ended"))
      if at is not None:
        found.append(
          {
            "at": at,
            "outcome": record.get("outcome"),
            "line": record.get("line"),
            "live_version": record.get("live_version"),
            nights_lib.NOTES_FIELD: record.get(nights_lib.NOTES_FIELD),
          }
        )
  for facts in running.values():
    at = layout.parse_utc(facts.get("started"))
    if facts.get("owner") == owner and at is not None:
      found.append({"at": at, **_open_night_state(facts)})
  # The latest by time; of two in one second, the one recorded (or opened) last.
  latest = max(enumerate(found), key=lambda item: (item[1]["at"], item[0]), default=None)
  return latest[1] if latest else None
