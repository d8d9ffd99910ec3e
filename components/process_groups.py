"""Stopping a process group we started: the run's own process and everything it started.

A run (run_local.py, a trainer worker) leads a group of its own (`start_new_session=True`), and
its helpers (Beam's workers, TensorFlow's servers, a module's children) share it. Stopping the
run is done when no process of the group is left running, not when its leader has exited: a
member that ignores SIGTERM, or outlives a leader that did not, gets SIGKILL after the grace.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterable

# Seconds a group gets to go after SIGKILL before `stop` gives up on it.
KILL_WAIT_S = 30.0
_POLL_S = 0.05


def _running_groups() -> set[int] | None:
  """The groups with a process still running, from one pass over /proc; None without /proc.

  A zombie (dead, waiting for its parent to collect its status) is not running: it holds
  nothing and runs nothing.
  """
  if not os.path.isdir("/proc"):
    return None
  groups = set()
  for entry in os.listdir("/proc"):
    if not entry.isdigit():
      continue
    try:
      with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
        stat = f.read()
    except OSError:
      continue
    # After the command's closing parenthesis: state, ppid, pgrp, ...
    fields = stat.rpartition(")")[2].split()
    if len(fields) > 2 and fields[0] != "Z" and fields[2].isdigit():
      groups.add(int(fields[2]))
  return groups


def _signalable(pgid: int) -> bool:
  """Without /proc: whether signal 0 reaches the group (a zombie counts here)."""
  try:
    os.killpg(pgid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def running(pgid: int) -> bool:
  """Whether a process of the group `pgid` is still running (a zombie is not)."""
  groups = _running_groups()
  return _signalable(pgid) if groups is None else pgid in groups


def _wait(procs: list[subprocess.Popen], deadline: float) -> bool:
  """Waits until every group of `procs` has no running process; False at `deadline`."""
  while True:
    for proc in procs:
      proc.poll()  # Collects a leader that has exited, so that it is no longer counted.
    groups = _running_groups()
    alive = _signalable if groups is None else groups.__contains__
    if not any(alive(proc.pid) for proc in procs):
      return True
    if time.monotonic() >= deadline:
      return False
    time.sleep(_POLL_S)


def stop(procs: Iterable[subprocess.Popen], grace_s: float, sig: int = signal.SIGTERM) -> bool:
  """Sends `sig` to the group each of `procs` leads, and SIGKILL to the groups that still have a
  running process after `grace_s` seconds.

  Args:
    procs: processes started with `start_new_session=True` (each leads its own group).
    grace_s: seconds the groups get to end after `sig`.
    sig: the first signal.

  Returns:
    Whether every group ended (False: a process outlived SIGKILL by KILL_WAIT_S, which only
    a process stuck in the kernel does).
  """
  procs = list(procs)
  for signal_number, wait_s in ((sig, grace_s), (signal.SIGKILL, KILL_WAIT_S)):
    for proc in procs:
      with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal_number)
    if _wait(procs, time.monotonic() + wait_s):
      return True
  return False
