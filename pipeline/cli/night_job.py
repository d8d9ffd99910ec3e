"""One scheduled night, as the crontab line runs it: lock, log, time limit, record, exit status.

`schedule.py local install` writes a crontab line that runs `schedule.py local night`, which
calls `run_night`:

- the night's log section: ``<output>/logs/nightly.log`` gets a header line per night and is
  rotated before a night once it is over LOG_MAX_BYTES (LOG_BACKUPS old files are kept);
- the lock: ``<output>/.cron.lock`` (the lock earlier crontab lines took with ``flock -n``), so
  that a night due while the previous one still runs is skipped, recorded and notified;
- the time limit: run_local.py runs in its own process group; past the limit the whole group
  gets SIGTERM, then SIGKILL after KILL_GRACE_S, and the night is recorded and notified as
  timed out. The lock goes with this process;
- the exit status: run_local.py's own (0, 1, 2), EXIT_SKIPPED or EXIT_TIMED_OUT, or 128 + N
  where run_local.py was killed by signal N (the kernel's out-of-memory killer sends SIGKILL)
  or this job was stopped by it; such a night is recorded and notified as interrupted.

The night's id is given to run_local.py (`nights_lib.NIGHT_ID_ENV`) so that this process can
record the night it had to stop.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence

from components.serving import layout
from core.errors import UserInputError
from pipeline.definition.config import REPO_ROOT

EXIT_SKIPPED = 75  # EX_TEMPFAIL, as run_local.py's own exit on a busy output folder.
EXIT_TIMED_OUT = 124  # As timeout(1).
DEFAULT_TIME_LIMIT = "6h"
KILL_GRACE_S = 60
LOG_NAME = "nightly.log"
LOG_MAX_BYTES = 20 * 1024 * 1024
LOG_BACKUPS = 5
LOCK_NAME = ".cron.lock"
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, flag: str = "--time-limit") -> float:
  """Seconds in '90m', '6h', '1d', '3600s' or '3600'.

  Raises:
    UserInputError: for anything else, or no time at all.
  """
  match = _DURATION.match(str(text))
  seconds = float(match.group(1)) * _UNIT_S[match.group(2)] if match else 0
  if seconds <= 0:
    raise UserInputError(f"{flag} {text!r} is not a duration; pass e.g. 6h, 90m or 1d.")
  return seconds


def describe_duration(seconds: float) -> str:
  """'6 h', '90 min' or '45 s'."""
  if seconds >= 3600 and seconds % 3600 == 0:
    return f"{seconds / 3600:g} h"
  if seconds >= 60 and seconds % 60 == 0:
    return f"{seconds / 60:g} min"
  return f"{seconds:g} s"


def rotate_log(path: pathlib.Path) -> None:
  """Moves `path` to path.1 (path.1 to path.2 ...) when it is over LOG_MAX_BYTES."""
  if not path.is_file() or path.stat().st_size <= LOG_MAX_BYTES:
    return
  for n in range(LOG_BACKUPS - 1, 0, -1):
    older = path.with_name(f"{path.name}.{n}")
    if older.exists():
      older.replace(path.with_name(f"{path.name}.{n + 1}"))
  path.replace(path.with_name(f"{path.name}.1"))


@contextlib.contextmanager
def _log_to(path: pathlib.Path) -> Iterator[None]:
  """Points this process's stdout and stderr (and so its children's) at the log."""
  sys.stdout.flush()
  sys.stderr.flush()
  fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
  saved = os.dup(1), os.dup(2)
  os.dup2(fd, 1)
  os.dup2(fd, 2)
  os.close(fd)
  try:
    yield
  finally:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])


def _stamp() -> str:
  return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _say(text: str) -> None:
  print(f"[{_stamp()}] {text}", flush=True)


def run_night(
  output_dir: str,
  job_name: str,
  time_limit_s: float,
  run_local_args: Sequence[str],
  python: str | None = None,
) -> int:
  """Runs one night of the job and returns its exit status (see the module's docstring)."""
  from components.nights import nights_lib

  out = pathlib.Path(output_dir).resolve()
  logs = out / "logs"
  logs.mkdir(parents=True, exist_ok=True)
  log = logs / LOG_NAME
  rotate_log(log)
  night = nights_lib.new_night_id()
  started = layout.utc_now(), time.monotonic()
  with _log_to(log):
    print(f"\n==== night {night} of {job_name}, {_stamp()} ====", flush=True)
    lock = os.open(out / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
      try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        why = f"skipped: the previous night still holds {out / LOCK_NAME}"
        code, outcome = EXIT_SKIPPED, nights_lib.SKIPPED
      else:
        code, outcome, why = _run_under_limit(out, night, time_limit_s, run_local_args, python)
      hard_exit = False
      if outcome:
        _say(f"{job_name}: {why}")
        hard_exit = _record(out, night, run_local_args, (outcome, why), started)
      _say(f"night {night} ended with exit status {code}")
      if hard_exit:  # tensorflow-io (s3://) aborts the interpreter at a normal exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
      return code
    finally:
      os.close(lock)  # Releases the lock.


def _run_under_limit(
  out: pathlib.Path,
  night: str,
  time_limit_s: float,
  run_local_args: Sequence[str],
  python: str | None,
) -> tuple[int, str, str]:
  """Runs run_local.py in its own process group.

  Returns:
    (exit status, the outcome to record where run_local.py could not record the night itself,
    else '', and the night's line for it).
  """
  from components.nights import nights_lib

  env = {**os.environ, nights_lib.NIGHT_ID_ENV: night, "TF_USE_LEGACY_KERAS": "1"}
  command = [python or sys.executable, str(REPO_ROOT / "pipeline" / "run_local.py")]
  command += ["--output-dir", str(out), *run_local_args]
  proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, start_new_session=True)
  stop, received = _stop_group_on_signals(proc)
  try:
    code = proc.wait(timeout=time_limit_s)
  except subprocess.TimeoutExpired:
    _say(f"the night ran past its limit of {describe_duration(time_limit_s)}; stopping it")
    _stop_group(proc)
    limit = describe_duration(time_limit_s)
    why = f"timed out: the night ran past its limit of {limit} and was stopped"
    return EXIT_TIMED_OUT, nights_lib.TIMED_OUT, why
  finally:
    stop()
  if received:
    name = signal.Signals(received[0]).name
    why = f"interrupted: the nightly job received {name} and stopped the run"
    return 128 + received[0], nights_lib.INTERRUPTED, why
  if code < 0:  # Killed by a signal from outside; it could record nothing.
    name = signal.Signals(-code).name
    why = f"interrupted: run_local.py was killed by {name}"
    if -code == signal.SIGKILL:
      why += " (the kernel's out-of-memory killer sends it when memory runs out)"
    return 128 - code, nights_lib.INTERRUPTED, why
  if code == EXIT_SKIPPED:  # run_local.py found its output folder busy (a run by hand).
    return code, nights_lib.SKIPPED, f"skipped: another run_local.py was using {out}"
  return code, "", ""


def _stop_group(proc: subprocess.Popen) -> None:
  """SIGTERM to the run's process group, SIGKILL to what is left of it after KILL_GRACE_S."""
  from components import process_groups

  process_groups.stop([proc], KILL_GRACE_S)


def _stop_group_on_signals(proc: subprocess.Popen):
  """While the run goes, SIGTERM or SIGINT to this process stops the run's group too; the
  night is then recorded as interrupted.

  Returns:
    (the undo, the list the signal's number is appended to when one came).
  """
  received: list[int] = []

  def handler(signum, frame):
    del frame
    _say(f"received signal {signum}; stopping the night")
    received.append(signum)
    _stop_group(proc)

  previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}

  def undo() -> None:
    for sig, old in previous.items():
      signal.signal(sig, old)

  return undo, received


def _record(
  out: pathlib.Path,
  night: str,
  run_local_args: Sequence[str],
  ending: tuple[str, str],
  started: tuple[str, float],
) -> bool:
  """Records and notifies a night that run_local.py could not record itself.

  Args:
    ending: (the outcome, the night's line).
    started: (UTC time stamp, time.monotonic()) when this job began the night.

  Returns:
    Whether tensorflow-io was loaded for an s3:// serving folder (the process must end with
    os._exit).
  """
  # Recording imports TFX; TensorFlow's start-up lines have no place in the night's log.
  os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
  from components import tf_compat
  from components.nights import nights_lib
  from pipeline.cli import local as run_local

  hard_exit = False
  try:
    args = run_local.build_parser().parse_args(["--output-dir", str(out), *run_local_args])
    serving, model, targets = run_local.night_target(args, out)
    hard_exit = tf_compat.register_filesystems([serving])
    _, notices = nights_lib.end_night(
      serving,
      model,
      night,
      succeeded=False,
      error=ending[1],
      started=started[0],
      seconds=round(time.monotonic() - started[1], 2),
      notify=targets,
      every_night=args.notify_every_night,
      outcome=ending[0],
      heartbeat=run_local.heartbeat(args),
      owner=nights_lib.local_owner(str(out)),
    )
  except (Exception, SystemExit) as e:  # The log keeps the line; the next night tries again.
    _say(f"the night could not be recorded: {type(e).__name__}: {e}")
    return hard_exit
  for notice in notices:
    state = "notified" if notice["ok"] else f"could not notify ({notice['error']})"
    _say(f"{state} {notice['target']}")
  return hard_exit
