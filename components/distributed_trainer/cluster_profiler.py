"""Profiling a cluster's processes: each serves a profile, and the chief traces them all.

A local cluster tells its processes their profiler ports in PROFILER_PORTS_ENV; a TFJob's
replicas derive theirs from TF_CONFIG. Training without a cluster profiles through
TensorBoard's own `profile_batch` instead (trainer_api.fit).
"""

from __future__ import annotations

import json
import logging
import os
import time

_LOG = logging.getLogger(__name__)

# JSON {"<job>-<index>": port} of the profiler servers of a local cluster's processes, or
# PROFILER_PORTS_FROM_TF_CONFIG: in a cluster whose addresses only TF_CONFIG knows (a TFJob's
# pods), each process serves at its own TF_CONFIG host and port + 1.
PROFILER_PORTS_ENV = "TFXKIT_PROFILER_PORTS"
PROFILER_PORTS_FROM_TF_CONFIG = "tf_config_port+1"


def profiler_ports() -> dict[str, int]:
  """The cluster's profiler server ports, {"<job>-<index>": port}; {} outside a cluster."""
  return {k: int(a.rpartition(":")[2]) for k, a in profiler_addresses().items()}


def profiler_addresses() -> dict[str, str]:
  """Where each process of the cluster serves its profile, {"<job>-<index>": "host:port"}."""
  raw = os.environ.get(PROFILER_PORTS_ENV)
  if not raw:
    return {}
  if raw != PROFILER_PORTS_FROM_TF_CONFIG:
    return {k: f"localhost:{int(v)}" for k, v in json.loads(raw).items()}
  cluster = json.loads(os.environ.get("TF_CONFIG") or "{}").get("cluster") or {}
  out = {}
  for job, addresses in cluster.items():
    # A sparse TF_CONFIG (the operator's enableDynamicWorker) maps indexes to addresses.
    pairs = addresses.items() if isinstance(addresses, dict) else enumerate(addresses or ())
    for index, address in pairs:
      host, _, port = address.rpartition(":")
      out[f"{job}-{index}"] = f"{host}:{int(port) + 1}"
  return out


def start_profiler_server(task_type: str, task_index: int) -> int | None:
  """Starts this process's profiler server when the cluster asked for one; returns its port."""
  port = profiler_ports().get(f"{task_type}-{task_index}")
  if port is None:
    return None
  import tensorflow as tf

  tf.profiler.experimental.server.start(port)
  _LOG.info("Profiler server of %s-%d on port %d", task_type, task_index, port)
  return port


_TRACE_DONE = ".trace_done"


def cluster_trace(
  ports: dict[str, int], steps: tuple[int, int], steps_per_epoch: int, logdir: str, chief: bool
):
  """A callback that traces every process of a local cluster over `steps`.

  On the chief, when training reaches the first step, it asks every process's profiler server
  for a trace (tf.profiler.experimental.client.trace) lasting as long as the steps should take
  at the speed measured so far, in a background thread; at the end of training it waits for
  the trace and marks it done. A worker whose training ends first waits for that mark before
  its process exits, since a profiler server that is gone returns nothing.
  """
  import threading

  import tensorflow as tf

  done = os.path.join(logdir, _TRACE_DONE)

  class _Trace(tf.keras.callbacks.Callback):
    def __init__(self):
      super().__init__()
      self._epoch = 0
      self._started = None
      self._thread = None

    def on_epoch_begin(self, epoch, logs=None):
      self._epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
      if not chief:
        return
      step = self._epoch * steps_per_epoch + batch
      if self._started is None:
        self._started = (time.perf_counter(), step)
      if self._thread is not None or step < steps[0]:
        return
      t0, s0 = self._started
      per_step = (time.perf_counter() - t0) / max(step - s0, 1) if step > s0 else 0.05
      duration_ms = int(min(max(per_step * (steps[1] - steps[0] + 1) * 1000, 1000), 60000))
      addresses = ",".join(f"grpc://{a}" for a in profiler_addresses().values())
      self._thread = threading.Thread(
        target=tf.profiler.experimental.client.trace,
        args=(addresses, logdir, duration_ms),
        daemon=True,
      )
      self._thread.start()
      _LOG.info("Tracing %s for %d ms from step %d", sorted(ports), duration_ms, step)

    def on_train_end(self, logs=None):
      if chief:
        if self._thread is not None:
          self._thread.join(timeout=120)
        tf.io.gfile.makedirs(logdir)
        with tf.io.gfile.GFile(done, "w") as f:
          f.write("done")
        return
      deadline = time.monotonic() + 120
      while not tf.io.gfile.exists(done) and time.monotonic() < deadline:
        time.sleep(0.2)

  return _Trace()
