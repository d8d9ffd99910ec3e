"""A run_local.py that no nightly job runs, stopped by SIGTERM (systemd, a Kubernetes CronJob
past its deadline, a cron line of the user's own under timeout(1)): its trainer cluster is
stopped with it, and the night is recorded as interrupted instead of left open in silence.
The signal handling on its own is in tests/fast/test_run_signals.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from components.nights import nights_lib
from components.serving import nights
from tests.support.cli_runs import REPO_ROOT, load_summary, project_env


@pytest.mark.timeout(600)
def test_sigterm_stops_the_trainer_cluster_and_records_the_night_as_interrupted(tmp_path):
  """Before, Python's default ended run_local.py at once: the night stayed open with no record
  or notice, and both trainer workers (each in a process group of its own) kept running."""
  reached = tmp_path / "reached"
  reached.mkdir()
  sleepy = tmp_path / "sleepy.py"
  sleepy.write_text(
    "def run_fn(fn_args):\n  import os, pathlib, time\n\n"
    f"  pathlib.Path({str(reached)!r}, str(os.getpid())).touch()\n  time.sleep(3600)\n"
  )
  out = tmp_path / "out"
  command = [sys.executable, str(REPO_ROOT / "pipeline" / "run_local.py"), "--output-dir", out]
  command += ["--module-file", sleepy, "--strategy", "multi_worker_mirrored"]
  command += ["--local-workers", "2", "--optimizer-variants", "none", "--quiet"]
  run = subprocess.Popen(
    [str(part) for part in command],
    cwd=REPO_ROOT,
    env=project_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,  # So that the test can stop whatever is left if it fails.
  )
  try:
    deadline = time.monotonic() + 420
    while len(os.listdir(reached)) < 2 and run.poll() is None and time.monotonic() < deadline:
      time.sleep(0.5)
    assert len(os.listdir(reached)) == 2, "the two workers did not reach the module"
    run.send_signal(signal.SIGTERM)
    _, stderr = run.communicate(timeout=180)
  finally:
    if run.poll() is None:
      os.killpg(run.pid, signal.SIGKILL)

  assert run.returncode == 128 + signal.SIGTERM, stderr[-2000:]
  line = (
    "interrupted: the run received SIGTERM and stopped before it finished; run it again to "
    "finish (the steps that completed are reused from the cache)"
  )
  assert stderr.strip().splitlines()[-1] == f"error: {line}"
  workers = [int(name) for name in os.listdir(reached)]
  left = [pid for pid in workers if _running(pid)]
  assert left == [], f"trainer workers {left} outlived the run"
  (record,) = nights.read_records(str(out / "serving"), "digits")
  assert (record["outcome"], record["line"]) == (nights_lib.INTERRUPTED, line), record
  assert record["rows"]["train"] > 0, record  # The gate's facts, recorded before the trainer.
  summary = load_summary(out)
  assert summary["status"] == nights_lib.INTERRUPTED, json.dumps(summary)[:2000]


def _running(pid: int) -> bool:
  try:
    with open(f"/proc/{pid}/stat") as f:
      return f.read().rpartition(")")[2].split()[0] != "Z"
  except OSError:
    return False
