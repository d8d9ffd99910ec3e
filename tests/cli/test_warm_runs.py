"""`run_script(..., warm=True)` gives what a fresh `python pipeline/<script>` process gives.

The end-to-end files that run many pipelines take their runs from a warm server
(tests/support/warm_python.py); these cases hold its children to a fresh process's exit status,
stdout and stderr, byte for byte, on runs that end early (help, mistakes, a missing folder).
"""

import pytest

from tests.support.cli_runs import run_script


@pytest.mark.parametrize(
  "script, args",
  [
    ("run_local.py", ["--help"]),
    ("run_local.py", ["--train-steps", "0"]),
    ("run_local.py", ["--data-root", "/nonexistent/folder"]),
    ("schedule.py", ["local", "history", "--output-dir", "/nonexistent/output"]),
    ("rollback.py", ["--serving-dir", "/nonexistent/serving", "--model-name", "m", "--previous"]),
  ],
)
def test_a_warm_run_exits_and_writes_as_a_fresh_process_does(script, args, tmp_path):
  if script == "run_local.py":
    # An empty output folder: with an earlier run's output there (`make run` writes output/),
    # run_local.py imports TensorFlow before it checks the flags, and the fresh process's
    # stderr then holds TensorFlow's import-time lines, which a warm child does not print.
    args = [*args, "--output-dir", str(tmp_path / "out")]
  fresh = run_script(script, *args, timeout=120)
  warm = run_script(script, *args, timeout=120, warm=True)
  assert (warm.returncode, warm.stdout, warm.stderr) == (
    fresh.returncode,
    fresh.stdout,
    fresh.stderr,
  )
  assert fresh.stdout or fresh.stderr


POOL_STEP = """
import os, sys, time
print("pid", os.getpid(), "pgid", os.getpgid(0), "argv", sys.argv[1:], flush=True)
if sys.argv[1] == "sleep":
  time.sleep(600)
sys.exit(int(sys.argv[1]))
"""


def test_a_warm_pool_runs_children_side_by_side_each_in_its_own_session(tmp_path):
  """The pool the local clusters and the fake kubelet take their processes from: children run
  at once, each leads its own process group, writes to its log, and reports its exit status
  (negative for a signal) as `subprocess.Popen` does."""
  import os
  import signal
  import subprocess
  import sys

  from tests.support import warm_python
  from tests.support.cli_runs import project_env

  (tmp_path / "pool_step.py").write_text(POOL_STEP)
  env = project_env(PYTHONPATH=str(tmp_path))
  logs = {name: tmp_path / f"{name}.log" for name in ("sleeps", "ok", "fails")}
  spawn = warm_python.spawn_module
  sleeps = spawn([sys.executable, "-m", "pool_step", "sleep"], env, tmp_path, logs["sleeps"])
  ok = spawn([sys.executable, "-m", "pool_step", "0"], env, tmp_path, logs["ok"])
  fails = spawn([sys.executable, "-m", "pool_step", "3"], env, tmp_path, logs["fails"])
  assert (ok.wait(120), fails.wait(120)) == (0, 3)
  assert sleeps.poll() is None  # still running while the others ended
  with pytest.raises(subprocess.TimeoutExpired):
    sleeps.wait(0.1)
  os.killpg(sleeps.pid, signal.SIGKILL)
  assert sleeps.wait(60) == -signal.SIGKILL
  for name, child in (("sleeps", sleeps), ("ok", ok), ("fails", fails)):
    words = logs[name].read_text().split()
    assert words[:4] == ["pid", str(child.pid), "pgid", str(child.pid)], words
  with pytest.raises(ValueError, match="not a `python -m` command"):
    spawn([sys.executable, str(tmp_path / "pool_step.py")], env, tmp_path, logs["ok"])
