"""Shape tests of the rendered Kubeflow TFJob manifest against the kubeflow.org/v1 schema."""

import json

import pytest

from components.distributed_trainer import tfjob_lib

# Replica spec fields of kubeflow.org/v1 TFJob (training-operator ReplicaSpec).
_REPLICA_KEYS = {"replicas", "restartPolicy", "template"}


def _check_replica(spec, replicas, image, command):
  assert set(spec) == _REPLICA_KEYS
  assert spec["replicas"] == replicas
  assert spec["restartPolicy"] in tfjob_lib.RESTART_POLICIES
  containers = spec["template"]["spec"]["containers"]
  assert [c["name"] for c in containers] == ["tensorflow"]
  assert containers[0]["image"] == image
  assert containers[0]["command"] == command
  env = {e["name"]: e["value"] for e in containers[0]["env"]}
  assert env["TF_USE_LEGACY_KERAS"] == "1"
  assert all(isinstance(v, str) for v in env.values())
  return containers[0]


def test_multi_worker_tfjob_has_workers_only():
  command = tfjob_lib.worker_command("gs://bucket/run/spec.json")
  manifest = tfjob_lib.render_tfjob(
    "digits-trainer",
    "gcr.io/p/kit:1",
    command,
    num_workers=3,
    env={"GLOG_v": 0},
    worker_resources={"limits": {"nvidia.com/gpu": 1}},
  )
  assert manifest["apiVersion"] == "kubeflow.org/v1"
  assert manifest["kind"] == "TFJob"
  assert manifest["metadata"]["name"] == "digits-trainer"
  specs = manifest["spec"]["tfReplicaSpecs"]
  assert set(specs) == {"Worker"}
  container = _check_replica(specs["Worker"], 3, "gcr.io/p/kit:1", command)
  assert container["resources"] == {"limits": {"nvidia.com/gpu": 1}}
  assert command == [
    "python",
    "-m",
    "components.distributed_trainer.worker",
    "--spec",
    "gs://bucket/run/spec.json",
  ]
  assert manifest["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "Running"}
  assert json.loads(tfjob_lib.to_json(manifest)) == manifest


def test_parameter_server_tfjob_has_chief_workers_and_ps():
  manifest = tfjob_lib.render_tfjob(
    "ps-run", "img", ["python", "x.py"], num_workers=2, num_ps=1, restart_policy="ExitCode",
    service_account="trainer",
  )  # fmt: skip
  specs = manifest["spec"]["tfReplicaSpecs"]
  assert list(specs) == ["Chief", "Worker", "PS"]
  for role, count in (("Chief", 1), ("Worker", 2), ("PS", 1)):
    _check_replica(specs[role], count, "img", ["python", "x.py"])
    assert specs[role]["restartPolicy"] == "ExitCode"
    assert specs[role]["template"]["spec"]["serviceAccountName"] == "trainer"


@pytest.mark.parametrize(
  ("kwargs", "message"),
  [
    ({"name": "Bad_Name"}, "DNS-1123"),
    ({"num_workers": 0}, "num_workers >= 1"),
    ({"restart_policy": "Sometimes"}, "restart_policy"),
    ({"clean_pod_policy": "Some"}, "clean_pod_policy"),
  ],
)
def test_invalid_tfjob_arguments(kwargs, message):
  args = {"name": "ok", "image": "img", "command": ["python"], "num_workers": 1, **kwargs}
  with pytest.raises(ValueError, match=message):
    tfjob_lib.render_tfjob(**args)
