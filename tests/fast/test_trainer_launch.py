"""Tests of the local cluster launcher with small real processes (no TensorFlow inside)."""

import json
import os
import sys
import textwrap

import pytest

from components.distributed_trainer import launch

# Each task writes its TF_CONFIG and attempt to <out>/<job>-<index>-<attempt>.json, then acts
# by its role: ps/worker of a PS cluster serve forever; trainers may be told to fail.
TASK = textwrap.dedent("""
  import json, os, sys, time
  out, mode = sys.argv[1], sys.argv[2]
  config = json.loads(os.environ["TF_CONFIG"])
  task = config["task"]
  attempt = int(os.environ["LOCAL_CLUSTER_ATTEMPT"])
  with open(os.path.join(out, f"{task['type']}-{task['index']}-{attempt}.json"), "w") as f:
    json.dump({"config": config, "legacy_keras": os.environ.get("TF_USE_LEGACY_KERAS")}, f)
  serving = config["cluster"].get("ps") and task["type"] in ("ps", "worker")
  if serving or mode == "hang":
    time.sleep(600)
  if task["type"] == "chief":
    # Like a real coordinator, finish only after every server is up.
    others = [f"{job}-{i}-{attempt}.json" for job in ("ps", "worker")
              for i in range(len(config["cluster"].get(job, [])))]
    while not all(os.path.exists(os.path.join(out, name)) for name in others):
      time.sleep(0.05)
  if mode == "fail_worker_1" and task == {"type": "worker", "index": 1}:
    print("boom: worker 1 cannot train", file=sys.stderr)
    sys.exit(3)
  if mode == "fail_first_attempt" and attempt == 0 and task["index"] == 1:
    sys.exit(5)
""")


def _command(tmp_path, mode):
  script = tmp_path / "task.py"
  script.write_text(TASK)
  out = tmp_path / "out"
  out.mkdir(exist_ok=True)
  return [sys.executable, str(script), str(out), mode], out


def _written(out):
  return {p.name[: -len(".json")]: json.loads(p.read_text()) for p in out.glob("*.json")}


def test_make_cluster_uses_distinct_free_loopback_ports():
  cluster = launch.make_cluster(3, 2)
  addresses = [a for job in cluster.values() for a in job]
  assert len(cluster["worker"]) == 3 and len(cluster["ps"]) == 2 and len(cluster["chief"]) == 1
  assert len(set(addresses)) == 6
  assert all(a.startswith("localhost:") and int(a.split(":")[1]) > 0 for a in addresses)
  assert "ps" not in launch.make_cluster(2)
  with pytest.raises(ValueError, match="at least one worker"):
    launch.make_cluster(0)


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_workers_get_one_tf_config_each(tmp_path):
  command, out = _command(tmp_path, "ok")
  run = launch.run_local_cluster(command, 3, log_dir=str(tmp_path / "logs"), timeout_s=50)
  written = _written(out)
  assert sorted(written) == ["worker-0-0", "worker-1-0", "worker-2-0"]
  assert all(w["config"]["cluster"] == run.cluster for w in written.values())
  assert all(w["legacy_keras"] == "1" for w in written.values())
  assert run.restarts == 0 and run.failures == []


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_parameter_server_servers_are_stopped_after_the_chief(tmp_path):
  command, out = _command(tmp_path, "ok")
  run = launch.run_local_cluster(command, 2, 1, log_dir=str(tmp_path / "logs"), timeout_s=50)
  assert sorted(_written(out)) == ["chief-0-0", "ps-0-0", "worker-0-0", "worker-1-0"]
  with open(tmp_path / "logs" / "attempt-0" / "pids.json") as f:
    pids = json.load(f)
  assert sorted(pids) == ["chief-0", "ps-0", "worker-0", "worker-1"]
  for pid in pids.values():  # every server process was reaped, none left running
    with pytest.raises(ChildProcessError):
      os.waitpid(pid, os.WNOHANG)
  assert run.cluster["ps"]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_failed_worker_surfaces_its_exit_and_stderr_tail(tmp_path):
  command, _ = _command(tmp_path, "fail_worker_1")
  with pytest.raises(launch.ClusterError) as error:
    launch.run_local_cluster(command, 2, log_dir=str(tmp_path / "logs"), timeout_s=50)
  message = str(error.value)
  assert "worker 1 exited with status 3" in message
  assert "boom: worker 1 cannot train" in message


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_a_failed_worker_ends_a_local_run_in_one_line_naming_its_log(tmp_path):
  # run_local.py ends a run with the first line of a UserInputError anywhere in the chain and
  # no traceback of ours (pipeline/cli/reporting.py); the worker's own is in the log it names.
  from pipeline.cli import reporting

  command, _ = _command(tmp_path, "fail_worker_1")
  with pytest.raises(launch.ClusterError) as error:
    launch.run_local_cluster(command, 2, log_dir=str(tmp_path / "logs"), timeout_s=50)
  step = RuntimeError("the DistributedTrainer step failed")
  step.__cause__ = error.value
  line = reporting.user_error_message(step)
  assert line == str(error.value).splitlines()[0]
  log = str(tmp_path / "logs" / "attempt-0" / "worker-1.log")
  assert line == (
    f"local cluster failed: worker 1 exited with status 3 (attempt 1 of 1); log {log} ends with:"
  )
  with open(log) as f:
    assert "boom: worker 1 cannot train" in f.read()


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_cluster_restarts_after_a_failure_on_fresh_ports(tmp_path):
  command, out = _command(tmp_path, "fail_first_attempt")
  run = launch.run_local_cluster(
    command, 2, log_dir=str(tmp_path / "logs"), timeout_s=50, max_restarts=1
  )
  written = _written(out)
  assert run.restarts == 1
  assert run.failures == ["attempt 0: worker 1 exited with status 5"]
  assert {"worker-0-1", "worker-1-1"} <= set(written)
  # worker 1 wrote its file before failing (worker 0 of attempt 0 may have been torn down).
  first = written["worker-1-0"]["config"]["cluster"]["worker"]
  assert first != written["worker-0-1"]["config"]["cluster"]["worker"]


@pytest.mark.multiprocess
@pytest.mark.timeout(60)
def test_timeout_kills_the_cluster_and_says_so(tmp_path):
  command, _ = _command(tmp_path, "hang")
  with pytest.raises(launch.ClusterError, match="timeout: worker 0, worker 1 still running"):
    launch.run_local_cluster(command, 2, log_dir=str(tmp_path / "logs"), timeout_s=3)
  with open(tmp_path / "logs" / "attempt-0" / "pids.json") as f:
    for pid in json.load(f).values():
      with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
