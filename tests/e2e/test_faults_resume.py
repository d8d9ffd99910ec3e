"""Killed runs: the next run cleans up after them and resumes training from the checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from tests.support.cli_runs import REPO_ROOT, load_summary, project_env, run_script

pytestmark = pytest.mark.e2e

# 1000 steps in 5 epochs: a BackupAndRestore checkpoint after every 200 steps.
RUN_ARGS = ("--optimizer-variants", "none", "--tensorrt", "off", "--train-steps", "1000")


def _progress(out):
  """Epoch events of the running trainer, from its progress log."""
  logs = list((out / "pipeline_root" / "DistributedTrainer" / "model_run").glob("*/**/*.jsonl"))
  events = []
  for log in logs:
    events += [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
  return logs, events


def _store(out) -> metadata_store.MetadataStore:
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = str(out / "metadata.sqlite")
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  return metadata_store.MetadataStore(config)


@pytest.mark.timeout(900)
def test_killed_trainer_is_cleaned_up_and_the_rerun_resumes_from_its_checkpoint(tmp_path):
  out = tmp_path / "out"
  cmd = [sys.executable, str(REPO_ROOT / "pipeline" / "run_local.py"), "--output-dir", str(out)]
  with open(tmp_path / "killed.log", "wb") as log:
    proc = subprocess.Popen(
      [*cmd, *RUN_ARGS, "--quiet"],
      cwd=REPO_ROOT,
      env=project_env(),
      stdout=log,
      stderr=subprocess.STDOUT,
      start_new_session=True,
    )
    try:
      deadline = time.monotonic() + 600
      while time.monotonic() < deadline and proc.poll() is None:
        logs, events = _progress(out)
        if sum(e["event"] == "epoch_end" for e in events) >= 2:
          break
        time.sleep(0.05)
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait(timeout=60)
    finally:
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
  assert proc.returncode == -signal.SIGKILL, "the run ended before it could be killed"
  killed_run = logs[0].parents[2]
  killed_id = int(killed_run.name)
  killed_model = out / "pipeline_root" / "DistributedTrainer" / "model" / str(killed_id)
  assert killed_run.is_dir()

  rerun = run_script("run_local.py", "--output-dir", out, *RUN_ARGS, "--quiet", timeout=600)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  summary = load_summary(out)
  assert summary["status"] == "succeeded" and summary["pushed"]["pushed"]
  assert f"DistributedTrainer (execution {killed_id})" in summary["cleanup"]
  assert "cleaned up after a killed run" in rerun.stdout
  killed = _store(out).get_executions_by_id([killed_id])[0]
  assert killed.last_known_state == metadata_store_pb2.Execution.FAILED
  assert not killed_run.exists() and not killed_model.exists()

  # The rerun started from the checkpoint of the killed one: fewer steps than the 1000 asked.
  trainer = next(r for r in summary["components"] if r["name"] == "DistributedTrainer")
  model = next(
    a
    for e in _store(out).get_events_by_execution_ids([trainer["execution_id"]])
    if e.type == e.OUTPUT
    for a in _store(out).get_artifacts_by_id([e.artifact_id])
    if a.uri.endswith(f"/model/{trainer['execution_id']}")
  )
  assert model.custom_properties["initial_epoch"].int_value >= 2
  assert model.custom_properties["steps_run"].int_value <= 600
  # BackupAndRestore removed the checkpoint once training completed.
  backups = out / "pipeline_root" / "DistributedTrainer" / ".backup"
  assert not any(p.is_file() for p in backups.rglob("*"))
