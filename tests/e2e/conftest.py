"""The one default digits run that every end-to-end test which only reads its outputs shares."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess

import pytest
from filelock import FileLock

from tests.support.cli_runs import load_summary, project_env, run_script


@dataclasses.dataclass(frozen=True)
class DigitsRun:
  """`python pipeline/run_local.py --output-dir OUT` on the bundled digits, as a user runs it.

  Attributes:
    out: The --output-dir (pipeline_root/, serving/, metadata.sqlite, run_summary.json).
    summary: run_summary.json as the run wrote it.
    stdout: What the run printed on stdout.
    printed_lines: How many lines it printed on stdout and stderr together.
    tmp: The run's TMPDIR, a folder of its own: what the run left in it.
  """

  out: pathlib.Path
  summary: dict
  stdout: str
  printed_lines: int
  tmp: pathlib.Path


@pytest.fixture(scope="session")
def digits_run(tmp_path_factory, worker_id) -> DigitsRun:
  """Runs the default pipeline once per test session, whatever the number of xdist workers.

  Tests must only read what it wrote; a test that runs the pipeline again or pushes copies
  `out` first. Under pytest-xdist the workers share one run through a lock on a folder they
  all see (the parent of each worker's base temp folder); the first to take the lock runs it.
  """
  root = tmp_path_factory.getbasetemp()
  if worker_id != "master":
    root = root.parent
  out = root / "digits_run"
  record = root / "digits_run.json"
  tmp = root / "digits_run_tmp"
  with FileLock(str(root / "digits_run.lock")):
    if not record.exists():
      tmp.mkdir(exist_ok=True)
      env = project_env(TMPDIR=str(tmp))
      proc = run_script("run_local.py", "--output-dir", out, timeout=900, env=env)
      if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, proc.args, proc.stdout, proc.stderr)
      lines = len((proc.stdout + proc.stderr).splitlines())
      record.write_text(json.dumps({"stdout": proc.stdout, "printed_lines": lines}))
  printed = json.loads(record.read_text())
  return DigitsRun(out, load_summary(out), printed["stdout"], printed["printed_lines"], tmp)
