"""Benchmark: DistributedTrainer throughput per tf.distribute strategy that runs on this host.

Trains the default tabular model on digits through `pipeline/run_local.py` under each
strategy (see strategies_lib), interleaved round by round, and reports per-step time and
examples/s from the Model artifact.

    .venv/bin/python bench/strategies.py [--repeats 2] [--steps 600]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
import strategies_lib

from core import defaults


def to_markdown(rows: list[dict], steps: int) -> str:
  base = rows[0]["label"] if rows else ""
  table = common.markdown_table(
    [
      "configuration",
      "strategy",
      "processes",
      "replicas",
      "runs",
      "examples/s",
      "ms/step",
      f"ms/step / {base}",
      "trainer component s",
      "run CPU s",
      "trainer accuracy",
    ],
    [
      [
        r["label"],
        r["strategy"],
        r["processes"],
        r["replicas"],
        r["runs"],
        f"{r['examples_per_sec']:,.0f}",
        r["step_ms"],
        f"{r['overhead_vs_first']:.2f}x",
        r["trainer_s"],
        r["process_cpu_s"],
        f"{r['trainer_accuracy']:.4f}",
      ]
      for r in rows
    ],
  )
  return (
    f"{table}\n\nThe default tabular model (256 hidden units) on digits, global batch "
    f"{defaults.GLOBAL_BATCH_SIZE}, {steps} steps in {defaults.NUM_EPOCHS} epochs, each run a "
    "whole `run_local.py` pipeline with `--optimizer-variants none` in a fresh process. "
    "*examples/s* is the Model artifact's `train_examples_per_sec` (global examples per "
    "second over the epochs after the first, which pays for tracing); *ms/step* = global "
    f"batch / examples/s; the ratio to {base} is the median over rounds of each round's "
    "ratio (above 1: slower per step). *trainer component s* is the DistributedTrainer's "
    "whole time (process or cluster start-up, profiling, fit, evaluation, export); *run CPU "
    "s* is the CPU time of the whole pipeline run, every process included. Medians of the "
    "runs listed. ParameterServerStrategy reports 1 replica in sync: its workers step "
    "asynchronously, and the coordinator (chief) times the global steps it dispatches. "
    "On this 2-core machine every multi-replica setup shares the same two cores, "
    "so the figures show each mechanism's overhead (all-reduce between replicas, gRPC between "
    "processes, parameter round-trips), not a speed-up.\n"
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=defaults.TRAIN_STEPS)
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--json")
  args = parser.parse_args(argv)
  configs = strategies_lib.DEFAULT_CONFIGS
  runs = strategies_lib.run_benchmark(args.steps, args.repeats, configs)
  rows = strategies_lib.summarize(runs, configs)
  report = {
    "machine": common.machine(),
    "runs": [dataclasses.asdict(r) for r in runs],
    "results": rows,
    "markdown": to_markdown(rows, args.steps),
  }
  print(report["markdown"])
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=2)
  return report


if __name__ == "__main__":
  main()
