"""A Python process that imports the heavy libraries once, then forks one child per command.

A pipeline run (`python pipeline/run_local.py ...`) or a compiled Kubeflow step (`python -m
pipeline.definition.kfp_entrypoint ...`) spends about 13 s of a 2-core machine importing
TensorFlow, Beam and TFX before it does anything. Tests that run many of them, and do not test
the start-up itself, can hand the commands to a `WarmPython` instead: its server (this module
run with `python -m`) imports the third-party libraries of `PRELOAD` once, and for each command
forks a child that takes the command's environment, working folder, stdout and stderr as its
own and runs the script or module as `python` would (`runpy.run_path` with the script's folder
first on `sys.path`, or `runpy.run_module(..., alter_sys=True)`, both as `__main__`), then exits
the way the interpreter does: atexit handlers, the status of a SystemExit, a traceback and status
1 for an uncaught exception. The project's own modules are not preloaded (but for
`components.tf_compat` and `components.memory`), so each child imports them, and start-up code
such as `keras_tuner_on_tf_keras` runs in every child.

What differs from a fresh process: the libraries of `PRELOAD` were imported with the server's
environment (the command's own variables are set before its code runs, but after those imports)
and in the server's order, so what they print while imported (deprecation warnings) is in the
server's log rather than the command's stderr; their objects are frozen (`gc.freeze`) before
the command starts, where the project's entry points freeze them just before their work; and
`sys.path` is the server's (`WarmPython.can_run` tells whether a command's PYTHONPATH and the
like match the server's).
Tests of a command's start-up, of signals sent to it, or of what a user sees from a fresh shell
keep fresh processes.

Protocol: one JSON object per line on the server's stdin, `{"script" or "module", "args",
"env", "cwd", "stdout", "stderr"}` (the last two are file paths); its replies on stdout are
`{"ready": true}` once the imports are done, then per command `{"pid": N}` once the child
exists and `{"returncode": N}` when it ended (negative for a signal, as `subprocess` reports it).
The server ends when its stdin closes.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import queue
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
# Imported once by the server, in this order, after keras_tuner (see `preload`).
PRELOAD = (
  "tensorflow",
  "apache_beam",
  "tensorflow_data_validation",
  "tensorflow_model_analysis",
  "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
  "tfx.orchestration.local.local_dag_runner",
)
# Variables read while PRELOAD is imported: a command with other values gets a fresh process.
IMPORT_TIME_VARIABLES = ("PYTHONPATH", "TF_USE_LEGACY_KERAS", "TF_CPP_MIN_LOG_LEVEL")


class WarmPythonError(RuntimeError):
  """The server ended or answered out of turn."""


# ------------------------------------------------------------------------ the server


def preload() -> None:
  """Imports PRELOAD, keras_tuner first on tf_keras, as the project's entry points set it, and
  freezes what they created (`components.memory.freeze_imports`, `gc.freeze`): a child's
  collections and its exit then do not walk them (a child took 1.8 s to exit without it), and
  they are not written to (copied) in each child."""
  from components import memory, tf_compat

  tf_compat.keras_tuner_on_tf_keras()
  memory.freeze_imports(PRELOAD)


def _child(request: Mapping[str, Any]) -> int:
  """Becomes the command's process (stdio, environment, folder, argv) and runs its code."""
  devnull = os.open(os.devnull, os.O_RDONLY)
  os.dup2(devnull, 0)
  os.close(devnull)
  for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, fd)
    os.close(out)
  os.environ.clear()
  os.environ.update(request["env"])
  os.chdir(request["cwd"])
  if "script" in request:
    script = os.path.abspath(request["script"])
    sys.argv = [request["script"], *request["args"]]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
  else:
    sys.argv = [request["module"], *request["args"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
  return 0


def _reply(message: Mapping[str, Any]) -> None:
  sys.stdout.write(json.dumps(message) + "\n")
  sys.stdout.flush()


def main() -> int:
  preload()
  _reply({"ready": True})
  for line in sys.stdin:
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      return _child(request)
    _reply({"pid": pid})
    _, status = os.waitpid(pid, 0)
    _reply({"returncode": os.waitstatus_to_exitcode(status)})
  return 0


# ------------------------------------------------------------------------ the client


def _start_server(env: Mapping[str, str], log: str | os.PathLike, *flags: str):
  """This module run as a server with `env` and `flags`; returns it and its open `log`."""
  pathlib.Path(log).parent.mkdir(parents=True, exist_ok=True)
  log_file = open(log, "w", encoding="utf-8")  # noqa: SIM115 (held until the server stops)
  proc = subprocess.Popen(
    [sys.executable, "-m", "tests.support.warm_python", *flags],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=log_file,
    env=dict(env),
    cwd=REPO_ROOT,
  )
  return proc, log_file


class WarmPython:
  """Starts a server with `env` and runs commands in its children, one at a time.

  Args:
    env: the server's environment (also the default for commands).
    log: where the server's own output goes (its import warnings).
  """

  def __init__(self, env: Mapping[str, str], log: str | os.PathLike):
    self.env = dict(env)
    self._proc, self._log = _start_server(self.env, log)
    self._pending = b""
    self._ready = False
    self._finalizer = weakref.finalize(self, _stop, self._proc, self._log)

  def can_run(self, env: Mapping[str, str]) -> bool:
    """Whether a command with `env` sees what a fresh process would have imported."""
    return all(env.get(k) == self.env.get(k) for k in IMPORT_TIME_VARIABLES)

  def _read(self, timeout: float | None) -> dict[str, Any] | None:
    """The next reply, or None when none came within `timeout` seconds."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in self._pending:
      left = None if deadline is None else max(0.0, deadline - time.monotonic())
      ready, _, _ = select.select([self._proc.stdout], [], [], left)
      if not ready:
        return None
      chunk = os.read(self._proc.stdout.fileno(), 65536)
      if not chunk:
        raise WarmPythonError(f"the warm Python server ended; see {self._log.name}")
      self._pending += chunk
    line, self._pending = self._pending.split(b"\n", 1)
    return json.loads(line)

  def run(
    self,
    target: Mapping[str, str],
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike,
    stdout: str | os.PathLike,
    stderr: str | os.PathLike,
    timeout: float,
  ) -> int | None:
    """Runs `{"script": path}` or `{"module": name}` with `args` in a child of the server.

    The command's output is appended to the files `stdout` and `stderr` (they may be the same).

    Returns:
      The exit status, or None when it ran past `timeout` seconds and was killed.
    """
    if not self._ready:
      self._ready = bool(self._read(None))
    request = {
      **target,
      "args": [str(a) for a in args],
      "env": dict(env),
      "cwd": str(cwd),
      "stdout": str(stdout),
      "stderr": str(stderr),
    }
    self._proc.stdin.write(json.dumps(request).encode() + b"\n")
    self._proc.stdin.flush()
    pid = self._read(None)["pid"]
    done = self._read(timeout)
    if done is None:
      os.kill(pid, signal.SIGKILL)
      self._read(None)
      return None
    return done["returncode"]

  def close(self) -> None:
    """Ends the server (it also ends when this object is collected)."""
    self._finalizer()


def _stop(proc: subprocess.Popen, log) -> None:
  if proc.poll() is None:
    proc.stdin.close()
    try:
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
  log.close()


# ------------------------------------------------------------------------ the pool


def serve_pool() -> int:
  """The server of a `WarmPool`: forks a child per request at once, each in its own session
  (as `start_new_session` does), answers with its pid and the request's `id`, and reports each
  child's exit as it happens."""
  preload()
  _reply({"ready": True})
  pending, running, closed = b"", set(), False
  while not closed or running:
    if not closed:
      ready, _, _ = select.select([sys.stdin.fileno()], [], [], 0.05)
      chunk = os.read(sys.stdin.fileno(), 65536) if ready else None
      closed = chunk == b""
      pending += chunk or b""
      while b"\n" in pending:
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
          os.setsid()
          return _child(request)
        running.add(pid)
        _reply({"pid": pid, "id": request["id"]})
    else:
      time.sleep(0.05)
    while running:
      pid, status = os.waitpid(-1, os.WNOHANG)
      if pid == 0:
        break
      running.discard(pid)
      _reply({"exited": pid, "returncode": os.waitstatus_to_exitcode(status)})
  return 0


class WarmChild:
  """A `WarmPool` child as the local cluster and the fake kubelet use a `subprocess.Popen`:
  its `pid` (also its process group's id), `poll()` and `wait(timeout)`."""

  def __init__(self, pid: int):
    self.pid = pid
    self.returncode: int | None = None
    self._done = threading.Event()

  def _exited(self, returncode: int) -> None:
    self.returncode = returncode
    self._done.set()

  def poll(self) -> int | None:
    return self.returncode

  def wait(self, timeout: float | None = None) -> int:
    if not self._done.wait(timeout):
      raise subprocess.TimeoutExpired(str(self.pid), timeout)
    return self.returncode


class _Births:
  """Hands each `WarmPool.spawn` the pid of its own child, by request id.

  A reply can come after its spawn gave up waiting (a fork on a machine out of breath): that
  child belongs to no one, so it is killed with its process group as soon as its pid is known,
  and no later spawn takes it for its own (one did, and its cluster then watched another test's
  orphan worker and reported that worker's exit as its own).
  """

  def __init__(self, kill: Callable[[int], None]):
    self._kill = kill
    self._lock = threading.Lock()
    self._waiting: dict[int, queue.Queue] = {}
    self._ended = False

  def expect(self, request_id: int) -> queue.Queue:
    """A queue that receives the pid of `request_id`'s child, or None if the server ends."""
    box: queue.Queue = queue.Queue(maxsize=1)
    with self._lock:
      if self._ended:
        box.put(None)
      self._waiting[request_id] = box
    return box

  def abandon(self, request_id: int, box: queue.Queue) -> None:
    """The spawn of `request_id` stopped waiting: its child, now or later, is killed."""
    with self._lock:
      self._waiting.pop(request_id, None)
      pid = None if box.empty() else box.get()
    if pid is not None:
      self._kill(pid)

  def born(self, request_id: int, pid: int) -> None:
    with self._lock:
      box = self._waiting.pop(request_id, None)
      if box is not None:
        box.put(pid)
    if box is None:
      self._kill(pid)

  def server_ended(self) -> None:
    with self._lock:
      self._ended = True
      boxes, self._waiting = list(self._waiting.values()), {}
    for box in boxes:
      box.put(None)


def _kill_group(pid: int) -> None:
  with contextlib.suppress(ProcessLookupError):
    os.killpg(pid, signal.SIGKILL)


class WarmPool:
  """Like `WarmPython`, but its children run side by side: the processes of a local cluster
  or the pods of the fake training operator, which run for as long as their cluster does.

  Args:
    env: the server's environment.
    log: where the server's own output goes.
  """

  # How long a spawn waits for its child's pid; a fork takes well under a second, but one
  # whole-suite run on 2 busy cores waited over 60 s (the tests' own timeouts bound it too).
  SPAWN_TIMEOUT_S = 240.0

  def __init__(self, env: Mapping[str, str], log: str | os.PathLike):
    self._proc, self._log = _start_server(env, log, "--pool")
    self._children: dict[int, WarmChild] = {}
    self._births = _Births(_kill_group)
    self._ids = itertools.count()
    self._ready = threading.Event()
    self._lock = threading.Lock()
    threading.Thread(target=self._read_replies, daemon=True).start()
    self._finalizer = weakref.finalize(self, _stop, self._proc, self._log)

  def _read_replies(self) -> None:
    for line in self._proc.stdout:
      try:
        reply = json.loads(line)
      except ValueError:  # a library printed to the server's stdout: not a reply
        continue
      if "ready" in reply:
        self._ready.set()
      elif "exited" in reply:
        with self._lock:
          child = self._children.setdefault(reply["exited"], WarmChild(reply["exited"]))
        child._exited(reply["returncode"])
      else:
        with self._lock:  # a new child, even where the system reused an earlier one's pid
          self._children[reply["pid"]] = WarmChild(reply["pid"])
        self._births.born(reply["id"], reply["pid"])
    self._births.server_ended()

  def spawn(
    self,
    target: Mapping[str, str],
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike,
    log: str | os.PathLike,
  ) -> WarmChild:
    """Starts `{"script": path}` or `{"module": name}` with `args` in a child of the server,
    its stdout and stderr appended to `log`, and returns at once."""
    if not self._ready.wait(300):
      raise WarmPythonError(f"the warm pool did not start; see {self._log.name}")
    request_id = next(self._ids)
    request = {**target, "args": [str(a) for a in args], "env": dict(env), "cwd": str(cwd)}
    request.update(stdout=str(log), stderr=str(log), id=request_id)
    box = self._births.expect(request_id)
    with self._lock:
      self._proc.stdin.write(json.dumps(request).encode() + b"\n")
      self._proc.stdin.flush()
    try:
      pid = box.get(timeout=self.SPAWN_TIMEOUT_S)
    except queue.Empty:
      self._births.abandon(request_id, box)
      raise WarmPythonError(
        f"the warm pool forked no child for {target} within {self.SPAWN_TIMEOUT_S:.0f} s;"
        f" see {self._log.name}"
      ) from None
    if pid is None:
      raise WarmPythonError(f"the warm pool ended; see {self._log.name}")
    with self._lock:
      return self._children[pid]

  def close(self) -> None:
    """Ends the server once its children have ended."""
    self._finalizer()


# This process's shared servers, by kind and the values of their import-time variables.
_SHARED: dict[tuple, WarmPython | WarmPool] = {}
# Set per command (a cluster process's role); a server has no use for them.
_PER_COMMAND = ("TF_CONFIG",)


def shared(kind: type[WarmPython] | type[WarmPool], env: Mapping[str, str]):
  """The test process's `kind` of server for commands with `env`'s import-time variables,
  started on first use and kept for the life of the process."""
  key = (kind, *(env.get(k) for k in IMPORT_TIME_VARIABLES))
  if key not in _SHARED:
    prefix = "warm-pool-" if kind is WarmPool else "warm-python-"
    log = pathlib.Path(tempfile.mkdtemp(prefix=prefix)) / "server.log"
    _SHARED[key] = kind({k: v for k, v in env.items() if k not in _PER_COMMAND}, log)
  return _SHARED[key]


def spawn_module(command: Sequence[str], env: Mapping[str, str], cwd, log_path) -> WarmChild:
  """The local cluster's `launch._spawn` for tests of what a cluster does, not of how its
  processes start: `python -m MODULE ARGS...` runs in a warm pool's child instead of a fresh
  process (about 6 CPU s less each), in its own session, its output in `log_path`."""
  if list(command[:2]) != [sys.executable, "-m"]:
    raise ValueError(f"not a `python -m` command: {command}")
  pathlib.Path(log_path).write_bytes(b"")
  return shared(WarmPool, env).spawn(
    {"module": command[2]}, command[3:], env=env, cwd=cwd or os.getcwd(), log=log_path
  )


if __name__ == "__main__":
  sys.exit(serve_pool() if sys.argv[1:] == ["--pool"] else main())
