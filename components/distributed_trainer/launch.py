"""Launches a local TF cluster (workers, ps, chief) on loopback, one TF_CONFIG per process.

The DistributedTrainer uses it for `--local-workers`/`--local-ps`. Every process runs the
same command with its own TF_CONFIG. Without ps tasks the cluster
is `worker` x N (worker 0 is the chief) and every worker must exit 0. With ps tasks the
cluster is `chief` + `worker` x N + `ps` x M; the chief runs the training program and the
others are expected to serve (`tf.distribute.Server.join()`) until the chief is done, after
which they are terminated. When any required process fails the whole cluster is torn down
and, while restarts remain, started again on fresh ports, so training can resume from a
BackupAndRestore checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence

from components import process_groups
from core.errors import UserInputError

ATTEMPT_ENV = "LOCAL_CLUSTER_ATTEMPT"
_TAIL_CHARS = 3000
_TERMINATE_GRACE_S = 5.0

Task = tuple[str, int]


class ClusterError(UserInputError, RuntimeError):
  """A local cluster failed or timed out; the message carries the failing process's log tail.

  What fails a process of the cluster is the user's to fix: their module, their data, the
  settings (worker_timeout_s, the batch over the replicas) or the cluster (a TFJob's; see
  tfjob_lib.TFJobError). So it is a UserInputError: runners print its first line, which names
  the process and where its log is, and no traceback of ours; the process's own traceback is
  in that log, whose tail follows the line (and a TFJob step logs each replica's tail). It
  stays a RuntimeError, as it was, for code that catches it as one.
  """


@dataclasses.dataclass
class ClusterRun:
  """Outcome of a successful local cluster run.

  Attributes:
    cluster: the cluster dict of the last attempt.
    restarts: how many times the cluster was restarted after a failure.
    log_dir: where each process's combined stdout/stderr went (attempt-<k>/<job>-<i>.log;
      attempt-<k>/pids.json maps '<job>-<i>' to the process id).
    failures: one line per failed attempt.
  """

  cluster: dict[str, list[str]]
  restarts: int
  log_dir: str
  failures: list[str]


def free_ports(count: int, host: str = "localhost") -> list[int]:
  """Returns `count` distinct ports the OS reports free (bound to port 0, then released).

  Args:
    count: how many ports.
    host: interface to bind.

  Returns:
    The port numbers.
  """
  with contextlib.ExitStack() as stack:
    ports = []
    for _ in range(count):
      sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
      sock.bind((host, 0))
      ports.append(sock.getsockname()[1])
    return ports


def make_cluster(num_workers: int, num_ps: int = 0, host: str = "localhost") -> dict[str, list]:
  """Returns a TF_CONFIG cluster dict on free loopback ports.

  Args:
    num_workers: worker tasks (>= 1).
    num_ps: ps tasks; > 0 adds a chief (the coordinator).
    host: host name in the addresses.

  Returns:
    {'worker': [...], 'ps': [...], 'chief': [...]} (ps and chief only when num_ps > 0).

  Raises:
    ValueError: for a cluster without workers.
  """
  if num_workers < 1:
    raise ValueError(f"a local cluster needs at least one worker, got {num_workers}")
  ports = iter(free_ports(num_workers + (num_ps + 1 if num_ps else 0), host))
  cluster = {"worker": [f"{host}:{next(ports)}" for _ in range(num_workers)]}
  if num_ps:
    cluster["ps"] = [f"{host}:{next(ports)}" for _ in range(num_ps)]
    cluster["chief"] = [f"{host}:{next(ports)}"]
  return cluster


def tasks_of(cluster: Mapping[str, Sequence[str]]) -> list[Task]:
  """Returns every (job, index) of the cluster, chief first."""
  order = ("chief", "worker", "ps")
  return [(job, i) for job in order for i in range(len(cluster.get(job, ())))]


def tf_config_for(cluster: Mapping[str, Sequence[str]], task: Task) -> str:
  """Returns the TF_CONFIG JSON for one task of the cluster."""
  return json.dumps({"cluster": dict(cluster), "task": {"type": task[0], "index": task[1]}})


def _required(cluster: Mapping[str, Sequence[str]]) -> list[Task]:
  # With ps tasks only the coordinator finishes; the servers run until they are stopped.
  if cluster.get("ps"):
    return [("chief", 0)]
  return [("worker", i) for i in range(len(cluster["worker"]))]


def _tail(path: str) -> str:
  try:
    with open(path, errors="replace") as f:
      f.seek(0, os.SEEK_END)
      f.seek(max(0, f.tell() - _TAIL_CHARS))
      return f.read()
  except OSError:
    return "<no log>"


def _describe_exit(code: int) -> str:
  if code < 0:
    return f"was killed by {signal.Signals(-code).name}"
  return f"exited with status {code}"


def _stop(procs: Mapping[Task, subprocess.Popen], sig: int = signal.SIGTERM) -> None:
  """Signals each process group we started, then SIGKILLs those with a process still running
  after a grace."""
  process_groups.stop(procs.values(), _TERMINATE_GRACE_S, sig)


def run_local_cluster(
  command: Sequence[str],
  num_workers: int,
  num_ps: int = 0,
  *,
  log_dir: str,
  timeout_s: float = 600.0,
  max_restarts: int = 0,
  env: Mapping[str, str] | None = None,
  cwd: str | None = None,
  poll_s: float = 0.1,
  on_poll: Callable[[int, Mapping[Task, subprocess.Popen]], None] | None = None,
) -> ClusterRun:
  """Runs `command` once per task of a fresh loopback cluster until it succeeds.

  Args:
    command: argv every process runs (it reads TF_CONFIG to learn its role).
    num_workers: worker processes.
    num_ps: parameter-server processes (> 0 adds a chief/coordinator process).
    log_dir: folder for per-process logs.
    timeout_s: wall-clock limit over all attempts.
    max_restarts: cluster restarts allowed after failures.
    env: extra environment for the processes (TF_CONFIG and the attempt are added).
    cwd: working directory of the processes.
    poll_s: poll interval.
    on_poll: called as on_poll(attempt, processes) on every poll (tests use it to inject
      failures).

  Returns:
    The ClusterRun of the successful attempt.

  Raises:
    ClusterError: when an attempt fails with no restarts left, or on timeout; the message
      names the process and ends with its log tail.
  """
  deadline = time.monotonic() + timeout_s
  failures: list[str] = []
  base_env = {**os.environ, **(env or {})}
  for attempt in range(max_restarts + 1):
    cluster = make_cluster(num_workers, num_ps)
    attempt_dir = os.path.join(log_dir, f"attempt-{attempt}")
    os.makedirs(attempt_dir, exist_ok=True)
    failure, logs = _run_attempt(
      command,
      cluster,
      attempt,
      attempt_dir,
      env=base_env,
      cwd=cwd,
      deadline=deadline,
      poll_s=poll_s,
      on_poll=on_poll,
    )
    if failure is None:
      return ClusterRun(cluster, attempt, log_dir, failures)
    task, message = failure
    failures.append(f"attempt {attempt}: {message}")
    if message.startswith("timeout") or attempt == max_restarts:
      raise ClusterError(
        f"local cluster failed: {message} (attempt {attempt + 1} of {max_restarts + 1}); "
        f"log {logs[task]} ends with:\n{_tail(logs[task])}"
      )
  raise AssertionError("unreachable: the loop returns or raises")


def _run_attempt(
  command: Sequence[str],
  cluster: Mapping[str, Sequence[str]],
  attempt: int,
  attempt_dir: str,
  *,
  env: Mapping[str, str],
  cwd: str | None,
  deadline: float,
  poll_s: float,
  on_poll: Callable[[int, Mapping[Task, subprocess.Popen]], None] | None,
) -> tuple[tuple[Task, str] | None, dict[Task, str]]:
  """Starts every task of one attempt, waits for it and stops what is left.

  Returns:
    (None, or the failed task and what happened; each task's log path).
  """
  procs: dict[Task, subprocess.Popen] = {}
  logs: dict[Task, str] = {}
  try:
    for task in tasks_of(cluster):
      logs[task] = os.path.join(attempt_dir, f"{task[0]}-{task[1]}.log")
      task_env = {**env, "TF_CONFIG": tf_config_for(cluster, task), ATTEMPT_ENV: str(attempt)}
      procs[task] = _spawn(command, task_env, cwd, logs[task])
    with open(os.path.join(attempt_dir, "pids.json"), "w") as f:
      json.dump({f"{job}-{index}": p.pid for (job, index), p in procs.items()}, f)
    failure = _wait(
      procs,
      _required(cluster),
      deadline=deadline,
      poll_s=poll_s,
      attempt=attempt,
      on_poll=on_poll,
    )
  finally:
    failed = any(p.poll() not in (None, 0) for p in procs.values())
    _stop(procs, signal.SIGKILL if failed else signal.SIGTERM)
  return failure, logs


def _spawn(
  command: Sequence[str], env: Mapping[str, str], cwd: str | None, log_path: str
) -> subprocess.Popen:
  """Starts one task's process, its stdout and stderr going to `log_path`."""
  with open(log_path, "wb") as log:
    return subprocess.Popen(
      list(command),
      env=dict(env),
      cwd=cwd,
      stdout=log,
      stderr=subprocess.STDOUT,
      stdin=subprocess.DEVNULL,
      # Own process group, so teardown reaches anything the task spawned.
      start_new_session=True,
    )


def _wait(
  procs: Mapping[Task, subprocess.Popen],
  required: Sequence[Task],
  *,
  deadline: float,
  poll_s: float,
  attempt: int,
  on_poll: Callable[[int, Mapping[Task, subprocess.Popen]], None] | None,
) -> tuple[Task, str] | None:
  """Polls until the required tasks exit 0 (None) or something fails ((task, message))."""
  while True:
    if on_poll is not None:
      on_poll(attempt, procs)
    for task, proc in procs.items():
      code = proc.poll()
      if code is None or (code == 0 and task in required):
        continue
      what = "exited before the chief finished" if code == 0 else _describe_exit(code)
      return task, f"{task[0]} {task[1]} {what}"
    if all(procs[t].poll() == 0 for t in required):
      return None
    if time.monotonic() > deadline:
      running = [f"{t[0]} {t[1]}" for t, p in procs.items() if p.poll() is None and t in required]
      return required[0], f"timeout: {', '.join(running)} still running after the time limit"
    time.sleep(poll_s)
