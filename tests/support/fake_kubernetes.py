"""A fake Kubernetes API server with a Kubeflow Training Operator, on loopback, for TFJob tests.

`FakeKubernetes` serves standard-library HTTP on a free 127.0.0.1 port and answers what the
DistributedTrainer's step asks of a cluster (components/distributed_trainer/tfjob_lib.py):
create, get, list and delete of `tfjobs` (`/apis/kubeflow.org/v1/namespaces/<ns>/tfjobs`),
list and get of pods, and `pods/<name>/log` (`tailLines`, `previous`). Errors come back as
Kubernetes `Status` objects: 409 AlreadyExists, 404 NotFound, 422 Invalid.

A cluster that is not ready can be played too: without the TFJob CRD (`tfjob_crd=False`, every
`kubeflow.org` path answers 404 as the API server does for a resource it does not know), with
only some namespaces (`namespaces`: creating in another is 404 `namespaces "x" not found`, as
the NamespaceLifecycle admission plugin answers), and with RBAC refusing some verbs
(`forbidden`: 403 Forbidden with the API server's `... is forbidden: User "..." cannot ...`
message). An unreachable API server is a closed port, which needs no fake.

A reconcile thread plays the training operator and the kubelet. The operator's rules were read
in kubeflow/training-operator v1.7.0 and are written here in our own code; each is cited:

- Defaults (`pkg/apis/kubeflow.org/v1/tensorflow_defaults.go`): replica types in any case,
  1 replica, restartPolicy Never, cleanPodPolicy None, port 2222 named `tfjob-port` on the
  container named `tensorflow`.
- Validation (`tensorflow_validation.go`): a DNS-1035 name, a `tensorflow` container with an
  image in every replica, at most one Chief/Master. An invalid job is left unreconciled, as
  the operator does (it only records an event).
- TF_CONFIG (`pkg/controller.v1/tensorflow/tensorflow.go`, `genTFConfigJSONStr` and
  `genClusterSpec`): set only when the job has more than one replica (`util.go`,
  `isDistributed`); `{"cluster": {<lower-cased type>: ["<job>-<type>-<i>.<ns>.svc:<port>"]},
  "task": {"type", "index"}, "environment": "cloud"}` with the port of the `tensorflow`
  container's `tfjob-port`, `$CUSTOM_CLUSTER_DOMAIN` appended to the host when set, and the
  sparse form for `enableDynamicWorker`. The pod's env holds this string exactly (Go's
  json.Marshal: no spaces, sorted map keys). Each `<host>:<port>` is then mapped to a
  127.0.0.1 port whose next port is free too (for the profiler rule, port + 1) and the
  *process* gets the mapped copy, since there is no cluster DNS here.
- Pods (`pkg/controller.v1/common/pod.go`, `ReconcilePods` and `createNewPod`): one per
  replica index, named `<job>-<type>-<i>`, labelled `training.kubeflow.org/{operator-name,
  job-name,replica-type,replica-index}` (and `job-role: master` for the chief, or worker 0
  without one); the pod's restartPolicy is the replica's, ExitCode becoming Never; a Failed
  pod is deleted (and so recreated) under OnFailure/Always, or under ExitCode when its exit
  code is >= 128 (`pkg/util/train/train_util.go`), with a Restarting condition.
- Job status (`tfjob_controller.go`, `UpdateJobStatus`): with a Chief (or Master), Running
  while it runs and Succeeded when it has succeeded; without one, Succeeded when worker 0
  exited 0 (or, with successPolicy AllWorkers, all workers did), else Running while workers
  run; Failed when any replica's pod failed, unless the job is Restarting.
- Run policy (`pkg/controller.v1/common/job.go`, `pkg/core/job.go`): backoffLimit against the
  container restarts of running pods under OnFailure/Always/ExitCode (any restart when it is
  0), activeDeadlineSeconds from the job's start time (both delete every pod and fail the
  job), cleanPodPolicy once finished (All, Running: only running and pending pods, None), and
  ttlSecondsAfterFinished (deletes the job).
- Conditions (`pkg/util/status.go`): Created, Running, Restarting, Succeeded, Failed with
  reasons `TFJob<Type>`; Running and Restarting replace each other, Succeeded and Failed set
  Running to "False", and nothing changes once Failed.

The kubelet part runs each pod's container `command` + `args` as a local process (`python`
is this interpreter), in its own process group, with the container's env (secretKeyRef read
from the in-memory `secrets`; a missing one leaves the pod waiting in
CreateContainerConfigError) over `base_env`, and its output as the pod's log. restartPolicy
OnFailure/Always restart the container in place after a back-off (`crash_backoff_s`,
doubling, standing in for the kubelet's 10 s .. 5 min); a signal death reads as exit code
128 + signal. Deleted pods get SIGTERM, then SIGKILL after `grace_s`.

Not emulated: scheduling, images, services and DNS (mapped ports instead), volumes (recorded,
not mounted), resources, gang scheduling, suspend, watch, authentication, the operator's
requeue-count backoff path, and CRD schema checks beyond the required fields.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

GROUP = "kubeflow.org"
VERSION = "v1"
OPERATOR_NAME = "tfjob-controller"
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
CONTAINER = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222
# The order UpdateJobStatus walks the replica types in.
REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_SUBDOMAIN = re.compile(
  r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)


def _now() -> str:
  return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _go_json(value: Any) -> str:
  """json.Marshal's output for plain maps, slices and strings: no spaces, sorted map keys."""
  return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _camel(rtype: str) -> str:
  """setTypeNameToCamelCase: 'worker' or 'WORKER' -> 'Worker', 'ps' -> 'PS'."""
  for known in REPLICA_TYPES:
    if rtype.lower() == known.lower():
      return known
  return rtype


def tf_config(job: Mapping[str, Any], rtype: str, index: int, cluster_domain: str = "") -> str:
  """The TF_CONFIG the training operator puts into replica (rtype, index) of `job`.

  genTFConfigJSONStr/genClusterSpec in pkg/controller.v1/tensorflow/tensorflow.go (v1.7.0).
  """
  name, namespace = job["metadata"]["name"], job["metadata"]["namespace"]
  specs = {_camel(t): s for t, s in job["spec"]["tfReplicaSpecs"].items()}
  cluster: dict[str, list[str]] = {}
  for t, spec in specs.items():
    rt = t.lower()
    port = _port_of(spec)
    hosts = []
    for i in range(int(spec.get("replicas", 1))):
      host = f"{name}-{rt}-{i}".replace("/", "-") + f".{namespace}.svc"
      if cluster_domain:
        host += f".{cluster_domain}"
      hosts.append(f"{host}:{port}")
    cluster[rt] = hosts
  rt = rtype.lower()
  if job["spec"].get("enableDynamicWorker"):
    # convertClusterSpecToSparseClusterSpec: PS see themselves; workers see every ps and
    # themselves; other types see neither (nil ps list -> null, as Go marshals it).
    workers: dict[str, str] = {}
    ps: list[str] | None = []
    if rt == "ps":
      ps = [cluster[rt][index]]
    elif rt == "worker":
      ps = cluster.get("ps")
      workers[str(index)] = cluster[rt][index]
    sparse = {"cluster": {"worker": workers, "ps": ps}, "task": {"type": rt, "index": index}}
    return _go_json(sparse)
  ordered = {k: cluster[k] for k in sorted(cluster)}
  return _go_json(
    {"cluster": ordered, "task": {"type": rt, "index": index}, "environment": "cloud"}
  )


def _port_of(spec: Mapping[str, Any]) -> int:
  """GetPortFromTFJob: the tfjob-port of the tensorflow container, else 2222."""
  for container in spec["template"]["spec"]["containers"]:
    if container.get("name") == CONTAINER:
      for port in container.get("ports") or []:
        if port.get("name") == PORT_NAME:
          return int(port["containerPort"])
  return DEFAULT_PORT


def is_distributed(job: Mapping[str, Any]) -> bool:
  """isDistributed: the job has more (or fewer) than exactly one replica in total."""
  total = 0
  for t, spec in job["spec"]["tfReplicaSpecs"].items():
    if _camel(t) in REPLICA_TYPES:
      total += int(spec.get("replicas", 1)) if spec.get("replicas") is not None else 1
  return total != 1


def validate(job: Mapping[str, Any]) -> str | None:
  """ValidateV1TFJob (tensorflow_validation.go): the reason the operator refuses it, or None."""
  return next(_operator_problems(job), None)


def _operator_problems(job: Mapping[str, Any]):
  name = job["metadata"].get("name", "")
  if not _DNS_1035.match(name) or len(name) > 63:
    yield f"TFJob name is invalid: {name!r} is not a DNS-1035 label"
  specs = job["spec"].get("tfReplicaSpecs")
  if not specs:
    yield "TFJobSpec is not valid"
  chiefs = 0
  for t, spec in (specs or {}).items():
    containers = ((spec or {}).get("template") or {}).get("spec", {}).get("containers") or []
    if not containers:
      yield f"TFJobSpec is not valid: containers definition expected in {t}"
    chiefs += _camel(t) in ("Chief", "Master")
    if any(not c.get("image") for c in containers):
      yield f"TFJobSpec is not valid: Image is undefined in the container of {t}"
    if not any(c.get("name") == CONTAINER for c in containers):
      yield f"TFJobSpec is not valid: There is no container named {CONTAINER} in {t}"
  if chiefs > 1:
    yield "TFJobSpec is not valid: more than 1 chief/master found"


def _free_port_pair() -> int:
  """A loopback port p such that p and p + 1 are both free (the replica and its profiler)."""
  for _ in range(200):
    with socket.socket() as a:
      a.bind(("127.0.0.1", 0))
      port = a.getsockname()[1]
      if port >= 65535:
        continue
      with socket.socket() as b:
        try:
          b.bind(("127.0.0.1", port + 1))
        except OSError:
          continue
        return port
  raise RuntimeError("no pair of free loopback ports")


@dataclasses.dataclass
class _Run:
  """One run of a pod's container (a local process)."""

  proc: subprocess.Popen
  log: str
  started_at: str
  started: float
  finished_at: str | None = None
  exit_code: int | None = None


@dataclasses.dataclass
class _Pod:
  obj: dict[str, Any]  # the Pod as the API returns it (without status)
  job: tuple[str, str]
  replica: tuple[str, int]  # (CRD type, index)
  restart_policy: str
  env: dict[str, str]  # the process's environment additions (secrets resolved, TF_CONFIG mapped)
  command: list[str]
  runs: list[_Run] = dataclasses.field(default_factory=list)
  phase: str = "Pending"
  waiting: tuple[str, str] | None = ("ContainerCreating", "")
  restart_at: float | None = None

  @property
  def name(self) -> str:
    return self.obj["metadata"]["name"]

  def exit_code(self) -> int:
    """getContainerExitCode: the terminated tensorflow container's code, else 0xbeef."""
    if self.phase in ("Succeeded", "Failed") and self.runs:
      return int(self.runs[-1].exit_code)
    return 0xBEEF

  def restart_count(self) -> int:
    return max(len(self.runs) - 1, 0)


def _terminated(run: _Run) -> dict[str, Any]:
  return {
    "exitCode": run.exit_code,
    "reason": "Completed" if run.exit_code == 0 else "Error",
    "startedAt": run.started_at,
    "finishedAt": run.finished_at,
    "containerID": f"fake://{run.proc.pid}",
  }


class FakeKubernetes:
  """The fake API server and operator. Use as a context manager, or start() and stop().

  Args:
    base_env: environment every container starts from (the image's, e.g. PYTHONPATH).
    cwd: working folder of the containers (the image's WORKDIR).
    secrets: {(namespace, secret name): {key: value}} for secretKeyRef.
    namespace: the kubeconfig context's namespace (`write_kubeconfig`).
    cluster_domain: the operator's $CUSTOM_CLUSTER_DOMAIN ('' when unset).
    crash_backoff_s: the first in-place restart delay (doubles per restart, capped at 8x).
    grace_s: SIGTERM to SIGKILL when a pod is deleted.
    reconcile_s: how often the operator and the kubelet look.
    log_dir: where container logs go (default: a temporary folder).
    tfjob_crd: whether the TFJob CRD is installed (False: kubeflow.org paths answer 404).
    namespaces: the namespaces that exist (None: every one).
    forbidden: (verb, resource) pairs RBAC refuses `user`, e.g. ("create", "tfjobs"),
      ("list", "pods"); verbs are Kubernetes' (get, list, create, delete).
    user: the user the API server names in a 403.
  """

  def __init__(
    self,
    *,
    base_env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    secrets: Mapping[tuple[str, str], Mapping[str, str]] | None = None,
    namespace: str = "default",
    cluster_domain: str = "",
    crash_backoff_s: float = 0.5,
    grace_s: float = 2.0,
    reconcile_s: float = 0.05,
    log_dir: str | None = None,
    tfjob_crd: bool = True,
    namespaces: Collection[str] | None = None,
    forbidden: Collection[tuple[str, str]] = (),
    user: str = "system:serviceaccount:kubeflow:pipeline-runner",
    spawn: Callable[..., Any] | None = None,
  ):
    self.base_env = dict(base_env if base_env is not None else os.environ)
    self.cwd = cwd
    self.secrets = {k: dict(v) for k, v in (secrets or {}).items()}
    self.namespace = namespace
    self.cluster_domain = cluster_domain
    self.crash_backoff_s = crash_backoff_s
    self.grace_s = grace_s
    self.reconcile_s = reconcile_s
    self._tmp = None if log_dir else tempfile.TemporaryDirectory(prefix="fake-k8s-")
    self.log_dir = log_dir or self._tmp.name
    self.tfjob_crd = tfjob_crd
    self.namespaces = None if namespaces is None else set(namespaces)
    self.forbidden = set(forbidden)
    self.user = user
    # spawn(command, env, cwd, log_path) -> a Popen-like process; None: subprocess.Popen.
    self.spawn = spawn
    self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
    self.pods: dict[tuple[str, str], _Pod] = {}
    # What tests look at: every request, every pod created, validation refusals, a timeline.
    self.requests: list[tuple[str, str, int]] = []
    self.pod_history: list[dict[str, Any]] = []
    self.validation_errors: dict[tuple[str, str], str] = {}
    self.events: list[tuple[float, str, str]] = []
    self._ports: dict[tuple[str, str], dict[str, str]] = {}
    self._served_finished: set[tuple[str, str]] = set()
    # Per job: when it started and finished (time.time()), for activeDeadline and the TTL.
    self._times: dict[tuple[str, str], dict[str, float]] = {}
    self._lock = threading.RLock()
    self._stop = threading.Event()
    self._server: http.server.ThreadingHTTPServer | None = None
    self._threads: list[threading.Thread] = []
    self._version = 0

  # ----- lifecycle -----

  @property
  def url(self) -> str:
    assert self._server is not None, "not started"
    return f"http://127.0.0.1:{self._server.server_address[1]}"

  def start(self) -> FakeKubernetes:
    handler = type("Handler", (_Handler,), {"fake": self})
    self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    self._server.daemon_threads = True
    self._threads = [
      threading.Thread(target=self._server.serve_forever, daemon=True),
      threading.Thread(target=self._loop, daemon=True),
    ]
    for t in self._threads:
      t.start()
    return self

  def stop(self) -> None:
    self._stop.set()
    if self._server is not None:
      self._server.shutdown()
      self._server.server_close()
    for t in self._threads:
      t.join(timeout=10)
    with self._lock:
      for pod in list(self.pods.values()):
        self._kill(pod)
      self.pods.clear()
    if self._tmp is not None:
      self._tmp.cleanup()

  def __enter__(self) -> FakeKubernetes:
    return self.start()

  def __exit__(self, *exc) -> None:
    self.stop()

  def write_kubeconfig(self, path: str) -> str:
    """Writes a kubeconfig whose current context is this server and `namespace`."""
    config = {
      "apiVersion": "v1",
      "kind": "Config",
      "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
      "users": [{"name": "fake", "user": {"token": "fake-token"}}],
      "contexts": [
        {
          "name": "fake",
          "context": {"cluster": "fake", "user": "fake", "namespace": self.namespace},
        }
      ],
      "current-context": "fake",
    }
    with open(path, "w") as f:
      json.dump(config, f)  # JSON is YAML.
    return path

  # ----- what tests use -----

  def creates(self) -> int:
    """How many tfjobs POSTs created a job (201)."""
    return sum(1 for m, p, s in self.requests if m == "POST" and p.endswith("/tfjobs") and s == 201)

  def pod_pid(self, name: str, namespace: str | None = None) -> int | None:
    """The process id of a pod's running container, or None."""
    with self._lock:
      pod = self.pods.get((namespace or self.namespace, name))
      if pod and pod.runs and pod.runs[-1].exit_code is None:
        return pod.runs[-1].proc.pid
      return None

  def times(self, kind: str, detail: str | None = None) -> list[float]:
    """When events of a kind happened (time.time()), optionally for one detail."""
    return [t for t, k, d in self.events if k == kind and (detail is None or d == detail)]

  # ----- the API -----

  def _event(self, kind: str, detail: str) -> None:
    self.events.append((time.time(), kind, detail))

  def handle(self, method: str, path: str, query: dict[str, str], body: Any):
    """Returns (status, content type, payload) for one request."""
    refused = self._not_ready(method, path)
    if refused:
      return refused
    m = re.fullmatch(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs(?:/([^/]+))?", path)
    if m:
      namespace, name = m.groups()
      routes = {
        ("POST", False): lambda: self._create(namespace, body),
        ("GET", False): lambda: self._list_jobs(namespace),
        ("GET", True): lambda: self._get_job(namespace, name),
        ("DELETE", True): lambda: self._delete_job(namespace, name),
      }
      route = routes.get((method, name is not None))
      return route() if route else _status(405, "MethodNotAllowed", f"{method} {path}")
    m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?(/log)?", path)
    if m and method == "GET":
      namespace, name, log = m.groups()
      if name is None:
        return self._list_pods(namespace, query.get("labelSelector", ""))
      return self._log(namespace, name, query) if log else self._get_pod(namespace, name)
    return _status(404, "NotFound", f"the server could not find the requested resource ({path})")

  def _not_ready(self, method: str, path: str):
    """What a cluster that is not ready answers instead (404, 403), else None."""
    m = re.fullmatch(r"/apis/kubeflow\.org/v1/namespaces/([^/]+)/tfjobs(/[^/]+)?", path)
    if m and not self.tfjob_crd:
      return _status(404, "NotFound", "the server could not find the requested resource")
    if m:
      namespace, named, group, resource = m.group(1), bool(m.group(2)), GROUP, "tfjobs"
    else:
      m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods(/[^/]+)?(/log)?", path)
      if not m:
        return None
      namespace, named, group = m.group(1), bool(m.group(2)), ""
      resource = "pods/log" if m.group(3) else "pods"
    # RBAC (the authorizer's message), then NamespaceLifecycle admission on create.
    verb = {"POST": "create", "DELETE": "delete", "GET": "get" if named else "list"}.get(method)
    if (verb, resource) in self.forbidden:
      message = (
        f"{resource.split('/', 1)[0]}{'.' + group if group else ''} is forbidden: User "
        f'"{self.user}" cannot {verb} resource "{resource}" in API group "{group}" in the '
        f'namespace "{namespace}"'
      )
      return _status(403, "Forbidden", message, {"group": group, "kind": resource})
    if method == "POST" and self.namespaces is not None and namespace not in self.namespaces:
      details = {"name": namespace, "kind": "namespaces"}
      return _status(404, "NotFound", f'namespaces "{namespace}" not found', details)
    return None

  def _get_pod(self, namespace: str, name: str):
    with self._lock:
      pod = self.pods.get((namespace, name))
      if pod is None:
        return _status(404, "NotFound", f'pods "{name}" not found')
      return 200, "application/json", self._pod_json(pod)

  def _create(self, namespace: str, body: Any):
    problem = _schema_problem(body)
    if problem:
      return _status(422, "Invalid", f"TFJob.kubeflow.org is invalid: {problem}")
    name = body["metadata"]["name"]
    with self._lock:
      if (namespace, name) in self.jobs:
        return _status(409, "AlreadyExists", f'tfjobs.kubeflow.org "{name}" already exists')
      job = copy.deepcopy(body)
      self._version += 1
      job["metadata"].update(
        namespace=namespace,
        uid=str(uuid.uuid4()),
        creationTimestamp=_now(),
        resourceVersion=str(self._version),
        generation=1,
      )
      job.pop("status", None)
      self.jobs[(namespace, name)] = job
      self._event("job-created", name)
      return 201, "application/json", copy.deepcopy(job)

  def _get_job(self, namespace: str, name: str):
    with self._lock:
      job = self.jobs.get((namespace, name))
      if job is None:
        return _status(404, "NotFound", f'tfjobs.kubeflow.org "{name}" not found')
      if _finished(job.get("status") or {}) and (namespace, name) not in self._served_finished:
        self._served_finished.add((namespace, name))
        self._event("finished-served", name)
      return 200, "application/json", copy.deepcopy(job)

  def _list_jobs(self, namespace: str):
    with self._lock:
      items = [copy.deepcopy(j) for (ns, _), j in sorted(self.jobs.items()) if ns == namespace]
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TFJobList", "metadata": {}, "items": items}
    return 200, "application/json", body

  def _delete_job(self, namespace: str, name: str):
    with self._lock:
      job = self.jobs.pop((namespace, name), None)
      if job is None:
        return _status(404, "NotFound", f'tfjobs.kubeflow.org "{name}" not found')
      self._event("job-deleted", name)
      # The garbage collector removes what the job owns.
      for key, pod in list(self.pods.items()):
        if pod.job == (namespace, name):
          self._delete_pod(key)
      self._ports.pop((namespace, name), None)
    details = {"name": name, "group": GROUP, "kind": "tfjobs", "uid": job["metadata"]["uid"]}
    return 200, "application/json", {**_status_body(200, "", "")[0], "details": details}

  def _list_pods(self, namespace: str, selector: str):
    wanted = dict(part.split("=", 1) for part in selector.split(",") if "=" in part)
    with self._lock:
      items = [
        self._pod_json(p)
        for (ns, _), p in sorted(self.pods.items())
        if ns == namespace
        and all(p.obj["metadata"]["labels"].get(k) == v for k, v in wanted.items())
      ]
    return (
      200,
      "application/json",
      {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items},
    )

  def _log(self, namespace: str, name: str, query: dict[str, str]):
    with self._lock:
      pod = self.pods.get((namespace, name))
      if pod is None:
        return _status(404, "NotFound", f'pods "{name}" not found')
      container = query.get("container", CONTAINER)
      if container != CONTAINER:
        return _status(400, "BadRequest", f"container {container} is not valid for pod {name}")
      previous = query.get("previous", "false").lower() == "true"
      runs = pod.runs[:-1] if previous else pod.runs
      if not runs:
        what = "previous terminated container" if previous else "container"
        return _status(
          400, "BadRequest", f'{what} "{CONTAINER}" in pod "{name}" is waiting to start'
        )
      path = runs[-1].log
    with open(path, errors="replace") as f:
      lines = f.read().splitlines(keepends=True)
    if "tailLines" in query:
      lines = lines[-int(query["tailLines"]) :] if int(query["tailLines"]) > 0 else []
    return 200, "text/plain", "".join(lines)

  def _pod_json(self, pod: _Pod) -> dict[str, Any]:
    obj = copy.deepcopy(pod.obj)
    status: dict[str, Any] = {"phase": pod.phase, "podIP": "127.0.0.1"}
    container: dict[str, Any] = {
      "name": CONTAINER,
      "image": obj["spec"]["containers"][0].get("image", ""),
      "imageID": "",
      "restartCount": pod.restart_count(),
      "ready": False,
      "started": False,
      "state": {},
      "lastState": {},
    }
    if pod.runs:
      status["startTime"] = pod.runs[0].started_at
      current = pod.runs[-1]
      if len(pod.runs) > 1:
        container["lastState"] = {"terminated": _terminated(pod.runs[-2])}
      if current.exit_code is None:
        container.update(ready=True, started=True)
        container["state"] = {"running": {"startedAt": current.started_at}}
      elif pod.waiting:
        container["state"] = {"waiting": {"reason": pod.waiting[0], "message": pod.waiting[1]}}
        container["lastState"] = {"terminated": _terminated(current)}
      else:
        container["state"] = {"terminated": _terminated(current)}
    elif pod.waiting:
      container["state"] = {"waiting": {"reason": pod.waiting[0], "message": pod.waiting[1]}}
    status["containerStatuses"] = [container]
    obj["status"] = status
    return obj

  # ----- the operator and the kubelet -----

  def _loop(self) -> None:
    while not self._stop.wait(self.reconcile_s):
      with self._lock:
        for pod in list(self.pods.values()):
          self._kubelet(pod)
        for key in list(self.jobs):
          if key in self.jobs:
            self._reconcile(key)

  def _kubelet(self, pod: _Pod) -> None:
    now = time.monotonic()
    if not pod.runs and pod.phase == "Pending":
      self._start(pod)
      return
    if not pod.runs:
      return
    current = pod.runs[-1]
    if current.exit_code is None:
      code = current.proc.poll()
      if code is None:
        return
      current.exit_code = 128 - code if code < 0 else code
      current.finished_at = _now()
      self._event("container-exited", f"{pod.name}:{current.exit_code}")
      restart = pod.restart_policy == "Always" or (
        pod.restart_policy == "OnFailure" and current.exit_code != 0
      )
      if restart:
        delay = min(self.crash_backoff_s * 2 ** (len(pod.runs) - 1), 8 * self.crash_backoff_s)
        pod.restart_at = now + delay
        pod.waiting = ("CrashLoopBackOff", f"back-off restarting failed container {CONTAINER}")
      else:
        pod.phase = "Succeeded" if current.exit_code == 0 else "Failed"
        pod.waiting = None
      return
    if pod.restart_at is not None and now >= pod.restart_at:
      pod.restart_at = None
      self._start(pod)

  def _start(self, pod: _Pod) -> None:
    env = {}
    for var in pod.obj["spec"]["containers"][0].get("env") or []:
      ref = (var.get("valueFrom") or {}).get("secretKeyRef")
      if ref:
        secret = self.secrets.get((pod.job[0], ref["name"])) or {}
        if ref["key"] not in secret:
          message = f'secret "{ref["name"]}" (key "{ref["key"]}") not found'
          pod.waiting = ("CreateContainerConfigError", message)
          return
        env[var["name"]] = secret[ref["key"]]
      else:
        env[var["name"]] = var.get("value", "")
    env.update(pod.env)  # the mapped TF_CONFIG
    command = [sys.executable if c in ("python", "python3") else c for c in pod.command]
    log = os.path.join(self.log_dir, f"{pod.job[0]}_{pod.name}_{len(pod.runs)}.log")
    env = {**self.base_env, **env, "HOSTNAME": pod.name}
    if self.spawn is not None:
      proc = self.spawn(command, env, self.cwd, log)
    else:
      with open(log, "wb") as out:
        proc = subprocess.Popen(
          command,
          env=env,
          cwd=self.cwd,
          stdout=out,
          stderr=subprocess.STDOUT,
          stdin=subprocess.DEVNULL,
          start_new_session=True,
        )
    pod.runs.append(_Run(proc, log, _now(), time.monotonic()))
    pod.phase = "Running"
    pod.waiting = None
    self._event("container-started", pod.name)

  def _kill(self, pod: _Pod) -> None:
    procs = [r.proc for r in pod.runs if r.proc.poll() is None]
    for proc in procs:
      with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + self.grace_s
    for proc in procs:
      try:
        proc.wait(timeout=max(0.0, deadline - time.monotonic()))
      except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
          os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

  def _delete_pod(self, key: tuple[str, str]) -> None:
    pod = self.pods.pop(key)
    self._kill(pod)
    self._event("pod-deleted", pod.name)

  def _reconcile(self, key: tuple[str, str]) -> None:
    job = self.jobs[key]
    name = key[1]
    if key in self.validation_errors:
      return
    problem = validate(job)
    if problem:
      self.validation_errors[key] = problem  # the operator records an event and gives up
      return
    status = job.setdefault("status", {})
    if not status.get("conditions"):
      _set_condition(status, "Created", "True", "TFJobCreated", f"TFJob {name} is created.")
    specs = {_camel(t): _defaulted(s) for t, s in job["spec"]["tfReplicaSpecs"].items()}
    run_policy = job["spec"].get("runPolicy") or {}
    pods = {k: p for k, p in self.pods.items() if p.job == key}
    if _finished(status):
      self._clean_up(job, pods, run_policy)
      return
    if self._past_backoff_limit(specs, pods, run_policy):
      message = f"Job {name} has failed because it has reached the specified backoff limit"
    elif self._past_deadline(key, run_policy):
      message = f"Job {name} has failed because it was active longer than specified deadline"
    else:
      message = None
    if message:
      status.setdefault("completionTime", _now())
      for pod_key in pods:  # not finished yet, so every pod goes, whatever cleanPodPolicy says
        self._delete_pod(pod_key)
      _set_condition(status, "Failed", "True", "TFJobFailed", message)
      self._event("condition", "Failed")
      return
    replica_statuses: dict[str, dict[str, int]] = {}
    for rtype, spec in specs.items():
      replica_statuses[rtype] = self._reconcile_pods(job, specs, rtype, spec, pods, status)
    status["replicaStatuses"] = replica_statuses
    self._update_job_status(job, specs, replica_statuses, status)

  def _reconcile_pods(self, job, specs, rtype, spec, pods, status) -> dict[str, int]:
    name = job["metadata"]["name"]
    counts = {"active": 0, "succeeded": 0, "failed": 0}
    typed = {p.replica[1]: (k, p) for k, p in pods.items() if p.replica[0] == rtype}
    for index in range(int(spec["replicas"])):
      if index not in typed:
        self._create_pod(job, specs, rtype, index, spec)
        continue
      pod_key, pod = typed[index]
      code = pod.exit_code()
      policy = spec["restartPolicy"]
      if pod.phase == "Failed" and (
        (policy == "ExitCode" and code >= 128) or policy in ("OnFailure", "Always")
      ):
        self._delete_pod(pod_key)
        _set_condition(
          status,
          "Restarting",
          "True",
          "TFJobRestarting",
          f"job {name} is restarting because {rtype} replica(s) failed.",
        )
        self._event("condition", "Restarting")
      # updateJobReplicaStatuses: the pod as it was, even when it was just deleted.
      field = {"Running": "active", "Succeeded": "succeeded", "Failed": "failed"}.get(pod.phase)
      if field:
        counts[field] += 1
    return counts

  def _create_pod(self, job, specs, rtype: str, index: int, spec) -> None:
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    rt = rtype.lower()
    template = copy.deepcopy(spec["template"])
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    labels.update(
      {
        OPERATOR_NAME_LABEL: OPERATOR_NAME,
        JOB_NAME_LABEL: name.replace("/", "-"),
        REPLICA_TYPE_LABEL: rt,
        REPLICA_INDEX_LABEL: str(index),
      }
    )
    has_chief = any(t in ("Chief", "Master") for t in specs)
    if (has_chief and rtype in ("Chief", "Master")) or (
      not has_chief and rtype == "Worker" and index == 0
    ):
      labels[JOB_ROLE_LABEL] = "master"
    pod_name = f"{name}-{rt}-{index}".replace("/", "-")
    pod_spec = template["spec"]
    pod_spec["restartPolicy"] = (
      "Never" if spec["restartPolicy"] == "ExitCode" else spec["restartPolicy"]
    )
    process_env = {}
    if is_distributed(job):
      config = tf_config(job, rtype, index, self.cluster_domain)
      for container in pod_spec["containers"]:
        if container.get("name") == CONTAINER:
          container.setdefault("env", []).append({"name": "TF_CONFIG", "value": config})
          break
      process_env["TF_CONFIG"] = self._mapped(job, config)
    obj = {
      "apiVersion": "v1",
      "kind": "Pod",
      "metadata": {
        "name": pod_name,
        "namespace": namespace,
        "uid": str(uuid.uuid4()),
        "labels": labels,
        "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
        "creationTimestamp": _now(),
        "ownerReferences": [
          {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "TFJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
          }
        ],
      },
      "spec": pod_spec,
    }
    container = next(c for c in pod_spec["containers"] if c.get("name") == CONTAINER)
    command = list(container.get("command") or []) + list(container.get("args") or [])
    pod = _Pod(
      obj, (namespace, name), (rtype, index), pod_spec["restartPolicy"], process_env, command
    )
    # Containers other than `tensorflow` (sidecars) are not run here.
    obj["spec"]["containers"] = [container] + [
      c for c in pod_spec["containers"] if c is not container
    ]
    self.pods[(namespace, pod_name)] = pod
    self.pod_history.append(copy.deepcopy(obj))
    self._event("pod-created", pod_name)

  def _mapped(self, job, config: str) -> str:
    """TF_CONFIG with each `<host>:<port>` replaced by its 127.0.0.1 port for this job."""
    key = (job["metadata"]["namespace"], job["metadata"]["name"])
    ports = self._ports.setdefault(key, {})
    parsed = json.loads(config)

    def local(address: str) -> str:
      if address not in ports:
        ports[address] = f"127.0.0.1:{_free_port_pair()}"
      return ports[address]

    for rt, addresses in parsed["cluster"].items():
      if isinstance(addresses, dict):
        parsed["cluster"][rt] = {i: local(a) for i, a in addresses.items()}
      elif addresses is not None:
        parsed["cluster"][rt] = [local(a) for a in addresses]
    return json.dumps(parsed)

  def _past_backoff_limit(self, specs, pods, run_policy) -> bool:
    """PastBackoffLimit (pkg/core/job.go): restarts of running pods against backoffLimit."""
    limit = run_policy.get("backoffLimit")
    if limit is None:
      return False
    total = 0
    for rtype, spec in specs.items():
      if spec["restartPolicy"] not in ("OnFailure", "Always", "ExitCode"):
        continue
      for pod in pods.values():
        if pod.replica[0] == rtype and pod.phase == "Running":
          total += pod.restart_count()
    return total > 0 if int(limit) == 0 else total >= int(limit)

  def _past_deadline(self, key, run_policy) -> bool:
    deadline = run_policy.get("activeDeadlineSeconds")
    start = self._times.get(key, {}).get("started")
    return bool(deadline is not None and start is not None and time.time() - start >= int(deadline))

  def _update_job_status(self, job, specs, replica_statuses, status) -> None:
    """UpdateJobStatus in tfjob_controller.go."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    if "startTime" not in status:
      status["startTime"] = _now()
      self._times.setdefault((namespace, name), {})["started"] = time.time()
    restarting = next((c for c in status["conditions"] if c["type"] == "Restarting"), None)
    has_chief = any(t in ("Chief", "Master") for t in specs)
    policy = job["spec"].get("successPolicy") or ""
    worker0 = True
    if "Worker" in specs:
      worker0 = any(
        p.replica == ("Worker", 0) and p.phase == "Succeeded" and p.exit_code() == 0
        for p in self.pods.values()
        if p.job == (namespace, name)
      )
    for rtype in REPLICA_TYPES:
      if rtype not in specs:
        continue
      counts = replica_statuses[rtype]
      expected = int(specs[rtype]["replicas"]) - counts["succeeded"]
      running, failed = counts["active"], counts["failed"]
      if has_chief:
        if rtype in ("Chief", "Master"):
          if running > 0:
            _set_condition(
              status, "Running", "True", "TFJobRunning", f"TFJob {namespace}/{name} is running."
            )
          if expected == 0:
            self._succeed(status, namespace, name)
      elif rtype == "Worker":
        if expected == 0 or (worker0 and policy != "AllWorkers"):
          self._succeed(status, namespace, name)
        elif running > 0:
          _set_condition(
            status, "Running", "True", "TFJobRunning", f"TFJob {namespace}/{name} is running."
          )
      if failed > 0:
        if restarting is not None:
          _set_condition(status, "Restarting", "True", restarting["reason"], restarting["message"])
        elif job["spec"].get("enableDynamicWorker") and rtype == "Worker":
          continue
        else:
          status.setdefault("completionTime", _now())
          message = (
            f"TFJob {namespace}/{name} has failed because {failed} {rtype} replica(s) failed."
          )
          if not _is_true(status, "Failed"):
            self._event("condition", "Failed")
          _set_condition(status, "Failed", "True", "TFJobFailed", message)

  def _succeed(self, status, namespace: str, name: str) -> None:
    status.setdefault("completionTime", _now())
    if not _is_true(status, "Succeeded") and not _is_true(status, "Failed"):
      self._event("condition", "Succeeded")
    _set_condition(
      status,
      "Succeeded",
      "True",
      "TFJobSucceeded",
      f"TFJob {namespace}/{name} successfully completed.",
    )

  def _clean_up(self, job, pods, run_policy) -> None:
    """CleanUpResources: cleanPodPolicy once finished, then ttlSecondsAfterFinished."""
    policy = run_policy.get("cleanPodPolicy") or "None"
    if policy != "None":
      for key, pod in pods.items():
        if policy == "Running" and pod.phase not in ("Running", "Pending"):
          continue
        self._delete_pod(key)
    ttl = run_policy.get("ttlSecondsAfterFinished")
    key = (job["metadata"]["namespace"], job["metadata"]["name"])
    done = self._times.setdefault(key, {}).setdefault("finished", time.time())
    if ttl is not None and time.time() >= done + int(ttl):
      self.jobs.pop(key, None)
      self._event("job-deleted", key[1])


def _defaulted(spec: Mapping[str, Any]) -> dict[str, Any]:
  """SetDefaults_TFJob for one replica spec (a working copy; the stored job is unchanged)."""
  out = dict(spec)
  if out.get("replicas") is None:
    out["replicas"] = 1
  out["restartPolicy"] = out.get("restartPolicy") or "Never"
  return out


def _is_true(status: Mapping[str, Any], kind: str) -> bool:
  return any(c["type"] == kind and c["status"] == "True" for c in status.get("conditions") or [])


def _finished(status: Mapping[str, Any]) -> bool:
  return _is_true(status, "Succeeded") or _is_true(status, "Failed")


def _set_condition(status: dict, kind: str, value: str, reason: str, message: str) -> None:
  """setCondition/filterOutCondition of pkg/util/status.go."""
  if _is_true(status, "Failed"):
    return
  conditions = status.setdefault("conditions", [])
  current = next((c for c in conditions if c["type"] == kind), None)
  if current and current["status"] == value and current["reason"] == reason:
    return
  now = _now()
  new = {
    "type": kind,
    "status": value,
    "reason": reason,
    "message": message,
    "lastUpdateTime": now,
    "lastTransitionTime": current["lastTransitionTime"]
    if current and current["status"] == value
    else now,
  }
  kept = []
  for c in conditions:
    if (kind, c["type"]) in (("Restarting", "Running"), ("Running", "Restarting")):
      continue
    if c["type"] == kind:
      continue
    running_ends = kind in ("Failed", "Succeeded") and c["type"] == "Running"
    kept.append({**c, "status": "False"} if running_ends else c)
  status["conditions"] = [*kept, new]


def _schema_problem(body: Any) -> str | None:
  """What the CRD's schema (and the API server's name rules) refuse, or None."""
  return next(_schema_problems(body), None)


def _schema_problems(body: Any):
  if not isinstance(body, dict) or body.get("kind") != "TFJob":
    yield "kind must be TFJob"
    return
  if body.get("apiVersion") != f"{GROUP}/{VERSION}":
    yield f"apiVersion must be {GROUP}/{VERSION}"
  name = (body.get("metadata") or {}).get("name") or ""
  if not _DNS_1123_SUBDOMAIN.match(name) or len(name) > 253:
    yield f"metadata.name: Invalid value: {name!r}"
  specs = (body.get("spec") or {}).get("tfReplicaSpecs")
  if not isinstance(specs, dict):
    yield "spec.tfReplicaSpecs: Required value"
    return
  for t, spec in specs.items():
    containers = (((spec or {}).get("template") or {}).get("spec") or {}).get("containers")
    if not isinstance(containers, list):
      yield f"spec.tfReplicaSpecs.{t}.template.spec.containers: Required value"
    elif any(not isinstance(c, dict) or not c.get("name") for c in containers):
      yield f"spec.tfReplicaSpecs.{t}.template.spec.containers.name: Required value"


def _status_body(
  code: int, reason: str, message: str, details: dict[str, str] | None = None
) -> tuple[dict[str, Any], int]:
  body = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Success" if code < 400 else "Failure",
    "code": code,
  }
  if reason:
    body["reason"] = reason
  if message:
    body["message"] = message
  if details:
    body["details"] = details
  return body, code


def _status(code: int, reason: str, message: str, details: dict[str, str] | None = None):
  body, code = _status_body(code, reason, message, details)
  return code, "application/json", body


class _Handler(http.server.BaseHTTPRequestHandler):
  fake: FakeKubernetes
  protocol_version = "HTTP/1.1"

  def log_message(self, *args) -> None:  # quiet
    pass

  def _serve(self, method: str) -> None:
    url = urllib.parse.urlsplit(self.path)
    query = dict(urllib.parse.parse_qsl(url.query))
    length = int(self.headers.get("Content-Length") or 0)
    raw = self.rfile.read(length) if length else b""
    try:
      body = json.loads(raw) if raw else None
    except ValueError:
      body = None
    status, content_type, payload = self.fake.handle(method, url.path, query, body)
    self.fake.requests.append((method, url.path, status))
    data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
    self.send_response(status)
    self.send_header("Content-Type", content_type)
    self.send_header("Content-Length", str(len(data)))
    self.end_headers()
    self.wfile.write(data)

  def do_GET(self) -> None:
    self._serve("GET")

  def do_POST(self) -> None:
    self._serve("POST")

  def do_DELETE(self) -> None:
    self._serve("DELETE")

  def do_PUT(self) -> None:
    self._serve("PUT")

  def do_PATCH(self) -> None:
    self._serve("PATCH")
