"""The Kubeflow TFJob (kubeflow.org/v1) a DistributedTrainer step submits: settings and body.

Plain Python that knows neither TFX types nor the `kubernetes` client (bar its quantity
parser): `TFJobSettings` is what the compiled pipeline passes the step, `build_tfjob` the body
it creates; tfjob_lib submits that body and follows the job.

The operator's contract followed here was read in kubeflow/training-operator v1.7.0:
`pkg/apis/kubeflow.org/v1/{tensorflow_types,tensorflow_defaults,tensorflow_validation,
common_types}.go` (field names, defaults, the `tensorflow` container and `tfjob-port`),
`pkg/controller.v1/tensorflow/tensorflow.go` (TF_CONFIG) and
`pkg/controller.v1/common/{job,pod}.go` (restart policies, backoffLimit, cleanPodPolicy, pod
labels).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TFJob"
PLURAL = "tfjobs"

# The operator reads the port of this container (TFJobDefaultContainerName, ...PortName).
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222

# Replica types as the CRD spells them; TF_CONFIG and pod labels use them lower-cased.
CHIEF = "Chief"
WORKER = "Worker"
PS = "PS"
EVALUATOR = "Evaluator"

# Labels the operator puts on every pod of a job (common_types.go).
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"

# Marks the jobs this kit creates, and which Model artifact a job trains (the retry check).
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "tfx-pipeline-kit"
ARTIFACT_ANNOTATION = "tfx-pipeline-kit/model-uri"

# Total container restarts after which the operator fails the job (runPolicy.backoffLimit).
DEFAULT_BACKOFF_LIMIT = 3
# The step deletes its job when it is done; this removes a job whose step died (after a retry
# had its chance to attach).
TTL_SECONDS_AFTER_FINISHED = 3600
# How often the step reads the job's status.
DEFAULT_POLL_S = 2.0

# Resource names: an optional DNS prefix and a name, e.g. cpu, memory, nvidia.com/gpu.
_RESOURCE_NAME = re.compile(
  r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
  r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
# TFJob names are DNS-1035 labels, which also prefix the operator's pod and service names.
_JOB_NAME_PREFIX = "trainer"

Replica = tuple[str, int]  # (lower-case replica type, index), as in TF_CONFIG.


@dataclasses.dataclass(frozen=True)
class TFJobSettings:
  """What the compiled pipeline tells the DistributedTrainer step about its TFJob.

  Attributes:
    workers: Worker replicas (>= 1).
    ps: PS replicas; with any, a Chief replica coordinates (ParameterServerStrategy).
    image: the container image of every replica (the pipeline's own).
    namespace: where the job runs; '' for the step pod's own namespace.
    service_account: the replicas' service account; '' for the namespace's default.
    worker_resources: requests (= limits) of the chief and each worker, e.g. {'cpu': '4'}.
    ps_resources: requests (= limits) of each PS replica.
    env: (name, value) environment variables of every replica.
    secret_env: (secret, key, variable) environment variables read from Kubernetes secrets.
    volumes: (PersistentVolumeClaim, mount path) pairs mounted in every replica.
    backoff_limit: container restarts over the whole job before the operator fails it.
    poll_s: how often the step reads the job's status.
  """

  workers: int
  ps: int = 0
  image: str = ""
  namespace: str = ""
  service_account: str = ""
  worker_resources: Mapping[str, str] = dataclasses.field(default_factory=dict)
  ps_resources: Mapping[str, str] = dataclasses.field(default_factory=dict)
  env: tuple[tuple[str, str], ...] = ()
  secret_env: tuple[tuple[str, str, str], ...] = ()
  volumes: tuple[tuple[str, str], ...] = ()
  backoff_limit: int = DEFAULT_BACKOFF_LIMIT
  poll_s: float = DEFAULT_POLL_S

  def to_json(self) -> str:
    """The execution parameter's value (sorted keys, so equal settings compile equally)."""
    return json.dumps(dataclasses.asdict(self), sort_keys=True)

  @classmethod
  def from_json(cls, text: str) -> TFJobSettings:
    """Reads `to_json`'s output."""
    raw = json.loads(text)
    for key in ("env", "secret_env", "volumes"):
      raw[key] = tuple(tuple(item) for item in raw.get(key) or ())
    return cls(**raw)

  def replicas(self) -> dict[str, int]:
    """Replica counts by CRD type: Worker, plus PS and a Chief when there are PS replicas."""
    counts = {WORKER: self.workers}
    if self.ps:
      counts = {CHIEF: 1, WORKER: self.workers, PS: self.ps}
    return counts

  def chief(self) -> Replica:
    """The task that trains, evaluates and exports (its TrainResult's name): the chief, else
    worker 0; a single replica gets no TF_CONFIG from the operator, so it is a 'chief'."""
    return ("chief", 0) if self.ps or self.workers == 1 else ("worker", 0)


def parse_resources(text: str) -> dict[str, str]:
  """Parses `cpu=4,memory=16Gi,nvidia.com/gpu=1` into Kubernetes resource quantities.

  Raises:
    ValueError: naming the part that is not NAME=QUANTITY or not a valid quantity.
  """
  from kubernetes.utils import parse_quantity

  out: dict[str, str] = {}
  for part in filter(None, (p.strip() for p in text.split(","))):
    name, sep, quantity = (s.strip() for s in part.partition("="))
    if not sep or not _RESOURCE_NAME.match(name) or not quantity:
      raise ValueError(f"{part!r} is not NAME=QUANTITY (e.g. cpu=4,memory=16Gi,nvidia.com/gpu=1)")
    try:
      value = parse_quantity(quantity)
    except ValueError:
      value = None
    if value is None or value < 0:
      raise ValueError(
        f"{name}={quantity!r} is not a Kubernetes quantity (e.g. 4, 500m, 16Gi, 1.5)"
      )
    # Extended resources (a prefixed name such as nvidia.com/gpu) are whole devices.
    if "/" in name and not name.startswith("kubernetes.io/") and value != int(value):
      raise ValueError(f"{name}={quantity} must be a whole number of devices")
    out[name] = quantity
  if not out:
    raise ValueError(f"{text!r} names no resource; e.g. cpu=4,memory=16Gi")
  return out


def job_name(artifact_uri: str) -> str:
  """A TFJob name that is the same for every try of one pipeline task and differs between tasks.

  KFP makes the Model artifact's URI unique per run and task and keeps it for a retried pod,
  so its digest names the job. The name is a DNS-1035 label short enough that the operator's
  pod and service names (`<job>-<type>-<index>`) are labels too.
  """
  digest = hashlib.sha256(artifact_uri.rstrip("/").encode()).hexdigest()[:16]
  return f"{_JOB_NAME_PREFIX}-{digest}"


def _container_env(settings: TFJobSettings, extra_env: Mapping[str, str]) -> list[dict[str, Any]]:
  # Every process must use Keras 2 (tf_keras); see the project rules.
  values = {"TF_USE_LEGACY_KERAS": "1", **dict(settings.env), **dict(extra_env)}
  env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
  # Secret values never enter the job body: the kubelet reads them into the container.
  env += [
    {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
    for secret, key, var in settings.secret_env
  ]
  return env


def _pod_template(
  settings: TFJobSettings,
  command: Sequence[str],
  resources: Mapping[str, str],
  extra_env: Mapping[str, str],
) -> dict[str, Any]:
  container: dict[str, Any] = {
    "name": CONTAINER_NAME,
    "image": settings.image,
    "command": list(command),
    "env": _container_env(settings, extra_env),
    "ports": [{"name": PORT_NAME, "containerPort": DEFAULT_PORT}],
  }
  if resources:
    container["resources"] = {"requests": dict(resources), "limits": dict(resources)}
  volumes = [
    {"name": f"volume-{i}", "persistentVolumeClaim": {"claimName": claim}}
    for i, (claim, _) in enumerate(settings.volumes)
  ]
  if volumes:
    container["volumeMounts"] = [
      {"name": f"volume-{i}", "mountPath": path} for i, (_, path) in enumerate(settings.volumes)
    ]
  spec: dict[str, Any] = {"containers": [container]}
  if volumes:
    spec["volumes"] = volumes
  if settings.service_account:
    spec["serviceAccountName"] = settings.service_account
  return {
    "metadata": {
      "labels": {MANAGED_BY_LABEL: MANAGED_BY},
      # Kubeflow's Istio would add a sidecar that keeps each pod alive after training and sits
      # between the replicas' gRPC connections; the operator's docs turn it off for TFJobs.
      "annotations": {"sidecar.istio.io/inject": "false"},
    },
    "spec": spec,
  }


def build_tfjob(
  name: str,
  namespace: str,
  settings: TFJobSettings,
  command: Sequence[str],
  *,
  artifact_uri: str,
  extra_env: Mapping[str, str] | None = None,
  active_deadline_s: int | None = None,
) -> dict[str, Any]:
  """The TFJob body: every replica runs `command` in the pipeline's image.

  Restart policies, as the operator applies them (common/pod.go, job.go):
  - Worker and PS: `OnFailure`. The kubelet restarts a failed container in place, in the
    same pod with the same DNS name, so a lost worker comes back where its peers expect it;
    under ParameterServerStrategy the coordinator re-queues the lost worker's steps and
    carries on, and MultiWorkerMirrored workers resume from BackupAndRestore.
  - Chief: `ExitCode`. An exception in training code exits 1, which the operator treats as
    permanent: the job fails at once, with the chief's pod and log kept for the report,
    instead of crash-looping through the backoff limit. A chief killed from outside
    (exit code >= 128: OOM kill, eviction, preemption) is recreated and resumes from its
    BackupAndRestore checkpoint.
  Every container restart counts against `backoffLimit`. `cleanPodPolicy: Running` removes the
  replicas still running when the job finishes (the PS servers, which never exit by
  themselves) and keeps the finished ones, whose logs the step copies before it deletes the
  job; `ttlSecondsAfterFinished` removes a job whose step died.

  Args:
    name: the job name (`job_name`).
    namespace: where it runs.
    settings: replicas, image, resources, environment and volumes.
    command: the replicas' command line (the worker entry point and its spec).
    artifact_uri: the Model artifact the job trains; recorded so a retried step knows the job
      is its own.
    extra_env: more environment for every replica (e.g. the profiler's port rule).
    active_deadline_s: the operator fails the job after this long (None: no deadline).

  Returns:
    The body to POST to /apis/kubeflow.org/v1/namespaces/<namespace>/tfjobs.
  """
  extra_env = dict(extra_env or {})
  policies = {CHIEF: "ExitCode", WORKER: "OnFailure", PS: "OnFailure"}
  specs = {}
  for rtype, count in settings.replicas().items():
    resources = settings.ps_resources if rtype == PS else settings.worker_resources
    specs[rtype] = {
      "replicas": count,
      "restartPolicy": policies[rtype],
      "template": _pod_template(settings, command, resources, extra_env),
    }
  run_policy: dict[str, Any] = {
    "cleanPodPolicy": "Running",
    "ttlSecondsAfterFinished": TTL_SECONDS_AFTER_FINISHED,
    "backoffLimit": settings.backoff_limit,
  }
  if active_deadline_s:
    run_policy["activeDeadlineSeconds"] = int(active_deadline_s)
  return {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "metadata": {
      "name": name,
      "namespace": namespace,
      "labels": {MANAGED_BY_LABEL: MANAGED_BY},
      "annotations": {ARTIFACT_ANNOTATION: artifact_uri},
    },
    "spec": {"runPolicy": run_policy, "tfReplicaSpecs": specs},
  }
