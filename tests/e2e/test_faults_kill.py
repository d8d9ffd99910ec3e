"""Fault suite: run_local.py killed with SIGKILL during training, then run again on its output."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from filelock import FileLock
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.serving import layout, nights, versions
from components.serving.manifest import read_manifest
from tests.support.cli_runs import REPO_ROOT, load_summary, project_env, run_script, states

pytestmark = pytest.mark.e2e

RUN_ARGS = ("--optimizer-variants", "none", "--train-steps", "200", "--min-accuracy", "0.5")
_RUNNING = metadata_store_pb2.Execution.RUNNING
_TRAINER_TYPE = "components.distributed_trainer.component.DistributedTrainer"


def _running_trainer(db) -> int | None:
  """Id of a RUNNING DistributedTrainer execution, read without writing to the store."""
  if not db.exists():
    return None
  try:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
      rows = conn.execute(
        "SELECT e.id FROM Execution e JOIN Type t ON e.type_id = t.id "
        "WHERE t.name = ? AND e.last_known_state = ?",
        (_TRAINER_TYPE, _RUNNING),
      ).fetchall()
  except sqlite3.Error:  # The runner may be creating the schema right now.
    return None
  return rows[-1][0] if rows else None


def _wait_for_training(proc, out, timeout_s=400) -> int:
  """Waits until the trainer runs and has written into its ModelRun folder; returns its id."""
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline and proc.poll() is None:
    execution_id = _running_trainer(out / "metadata.sqlite")
    if execution_id is not None:
      model_run = out / "pipeline_root" / "DistributedTrainer" / "model_run" / str(execution_id)
      if model_run.is_dir() and any(p.is_file() for p in model_run.rglob("*")):
        return execution_id
    time.sleep(0.1)
  raise AssertionError(f"training never started (exit code {proc.poll()})")


def _store(out) -> metadata_store.MetadataStore:
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = str(out / "metadata.sqlite")
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  return metadata_store.MetadataStore(config)


@pytest.mark.timeout(900)
def test_rerun_after_sigkill_mid_training_reuses_cache_and_pushes_one_complete_version(tmp_path):
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
      killed_id = _wait_for_training(proc, out)
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait(timeout=60)
    finally:
      if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
  assert proc.returncode == -signal.SIGKILL

  # The dead process held <out>/.run.lock; the kernel released it with the process.
  lock = FileLock(str(out / ".run.lock"))
  lock.acquire(timeout=0)
  lock.release()
  assert _store(out).get_executions_by_id([killed_id])[0].last_known_state == _RUNNING
  # No version was half-written: the serving folder holds only the killed night's open facts,
  # which the next night records as interrupted.
  kept = [p.relative_to(out / "serving") for p in (out / "serving").rglob("*") if p.is_file()]
  assert kept and all(p.parts[1] == layout.OPEN_DIR for p in kept), kept

  rerun = run_script("run_local.py", "--output-dir", out, *RUN_ARGS, "--quiet", timeout=600)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert "Traceback" not in rerun.stderr
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  s = states(summary)
  for name in ("CsvExampleGen", "StatisticsGen", "SchemaGen"):
    assert s[name] == "cached", (name, s)
  assert s["DistributedTrainer"] == "ran"
  assert summary["pushed"]["pushed"] and summary["pushed"]["version"] == 1

  model_dir = out / "serving" / "digits"
  # The rerun held the output folder's lock, which proves the killed night dead: it closed it as
  # interrupted before its own night began, and recorded its own after it.
  assert sorted(p.name for p in model_dir.iterdir() if p.is_dir()) == ["1"]
  assert versions.verify_version(str(model_dir / "1")) == []
  killed_night, night = nights.read_records(str(out / "serving"), "digits")
  assert (killed_night["outcome"], night["outcome"]) == ("interrupted", "pushed")
  assert killed_night["owner"] == night["owner"] and killed_night["version"] is None

  # The pushed model is the rerun's, and the killed execution never became COMPLETE.
  store = _store(out)
  pusher_run = next(r for r in summary["components"] if r["name"] == "Pusher")
  model_type = store.get_artifact_type("Model").id
  inputs = store.get_events_by_execution_ids([pusher_run["execution_id"]])
  pushed_models = [
    a
    for a in store.get_artifacts_by_id([e.artifact_id for e in inputs if e.type == e.INPUT])
    if a.type_id == model_type
  ]
  assert len(pushed_models) == 1
  producers = [
    e.execution_id
    for e in store.get_events_by_artifact_ids([pushed_models[0].id])
    if e.type == e.OUTPUT
  ]
  trainer_run = next(r for r in summary["components"] if r["name"] == "DistributedTrainer")
  assert producers == [trainer_run["execution_id"]] != [killed_id]
  producer = store.get_executions_by_id(producers)[0]
  assert producer.last_known_state == metadata_store_pb2.Execution.COMPLETE
  killed = store.get_executions_by_id([killed_id])[0]
  assert killed.last_known_state not in (
    metadata_store_pb2.Execution.COMPLETE,
    metadata_store_pb2.Execution.CACHED,
  )
  killed_outputs = [e for e in store.get_events_by_execution_ids([killed_id]) if e.type == e.OUTPUT]
  assert killed_outputs == []
  manifest = read_manifest(str(model_dir / "1"))
  assert manifest["source"]["saved_model"].startswith(pushed_models[0].uri)
  assert f"/{killed_id}/" not in manifest["source"]["saved_model"]
