"""run_local.py's stop signals in one process: the first SIGTERM raises, a second one would end
the process, and a run under the nightly job keeps Python's default (the job records the night).
A real run stopped by SIGTERM is in tests/cli/test_run_signals.py.
"""

from __future__ import annotations

import os
import signal

import pytest

from pipeline.cli import run_signals


def test_the_first_sigterm_raises_stopped_and_the_default_comes_back_for_a_second():
  before = signal.getsignal(signal.SIGTERM)
  with pytest.raises(run_signals.Stopped) as stopped, run_signals.stop_on_signals():
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the block")
  assert run_signals.signal_of(stopped.value) == signal.SIGTERM
  assert signal.getsignal(signal.SIGTERM) == before


def test_inside_the_block_a_second_sigterm_meets_the_default_handler():
  seen = []
  with pytest.raises(run_signals.Stopped), run_signals.stop_on_signals():
    try:
      os.kill(os.getpid(), signal.SIGTERM)
    finally:
      seen.append(signal.getsignal(signal.SIGTERM))
  assert seen == [signal.SIG_DFL]


def test_disabled_under_the_nightly_job_it_leaves_the_handler_alone():
  calls = []
  previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
  try:
    with run_signals.stop_on_signals(enabled=False):
      assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
      os.kill(os.getpid(), signal.SIGTERM)
  finally:
    signal.signal(signal.SIGTERM, previous)
  assert calls == [signal.SIGTERM]


@pytest.mark.parametrize(
  ("stop", "number", "said"),
  [
    (run_signals.Stopped(signal.SIGTERM), 15, "received SIGTERM and stopped"),
    (KeyboardInterrupt(), 2, "received Ctrl-C (SIGINT) and stopped"),
  ],
)
def test_the_nights_line_names_the_signal(stop, number, said):
  assert run_signals.signal_of(stop) == number
  line = run_signals.describe(stop)
  assert line.startswith(f"interrupted: the run {said} before it finished; run it again")
  assert "\n" not in line
