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
