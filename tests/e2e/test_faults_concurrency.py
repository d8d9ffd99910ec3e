"""Fault suite: two run_local.py on one output folder, a third run after, and no leaked secret.

One scenario serves every test here, because each full run costs a minute: two runs start
together on one output folder (with secrets in their environment and tolerated bad rows in
their data), then a third run follows on the same folder.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import pathlib
import subprocess
import sys

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.serving import versions
from tests.support.cli_runs import REPO_ROOT, load_summary, project_env, run_script, states
from tests.support.example_gen_runs import NASTY_ROWS, REASON

pytestmark = [pytest.mark.e2e, pytest.mark.multiprocess]

SENTINEL = "sentinel-secret-5c1e0b7d"
SECRET_ENV = {
  "KFP_TOKEN": SENTINEL,
  "AWS_SECRET_ACCESS_KEY": SENTINEL,
  "GOOGLE_OAUTH_ACCESS_TOKEN": SENTINEL,
  "HF_TOKEN": SENTINEL,
}
# The 7 nasty rows are 0.39% of the rows: tolerated, quarantined, and the run goes on.
RUN_ARGS = (
  "--model-name",
  "digits",
  "--optimizer-variants",
  "none",
  "--train-steps",
  "200",
  "--min-accuracy",
  "0.5",
  "--max-bad-row-fraction",
  "0.01",
  "--quiet",
)


@dataclasses.dataclass
class Scenario:
  out: pathlib.Path
  first: list[subprocess.CompletedProcess]
  third: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def scenario(tmp_path_factory) -> Scenario:
  base = tmp_path_factory.mktemp("contended")
  data = base / "data"
  data.mkdir()
  digits = REPO_ROOT / "data" / "digits" / "digits.csv"
  (data / "digits.csv").write_bytes(digits.read_bytes() + NASTY_ROWS)
  out = base / "out"
  cmd = [
    sys.executable,
    str(REPO_ROOT / "pipeline" / "run_local.py"),
    "--data-root",
    str(data),
    "--output-dir",
    str(out),
    *RUN_ARGS,
  ]
  env = project_env(**SECRET_ENV)
  procs = [
    subprocess.Popen(
      cmd,
      cwd=REPO_ROOT,
      env=env,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
      text=True,
      start_new_session=True,
    )
    for _ in range(2)
  ]
  first = []
  try:
    for p in procs:
      stdout, stderr = p.communicate(timeout=600)
      first.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
  finally:
    for p in procs:
      if p.poll() is None:
        os.killpg(p.pid, 9)
        p.wait()
  third = run_script(
    "run_local.py", "--data-root", data, "--output-dir", out, *RUN_ARGS, timeout=600, env=env
  )
  return Scenario(out, first, third)


def _store(out) -> metadata_store.MetadataStore:
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = str(out / "metadata.sqlite")
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  return metadata_store.MetadataStore(config)


@pytest.mark.timeout(1500)
def test_second_concurrent_run_is_refused_in_one_line(scenario):
  codes = sorted(p.returncode for p in scenario.first)
  assert codes == [0, 75], [p.stderr[-2000:] for p in scenario.first]
  winner, refused = sorted(scenario.first, key=lambda p: p.returncode)
  assert "Traceback" not in refused.stderr
  assert refused.stderr.strip().splitlines() == [
    f"error: another run_local.py is already using {scenario.out}; wait for it to finish or "
    "pass another --output-dir."
  ]
  assert "Traceback" not in winner.stderr
  assert "pushed version 1" in winner.stdout


@pytest.mark.timeout(1500)
def test_metadata_store_is_consistent_and_a_third_run_succeeds(scenario):
  assert scenario.third.returncode == 0, scenario.third.stderr[-3000:]
  summary = load_summary(scenario.out)
  assert summary["status"] == "succeeded"
  s = states(summary)
  for name in ("CsvExampleGen", "StatisticsGen", "SchemaGen", "DistributedTrainer"):
    assert s[name] == "cached", (name, s)
  assert summary["pushed"]["pushed"] is False

  store = _store(scenario.out)
  # Only the winner and the third run reached the store: two pipeline runs, no stray state.
  runs = store.get_contexts_by_type("pipeline_run")
  assert len(runs) == 2
  executions = store.get_executions()
  done = (metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED)
  assert executions and all(e.last_known_state in done for e in executions)
  node_type = store.get_context_type("node").id
  seen = []
  for run in runs:
    run_executions = store.get_executions_by_context(run.id)
    nodes = [
      c.name
      for e in run_executions
      for c in store.get_contexts_by_execution(e.id)
      if c.type_id == node_type
    ]
    assert len(nodes) == len(set(nodes)) == len(run_executions)  # One execution per node.
    assert {"digits.CsvExampleGen", "digits.DistributedTrainer", "digits.Pusher"} <= set(nodes)
    seen += [e.id for e in run_executions]
  assert sorted(seen) == sorted(e.id for e in executions)  # Each belongs to one of the runs.
  events = store.get_events_by_execution_ids([e.id for e in executions])
  outputs = {e.artifact_id for e in events if e.type == e.OUTPUT}
  artifacts = store.get_artifacts()
  assert {a.id for a in artifacts} == outputs  # Every artifact was published by an execution.
  for a in artifacts:
    assert a.state == metadata_store_pb2.Artifact.LIVE, a
    assert os.path.exists(a.uri), a.uri
  model_dir = scenario.out / "serving" / "digits"
  assert sorted(p.name for p in model_dir.iterdir() if p.is_dir()) == ["1"]
  assert versions.verify_version(str(model_dir / "1")) == []


@pytest.mark.timeout(1500)
def test_tolerated_bad_rows_are_quarantined_and_the_run_goes_on(scenario):
  """Outcome (a) of the CSV fuzz contract through the real CLI: with a tolerant threshold the
  bad rows are quarantined with reasons, and the model trained on the good rows is pushed."""
  store = _store(scenario.out)
  examples = store.get_artifacts_by_type("Examples")
  assert len(examples) == 1
  props = examples[0].custom_properties
  assert props["num_bad_rows"].int_value == 7
  assert props["num_rows_train"].int_value + props["num_rows_eval"].int_value == 1797
  with open(props["quarantine_uri"].string_value, newline="") as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == 7
  assert all(r["file"].endswith("digits.csv") and int(r["line"]) > 1798 for r in rows)
  assert all(REASON.search(r["reason"]) for r in rows)
  assert (scenario.out / "serving" / "digits" / "1" / "saved_model.pb").is_file()


@pytest.mark.timeout(1500)
def test_no_secret_reaches_logs_summary_or_output_files(scenario):
  """Secrets in the environment stay out of the terminal, run_summary.json and every file the
  runs wrote (ML Metadata's SQLite bytes, logs, artifacts, the serving tree)."""
  runs = [*scenario.first, scenario.third]
  assert all(SENTINEL not in p.stdout + p.stderr for p in runs)
  files = [p for p in scenario.out.rglob("*") if p.is_file()]
  assert scenario.out / "run_summary.json" in files
  assert scenario.out / "metadata.sqlite" in files
  leaks = [str(p) for p in files if SENTINEL.encode() in p.read_bytes()]
  assert leaks == []
