"""`make bench`: every benchmark in one run, written to bench/results/latest.md.

Each section is a ratio measured side by side in this run; earlier result files
are kept next to it for comparison.

    .venv/bin/python bench/run_all.py [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
import example_gen
import optimizer
import pipelines
import strategies


def _section(title: str, fn, *args) -> tuple[str, dict | None]:
  print(f"== {title}", flush=True)
  try:
    result = fn(*args)
    return f"## {title}\n\n{result['markdown']}\n", result
  except Exception:
    tb = traceback.format_exc()
    print(tb, file=sys.stderr)
    return f"## {title}\n\nFAILED:\n\n```\n{tb[-3000:]}\n```\n", None


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick", action="store_true", help="one run each and 200,000 rows only (for a smoke test)"
  )
  args = parser.parse_args(argv)
  eg_args = (
    ["--rows", "200000", "--repeats", "1", "--stock-repeats", "1"]
    if args.quick
    else ["--rows", "200000", "1000000", "--repeats", "2", "--stock-repeats", "2", "1"]
  )
  pipe_args = ["--repeats", "1" if args.quick else "2"]
  started = datetime.datetime.now(datetime.timezone.utc)
  sections = [
    _section("ExampleGen: ours vs stock CsvExampleGen", example_gen.main, eg_args),
    _section(
      "Full pipeline vs stock CsvExampleGen -> Trainer -> Pusher, and cached re-run",
      pipelines.main,
      pipe_args,
    ),
    _section("Optimizer variants on the digits model", optimizer.main, []),
    _section("DistributedTrainer strategies", strategies.main, []),
  ]
  m = common.machine()
  header = (
    f"# Benchmark results\n\nRun {started:%Y-%m-%d %H:%M} UTC on {m['cpus']} CPU cores, "
    f"{m['memory_gb']} GB memory, Python {m['python']} ({m['platform']}). Medians of the runs "
    "listed in each table; every ratio compares runs made side by side in this run.\n\n"
  )
  text = header + "\n".join(md for md, _ in sections)
  os.makedirs(common.RESULTS_DIR, exist_ok=True)
  stamp = started.strftime("%Y%m%dT%H%M%SZ")
  path = os.path.join(common.RESULTS_DIR, f"{stamp}.md")
  with open(path, "w") as f:
    f.write(text)
  with open(os.path.join(common.RESULTS_DIR, f"{stamp}.json"), "w") as f:
    json.dump({"machine": m, "sections": [r for _, r in sections]}, f, indent=2, default=str)
  shutil.copyfile(path, os.path.join(common.RESULTS_DIR, "latest.md"))
  print(f"wrote {path} and bench/results/latest.md")
  return 0 if all(r is not None for _, r in sections) else 1


if __name__ == "__main__":
  sys.exit(main())
