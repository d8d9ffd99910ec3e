"""A Kubeflow step that fails on a user's mistake logs one line; a bug keeps its traceback."""

import json
import subprocess
import sys

import pytest

from tests.support import failing_executor
from tests.support.cli_runs import REPO_ROOT, project_env


def _step(tmp_path, class_path):
  executor_input = {"inputs": {}, "outputs": {"outputFile": str(tmp_path / "out" / "output.json")}}
  return subprocess.run(
    [
      sys.executable, "-m", "pipeline.definition.kfp_entrypoint",
      "--executor_class_path", class_path,
      "--json_serialized_invocation_args", json.dumps(executor_input),
    ],
    capture_output=True, text=True, env=project_env(), cwd=REPO_ROOT, timeout=300, check=False,
  )  # fmt: skip


@pytest.mark.timeout(300)
def test_a_users_mistake_is_one_error_line_and_exit_1(tmp_path):
  proc = _step(tmp_path, "tests.support.failing_executor.Executor")
  assert proc.returncode == 1
  assert "Traceback" not in proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == f"error: {failing_executor.MESSAGE}"


@pytest.mark.timeout(300)
def test_a_bug_keeps_its_traceback(tmp_path):
  proc = _step(tmp_path, "tests.support.failing_executor.BuggyExecutor")
  assert proc.returncode != 0
  assert "Traceback" in proc.stderr and "a bug of ours" in proc.stderr
