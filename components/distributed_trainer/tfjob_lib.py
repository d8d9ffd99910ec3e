"""Runs the DistributedTrainer's replicas as a Kubeflow Training Operator TFJob (kubeflow.org/v1).

Plain Python over the `kubernetes` client; it knows no TFX types. The executor builds the job
body (tfjob_manifest.build_tfjob), creates it or attaches to the one it created before a retry
(`create_or_attach`), waits for its `Succeeded` or `Failed` condition while copying each
replica's log tail (`wait_for_job`, `ReplicaLogs`), and deletes it (`delete_job`). A cluster
that cannot run the job (unreachable, no training operator, no permission) is one line naming
the fix (`tfjob_cluster.ClusterNotReadyError`).

The success and failure rules followed here were read in kubeflow/training-operator v1.7.0,
`pkg/controller.v1/tensorflow/{tensorflow,tfjob_controller}.go` and
`pkg/controller.v1/common/{job,pod}.go` (which pods it deletes, and when).
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import time
from collections.abc import Callable, Mapping
from typing import Any

from components.distributed_trainer import tfjob_cluster
from components.distributed_trainer.launch import ClusterError
from components.distributed_trainer.tfjob_manifest import (
  ARTIFACT_ANNOTATION,
  CHIEF,
  CONTAINER_NAME,
  DEFAULT_POLL_S,
  GROUP,
  JOB_NAME_LABEL,
  PLURAL,
  REPLICA_INDEX_LABEL,
  REPLICA_TYPE_LABEL,
  VERSION,
  Replica,
)

_LOG = logging.getLogger(__name__)

SUCCEEDED = "Succeeded"
FAILED = "Failed"

TAIL_LINES = 40


class TFJobError(ClusterError):
  """The TFJob failed, timed out or cannot be used; one summary line, then a log tail.

  A ClusterError, so a UserInputError: the step ends in the summary line alone.
  """


def get_job(api: tfjob_cluster.Api, namespace: str, name: str) -> dict[str, Any] | None:
  """The TFJob, or None when there is none of that name."""
  from kubernetes.client.exceptions import ApiException

  try:
    return api.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
  except ApiException as e:
    if e.status == 404:
      return None
    raise


def create_or_attach(
  api: tfjob_cluster.Api, body: Mapping[str, Any], *, timeout_s: float = 120.0, poll_s: float = 1.0
) -> tuple[dict[str, Any], bool]:
  """Creates the job, or attaches to the job of that name this task created before.

  A retried step (its pod died while the job ran) finds its job by name (HTTP 409 on
  create) and attaches to it if the job's annotation names the same Model artifact; it never
  creates a second job. A job of the same name that is still being deleted is waited out.

  Returns:
    (the job, whether this call created it).

  Raises:
    TFJobError: when a job of that name belongs to another artifact, or a deleted one does
      not go away within `timeout_s`.
  """
  from kubernetes.client.exceptions import ApiException

  namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
  ours = body["metadata"]["annotations"][ARTIFACT_ANNOTATION]
  deadline = time.monotonic() + timeout_s
  while True:
    try:
      created = api.custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
      return created, True
    except ApiException as e:
      if e.status != 409:
        raise
    existing = get_job(api, namespace, name)
    if existing is None:
      continue  # Deleted between the two calls: create it again.
    owner = (existing.get("metadata", {}).get("annotations") or {}).get(ARTIFACT_ANNOTATION)
    if owner != ours:
      raise TFJobError(
        f"TFJob {namespace}/{name} already exists and trains {owner or 'something else'}, not "
        f"{ours}; delete it (kubectl delete tfjob -n {namespace} {name}) and retry the step."
      )
    if not existing["metadata"].get("deletionTimestamp"):
      return existing, False
    if time.monotonic() > deadline:
      raise TFJobError(f"TFJob {namespace}/{name} is still being deleted after {timeout_s:.0f} s")
    time.sleep(poll_s)


def delete_job(api: tfjob_cluster.Api, namespace: str, name: str) -> bool:
  """Deletes the job; its pods and services go with it (owner references). False if gone."""
  from kubernetes import client
  from kubernetes.client.exceptions import ApiException

  try:
    api.custom.delete_namespaced_custom_object(
      GROUP,
      VERSION,
      namespace,
      PLURAL,
      name,
      body=client.V1DeleteOptions(propagation_policy="Background"),
    )
    return True
  except ApiException as e:
    if e.status == 404:
      return False
    raise


def condition(job: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
  """The job's condition of type `kind` when its status is "True", else None."""
  for c in (job.get("status") or {}).get("conditions") or []:
    if c.get("type") == kind and c.get("status") == "True":
      return c
  return None


def finished(job: Mapping[str, Any]) -> str | None:
  """SUCCEEDED or FAILED once the operator has decided, else None."""
  for kind in (FAILED, SUCCEEDED):
    if condition(job, kind):
      return kind
  return None


def _describe_exit(code: int, reason: str | None) -> str:
  if reason == "OOMKilled":
    return f"was killed for running out of memory (OOMKilled, exit code {code})"
  if code > 128:
    try:
      return f"was killed by {signal.Signals(code - 128).name} (exit code {code})"
    except ValueError:
      pass
  return f"exited with status {code}"


@dataclasses.dataclass
class Failure:
  """One failed run of a replica's container, as the step saw it."""

  replica: Replica
  what: str
  finished_at: str  # the container's finishedAt (RFC 3339), for ordering
  tail: str | None  # the failed container's log tail, if the step read it in time


# Pod restart policies under which the kubelet restarts a failed container in the same pod.
_IN_PLACE_POLICIES = ("OnFailure", "Always")


def _run_id(terminated: Any) -> str:
  """One run of a container: its id (finishedAt has whole seconds, and two runs can share one)."""
  return str(terminated.container_id or terminated.finished_at)


class ReplicaLogs:
  """Follows the job's pods: each replica's latest log tail, its failures and its restarts.

  The operator deletes pods on its own (cleanPodPolicy, backoffLimit), so tails are read while
  the pods exist: a container's log when it has just failed (the previous container's, after
  an in-place restart), and every `refresh_s` for running ones.
  """

  def __init__(
    self,
    api: tfjob_cluster.Api,
    namespace: str,
    job: str,
    tail_lines: int = TAIL_LINES,
    refresh_s=10.0,
  ):
    self.api, self.namespace, self.job = api, namespace, job
    self.tail_lines, self.refresh_s = tail_lines, refresh_s
    self.tails: dict[Replica, str] = {}
    self.failures: list[Failure] = []
    self.started: dict[Replica, str] = {}
    self._read_at: dict[str, float] = {}
    self._seen: set[tuple[str, int, str]] = set()
    self._restarts: dict[str, int] = {}
    self._failed_in_place: dict[str, int] = {}  # failed runs of pods that restart in place
    self._pods_by_replica: dict[Replica, set[str]] = {}

  @property
  def restarts(self) -> int:
    """Container restarts plus pods the operator recreated, over the whole job.

    A container that failed in a pod that restarts in place (OnFailure, Always) counts as
    restarted once the step has seen it fail: the kubelet restarts it, and the restart that
    reaches the backoff limit is the one the step never sees, since the operator then fails
    the job and deletes its pods at once (PastBackoffLimit counts restartCount, which grows
    only when the container starts again).
    """
    recreated = sum(len(uids) - 1 for uids in self._pods_by_replica.values())
    pods = self._restarts.keys() | self._failed_in_place.keys()
    in_place = sum(
      max(self._restarts.get(uid, 0), self._failed_in_place.get(uid, 0)) for uid in pods
    )
    return in_place + recreated

  def pods(self) -> list[Any]:
    """The job's pods (V1Pod), by the operator's job-name label."""
    listed = self.api.core.list_namespaced_pod(
      self.namespace, label_selector=f"{JOB_NAME_LABEL}={self.job}"
    )
    return list(listed.items or [])

  def _tail(self, pod: str, previous: bool = False) -> str | None:
    from kubernetes.client.exceptions import ApiException

    try:
      return self.api.core.read_namespaced_pod_log(
        pod,
        self.namespace,
        container=CONTAINER_NAME,
        tail_lines=self.tail_lines,
        previous=previous,
      )
    except ApiException:
      return None  # Not started yet, or already gone.

  def update(self, final: bool = False) -> None:
    """Reads the pods once: new failures and restarts, and the tails that are due."""
    now = time.monotonic()
    for pod in self.pods():
      labels = pod.metadata.labels or {}
      try:
        replica = (labels[REPLICA_TYPE_LABEL], int(labels[REPLICA_INDEX_LABEL]))
      except (KeyError, ValueError):
        continue
      name, uid = pod.metadata.name, pod.metadata.uid or pod.metadata.name
      self._pods_by_replica.setdefault(replica, set()).add(uid)
      status = next(
        (s for s in (pod.status.container_statuses or []) if s.name == CONTAINER_NAME), None
      )
      if status is None:
        continue
      self._restarts[uid] = max(int(status.restart_count or 0), self._restarts.get(uid, 0))
      state = status.state
      running = bool(state and state.running)
      if running and replica not in self.started:
        self.started[replica] = str(state.running.started_at)
      in_place = (pod.spec.restart_policy if pod.spec else None) in _IN_PLACE_POLICIES
      last = status.last_state.terminated if status.last_state else None
      if last is not None and last.exit_code:
        # A container that failed and is restarting in place (or waits to, in back-off):
        # once restarted, its log is the pod's previous one.
        self._fail(replica, uid, last, name, in_place, previous=running)
      if state and state.terminated:
        key = (uid, _run_id(state.terminated), "read")
        if key not in self._seen:
          self._seen.add(key)
          tail = self._tail(name)
          if tail is not None:
            self.tails[replica] = tail
          if state.terminated.exit_code:
            self._fail(replica, uid, state.terminated, name, in_place, tail=tail)
      elif running and (final or now >= self._read_at.get(uid, 0.0)):
        self._read_at[uid] = now + self.refresh_s
        tail = self._tail(name)
        if tail is not None:
          self.tails[replica] = tail

  def _fail(
    self,
    replica: Replica,
    uid: str,
    terminated,
    pod: str,
    in_place: bool,
    previous=False,
    tail=None,
  ) -> None:
    """Records one failed container run (once per run) with its log tail."""
    key = (uid, _run_id(terminated), "failed")
    if key in self._seen:
      return
    self._seen.add(key)
    if in_place:
      self._failed_in_place[uid] = self._failed_in_place.get(uid, 0) + 1
    if tail is None:
      tail = self._tail(pod, previous=previous)
    if tail is not None:
      self.tails[replica] = tail
    self.failures.append(
      Failure(
        replica,
        _describe_exit(int(terminated.exit_code), terminated.reason),
        str(terminated.finished_at or ""),
        tail,
      )
    )

  def first_failure(self) -> Failure | None:
    """The earliest failure seen: later ones are usually peers losing the failed replica."""
    return min(self.failures, key=lambda f: f.finished_at, default=None)


def wait_for_job(
  api: tfjob_cluster.Api,
  namespace: str,
  name: str,
  logs: ReplicaLogs,
  *,
  timeout_s: float,
  poll_s: float = DEFAULT_POLL_S,
  on_poll: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
  """Waits for the job's Succeeded or Failed condition, following its pods meanwhile.

  Returns:
    The finished job (check `finished(job)`).

  Raises:
    TFJobError: on timeout, or when the job disappears before it finishes.
  """
  deadline = time.monotonic() + timeout_s
  while True:
    job = get_job(api, namespace, name)
    if job is None:
      raise TFJobError(
        f"TFJob {namespace}/{name} disappeared before it finished (deleted by someone else, "
        "or its ttlSecondsAfterFinished passed while the step was away)"
      )
    if on_poll is not None:
      on_poll(job)
    done = finished(job)
    logs.update(final=done is not None)
    if done:
      return job
    if time.monotonic() > deadline:
      chief = logs.tails.get(_chief_of(job), "<no log yet>")
      raise TFJobError(
        f"TFJob {namespace}/{name} did not finish within {timeout_s:.0f} s (worker_timeout_s); "
        f"the chief's log ends with:\n{chief}"
      )
    time.sleep(poll_s)


def _chief_of(job: Mapping[str, Any]) -> Replica:
  specs = (job.get("spec") or {}).get("tfReplicaSpecs") or {}
  return ("chief", 0) if CHIEF in specs else ("worker", 0)


def failure_message(job: Mapping[str, Any], logs: ReplicaLogs) -> str:
  """One line naming the replica that failed first, then its log tail."""
  meta = job["metadata"]
  where = f"TFJob {meta.get('namespace')}/{meta['name']}"
  reason = (condition(job, FAILED) or {}).get("message") or "the operator marked it Failed"
  first = logs.first_failure()
  if first is None:
    chief = _chief_of(job)
    tail = logs.tails.get(chief)
    line = f"{where} failed: {reason.rstrip('.')}; no replica was seen failing"
    return f"{line}; {chief[0]} {chief[1]}'s log ends with:\n{tail or '<no log>'}"
  rtype, index = first.replica
  tail = first.tail or "<no log: its pod was gone before the step read it>"
  line = f"{where} failed: {rtype} {index} {first.what} ({reason.rstrip('.')})"
  return f"{line}; its log ends with:\n{tail}"


def log_tails_text(logs: ReplicaLogs) -> str:
  """Every replica's log tail, one block each, for the step's own log."""
  blocks = []
  for (rtype, index), tail in sorted(logs.tails.items()):
    blocks.append(f"----- {rtype} {index}: last {logs.tail_lines} log lines -----\n{tail.rstrip()}")
  return "\n".join(blocks)


@dataclasses.dataclass
class JobRun:
  """A TFJob that succeeded.

  Attributes:
    name: its name.
    namespace: its namespace.
    created: whether this step created it (False: it attached after a retry).
    job: the job as last read, with its conditions.
    logs: its replicas' log tails, failures and restarts.
  """

  name: str
  namespace: str
  created: bool
  job: dict[str, Any]
  logs: ReplicaLogs


def run_job(
  api: tfjob_cluster.Api,
  body: Mapping[str, Any],
  *,
  timeout_s: float,
  poll_s: float = DEFAULT_POLL_S,
) -> JobRun:
  """Creates (or attaches to) the job, waits for it, logs each replica's tail and deletes it.

  The job is deleted however the wait ends, so its pods and services go with it; only a step
  that is killed leaves it behind, for its retry to attach to (or for the operator's
  activeDeadlineSeconds and ttlSecondsAfterFinished to remove).

  Raises:
    TFJobError: when the job fails (one line naming the replica that failed first, then its
      log tail), times out or disappears.
    ClusterNotReadyError: when the cluster cannot run it (`tfjob_cluster.cluster_problem`).
  """
  namespace = body["metadata"]["namespace"]
  try:
    return _run_job(api, body, timeout_s=timeout_s, poll_s=poll_s)
  except Exception as e:
    line = tfjob_cluster.cluster_problem(e, api, namespace)
    if line is None:
      raise
    raise tfjob_cluster.ClusterNotReadyError(line) from e


def _run_job(
  api: tfjob_cluster.Api, body: Mapping[str, Any], *, timeout_s: float, poll_s: float
) -> JobRun:
  namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
  _, created = create_or_attach(api, body)
  counts = {t: s["replicas"] for t, s in body["spec"]["tfReplicaSpecs"].items()}
  _LOG.info(
    "%s TFJob %s/%s with replicas %s; waiting for it to finish.",
    "Created" if created else "Attached to the existing",
    namespace,
    name,
    counts,
  )
  logs = ReplicaLogs(api, namespace, name)
  try:
    job = wait_for_job(api, namespace, name, logs, timeout_s=timeout_s, poll_s=poll_s)
  finally:
    try:
      delete_job(api, namespace, name)
    except Exception as e:  # The job's TTL removes it; the wait's own outcome matters more.
      _LOG.warning("Could not delete TFJob %s/%s: %s", namespace, name, e)
  outcome = finished(job)
  _LOG.info(
    "TFJob %s/%s %s (%d restart(s)); replica logs:\n%s",
    namespace,
    name,
    outcome,
    logs.restarts,
    log_tails_text(logs),
  )
  if outcome != SUCCEEDED:
    raise TFJobError(failure_message(job, logs))
  return JobRun(name, namespace, created, job, logs)
