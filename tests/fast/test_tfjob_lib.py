"""tfjob_lib against the fake training operator, with plain-Python replicas (no TensorFlow)."""

import json
import os
import re
import textwrap
import time

import jsonschema
import pytest

from components.distributed_trainer import tfjob_cluster, tfjob_lib, tfjob_manifest
from core.errors import UserInputError
from tests.support import fake_kubernetes
from tests.support.fake_kubernetes import FakeKubernetes

NS = "team-a"

# The parts of the TFJob CRD (kubeflow/training-operator v1.7.0,
# manifests/base/crds/kubeflow.org_tfjobs.yaml, openAPIV3Schema) that a body must satisfy,
# restated by hand: required fields and the enumerations of the fields the kit sets.
TFJOB_SCHEMA = {
  "type": "object",
  "required": ["apiVersion", "kind", "metadata", "spec"],
  "properties": {
    "apiVersion": {"const": "kubeflow.org/v1"},
    "kind": {"const": "TFJob"},
    "metadata": {"type": "object", "required": ["name", "namespace"]},
    "spec": {
      "type": "object",
      "required": ["tfReplicaSpecs"],
      "additionalProperties": False,
      "properties": {
        "enableDynamicWorker": {"type": "boolean"},
        "successPolicy": {"type": "string"},
        "runPolicy": {
          "type": "object",
          "additionalProperties": False,
          "properties": {
            "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
            "backoffLimit": {"type": "integer", "minimum": 0},
            "cleanPodPolicy": {"enum": ["All", "Running", "None"]},
            "schedulingPolicy": {"type": "object"},
            "suspend": {"type": "boolean"},
            "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
          },
        },
        "tfReplicaSpecs": {
          "type": "object",
          "minProperties": 1,
          "propertyNames": {"enum": ["Chief", "Master", "PS", "Worker", "Evaluator"]},
          "additionalProperties": {
            "type": "object",
            "additionalProperties": False,
            "required": ["replicas", "restartPolicy", "template"],
            "properties": {
              "replicas": {"type": "integer", "minimum": 1},
              "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
              "template": {
                "type": "object",
                "required": ["spec"],
                "properties": {
                  "spec": {
                    "type": "object",
                    "required": ["containers"],
                    "properties": {
                      "containers": {
                        "type": "array",
                        "minItems": 1,
                        "items": {"type": "object", "required": ["name", "image"]},
                      }
                    },
                  }
                },
              },
            },
          },
        },
      },
    },
  },
}


def _settings(**kw):
  base = {
    "workers": 2,
    "ps": 1,
    "image": "registry.example/kit:1",
    "worker_resources": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
    "ps_resources": {"cpu": "2", "memory": "8Gi"},
    "env": (("S3_ENDPOINT", "http://minio:9000"),),
    "secret_env": (("minio-creds", "accesskey", "AWS_ACCESS_KEY_ID"),),
    "volumes": (("serving-pvc", "/mnt/serving"),),
    "service_account": "trainer",
  }
  base.update(kw)
  return tfjob_manifest.TFJobSettings(**base)


def _body(settings, name="trainer-test", commands=None, **kw):
  body = tfjob_manifest.build_tfjob(
    name, NS, settings, ["python", "-c", "pass"], artifact_uri="/root/model", **kw
  )
  for rtype, command in (commands or {}).items():
    body["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["command"] = [
      "python",
      "-c",
      textwrap.dedent(command),
    ]
  return body


def _is_valid_job_name(name):
  """Whether the operator accepts `name` (a DNS-1035 label) with room for its longest pod
  suffix, -evaluator-NNNNN."""
  dns_1035 = re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name)
  return bool(dns_1035) and len(name) + len("-evaluator-") + 5 <= 63


def test_job_name_is_a_dns_1035_label_with_room_for_the_operators_pod_names():
  uri = "s3://bucket/root/digits/run-1/DistributedTrainer/model"
  name = tfjob_manifest.job_name(uri)
  assert name == tfjob_manifest.job_name(uri + "/")  # the same task, however the URI is spelt
  assert name != tfjob_manifest.job_name(uri.replace("run-1", "run-2"))
  assert _is_valid_job_name(name)
  assert len(f"{name}-evaluator-99999") <= 63
  assert not _is_valid_job_name("1abc") and not _is_valid_job_name("a" * 60)


def test_parse_resources_takes_kubernetes_quantities_and_names_the_bad_part():
  assert tfjob_manifest.parse_resources("cpu=500m, memory=16Gi,nvidia.com/gpu=1") == {
    "cpu": "500m",
    "memory": "16Gi",
    "nvidia.com/gpu": "1",
  }
  for bad, text in (
    ("cpu", "is not NAME=QUANTITY"),
    ("memory=16GB", "not a Kubernetes quantity"),
    ("cpu=-1", "not a Kubernetes quantity"),
    ("nvidia.com/gpu=0.5", "whole number of devices"),
    ("", "names no resource"),
  ):
    with pytest.raises(ValueError, match=text):
      tfjob_manifest.parse_resources(bad)


def test_settings_survive_the_execution_parameter():
  settings = _settings()
  assert tfjob_manifest.TFJobSettings.from_json(settings.to_json()) == settings
  assert settings.replicas() == {"Chief": 1, "Worker": 2, "PS": 1}
  assert settings.chief() == ("chief", 0)
  assert _settings(ps=0).chief() == ("worker", 0)
  assert _settings(ps=0, workers=1).chief() == ("chief", 0)  # no TF_CONFIG: a lone chief


def test_the_body_is_a_valid_tfjob_that_the_operator_accepts():
  from kubernetes import client

  body = _body(_settings(), active_deadline_s=1800)
  jsonschema.validate(body, TFJOB_SCHEMA)
  assert fake_kubernetes.validate(body) is None  # the operator's own checks
  assert body["metadata"]["annotations"][tfjob_manifest.ARTIFACT_ANNOTATION] == "/root/model"
  specs = body["spec"]["tfReplicaSpecs"]
  assert {t: (s["replicas"], s["restartPolicy"]) for t, s in specs.items()} == {
    "Chief": (1, "ExitCode"),
    "Worker": (2, "OnFailure"),
    "PS": (1, "OnFailure"),
  }
  assert body["spec"]["runPolicy"] == {
    "cleanPodPolicy": "Running",
    "ttlSecondsAfterFinished": tfjob_manifest.TTL_SECONDS_AFTER_FINISHED,
    "backoffLimit": tfjob_manifest.DEFAULT_BACKOFF_LIMIT,
    "activeDeadlineSeconds": 1800,
  }
  api = client.ApiClient()
  for rtype, spec in specs.items():
    (container,) = spec["template"]["spec"]["containers"]
    assert container["name"] == "tensorflow" and container["image"] == "registry.example/kit:1"
    assert container["ports"] == [{"name": "tfjob-port", "containerPort": 2222}]
    resources = {"cpu": "2", "memory": "8Gi"} if rtype == "PS" else _settings().worker_resources
    assert container["resources"] == {"requests": resources, "limits": resources}
    env = {e["name"]: e for e in container["env"]}
    assert env["TF_USE_LEGACY_KERAS"]["value"] == "1"
    assert env["S3_ENDPOINT"]["value"] == "http://minio:9000"
    assert env["AWS_ACCESS_KEY_ID"] == {
      "name": "AWS_ACCESS_KEY_ID",
      "valueFrom": {"secretKeyRef": {"name": "minio-creds", "key": "accesskey"}},
    }
    assert container["volumeMounts"] == [{"name": "volume-0", "mountPath": "/mnt/serving"}]
    pod = spec["template"]["spec"]
    assert pod["volumes"] == [
      {"name": "volume-0", "persistentVolumeClaim": {"claimName": "serving-pvc"}}
    ]
    assert pod["serviceAccountName"] == "trainer"
    # Every field is a Kubernetes PodTemplateSpec field: the client's model keeps them all.
    model = api._ApiClient__deserialize(spec["template"], "V1PodTemplateSpec")
    assert api.sanitize_for_serialization(model) == spec["template"]


def test_operator_tf_config_for_every_replica_type():
  body = _body(_settings(ps=2, workers=3))
  body["spec"]["tfReplicaSpecs"]["Evaluator"] = json.loads(
    json.dumps(body["spec"]["tfReplicaSpecs"]["Worker"])
  )
  body["spec"]["tfReplicaSpecs"]["Evaluator"]["replicas"] = 1
  body["spec"]["tfReplicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] = [
    {"name": "tfjob-port", "containerPort": 3333}
  ]
  text = fake_kubernetes.tf_config(body, "Evaluator", 0)
  assert text.startswith('{"cluster":{"chief":') and " " not in text  # Go's json.Marshal
  config = json.loads(text)
  host = "trainer-test-{}.team-a.svc:{}"
  assert config == {
    "cluster": {
      "chief": [host.format("chief-0", 2222)],
      "evaluator": [host.format("evaluator-0", 2222)],
      "ps": [host.format("ps-0", 3333), host.format("ps-1", 3333)],
      "worker": [host.format(f"worker-{i}", 2222) for i in range(3)],
    },
    "task": {"type": "evaluator", "index": 0},
    "environment": "cloud",
  }
  domain = json.loads(fake_kubernetes.tf_config(body, "PS", 1, "cluster.local"))
  assert domain["cluster"]["ps"][1] == "trainer-test-ps-1.team-a.svc.cluster.local:3333"
  body["spec"]["enableDynamicWorker"] = True
  sparse = json.loads(fake_kubernetes.tf_config(body, "Worker", 2))
  assert sparse == {
    "cluster": {"worker": {"2": host.format("worker-2", 2222)}, "ps": config["cluster"]["ps"]},
    "task": {"type": "worker", "index": 2},
  }


@pytest.fixture
def cluster(tmp_path, monkeypatch):
  """The fake operator with a kubeconfig pointing at it, and a connected Api."""
  env = {**os.environ, "PYTHONPATH": str(tmp_path)}
  with FakeKubernetes(
    namespace=NS, secrets={(NS, "minio-creds"): {"accesskey": "AKIA-SENTINEL"}}, base_env=env
  ) as fake:
    monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(str(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield fake, tfjob_cluster.connect()


SERVE = "import time; print('serving', flush=True); time.sleep(120)"


def test_a_two_worker_job_succeeds_when_worker_0_does_and_the_rest_are_cleaned_up(cluster):
  fake, api = cluster
  report = """
    import json, os
    config = json.loads(os.environ["TF_CONFIG"])
    print(config["task"], os.environ["AWS_ACCESS_KEY_ID"], os.environ["S3_ENDPOINT"])
  """
  body = _body(_settings(ps=0), commands={"Worker": report})
  body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"][2] += (
    "\nimport time\nif config['task']['index'] == 1: time.sleep(120)"
  )
  run = tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.2)
  assert run.created and tfjob_lib.finished(run.job) == tfjob_lib.SUCCEEDED
  assert (
    "{'type': 'worker', 'index': 0} AKIA-SENTINEL http://minio:9000"
    in run.logs.tails[("worker", 0)]
  )
  # Pods carry the operator's labels and the TF_CONFIG it computes; no secret value.
  pods = {p["metadata"]["name"]: p for p in fake.pod_history}
  assert sorted(pods) == ["trainer-test-worker-0", "trainer-test-worker-1"]
  labels = pods["trainer-test-worker-1"]["metadata"]["labels"]
  assert labels[tfjob_manifest.JOB_NAME_LABEL] == "trainer-test"
  assert (
    labels[tfjob_manifest.REPLICA_TYPE_LABEL],
    labels[tfjob_manifest.REPLICA_INDEX_LABEL],
  ) == (
    "worker",
    "1",
  )
  env = {e["name"]: e for e in pods["trainer-test-worker-1"]["spec"]["containers"][0]["env"]}
  assert json.loads(env["TF_CONFIG"]["value"])["task"] == {"type": "worker", "index": 1}
  assert "AKIA-SENTINEL" not in json.dumps(fake.pod_history)
  # Still-running worker 1 was removed by cleanPodPolicy Running; the step deleted the job.
  assert not fake.jobs and not fake.pods
  assert ("DELETE", f"/apis/kubeflow.org/v1/namespaces/{NS}/tfjobs/trainer-test", 200) in (
    fake.requests
  )


def test_all_workers_success_policy_waits_for_every_worker(cluster):
  fake, api = cluster
  body = _body(
    _settings(ps=0),
    commands={
      "Worker": "import os, time; time.sleep(1 + 2 * ('worker-1' in os.environ['HOSTNAME']))"
    },
  )
  body["spec"]["successPolicy"] = "AllWorkers"
  start = time.monotonic()
  run = tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.2)
  assert tfjob_lib.finished(run.job) == tfjob_lib.SUCCEEDED
  assert time.monotonic() - start >= 3  # worker 1's three seconds, not worker 0's one
  assert len(fake.times("container-exited")) == 2


def test_a_worker_that_fails_once_is_restarted_in_place_under_on_failure(cluster, tmp_path):
  _, api = cluster
  flaky = f"""
    import os, pathlib, sys, time
    marker = pathlib.Path({str(tmp_path / "failed-once")!r})
    if 'worker-1' in os.environ['HOSTNAME'] and not marker.exists():
      marker.touch(); print('first try fails', flush=True); sys.exit(3)
    time.sleep(1.5 if 'worker-0' in os.environ['HOSTNAME'] else 0)
  """
  body = _body(_settings(ps=0), commands={"Worker": flaky})
  run = tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.1)
  assert tfjob_lib.finished(run.job) == tfjob_lib.SUCCEEDED
  assert run.logs.restarts == 1
  (failure,) = run.logs.failures
  assert (failure.replica, failure.what) == (("worker", 1), "exited with status 3")
  assert failure.tail == "first try fails\n"


def test_a_failing_replica_fails_the_job_with_one_line_and_its_log_tail(cluster):
  fake, api = cluster
  body = _body(
    _settings(ps=0, backoff_limit=2),
    commands={
      "Worker": f"""
      import os, sys, time
      if 'worker-1' in os.environ['HOSTNAME']:
        print('ValueError: boom on worker 1', flush=True); sys.exit(1)
      {SERVE}
    """
    },
  )
  with pytest.raises(tfjob_lib.TFJobError) as error:
    tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.1)
  first, *tail = str(error.value).splitlines()
  assert first.startswith(f"TFJob {NS}/trainer-test failed: worker 1 exited with status 1 (")
  assert "reached the specified backoff limit" in first
  assert first.endswith("its log ends with:")
  assert tail[-1] == "ValueError: boom on worker 1"
  assert isinstance(error.value, tfjob_lib.ClusterError)
  assert not fake.jobs and not fake.pods


def test_the_chief_fails_at_once_on_an_error_and_is_recreated_when_killed(cluster, tmp_path):
  fake, api = cluster
  body = _body(
    _settings(workers=1),
    commands={
      "Chief": "import sys; print('Traceback: chief broke'); sys.exit(1)",
      "Worker": SERVE,
      "PS": SERVE,
    },
  )
  with pytest.raises(
    tfjob_lib.TFJobError, match=r"chief 0 exited with status 1 \(TFJob .* 1 Chief"
  ):
    tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.1)
  assert len([p for p in fake.pod_history if "chief" in p["metadata"]["name"]]) == 1

  marker = tmp_path / "killed"
  killed_once = f"""
    import os, pathlib, signal, time
    marker = pathlib.Path({str(marker)!r})
    if not marker.exists():
      marker.touch(); os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
  """
  body = _body(
    _settings(workers=1),
    name="trainer-kill",
    commands={"Chief": killed_once, "Worker": SERVE, "PS": SERVE},
  )
  run = tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.05)
  assert tfjob_lib.finished(run.job) == tfjob_lib.SUCCEEDED
  chiefs = [p for p in fake.pod_history if p["metadata"]["name"] == "trainer-kill-chief-0"]
  assert len(chiefs) == 2  # ExitCode: exit code 137 is retryable, the pod was recreated
  assert chiefs[0]["spec"]["restartPolicy"] == "Never"


def test_a_retried_step_attaches_to_its_job_and_refuses_someone_elses(cluster):
  fake, api = cluster
  body = _body(_settings(ps=0), commands={"Worker": "import time; time.sleep(1)"})
  job, created = tfjob_lib.create_or_attach(api, body)
  assert created
  again, created = tfjob_lib.create_or_attach(api, body)
  assert not created and again["metadata"]["uid"] == job["metadata"]["uid"]
  assert fake.creates() == 1
  other = json.loads(json.dumps(body))
  other["metadata"]["annotations"][tfjob_manifest.ARTIFACT_ANNOTATION] = "/another/model"
  with pytest.raises(tfjob_lib.TFJobError, match="already exists and trains /root/model"):
    tfjob_lib.create_or_attach(api, other)
  assert tfjob_lib.delete_job(api, NS, "trainer-test") and not tfjob_lib.delete_job(
    api, NS, "trainer-test"
  )


def test_active_deadline_fails_the_job(cluster):
  _, api = cluster
  body = _body(_settings(ps=0), commands={"Worker": SERVE}, active_deadline_s=1)
  with pytest.raises(tfjob_lib.TFJobError, match="active longer than specified deadline"):
    tfjob_lib.run_job(api, body, timeout_s=60, poll_s=0.2)


def test_an_invalid_job_is_refused_by_the_api_server_or_ignored_by_the_operator(cluster):
  from kubernetes.client.exceptions import ApiException

  fake, api = cluster
  body = _body(_settings(ps=0))
  del body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"]
  with pytest.raises(ApiException) as error:
    tfjob_lib.create_or_attach(api, body)
  assert error.value.status == 422
  body = _body(_settings(ps=0))
  body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "main"
  tfjob_lib.create_or_attach(api, body)
  with pytest.raises(tfjob_lib.TFJobError, match="did not finish within 1 s"):
    tfjob_lib.wait_for_job(
      api,
      NS,
      "trainer-test",
      tfjob_lib.ReplicaLogs(api, NS, "trainer-test"),
      timeout_s=1,
      poll_s=0.2,
    )
  assert "no container named tensorflow" in fake.validation_errors[(NS, "trainer-test")]
  assert not fake.pod_history


def test_namespace_comes_from_the_pod_then_the_kubeconfig_then_default(
  cluster, tmp_path, monkeypatch
):
  file = tmp_path / "namespace"
  file.write_text("from-pod\n")
  assert tfjob_cluster.current_namespace(str(file)) == "from-pod"
  assert tfjob_cluster.current_namespace(str(tmp_path / "absent")) == NS
  monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-such-kubeconfig"))
  assert tfjob_cluster.current_namespace(str(tmp_path / "absent")) == "default"


def test_a_signal_death_reads_as_128_plus_the_signal():
  assert tfjob_lib._describe_exit(137, "Error") == "was killed by SIGKILL (exit code 137)"
  assert tfjob_lib._describe_exit(137, "OOMKilled").startswith("was killed for running out")
  assert tfjob_lib._describe_exit(2, "Error") == "exited with status 2"


def test_a_job_that_fails_at_its_backoff_limit_counts_the_restart_the_operator_counted(cluster):
  # The restart that reaches the limit makes the operator fail the job and delete its pods at
  # once, before the step can see the restarted container: it still counts.
  fake, api = cluster
  crash = f"""
    import os, sys
    if 'worker-1' in os.environ['HOSTNAME']:
      print('boom', flush=True); sys.exit(1)
    {SERVE}
  """
  body = _body(_settings(ps=0, backoff_limit=2), commands={"Worker": crash})
  tfjob_lib.create_or_attach(api, body)
  logs = tfjob_lib.ReplicaLogs(api, NS, "trainer-test")
  job = tfjob_lib.wait_for_job(api, NS, "trainer-test", logs, timeout_s=60, poll_s=0.1)
  assert tfjob_lib.finished(job) == tfjob_lib.FAILED
  assert "reached the specified backoff limit" in tfjob_lib.condition(job, "Failed")["message"]
  # The operator's count: every start of worker 1's container after its first.
  operator_restarts = len(fake.times("container-started", "trainer-test-worker-1")) - 1
  assert operator_restarts == 2
  assert logs.restarts == operator_restarts
  assert len(logs.failures) == 2
  tfjob_lib.delete_job(api, NS, "trainer-test")


def _not_ready_cluster(tmp_path, monkeypatch, **kw):
  fake = FakeKubernetes(namespace=NS, **kw).start()
  monkeypatch.setenv("KUBECONFIG", fake.write_kubeconfig(str(tmp_path / "kubeconfig")))
  monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
  return fake


def test_an_unreachable_api_server_is_one_line_naming_it_and_the_kubeconfig(tmp_path, monkeypatch):
  fake = _not_ready_cluster(tmp_path, monkeypatch)
  url = fake.url
  fake.stop()  # a closed port: nothing answers
  with pytest.raises(tfjob_cluster.ClusterNotReadyError) as error:
    tfjob_lib.run_job(tfjob_cluster.connect(), _body(_settings(ps=0)), timeout_s=10, poll_s=0.1)
  assert str(error.value) == (
    f"cannot reach the Kubernetes API server at {url} (Connection refused), which the "
    f"kubeconfig {tmp_path / 'kubeconfig'} names; check that the cluster is up and that "
    "KUBECONFIG (or, in a pod, its in-cluster config) names it: kubectl cluster-info should "
    "answer."
  )
  assert isinstance(error.value, UserInputError)


def test_no_kubeconfig_outside_a_pod_is_one_line(tmp_path, monkeypatch):
  monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
  monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
  with pytest.raises(
    tfjob_cluster.ClusterNotReadyError, match=r"^no Kubernetes cluster to run the"
  ):
    tfjob_cluster.connect()


def test_a_cluster_without_the_training_operator_is_one_line_naming_the_crd(tmp_path, monkeypatch):
  fake = _not_ready_cluster(tmp_path, monkeypatch, tfjob_crd=False)
  try:
    with pytest.raises(tfjob_cluster.ClusterNotReadyError) as error:
      tfjob_lib.run_job(tfjob_cluster.connect(), _body(_settings(ps=0)), timeout_s=10, poll_s=0.1)
    assert str(error.value) == (
      f"the Kubernetes API server at {fake.url} has no TFJob resource (kubeflow.org/v1 tfjobs, "
      "HTTP 404): the Kubeflow Training Operator is not installed; install it "
      "(docs/distributed-trainer.md, Training across machines) and check with kubectl get crd "
      "tfjobs.kubeflow.org."
    )
  finally:
    fake.stop()


def test_a_namespace_that_does_not_exist_is_one_line(tmp_path, monkeypatch):
  fake = _not_ready_cluster(tmp_path, monkeypatch, namespaces=["kubeflow"])
  try:
    with pytest.raises(tfjob_cluster.ClusterNotReadyError) as error:
      tfjob_lib.run_job(tfjob_cluster.connect(), _body(_settings(ps=0)), timeout_s=10, poll_s=0.1)
    assert str(error.value).startswith(f"namespace '{NS}' does not exist on the Kubernetes API")
    assert str(error.value).endswith("or pass --tfjob-namespace with an existing one.")
  finally:
    fake.stop()


@pytest.mark.parametrize(
  "forbidden,denied",
  [(("create", "tfjobs"), "create tfjobs"), (("list", "pods"), "list pods")],
)
def test_rbac_refusal_is_one_line_naming_the_account_the_namespace_and_the_role(
  tmp_path, monkeypatch, forbidden, denied
):
  fake = _not_ready_cluster(tmp_path, monkeypatch, forbidden=[forbidden])
  body = _body(_settings(ps=0), commands={"Worker": SERVE})
  try:
    with pytest.raises(tfjob_cluster.ClusterNotReadyError) as error:
      tfjob_lib.run_job(tfjob_cluster.connect(), body, timeout_s=10, poll_s=0.1)
    assert str(error.value) == (
      f"the Kubernetes API server at {fake.url} forbids "
      f"system:serviceaccount:kubeflow:pipeline-runner to {denied} in namespace '{NS}' (HTTP "
      "403, RBAC); give that account create/get/list/watch/delete on tfjobs.kubeflow.org, "
      "get/list on pods and get on pods/log in that namespace with a Role and RoleBinding "
      "(docs/distributed-trainer.md, Training across machines)."
    )
    assert not fake.jobs  # a job created before the refusal is deleted
  finally:
    fake.stop()
