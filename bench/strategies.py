"""Benchmark: training throughput per tf.distribute strategy that runs on this host.

Calls `components.distributed_trainer.bench_lib.run_benchmark`, which trains the default
digits module for the same global batch and steps under each strategy in fresh processes
(single-process strategies in a child interpreter, clusters as real local processes).

    .venv/bin/python bench/strategies.py [--steps 600]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=600)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--json")
  args = parser.parse_args(argv)
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  from components.distributed_trainer import bench_lib

  work = tempfile.mkdtemp(prefix="bench-strategies-")
  try:
    results = [
      dataclasses.asdict(r)
      for r in bench_lib.run_benchmark(
        work, os.path.join(common.REPO_ROOT, "data", "digits", "digits.csv"), args.steps, args.batch
      )
    ]
  finally:
    shutil.rmtree(work, ignore_errors=True)
  keys = [k for k in results[0] if k != "label"] if results else []
  md = common.markdown_table(
    ["configuration", *keys], [[r["label"], *(r[k] for k in keys)] for r in results]
  )
  report = {"machine": common.machine(), "results": results, "markdown": md}
  print(md)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=2)
  return report


if __name__ == "__main__":
  main()
