"""Stopping a process group: done when none of its processes runs, not when its leader exits."""

import pathlib
import signal
import subprocess
import time

from components import process_groups
from tests.support import crontab_runs


def _group(tmp_path: pathlib.Path, script: str) -> tuple[subprocess.Popen, pathlib.Path]:
  """A shell leading its own group, with a child that writes its pid to `pid` first."""
  pid = tmp_path / "pid"
  path = crontab_runs.executable(tmp_path / "group", script.format(pid=pid))
  proc = subprocess.Popen([path], start_new_session=True)
  deadline = time.monotonic() + 30
  while not (pid.exists() and pid.read_text().strip()):
    assert time.monotonic() < deadline, "the group's child did not start"
    time.sleep(0.05)
  return proc, pid


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path):
  # The leader exits at SIGTERM; its child ignores it and would run on.
  proc, _ = _group(
    tmp_path,
    "#!/bin/sh\n(trap '' TERM; echo $(exec sh -c 'echo $PPID') > {pid}; sleep 600) &\nsleep 600\n",
  )
  assert process_groups.running(proc.pid)
  started = time.monotonic()
  assert process_groups.stop([proc], grace_s=1.0)
  assert time.monotonic() - started >= 1.0  # It waited out the grace for the child.
  assert not process_groups.running(proc.pid)
  assert proc.returncode == -signal.SIGTERM


def test_a_group_that_ends_at_sigterm_is_not_waited_for(tmp_path):
  proc, _ = _group(tmp_path, "#!/bin/sh\nsleep 600 &\necho $! > {pid}\nsleep 600\n")
  started = time.monotonic()
  assert process_groups.stop([proc], grace_s=60.0)
  assert time.monotonic() - started < 30
  assert not process_groups.running(proc.pid)


def test_a_group_with_no_process_left_is_not_running(tmp_path):
  proc = subprocess.Popen(["true"], start_new_session=True)
  proc.wait()
  assert not process_groups.running(proc.pid)
  assert process_groups.stop([proc], grace_s=60.0)
