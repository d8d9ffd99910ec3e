"""A stop signal to a run_local.py that no nightly job runs: the night is closed, not lost.

A run started by hand, by a cron line of the user's own, by systemd or by a Kubernetes CronJob
(past its activeDeadlineSeconds) is stopped with SIGTERM, or with Ctrl-C. Python's default for
SIGTERM ends the process at once: the night stays open, with no record, no notice and no summary
until a later run closes it as interrupted. While the pipeline runs, `stop_on_signals` makes the
first SIGTERM raise `Stopped` in the main thread instead (Ctrl-C raises KeyboardInterrupt there
already), so the run unwinds (a trainer cluster's processes are stopped by its own cleanup) and
the night is closed, recorded and notified as interrupted. A second signal ends it at once.

Under `schedule.py local night` the job stops the run's whole process group and records the night
itself, so nothing is installed there.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Stopped(BaseException):
  """A stop signal arrived while the pipeline ran (a BaseException, as KeyboardInterrupt is, so
  that no `except Exception` on the way takes it for a failed step)."""

  def __init__(self, signum: int):
    super().__init__(f"received {signal.Signals(signum).name}")
    self.signum = signum


# What a stopped run raises: SIGTERM's Stopped, or Ctrl-C's KeyboardInterrupt.
STOPS = (Stopped, KeyboardInterrupt)


def signal_of(stop: BaseException) -> int:
  """The signal's number behind one of STOPS."""
  return stop.signum if isinstance(stop, Stopped) else int(signal.SIGINT)


def describe(stop: BaseException) -> str:
  """The night's one line for a run that a signal stopped."""
  name = signal.Signals(signal_of(stop)).name
  how = "Ctrl-C (SIGINT)" if name == "SIGINT" else name
  return (
    f"interrupted: the run received {how} and stopped before it finished; run it again to "
    "finish (the steps that completed are reused from the cache)"
  )


@contextlib.contextmanager
def stop_on_signals(enabled: bool = True) -> Iterator[None]:
  """While it holds, the first SIGTERM raises `Stopped` in the main thread; then the default
  comes back, so that a second one ends the process at once. A no-op where `enabled` is False or
  outside the main thread (only it can set a signal's handler)."""
  if not enabled or threading.current_thread() is not threading.main_thread():
    yield
    return

  def handler(signum, frame):
    del frame
    signal.signal(signum, signal.SIG_DFL)
    raise Stopped(signum)

  previous = signal.signal(signal.SIGTERM, handler)
  try:
    yield
  finally:
    signal.signal(signal.SIGTERM, previous)
