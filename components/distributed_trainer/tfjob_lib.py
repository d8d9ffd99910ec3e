"""Renders a Kubeflow Training Operator TFJob (kubeflow.org/v1) for the trainer's worker module.

On Kubeflow, whoever starts the replicas supplies TF_CONFIG: the Training Operator sets it
for each replica of a TFJob (Vertex AI does the same for worker pools). Every replica runs
`python -m components.distributed_trainer.worker --spec <spec.json>`, which serves or
trains according to its TF_CONFIG, exactly as in a local cluster. This module only renders
the manifest; submitting it (kubectl apply, or the Kubernetes API from a pipeline step) and
writing spec.json to storage every replica can read are the deployer's part.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

API_VERSION = "kubeflow.org/v1"
KIND = "TFJob"
# The Training Operator finds the TensorFlow container of a replica by this name.
CONTAINER_NAME = "tensorflow"
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("All", "Running", "None")
WORKER_MODULE = "components.distributed_trainer.worker"
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def worker_command(spec_uri: str, python: str = "python") -> list[str]:
  """Returns the container command that runs one trainer replica.

  Args:
    spec_uri: spec.json written by the executor, on storage all replicas can read (gs://...).
    python: interpreter inside the image.

  Returns:
    The argv list.
  """
  return [python, "-m", WORKER_MODULE, "--spec", spec_uri]


@dataclasses.dataclass(frozen=True)
class _Pod:
  """What every replica shares: image, command, environment, policy and account."""

  image: str
  command: Sequence[str]
  env: Mapping[str, str]
  restart_policy: str
  service_account: str | None


def _replica(pod: _Pod, replicas: int, resources: Mapping[str, Any] | None) -> dict[str, Any]:
  container: dict[str, Any] = {
    "name": CONTAINER_NAME,
    "image": pod.image,
    "command": list(pod.command),
    # Keras 2 in every replica, as everywhere in this kit.
    "env": [
      {"name": k, "value": str(v)} for k, v in {"TF_USE_LEGACY_KERAS": "1", **pod.env}.items()
    ],
  }
  if resources:
    container["resources"] = copy.deepcopy(dict(resources))
  pod_spec: dict[str, Any] = {"containers": [container]}
  if pod.service_account:
    pod_spec["serviceAccountName"] = pod.service_account
  return {
    "replicas": replicas,
    "restartPolicy": pod.restart_policy,
    "template": {"spec": pod_spec},
  }


def render_tfjob(
  name: str,
  image: str,
  command: Sequence[str],
  *,
  num_workers: int,
  num_ps: int = 0,
  namespace: str = "kubeflow",
  env: Mapping[str, str] | None = None,
  worker_resources: Mapping[str, Any] | None = None,
  ps_resources: Mapping[str, Any] | None = None,
  restart_policy: str = "OnFailure",
  backoff_limit: int = 3,
  clean_pod_policy: str = "Running",
  service_account: str | None = None,
) -> dict[str, Any]:
  """Returns a TFJob manifest for a MultiWorkerMirrored or ParameterServer trainer run.

  Without ps the job has `Worker` x num_workers (worker 0 acts as chief, as in local runs).
  With ps it has `Chief` x 1 (the coordinator) + `Worker` x num_workers + `PS` x num_ps.

  Args:
    name: TFJob name (DNS-1123 label).
    image: container image with this kit installed.
    command: container command, usually `worker_command(spec_uri)`.
    num_workers: Worker replicas (>= 1).
    num_ps: PS replicas.
    namespace: Kubernetes namespace.
    env: extra environment variables for every replica.
    worker_resources: resources of Chief and Worker containers (e.g. nvidia.com/gpu limits).
    ps_resources: resources of PS containers.
    restart_policy: one of RESTART_POLICIES; the operator restarts failed replicas with it,
      and BackupAndRestore lets the restarted workers resume.
    backoff_limit: restarts before the job is marked failed.
    clean_pod_policy: one of CLEAN_POD_POLICIES.
    service_account: Kubernetes service account of the pods (storage access).

  Returns:
    The manifest as a dict (`json.dumps` it for `kubectl apply -f -`).

  Raises:
    ValueError: for an invalid name, replica count or policy.
  """
  if not _NAME_RE.match(name):
    raise ValueError(f"TFJob name {name!r} must be a DNS-1123 label (lowercase, digits, '-')")
  if num_workers < 1 or num_ps < 0:
    raise ValueError("a TFJob needs num_workers >= 1 and num_ps >= 0")
  if restart_policy not in RESTART_POLICIES:
    raise ValueError(f"restart_policy={restart_policy!r}; use one of {RESTART_POLICIES}")
  if clean_pod_policy not in CLEAN_POD_POLICIES:
    raise ValueError(f"clean_pod_policy={clean_pod_policy!r}; use one of {CLEAN_POD_POLICIES}")
  pod = _Pod(image, command, dict(env or {}), restart_policy, service_account)
  specs: dict[str, Any] = {}
  if num_ps:
    specs["Chief"] = _replica(pod, 1, worker_resources)
  specs["Worker"] = _replica(pod, num_workers, worker_resources)
  if num_ps:
    specs["PS"] = _replica(pod, num_ps, ps_resources)
  return {
    "apiVersion": API_VERSION,
    "kind": KIND,
    "metadata": {
      "name": name,
      "namespace": namespace,
      "labels": {"app.kubernetes.io/component": "distributed-trainer"},
    },
    "spec": {
      "runPolicy": {"backoffLimit": backoff_limit, "cleanPodPolicy": clean_pod_policy},
      "tfReplicaSpecs": specs,
    },
  }


def to_json(manifest: Mapping[str, Any]) -> str:
  """Serialises a manifest for `kubectl apply -f -` (JSON is valid YAML)."""
  return json.dumps(manifest, indent=2, sort_keys=False)
