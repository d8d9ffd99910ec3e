"""Measures DistributedTrainer training throughput per runnable strategy and its per-step overhead.

Each configuration trains the default digits module for the same global batch and steps
in fresh processes: one_device and mirrored (over N logical CPU devices) in a child
interpreter, multi_worker_mirrored and parameter_server as real local clusters through the
executor. Throughput is global training examples per second over the epochs after the
first (which pays for tracing); the overhead ratio is the per-step time divided by
OneDeviceStrategy's. Call `run_benchmark` from bench/ scripts, or run
`python -m components.distributed_trainer.bench_lib --work-dir DIR --csv data/digits/digits.csv`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import components
from components.distributed_trainer import constants, examples_lib


@dataclasses.dataclass(frozen=True)
class BenchConfig:
  """One configuration to measure.

  Attributes:
    label: name in the report.
    strategy: strategy name passed to the trainer.
    logical_cpus: split the CPU into this many logical devices (single-process runs).
    workers: local worker processes (0: single process).
    ps: local parameter-server processes.
  """

  label: str
  strategy: str
  logical_cpus: int = 0
  workers: int = 0
  ps: int = 0


DEFAULT_CONFIGS = (
  BenchConfig("one_device", "one_device"),
  BenchConfig("mirrored_2_logical_cpus", "mirrored", logical_cpus=2),
  BenchConfig("multi_worker_mirrored_2_workers", "multi_worker_mirrored", workers=2),
  BenchConfig("parameter_server_1ps_2_workers", "parameter_server", workers=2, ps=1),
)


@dataclasses.dataclass
class BenchResult:
  """Measured throughput of one configuration.

  Attributes:
    label: configuration name.
    strategy: strategy the trainer chose.
    processes: OS processes that took part.
    num_replicas_in_sync: replicas of the strategy.
    examples_per_sec: global training examples per second (steady state).
    step_ms: milliseconds per global step.
    overhead_vs_one_device: step_ms / OneDeviceStrategy's step_ms (None without that run).
    eval_accuracy: accuracy of the trained model on the eval split.
    wall_s: wall time of the whole run, start-up and export included.
  """

  label: str
  strategy: str
  processes: int
  num_replicas_in_sync: int
  examples_per_sec: float
  step_ms: float
  overhead_vs_one_device: float | None
  eval_accuracy: float | None
  wall_s: float


def _child_env() -> dict[str, str]:
  root = os.path.dirname(os.path.dirname(os.path.abspath(components.__file__)))
  path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
  env = {**os.environ, "PYTHONPATH": path, "TF_USE_LEGACY_KERAS": "1"}
  env.pop("TF_CONFIG", None)  # single-process measurements
  return env


def _measure_single(config: BenchConfig, root: str, steps: int, batch: int) -> dict[str, Any]:
  # A child interpreter: logical devices must be set before TensorFlow starts.
  argv = [
    sys.executable, "-m", "components.distributed_trainer.bench_lib", "--single",
    "--strategy", config.strategy, "--logical-cpus", str(config.logical_cpus),
    "--work-dir", root, "--steps", str(steps), "--batch", str(batch),
  ]  # fmt: skip
  done = subprocess.run(
    argv, env=_child_env(), capture_output=True, text=True, timeout=900, check=False
  )
  if done.returncode:
    raise RuntimeError(f"benchmark child for {config.label} failed:\n{done.stderr[-3000:]}")
  line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT="))
  result = json.loads(line[len("RESULT=") :])
  return {
    "strategy": result["strategy"],
    "num_replicas_in_sync": result["num_replicas_in_sync"],
    "examples_per_sec": result["train_examples_per_sec"],
    "eval_accuracy": result["eval_accuracy"],
  }


def _measure_cluster(config: BenchConfig, root: str, steps: int, batch: int) -> dict[str, Any]:
  from tfx.proto import trainer_pb2
  from tfx.types import standard_component_specs as sc
  from tfx.utils import json_utils, proto_utils

  from components.distributed_trainer import executor

  inputs, outputs = _artifacts(root)
  props = {
    sc.TRAIN_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.TrainArgs(num_steps=steps)),
    sc.EVAL_ARGS_KEY: proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
    sc.MODULE_PATH_KEY: constants.DEFAULT_MODULE_PATH,
    sc.CUSTOM_CONFIG_KEY: json_utils.dumps(None),
    constants.STRATEGY_KEY: config.strategy,
    constants.LOCAL_WORKERS_KEY: config.workers,
    constants.LOCAL_PS_KEY: config.ps,
    constants.GLOBAL_BATCH_SIZE_KEY: batch,
    constants.WORKER_TIMEOUT_KEY: 900,
  }
  executor.Executor().Do(inputs, outputs, props)
  custom = outputs[sc.MODEL_KEY][0].mlmd_artifact.custom_properties
  return {
    "strategy": custom[constants.STRATEGY_PROPERTY].string_value,
    "num_replicas_in_sync": custom[constants.NUM_REPLICAS_PROPERTY].int_value,
    "examples_per_sec": custom[constants.EXAMPLES_PER_SEC_PROPERTY].double_value,
    "eval_accuracy": custom[constants.EVAL_ACCURACY_PROPERTY].double_value,
  }


def _artifacts(root: str):
  """Artifacts over examples written once under root/data, with fresh outputs per run."""
  from tfx.types import artifact_utils, standard_artifacts
  from tfx.types import standard_component_specs as sc

  examples = standard_artifacts.Examples()
  examples.uri = os.path.join(os.path.dirname(root), "data", "examples")
  examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
  schema = standard_artifacts.Schema()
  schema.uri = os.path.join(os.path.dirname(root), "data", "schema")
  model = standard_artifacts.Model()
  model.uri = os.path.join(root, "model")
  model_run = standard_artifacts.ModelRun()
  model_run.uri = os.path.join(root, "model_run")
  return (
    {sc.EXAMPLES_KEY: [examples], sc.SCHEMA_KEY: [schema]},
    {sc.MODEL_KEY: [model], sc.MODEL_RUN_KEY: [model_run]},
  )


def run_benchmark(
  work_dir: str,
  csv_path: str,
  steps: int = 600,
  global_batch_size: int = 64,
  configs: Sequence[BenchConfig] = DEFAULT_CONFIGS,
) -> list[BenchResult]:
  """Trains the default digits module under each configuration and measures throughput.

  Args:
    work_dir: empty folder for data and models.
    csv_path: digits CSV (pixel_0..pixel_63,label).
    steps: training steps per run (split into 5 epochs; the first is not timed).
    global_batch_size: examples per step over all replicas.
    configs: configurations to run, OneDeviceStrategy first for the overhead ratio.

  Returns:
    One BenchResult per configuration.
  """
  data = os.path.join(work_dir, "data")
  examples_lib.trainer_artifacts(data, csv_path)
  results: list[BenchResult] = []
  base_step_ms = None
  for config in configs:
    root = os.path.join(work_dir, config.label)
    start = time.perf_counter()
    if config.workers:
      raw = _measure_cluster(config, root, steps, global_batch_size)
      processes = config.workers + (config.ps + 1 if config.ps else 0)
    else:
      raw = _measure_single(config, root, steps, global_batch_size)
      processes = 1
    step_ms = 1000.0 * global_batch_size / raw["examples_per_sec"]
    if config.strategy == "one_device" and base_step_ms is None:
      base_step_ms = step_ms
    results.append(
      BenchResult(
        label=config.label,
        strategy=raw["strategy"],
        processes=processes,
        num_replicas_in_sync=raw["num_replicas_in_sync"],
        examples_per_sec=raw["examples_per_sec"],
        step_ms=step_ms,
        overhead_vs_one_device=step_ms / base_step_ms if base_step_ms else None,
        eval_accuracy=raw["eval_accuracy"],
        wall_s=time.perf_counter() - start,
      )
    )
  return results


def _single_main(args: argparse.Namespace) -> None:
  import tensorflow as tf

  if args.logical_cpus > 1:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
      cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(args.logical_cpus)]
    )
  from components.distributed_trainer import default_module, strategy_lib
  from components.distributed_trainer import distributed_trainer_lib as lib

  data = os.path.join(os.path.dirname(args.work_dir), "data")
  built = strategy_lib.build_strategy(args.strategy, tf_config={}, tpu_available=False)
  config = lib.TrainConfig(
    train_files=[os.path.join(data, "examples", "Split-train", "*")],
    eval_files=[os.path.join(data, "examples", "Split-eval", "*")],
    schema_path=os.path.join(data, "schema", "schema.pbtxt"),
    model_dir=os.path.join(args.work_dir, "model"),
    model_run_dir=os.path.join(args.work_dir, "model_run"),
    train_steps=args.steps,
    global_batch_size=args.batch,
  )
  result = lib.train_build_model(default_module.build_model, config, built)
  print("RESULT=" + json.dumps(dataclasses.asdict(result)))


def main(argv: Sequence[str] | None = None) -> int:
  """Command-line entry: the whole benchmark, or (--single) one in-process measurement."""
  parser = argparse.ArgumentParser(prog="python -m components.distributed_trainer.bench_lib")
  parser.add_argument("--work-dir", required=True)
  parser.add_argument("--csv", default="data/digits/digits.csv")
  parser.add_argument("--steps", type=int, default=600)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--single", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--strategy", default="one_device", help=argparse.SUPPRESS)
  parser.add_argument("--logical-cpus", type=int, default=0, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.single:
    _single_main(args)
    return 0
  for result in run_benchmark(args.work_dir, args.csv, args.steps, args.batch):
    print(json.dumps(dataclasses.asdict(result)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
