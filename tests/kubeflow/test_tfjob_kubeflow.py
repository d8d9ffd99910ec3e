"""run_kubeflow.py --workers: the compiled TFJob settings, the whole pipeline on the local KFP
launcher with the DistributedTrainer's replicas as a TFJob, and the trainer's step ending in one
line when a replica fails. The flags' checks: tests/fast/test_tfjob_flags.py."""

import json
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from components.distributed_trainer import constants, distributed_trainer_lib, tfjob_manifest
from core import properties
from pipeline.cli import kubeflow as run_kubeflow
from pipeline.definition import kubeflow_lib
from tests.support import example_files, fake_kubernetes, kfp_launcher, warm_python
from tests.support.cli_runs import REPO_ROOT, project_env
from tests.support.fake_kubernetes import FakeKubernetes

IMAGE = "registry.example/kit:test"
SENTINEL = "SENTINEL-SECRET-VALUE-7f3a"


def _tfjob_parameter(package: dict) -> tfjob_manifest.TFJobSettings:
  task = kubeflow_lib.tasks(package["pipelineSpec"])["DistributedTrainer"]
  value = task["inputs"]["parameters"][constants.TFJOB_KEY]["runtimeValue"]["constant"]
  return tfjob_manifest.TFJobSettings.from_json(value)


def test_the_package_carries_the_tfjob_with_image_env_secret_refs_and_volumes(tmp_path):
  output = tmp_path / "digits.json"
  proc = kfp_launcher.compile_package(
    output,
    "--image",
    IMAGE,
    "--pipeline-root",
    "s3://bucket/root",
    "--serving-dir",
    "/mnt/serving",
    "--task",
    "multiclass",
    "--workers",
    "4",
    "--ps",
    "2",
    "--worker-resources",
    "cpu=4,memory=16Gi,nvidia.com/gpu=1",
    "--ps-resources",
    "cpu=2,memory=8Gi",
    "--tfjob-service-account",
    "pipeline-runner",
    "--step-env",
    "S3_ENDPOINT=http://minio-service.kubeflow:9000",
    "--secret-env",
    "mlpipeline-minio-artifact:secretkey:AWS_SECRET_ACCESS_KEY",
    "--volume",
    "serving-pvc:/mnt/serving",
    warm=True,
    env=project_env(AWS_SECRET_ACCESS_KEY=SENTINEL),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  settings = _tfjob_parameter(json.loads(output.read_text()))
  assert settings == tfjob_manifest.TFJobSettings(
    workers=4,
    ps=2,
    image=IMAGE,
    service_account="pipeline-runner",
    worker_resources={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
    ps_resources={"cpu": "2", "memory": "8Gi"},
    env=(("S3_ENDPOINT", "http://minio-service.kubeflow:9000"),),
    secret_env=(("mlpipeline-minio-artifact", "secretkey", "AWS_SECRET_ACCESS_KEY"),),
    volumes=(("serving-pvc", "/mnt/serving"),),
  )
  for path in (output, pathlib.Path(run_kubeflow.kfp_package_path(str(output)))):
    assert SENTINEL not in path.read_text()


def test_without_tfjob_settings_the_trainer_has_no_tfjob_parameter():
  from tfx import types
  from tfx.types import standard_artifacts

  from components.distributed_trainer import DistributedTrainer

  examples = types.Channel(type=standard_artifacts.Examples)
  plain = DistributedTrainer(examples=examples)
  assert plain.exec_properties.get(constants.TFJOB_KEY) is None  # trains in its own pod
  settings = tfjob_manifest.TFJobSettings(workers=2, image=IMAGE).to_json()
  assert (
    DistributedTrainer(examples=examples, tfjob=settings).exec_properties[constants.TFJOB_KEY]
    == settings
  )
  with pytest.raises(distributed_trainer_lib.TrainerInputError, match="pass local_workers=0"):
    DistributedTrainer(examples=examples, tfjob=settings, local_workers=2)


def _traces(model_run: str) -> list[str]:
  root = pathlib.Path(model_run)
  return sorted(p.name for p in root.glob("logs/plugins/profile/*/*.xplane.pb"))


@pytest.mark.e2e
@pytest.mark.multiprocess
@pytest.mark.timeout(900)
def test_a_two_worker_tfjob_trains_the_pipeline_to_a_pushed_model(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(REPO_ROOT / "data" / "digits" / "digits.csv", data / "digits.csv")
  package_path = tmp_path / "digits.json"
  proc = kfp_launcher.compile_package(
    package_path,
    "--image",
    IMAGE,
    "--pipeline-root",
    tmp_path / "compile-root",
    "--data-root",
    data,
    "--serving-dir",
    tmp_path / "serving",
    "--task",
    "multiclass",
    "--train-steps",
    "100",
    "--optimizer-variants",
    "none",
    "--workers",
    "2",
    "--strategy",
    "multi_worker_mirrored",
    "--profile-steps",
    "25,45",
    warm=True,
    env=project_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  with FakeKubernetes(
    namespace="kubeflow-user",
    base_env=project_env(PYTHONPATH=str(REPO_ROOT)),
    cwd=str(REPO_ROOT),
    spawn=warm_python.spawn_module,
  ) as fake:
    env = project_env(KUBECONFIG=fake.write_kubeconfig(str(tmp_path / "kubeconfig")))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    # The trainer step, which creates the TFJob and waits on it, starts as a fresh process,
    # as in its pod; the steps around it are children of one warm process (see warm_python).
    with kfp_launcher.LocalKfp(
      tmp_path / "kfp-root", env=env, warm=True, fresh={"DistributedTrainer"}
    ) as launcher:
      results = launcher.run(kfp_launcher.load_package(package_path), "night-1")
    assert not results["DistributedTrainer"].warm and results["Evaluator"].warm

    assert results["Pusher"].artifacts["pushed_model"].value("pushed") == 1.0
    trainer = results["DistributedTrainer"]
    model = trainer.artifacts["model"]
    name = tfjob_manifest.job_name(model.uri)
    assert model.value(properties.TFJOB_NAME_PROPERTY) == name
    assert model.value(properties.TFJOB_NAMESPACE_PROPERTY) == "kubeflow-user"
    assert json.loads(model.value(properties.TFJOB_REPLICAS_PROPERTY)) == {"worker": 2}
    assert model.value(properties.STRATEGY_PROPERTY) == "multi_worker_mirrored"
    assert model.value(properties.NUM_REPLICAS_PROPERTY) == 2.0

    # Both replicas ran the pipeline's image and worker entry point, with the operator's
    # TF_CONFIG in their pod spec.
    pods = {p["metadata"]["name"]: p for p in fake.pod_history}
    assert sorted(pods) == [f"{name}-worker-0", f"{name}-worker-1"]
    host = f"{name}-worker-{{}}.kubeflow-user.svc:2222"
    for i in range(2):
      (container,) = pods[f"{name}-worker-{i}"]["spec"]["containers"]
      assert container["image"] == IMAGE
      spec_path = container["command"][-1]
      assert container["command"][:-1] == [
        "python",
        "-m",
        "components.distributed_trainer.worker",
        "--spec",
      ]
      assert spec_path.startswith(trainer.artifacts["model_run"].uri)
      env_vars = {e["name"]: e.get("value") for e in container["env"]}
      assert env_vars["TF_CONFIG"] == (
        '{"cluster":{"worker":["' + host.format(0) + '","' + host.format(1) + '"]},'
        f'"task":{{"type":"worker","index":{i}}},"environment":"cloud"}}'
      )
      job = {"metadata": {"name": name, "namespace": "kubeflow-user"}, "spec": {}}
      job["spec"]["tfReplicaSpecs"] = {
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}
      }
      assert env_vars["TF_CONFIG"] == fake_kubernetes.tf_config(job, "Worker", i)
    # The step deleted its job, and copied both replicas' log tails into its own log.
    assert ("DELETE", f"/apis/kubeflow.org/v1/namespaces/kubeflow-user/tfjobs/{name}", 200) in (
      fake.requests
    )
    assert not fake.jobs and not fake.pods
    log = trainer.log.read_text()
    assert "----- worker 0: last 40 log lines -----" in log
    assert "----- worker 1: last 40 log lines -----" in log
    # --profile-steps traced each replica's profiler server (its TF_CONFIG port + 1).
    traces = _traces(trainer.artifacts["model_run"].uri)
    assert len(traces) == 2 and len({t.split("_")[-1] for t in traces}) == 2, traces


FAILING_MODULE = textwrap.dedent("""
  import time


  def run_fn(fn_args):
    if fn_args.task_index == 1:
      raise ValueError("boom on worker 1 (planted by the test)")
    time.sleep(600)
""")


def _runtime_artifact(artifact, title: str, **metadata) -> dict:
  """An ExecutorInput artifact list of one artifact, as KFP's launcher writes it."""
  entry = {"uri": artifact.uri, "type": {"schemaTitle": title}, "metadata": metadata}
  return {"artifacts": [{"name": f"{title}-1", **entry}]}


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_a_failing_tfjob_worker_ends_the_kubeflow_step_in_one_line(tmp_path, digits_csv):
  # The DistributedTrainer step as its pod runs it (our entrypoint around TFX's), with a
  # worker whose run_fn raises: the user's module to fix, so one line and no traceback of ours.
  from tfx.proto import trainer_pb2
  from tfx.types import standard_component_specs as sc
  from tfx.utils import proto_utils

  module = tmp_path / "failing.py"
  module.write_text(FAILING_MODULE)
  inputs, outputs = example_files.trainer_artifacts(str(tmp_path / "run"), str(digits_csv))
  examples = inputs[sc.EXAMPLES_KEY][0]
  settings = tfjob_manifest.TFJobSettings(workers=2, image=IMAGE, backoff_limit=1, poll_s=0.5)
  parameters = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=50)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
    sc.MODULE_FILE_KEY: str(module),
    sc.CUSTOM_CONFIG_KEY: "null",
    constants.STRATEGY_KEY: "auto",
    constants.TFJOB_KEY: settings.to_json(),
  }
  executor_input = {
    "inputs": {
      "artifacts": {
        sc.EXAMPLES_KEY: _runtime_artifact(
          examples, "tfx.Examples", split_names=examples.split_names
        ),
        sc.SCHEMA_KEY: _runtime_artifact(inputs[sc.SCHEMA_KEY][0], "tfx.Schema"),
      },
      "parameters": {k: {"stringValue": v} for k, v in parameters.items()},
    },
    "outputs": {
      "artifacts": {
        sc.MODEL_KEY: _runtime_artifact(outputs[sc.MODEL_KEY][0], "tfx.Model"),
        sc.MODEL_RUN_KEY: _runtime_artifact(outputs[sc.MODEL_RUN_KEY][0], "tfx.ModelRun"),
      },
      "outputFile": str(tmp_path / "step" / "executor_output.json"),
    },
  }
  # A kubelet-like restart back-off, so that the step reads the failed container's log.
  with FakeKubernetes(
    namespace="kubeflow-user",
    base_env=project_env(PYTHONPATH=str(REPO_ROOT)),
    cwd=str(REPO_ROOT),
    crash_backoff_s=3.0,
    spawn=warm_python.spawn_module,
  ) as fake:
    env = project_env(KUBECONFIG=fake.write_kubeconfig(str(tmp_path / "kubeconfig")))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    proc = subprocess.run(
      [
        sys.executable, "-m", "pipeline.definition.kfp_entrypoint",
        "--executor_class_path", "components.distributed_trainer.executor.Executor",
        "--json_serialized_invocation_args", json.dumps(executor_input),
      ],
      capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=280, check=False,
    )  # fmt: skip
    assert not fake.jobs and not fake.pods
  name = tfjob_manifest.job_name(outputs[sc.MODEL_KEY][0].uri)
  assert proc.returncode == 1, proc.stderr[-3000:]
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(
    f"error: TFJob kubeflow-user/{name} failed: worker 1 exited with status 1 ("
  ), proc.stderr[-3000:]
  assert last.endswith("its log ends with:"), last
  # The worker's own traceback is in the replica logs the step copied into its log; the step
  # printed none of its own.
  assert "boom on worker 1 (planted by the test)" in proc.stderr
  assert "TFJobError" not in proc.stderr and "in _main" not in proc.stderr
