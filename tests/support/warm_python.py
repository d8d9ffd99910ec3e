"""A Python process that imports the heavy libraries once, then forks one child per command.

A compiled Kubeflow step is a fresh `python -m pipeline.definition.kfp_entrypoint ...` process,
and each spends about 15 s importing TensorFlow, Beam and TFX before its executor starts. Tests
that run many steps (five nights of the whole pipeline) can hand those commands to this process
instead (`kfp_launcher.LocalKfp(..., warm=True)`): it imports the third-party libraries of
`PRELOAD` once, and for each command forks a child that takes the command's environment,
working folder and log file as its own, and runs the module as `python -m` would
(`runpy.run_module(..., run_name="__main__", alter_sys=True)`), then exits the way the
interpreter does (atexit handlers, exit status from SystemExit, a traceback and status 1 for an
uncaught exception). The project's own modules are not preloaded: each child imports them, and
the entrypoint's own start-up (`keras_tuner_on_tf_keras` before TFX) runs in every child.

What differs from a fresh process: the libraries of `PRELOAD` were imported with the launcher's
environment, before the task's own variables (the run id) were set, and in this process's import
order. Tests that check a step's start-up itself keep fresh processes (the default).

Protocol: one JSON object per line on stdin,
`{"module": ..., "args": [...], "env": {...}, "cwd": ..., "log": ...}`; the replies on stdout are
`{"pid": N}` once the child exists, then `{"returncode": N}` (negative for a signal, as
`subprocess` reports it). The process ends when stdin closes.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys

# Imported once, in this order. keras_tuner must come first (see the entrypoint's docstring).
PRELOAD = (
  "tensorflow",
  "apache_beam",
  "tensorflow_data_validation",
  "tensorflow_model_analysis",
  "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor",
)


def preload() -> None:
  """Imports the libraries of PRELOAD, with keras_tuner on tf_keras as the entrypoint sets it."""
  from components import tf_compat

  tf_compat.keras_tuner_on_tf_keras()
  for name in PRELOAD:
    importlib.import_module(name)


def _child(request: dict) -> int:
  """Becomes the command's process: its stdio, environment, folder and argv; runs the module."""
  log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
  devnull = os.open(os.devnull, os.O_RDONLY)
  os.dup2(devnull, 0)
  os.dup2(log, 1)
  os.dup2(log, 2)
  os.close(log)
  os.close(devnull)
  os.environ.clear()
  os.environ.update(request["env"])
  os.chdir(request["cwd"])
  sys.argv = [request["module"], *request["args"]]
  runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
  return 0


def _reply(message: dict) -> None:
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


if __name__ == "__main__":
  sys.exit(main())
