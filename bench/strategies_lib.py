"""Training throughput of the DistributedTrainer per tf.distribute strategy that runs on this host.

Each configuration is a whole `pipeline/run_local.py` run on the bundled digits data with the
default tabular module, the same global batch and steps, and no Optimizer variants, in a fresh
process and output folder: one_device in the runner's process, mirrored over N logical CPU
devices (split before TensorFlow starts, by `run_local_logical_cpus.py`), multi_worker_mirrored
and parameter_server as real local clusters (`--local-workers`, `--local-ps`). The throughput
is the Model artifact's `train_examples_per_sec`: global training examples per second over the
epochs after the first (which pays for tracing). Configurations are interleaved round by round,
so the overhead ratio (per-step time / OneDeviceStrategy's in the same round) compares runs
made side by side.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

from core import defaults

# Model artifact properties the DistributedTrainer writes
# (components/distributed_trainer/constants.py).
_EXAMPLES_PER_SEC = "train_examples_per_sec"
_STRATEGY = "strategy"
_REPLICAS = "num_replicas_in_sync"


@dataclasses.dataclass(frozen=True)
class BenchConfig:
  """One configuration to measure.

  Attributes:
    label: name in the report.
    strategy: the runner's --strategy.
    logical_cpus: split the CPU into this many logical devices (single-process runs).
    workers: the runner's --local-workers (0: single process).
    ps: the runner's --local-ps.
  """

  label: str
  strategy: str
  logical_cpus: int = 0
  workers: int = 0
  ps: int = 0

  @property
  def processes(self) -> int:
    """Training processes: the runner alone, or the workers (+ ps and a chief)."""
    if not self.workers:
      return 1
    return self.workers + (self.ps + 1 if self.ps else 0)


DEFAULT_CONFIGS = (
  BenchConfig("one_device", "one_device"),
  BenchConfig("mirrored, 2 logical CPUs", "mirrored", logical_cpus=2),
  BenchConfig("multi_worker_mirrored, 2 workers", "multi_worker_mirrored", workers=2),
  BenchConfig("parameter_server, 1 ps + 2 workers", "parameter_server", workers=2, ps=1),
)


@dataclasses.dataclass
class RunResult:
  """One measured run of one configuration.

  Attributes:
    label: configuration name.
    round: the round it ran in (configurations of a round ran one after the other).
    strategy: the strategy the trainer recorded.
    num_replicas_in_sync: replicas of the strategy.
    examples_per_sec: global training examples per second after the first epoch.
    step_ms: milliseconds per global step (global batch / examples_per_sec).
    trainer_s: the DistributedTrainer component's seconds (start-up, profile, fit, eval,
      export; cluster launch included).
    trainer_accuracy: the trainer's eval accuracy on the eval split.
    pipeline_s: the whole pipeline run's seconds.
    process_cpu_s: CPU seconds of the runner and every process it started.
  """

  label: str
  round: int
  strategy: str
  num_replicas_in_sync: int
  examples_per_sec: float
  step_ms: float
  trainer_s: float
  trainer_accuracy: float | None
  pipeline_s: float
  process_cpu_s: float


def _command(config: BenchConfig, out: str, steps: int) -> list[str]:
  if config.logical_cpus:
    runner = [
      os.path.join(common.REPO_ROOT, "bench", "run_local_logical_cpus.py"),
      str(config.logical_cpus),
    ]
  else:
    runner = [os.path.join(common.REPO_ROOT, "pipeline", "run_local.py")]
  cmd = [
    common.python(),
    *runner,
    "--output-dir",
    out,
    "--train-steps",
    str(steps),
    "--strategy",
    config.strategy,
    "--optimizer-variants",
    "none",
    "--quiet",
  ]
  if config.workers:
    cmd += ["--local-workers", str(config.workers)]
  if config.ps:
    cmd += ["--local-ps", str(config.ps)]
  return cmd


def _model_properties(metadata_path: str) -> dict:
  """Custom properties of the newest Model artifact in a run's ML Metadata store."""
  from ml_metadata import metadata_store
  from ml_metadata.proto import metadata_store_pb2

  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = metadata_path
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
  models = metadata_store.MetadataStore(config).get_artifacts_by_type("Model")
  if not models:
    raise RuntimeError(f"no Model artifact in {metadata_path}")
  props = max(models, key=lambda a: a.id).custom_properties
  return {k: getattr(v, v.WhichOneof("value")) for k, v in props.items() if v.WhichOneof("value")}


def measure(config: BenchConfig, round_: int, steps: int) -> RunResult:
  """Runs the pipeline once with one configuration and reads its throughput."""
  batch = defaults.GLOBAL_BATCH_SIZE
  out = tempfile.mkdtemp(prefix="bench-strategy-")
  try:
    r = common.run_measured(_command(config, out, steps))
    if r["returncode"] != 0:
      raise RuntimeError(f"{config.label} failed:\n{r.get('stderr_tail')}")
    with open(os.path.join(out, "run_summary.json")) as f:
      summary = json.load(f)
    props = _model_properties(os.path.join(out, "metadata.sqlite"))
  finally:
    shutil.rmtree(out, ignore_errors=True)
  examples_per_sec = float(props[_EXAMPLES_PER_SEC])
  trainer_s = next(c["seconds"] for c in summary["components"] if c["name"] == "DistributedTrainer")
  return RunResult(
    label=config.label,
    round=round_,
    strategy=str(props.get(_STRATEGY)),
    num_replicas_in_sync=int(props.get(_REPLICAS, 0)),
    examples_per_sec=examples_per_sec,
    step_ms=1000.0 * batch / examples_per_sec,
    trainer_s=trainer_s,
    trainer_accuracy=summary["eval_metrics"].get("trainer_accuracy"),
    pipeline_s=summary["seconds"],
    process_cpu_s=r["process_cpu_s"],
  )


def run_benchmark(
  steps: int = defaults.TRAIN_STEPS,
  repeats: int = 2,
  configs: Sequence[BenchConfig] = DEFAULT_CONFIGS,
) -> list[RunResult]:
  """Runs every configuration `repeats` times, one round after another.

  Args:
    steps: training steps per run (split into 5 epochs; the first is not timed), each of
      the default global batch (core.defaults.GLOBAL_BATCH_SIZE).
    repeats: rounds; each runs every configuration once.
    configs: configurations, OneDeviceStrategy first (the overhead ratio's base).

  Returns:
    One RunResult per run, in run order.
  """
  results = []
  for i in range(repeats):
    for config in configs:
      result = measure(config, i + 1, steps)
      print(
        f"  round {i + 1} {config.label}: {result.examples_per_sec:,.0f} examples/s, "
        f"{result.step_ms:.2f} ms/step, trainer {result.trainer_s:.1f} s",
        flush=True,
      )
      results.append(result)
  return results


def summarize(results: Sequence[RunResult], configs: Sequence[BenchConfig]) -> list[dict]:
  """Medians per configuration and the per-round overhead against the first configuration."""
  base = {r.round: r.step_ms for r in results if r.label == configs[0].label}
  rows = []
  for config in configs:
    mine = [r for r in results if r.label == config.label]
    if not mine:
      continue
    rows.append(
      {
        "label": config.label,
        "strategy": mine[0].strategy,
        "processes": config.processes,
        "replicas": mine[0].num_replicas_in_sync,
        "runs": len(mine),
        "examples_per_sec": common.median([r.examples_per_sec for r in mine]),
        "step_ms": common.median([r.step_ms for r in mine]),
        "overhead_vs_first": common.median(
          [r.step_ms / base[r.round] for r in mine if r.round in base]
        ),
        "trainer_s": common.median([r.trainer_s for r in mine]),
        "process_cpu_s": common.median([r.process_cpu_s for r in mine]),
        "trainer_accuracy": common.median(
          [r.trainer_accuracy for r in mine if r.trainer_accuracy is not None]
        ),
        "all_step_ms": [round(r.step_ms, 3) for r in mine],
      }
    )
  return rows
