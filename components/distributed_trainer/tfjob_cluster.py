"""The Kubernetes API server a TFJob step talks to: connecting, and what a refusal means.

`connect` finds the cluster (in-cluster config in a pod, else KUBECONFIG); `cluster_problem`
turns what the API server or the network answered into one line naming the fix: unreachable,
no Training Operator (no tfjobs resource), no namespace, no permission (RBAC).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from components.distributed_trainer.tfjob_manifest import GROUP, PLURAL, VERSION
from core.errors import UserInputError, find

NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_NAMESPACE = "default"


class ClusterNotReadyError(UserInputError):
  """The cluster cannot run the job: no config, unreachable, no training operator, no access."""


@dataclasses.dataclass
class Api:
  """The two Kubernetes APIs the step uses (kubernetes.client objects), and where they point."""

  custom: Any  # CustomObjectsApi: tfjobs
  core: Any  # CoreV1Api: pods and their logs
  server: str = "the Kubernetes API server"  # its address, for messages
  source: str = "the kubeconfig"  # where that address came from, for messages


def connect() -> Api:
  """Clients for the cluster: in-cluster config in a pod, else kubeconfig ($KUBECONFIG).

  Raises:
    ClusterNotReadyError: when there is no usable config at all.
  """
  from kubernetes import client, config

  token = "/var/run/secrets/kubernetes.io/serviceaccount/token"
  kubeconfig = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
  try:
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.path.exists(token):
      source = "the step pod's in-cluster config"
      configuration = client.Configuration()
      config.load_incluster_config(client_configuration=configuration)
      api_client = client.ApiClient(configuration)
    else:
      source = f"the kubeconfig {kubeconfig}"
      api_client = config.new_client_from_config(config_file=os.environ.get("KUBECONFIG"))
  except config.ConfigException as e:
    raise ClusterNotReadyError(
      f"no Kubernetes cluster to run the TFJob on: {source} cannot be used "
      f"({str(e).strip().rstrip('.')}); run the step in a pod of the cluster, or set KUBECONFIG "
      "to a kubeconfig for it (kubectl cluster-info shows which cluster one names)."
    ) from e
  host = api_client.configuration.host
  return Api(client.CustomObjectsApi(api_client), client.CoreV1Api(api_client), host, source)


def cluster_problem(error: BaseException, api: Api, namespace: str) -> str | None:
  """One line naming the fix when the cluster cannot serve the step's calls, else None.

  The cases a new cluster meets: the API server does not answer, it has no TFJob resource
  (the training operator is not installed), the namespace does not exist, RBAC refuses the
  step's service account, or the credentials are refused.

  Args:
    error: what a Kubernetes call raised (an ApiException, or urllib3's error for a server
      that does not answer), anywhere in its cause chain.
    api: the clients the call was made with (for the server's address and its source).
    namespace: the namespace the job runs in.
  """
  import urllib3
  from kubernetes.client.exceptions import ApiException

  where = f"the Kubernetes API server at {api.server}"
  unreachable = find(error, urllib3.exceptions.HTTPError)
  if unreachable is not None:
    return (
      f"cannot reach {where} ({_transport_reason(unreachable)}), which {api.source} names; "
      "check that the cluster is up and that KUBECONFIG (or, in a pod, its in-cluster config) "
      "names it: kubectl cluster-info should answer."
    )
  refused = find(error, ApiException)
  return None if refused is None else _refusal(refused, where, api.source, namespace)


def _refusal(refused: Any, where: str, source: str, namespace: str) -> str | None:
  """cluster_problem for an HTTP error (ApiException) of the API server."""
  status, body = refused.status, _status_of(refused)
  if status == 404 and (body.get("details") or {}).get("kind") == "namespaces":
    return (
      f"namespace {namespace!r} does not exist on {where}; create it (kubectl create namespace "
      f"{namespace}) or pass --tfjob-namespace with an existing one."
    )
  if status == 404:
    return (
      f"{where} has no TFJob resource ({GROUP}/{VERSION} {PLURAL}, HTTP 404): the Kubeflow "
      "Training Operator is not installed; install it (docs/distributed-trainer.md, Training "
      f"across machines) and check with kubectl get crd {PLURAL}.{GROUP}."
    )
  if status == 403:
    message = str(body.get("message") or refused.reason or "")
    user = re.search(r'User "([^"]+)"', message)
    denied = re.search(r'cannot (\w+) resource "([^"]+)"', message)
    what = f"{denied.group(1)} {denied.group(2)}" if denied else "use tfjobs"
    who = user.group(1) if user else "the step's service account"
    return (
      f"{where} forbids {who} to {what} in namespace {namespace!r} (HTTP 403, RBAC); give that "
      f"account create/get/list/watch/delete on {PLURAL}.{GROUP}, get/list on pods and get on "
      "pods/log in that namespace with a Role and RoleBinding (docs/distributed-trainer.md, "
      "Training across machines)."
    )
  if status == 401:
    return (
      f"{where} refused the credentials of {source} (HTTP 401 Unauthorized); renew them "
      "(a new token or kubeconfig) and retry."
    )
  return None


def _transport_reason(error: BaseException) -> str:
  """'Connection refused' out of MaxRetryError(NewConnectionError(...: [Errno 111] ...))."""
  text = str(getattr(error, "reason", None) or error)
  found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
  return found.group(1).strip() if found else type(error).__name__


def _status_of(error: Any) -> dict[str, Any]:
  """The Kubernetes Status object an ApiException carries, or {} when its body is not one."""
  import json

  try:
    body = json.loads(error.body or "")
  except (TypeError, ValueError):
    return {}
  return body if isinstance(body, dict) else {}


def current_namespace(namespace_file: str = NAMESPACE_FILE) -> str:
  """The step pod's namespace, else the kubeconfig context's, else 'default'."""
  if os.path.exists(namespace_file):
    with open(namespace_file) as f:
      namespace = f.read().strip()
    if namespace:
      return namespace
  try:
    from kubernetes import config

    _, active = config.list_kube_config_contexts(config_file=os.environ.get("KUBECONFIG"))
    return (active or {}).get("context", {}).get("namespace") or DEFAULT_NAMESPACE
  except Exception:  # No kubeconfig at all: Kubernetes' own default namespace.
    return DEFAULT_NAMESPACE
