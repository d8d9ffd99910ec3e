"""Benchmark: training throughput per tf.distribute strategy that runs on this host.

Delegates to `components.distributed_trainer.bench_lib`, which trains the default digits
module for the same global batch and steps under each strategy in fresh processes.

    .venv/bin/python bench/strategies.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--json")
  args, rest = parser.parse_known_args(argv)
  work = tempfile.mkdtemp(prefix="bench-strategies-")
  out_json = os.path.join(work, "strategies.json")
  cmd = [common.python(), "-m", "components.distributed_trainer.bench_lib", "--work-dir", work,
         "--csv", os.path.join(common.REPO_ROOT, "data", "digits", "digits.csv"),
         "--json", out_json, *rest]
  r = common.run_measured(cmd)
  if r["returncode"] != 0:
    raise RuntimeError(f"strategy benchmark failed:\n{r.get('stderr_tail')}")
  with open(out_json) as f:
    result = json.load(f)
  result["machine"] = common.machine()
  print(result.get("markdown", json.dumps(result, indent=2)))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2)
  return result


if __name__ == "__main__":
  main()
