"""Helpers for tests that run the real command-line entry points in subprocesses."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def project_env(**extra: str) -> dict[str, str]:
  env = dict(os.environ)
  env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
  env.update(extra)
  return env


def run_script(script: str, *args: str, timeout: int = 600, env=None, cwd=None):
  """Runs pipeline/<script> with the test interpreter and returns the CompletedProcess."""
  return subprocess.run(
    [sys.executable, str(REPO_ROOT / "pipeline" / script), *map(str, args)],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=env or project_env(),
    cwd=cwd or REPO_ROOT,
    check=False,
  )


def load_summary(output_dir) -> dict:
  return json.loads((pathlib.Path(output_dir) / "run_summary.json").read_text())


def states(summary: dict) -> dict[str, str]:
  return {c["name"]: c["state"] for c in summary["components"]}
