"""The DistributedTrainer's step running its replicas as a TFJob on the fake training operator."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from tfx.proto import trainer_pb2
from tfx.types import artifact_utils
from tfx.types import standard_component_specs as sc
from tfx.utils import json_utils, proto_utils

from components.distributed_trainer import (
  constants,
  executor,
  tfjob_cluster,
  tfjob_lib,
  tfjob_manifest,
)
from core import defaults, properties
from tests.support import example_files, trainer_progress, warm_python
from tests.support.cli_runs import REPO_ROOT, project_env
from tests.support.fake_kubernetes import FakeKubernetes

pytestmark = pytest.mark.multiprocess

NS = "kubeflow-user"


@pytest.fixture
def fake(tmp_path, monkeypatch):
  """The fake operator, running replicas from this checkout (the image's /pipeline)."""
  # A kubelet-like restart back-off (the real one starts at 10 s): the step sees a crashed
  # container before it restarts. The pods' logs stay in the test's folder, to read after a
  # failure.
  (tmp_path / "pod-logs").mkdir()
  with FakeKubernetes(
    namespace=NS,
    base_env=project_env(PYTHONPATH=str(REPO_ROOT)),
    cwd=str(REPO_ROOT),
    crash_backoff_s=3.0,
    spawn=warm_python.spawn_module,
    log_dir=str(tmp_path / "pod-logs"),
  ) as server:
    monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(str(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield server


def _props(settings: tfjob_manifest.TFJobSettings, steps: int, **kw):
  props = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
    sc.MODULE_PATH_KEY: defaults.DEFAULT_MODULE_PATH,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
    constants.STRATEGY_KEY: "auto",
    constants.LOCAL_WORKERS_KEY: 0,
    constants.LOCAL_PS_KEY: 0,
    constants.GLOBAL_BATCH_SIZE_KEY: 64,
    constants.WORKER_TIMEOUT_KEY: 240,
    constants.TFJOB_KEY: settings.to_json(),
  }
  props.update(kw)
  return props


def _custom(artifact):
  return {k: v for k, v in artifact.mlmd_artifact.custom_properties.items()}


@pytest.mark.timeout(300)
def test_parameter_server_job_survives_a_worker_killed_mid_training(tmp_path, digits_csv, fake):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path), str(digits_csv))
  model = outputs[sc.MODEL_KEY][0]
  run_dir = outputs[sc.MODEL_RUN_KEY][0].uri
  worker_1 = f"{tfjob_manifest.job_name(model.uri)}-worker-1"
  killed = {}

  def kill_worker_1_after_the_first_epoch():
    # A real SIGKILL from outside, as when a node goes away, once the chief has trained.
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline and not killed:
      ends = [
        e for e in trainer_progress.read_progress(run_dir, "chief", 0) if e["event"] == "epoch_end"
      ]
      pid = fake.pod_pid(worker_1)
      if ends and pid:
        os.killpg(pid, signal.SIGKILL)
        killed["at_epoch"] = len(ends)
        return
      time.sleep(0.05)

  killer = threading.Thread(target=kill_worker_1_after_the_first_epoch, daemon=True)
  killer.start()
  settings = tfjob_manifest.TFJobSettings(workers=2, ps=1, image="kit:test", poll_s=0.5)
  executor.Executor().Do(inputs, outputs, _props(settings, steps=300))
  killer.join(timeout=5)
  assert killed and killed["at_epoch"] < 5, killed

  props = _custom(model)
  assert props[properties.STRATEGY_PROPERTY].string_value == "parameter_server"
  assert props[properties.TFJOB_NAMESPACE_PROPERTY].string_value == NS
  assert json.loads(props[properties.TFJOB_REPLICAS_PROPERTY].string_value) == {
    "chief": 1,
    "ps": 1,
    "worker": 2,
  }
  # Which containers exited, and with what, says where a restart beyond the kill came from.
  # Two whole-suite runs on 2 busy cores saw TensorFlow's coordinator abort the chief (SIGABRT,
  # exit 134) as the worker died under it: OnFailure restarted it too, it resumed from its
  # backup, and the job still ended trained. The test alone has always seen the chief carry on.
  exited = [d for _, k, d in fake.events if k == "container-exited"]
  aborted = exited.count(f"{tfjob_manifest.job_name(model.uri)}-chief-0:134")
  assert aborted <= 1, exited
  assert props[properties.RESTARTS_PROPERTY].int_value == 1 + aborted, exited
  assert props[properties.EVAL_ACCURACY_PROPERTY].double_value >= 0.85
  # OnFailure: the same pod restarted its container (killed: exit code 128 + 9), and the
  # chief carried on to the end (restarted only where it was aborted, resuming its epochs).
  assert f"{worker_1}:137" in exited
  assert len(fake.times("container-started", worker_1)) == 2
  assert [p["metadata"]["name"] for p in fake.pod_history].count(worker_1) == 1
  chief_starts = [
    e for e in trainer_progress.read_progress(run_dir, "chief", 0) if e["event"] == "epoch_begin"
  ]
  assert {e["attempt"] for e in chief_starts} == set(range(1 + aborted)), chief_starts
  assert {e["epoch"] for e in chief_starts} == set(range(5)), chief_starts
  assert aborted or len(chief_starts) == 5
  assert not fake.jobs and not fake.pods


FAILING_MODULE = textwrap.dedent("""
  import time


  def run_fn(fn_args):
    if fn_args.task_index == 1:
      raise ValueError("boom on worker 1 (planted by the test)")
    time.sleep(600)
""")


@pytest.mark.timeout(240)
def test_a_failing_replica_fails_the_step_with_one_line_and_its_log_tail(
  tmp_path, digits_csv, fake
):
  module = tmp_path / "failing.py"
  module.write_text(FAILING_MODULE)
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path / "run"), str(digits_csv))
  settings = tfjob_manifest.TFJobSettings(workers=2, image="kit:test", backoff_limit=1, poll_s=0.5)
  props = _props(settings, steps=50, **{sc.MODULE_PATH_KEY: None, sc.MODULE_FILE_KEY: str(module)})
  with pytest.raises(tfjob_lib.TFJobError) as error:
    executor.Executor().Do(inputs, outputs, props)
  first, *tail = str(error.value).splitlines()
  name = tfjob_manifest.job_name(outputs[sc.MODEL_KEY][0].uri)
  assert first.startswith(f"TFJob {NS}/{name} failed: worker 1 exited with status 1 ("), first
  assert first.endswith("its log ends with:")
  assert "boom on worker 1 (planted by the test)" in "\n".join(tail[-5:])
  assert not os.path.exists(os.path.join(outputs[sc.MODEL_KEY][0].uri, "Format-Serving"))
  assert not fake.jobs and not fake.pods


STEP = textwrap.dedent("""
  import json, sys
  from tfx.types import artifact_utils
  from components.distributed_trainer import executor

  with open(sys.argv[1]) as f:
    spec = json.load(f)
  executor.Executor().Do(
    artifact_utils.parse_artifact_dict(spec["input_dict"]),
    artifact_utils.parse_artifact_dict(spec["output_dict"]),
    spec["exec_properties"],
  )
""")


@pytest.mark.timeout(300)
def test_a_retried_step_attaches_to_the_job_it_created(tmp_path, digits_csv, fake):
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path / "run"), str(digits_csv))
  settings = tfjob_manifest.TFJobSettings(workers=1, image="kit:test", poll_s=0.5)
  props = _props(settings, steps=100)
  spec = tmp_path / "step.json"
  spec.write_text(
    json.dumps(
      {
        "input_dict": artifact_utils.jsonify_artifact_dict(inputs),
        "output_dict": artifact_utils.jsonify_artifact_dict(outputs),
        "exec_properties": props,
      }
    )
  )
  env = project_env(PYTHONPATH=str(REPO_ROOT), KUBECONFIG=os.environ["KUBECONFIG"])
  log = open(tmp_path / "first-step.log", "w")  # noqa: SIM115 (closed below)
  first = subprocess.Popen(
    [sys.executable, "-c", STEP, str(spec)], env=env, cwd=REPO_ROOT, stdout=log, stderr=log
  )
  try:
    deadline = time.monotonic() + 120
    while not fake.times("container-started") and time.monotonic() < deadline:
      time.sleep(0.1)
    assert fake.times("container-started"), (tmp_path / "first-step.log").read_text()[-3000:]
    first.send_signal(signal.SIGKILL)  # the step's pod dies; its job keeps training
    first.wait(timeout=30)
  finally:
    log.close()
  assert len(fake.jobs) == 1

  model = outputs[sc.MODEL_KEY][0]
  executor.Executor().Do(inputs, outputs, props)  # the retry, in a new "pod"

  posts = [s for m, p, s in fake.requests if m == "POST"]
  assert posts == [201, 409] and fake.creates() == 1
  assert len(fake.pod_history) == 1 and len(fake.times("container-started")) == 1
  props_out = _custom(model)
  assert props_out[properties.TFJOB_NAME_PROPERTY].string_value == tfjob_manifest.job_name(
    model.uri
  )
  assert props_out[properties.STRATEGY_PROPERTY].string_value == "one_device"
  assert os.path.exists(os.path.join(model.uri, "Format-Serving", "saved_model.pb"))
  assert not fake.jobs and not fake.pods


@pytest.mark.timeout(120)
def test_a_cluster_without_the_training_operator_fails_the_step_with_one_line(
  tmp_path, digits_csv, monkeypatch
):
  from pipeline.cli import reporting

  with FakeKubernetes(namespace=NS, tfjob_crd=False) as server:
    monkeypatch.setenv("KUBECONFIG", server.write_kubeconfig(str(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    inputs, outputs = example_files.trainer_artifacts(str(tmp_path / "run"), str(digits_csv))
    settings = tfjob_manifest.TFJobSettings(workers=2, image="kit:test", poll_s=0.5)
    with pytest.raises(tfjob_cluster.ClusterNotReadyError) as error:
      executor.Executor().Do(inputs, outputs, _props(settings, steps=50))
    line = reporting.user_error_message(error.value)
    assert line == str(error.value) and "\n" not in line
    assert "the Kubeflow Training Operator is not installed" in line
    assert "kubectl get crd tfjobs.kubeflow.org" in line
    assert not os.path.exists(os.path.join(outputs[sc.MODEL_KEY][0].uri, "Format-Serving"))
