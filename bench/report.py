"""What writing the report page costs a run: report.html for a 200,000-row run's outputs.

Runs `pipeline/run_local.py` once on a generated CSV (64 integer features + label, as
bench/example_gen.py makes it), then writes the page again from that output folder in fresh
processes that first import what a run has already imported (TFX, TFDV, TFMA), so each time is
the page's own cost inside a run: reading the statistics, the evaluation, the history and the
manifest, drawing every chart, writing the file. Also reported: the time the run's own log
gives for the page it wrote, and the run's total.

    .venv/bin/python bench/report.py [--rows 200000] [--repeats 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
import example_gen

TARGET_S = 2.0
# Imports a run has done before it writes the page; then the page, timed alone.
_TIMED = """
import json, sys, time
import tensorflow_data_validation, tensorflow_model_analysis, tfx.v1
from components.report import run_page
started = time.perf_counter()
run_page.write_run_page(sys.argv[1])
print(json.dumps({"page_s": time.perf_counter() - started}))
"""
_LOGGED = re.compile(r"Report page written in ([0-9.]+) s")


def _run(rows: int, out: str) -> dict:
  data = os.path.join(out, "data")
  example_gen.make_csv(os.path.join(data, "data.csv"), rows)
  run_out = os.path.join(out, "run")
  cmd = [
    common.python(),
    os.path.join(common.REPO_ROOT, "pipeline", "run_local.py"),
    "--data-root",
    data,
    "--output-dir",
    run_out,
    "--quiet",
  ]
  measured = common.run_measured(cmd)
  with open(os.path.join(run_out, "run_summary.json")) as f:
    summary = json.load(f)
  logged = None
  for name in sorted(os.listdir(os.path.join(run_out, "logs"))):
    with open(os.path.join(run_out, "logs", name), errors="replace") as f:
      found = _LOGGED.findall(f.read())
    logged = float(found[-1]) if found else logged
  return {
    "out": run_out,
    "status": summary["status"],
    "run_s": summary["seconds"],
    "wall_s": measured["wall_s"],
    "logged_page_s": logged,
  }


def _page_s(run_out: str) -> float:
  proc = subprocess.run(
    [common.python(), "-c", _TIMED, run_out],
    capture_output=True,
    text=True,
    env=common.child_env(),
    cwd=common.REPO_ROOT,
    check=True,
  )
  return json.loads(proc.stdout.strip().splitlines()[-1])["page_s"]


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", type=int, default=200_000)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--out", help="work folder (default: a temporary one)")
  args = parser.parse_args(argv)
  out = args.out or tempfile.mkdtemp(prefix="bench-report-")
  run = _run(args.rows, out)
  pages = [_page_s(run["out"]) for _ in range(args.repeats)]
  page_kb = os.path.getsize(os.path.join(run["out"], "report.html")) / 1024
  result = {
    "rows": args.rows,
    "run": run,
    "page_s": pages,
    "page_median_s": common.median(pages),
    "page_kb": round(page_kb, 1),
    "target_s": TARGET_S,
    "machine": common.machine(),
  }
  share = result["page_median_s"] / run["run_s"]
  result["markdown"] = (
    common.markdown_table(
      ["rows", "run s", "page s (median)", "page s (the run's log)", "share of the run", "page KB"],
      [
        [
          f"{args.rows:,}",
          f"{run['run_s']:.1f}",
          f"{result['page_median_s']:.2f}",
          f"{run['logged_page_s']}",
          f"{share:.1%}",
          f"{page_kb:.0f}",
        ]
      ],
    )
    + f"\n\nTarget: the page in at most {TARGET_S:.0f} s of the run.\n"
  )
  return result


if __name__ == "__main__":
  found = main()
  command = "bench/report.py " + " ".join(sys.argv[1:])
  path = common.write_results("report", {"command": command, **found}, indent=2)
  print(found["markdown"])
  print(f"wrote {path}")
  sys.exit(0 if found["page_median_s"] <= TARGET_S else 1)
