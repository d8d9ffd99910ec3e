"""Shared pieces of the benchmarks: machine facts, child processes with peak RSS, tables."""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import psutil

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPO_ROOT, "bench", "results")


def machine() -> dict:
  """What the figures were measured on."""
  return {
    "cpus": len(os.sched_getaffinity(0)),
    "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
    "python": platform.python_version(),
    "platform": platform.platform(),
  }


def write_results(kind: str, payload: dict, indent: int = 1) -> str:
  """Writes a run's figures to `bench/results/<UTC minute>-<kind>.json`; returns the path."""
  stamp = time.strftime("%Y%m%dT%H%MZ", time.gmtime())
  os.makedirs(RESULTS_DIR, exist_ok=True)
  path = os.path.join(RESULTS_DIR, f"{stamp}-{kind}.json")
  with open(path, "w") as f:
    json.dump(payload, f, indent=indent)
  return path


def child_env() -> dict[str, str]:
  env = dict(os.environ)
  env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONWARNINGS": "ignore"})
  return env


def _children_cpu_s() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def _pss(pid: int) -> int:
  """A process's proportional set size in bytes, from the kernel's one-line summary."""
  try:
    with open(f"/proc/{pid}/smaps_rollup") as f:
      for line in f:
        if line.startswith("Pss:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


def run_measured(cmd: Sequence[str], timeout: float = 3600) -> dict:
  """Runs a command, sampling the summed RSS of its whole process tree every 50 ms.

  Returns:
    wall_s (the whole process, start-up and imports included), process_cpu_s (user + system
    CPU seconds of the process and every descendant it waited for), peak_rss_mb (the summed
    RSS), peak_pss_mb (the summed proportional set size, read every 0.5 s), peak_processes
    (each process at the RSS peak), returncode, and the keys of the last line of stdout that
    is JSON (the child's own measurements).
  """
  cpu_start = _children_cpu_s()
  start = time.monotonic()
  proc = subprocess.Popen(
    list(cmd),
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
    env=child_env(),
    cwd=REPO_ROOT,
  )
  peak = 0
  peak_pss = 0
  peak_processes: list[str] = []
  stop = threading.Event()

  def sample():
    nonlocal peak, peak_pss, peak_processes
    next_pss = 0.0
    try:
      parent = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
      return
    while not stop.is_set():
      try:
        procs = [p for p in [parent, *parent.children(recursive=True)] if p.is_running()]
        rss = [p.memory_info().rss for p in procs]
        if sum(rss) > peak:
          peak = sum(rss)
          peak_processes = [
            f"{r / 2**20:.0f} MB {' '.join(p.cmdline()[:3])[:100]}"
            for p, r in zip(procs, rss, strict=True)
          ]
        now = time.monotonic()
        if now >= next_pss:
          # Proportional set size: pages a forked child still shares with its parent count
          # once, split between them, where the sum of RSS counts them in each process.
          # Reading it walks the page tables, so it is read every 0.5 s (every 50 ms it took
          # a third of a core from the run it measured).
          peak_pss = max(peak_pss, sum(_pss(p.pid) for p in procs))
          next_pss = now + 0.5
      except psutil.Error:
        pass
      time.sleep(0.05)

  sampler = threading.Thread(target=sample, daemon=True)
  sampler.start()
  out, err = proc.communicate(timeout=timeout)
  stop.set()
  sampler.join()
  wall = time.monotonic() - start
  result = {
    "wall_s": wall,
    "process_cpu_s": _children_cpu_s() - cpu_start,
    "peak_rss_mb": peak / 2**20,
    "peak_pss_mb": peak_pss / 2**20,
    "peak_processes": peak_processes,
    "returncode": proc.returncode,
  }
  lines = [line for line in out.strip().splitlines() if line.startswith("{")]
  if lines:
    result.update(json.loads(lines[-1]))
  if proc.returncode != 0:
    result["stderr_tail"] = err[-2000:]
  return result


def median(values: Sequence[float]) -> float:
  return statistics.median(values) if values else float("nan")


def python() -> str:
  return sys.executable


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
  def cell(v):
    if isinstance(v, float):
      return f"{v:,.2f}"
    if isinstance(v, int):
      return f"{v:,}"
    return str(v)

  lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
  lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
  return "\n".join(lines)
