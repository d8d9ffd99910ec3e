"""Benchmark: the full default pipeline against the stock three-component TFX pipeline.

Both train the same network on the bundled digits CSV for the same steps, in
fresh processes, alternating. Each pipeline is then run a second time on the same
output folder to measure the cached re-run.

    .venv/bin/python bench/pipelines.py --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

DIGITS = os.path.join(common.REPO_ROOT, "data", "digits")


def _ours(out: str, train_steps: int, eval_steps: int) -> dict:
  cmd = [
    common.python(),
    os.path.join(common.REPO_ROOT, "pipeline", "run_local.py"),
    "--output-dir",
    out,
    "--train-steps",
    str(train_steps),
    "--eval-steps",
    str(eval_steps),
    "--quiet",
  ]
  r = common.run_measured(cmd)
  if r["returncode"] != 0:
    raise RuntimeError(f"run_local.py failed:\n{r.get('stderr_tail')}")
  with open(os.path.join(out, "run_summary.json")) as f:
    summary = json.load(f)
  r["pipeline_s"] = summary["seconds"]
  r["summary"] = summary
  return r


def _stock(out: str, train_steps: int, eval_steps: int) -> dict:
  cmd = [
    common.python(),
    os.path.join(common.REPO_ROOT, "bench", "stock_pipeline_once.py"),
    "--data",
    DIGITS,
    "--out",
    out,
    "--train-steps",
    str(train_steps),
    "--eval-steps",
    str(eval_steps),
  ]
  r = common.run_measured(cmd)
  if r["returncode"] != 0:
    raise RuntimeError(f"stock pipeline failed:\n{r.get('stderr_tail')}")
  return r


def run(repeats: int, train_steps: int, eval_steps: int) -> dict:
  runs = collections.defaultdict(list)
  for i in range(repeats):
    for name, fn in (("stock", _stock), ("ours", _ours)):
      out = tempfile.mkdtemp(prefix=f"bench-pipe-{name}-")
      try:
        first = fn(out, train_steps, eval_steps)
        rerun = fn(out, train_steps, eval_steps)
      finally:
        shutil.rmtree(out, ignore_errors=True)
      print(
        f"  {name} run {i + 1}: first {first['pipeline_s']:.1f} s, "
        f"re-run {rerun['pipeline_s']:.1f} s",
        flush=True,
      )
      runs[name].append((first, rerun))
  result = {"train_steps": train_steps, "eval_steps": eval_steps, "repeats": repeats}
  for name, pairs in runs.items():
    firsts = [p[0]["pipeline_s"] for p in pairs]
    reruns = [p[1]["pipeline_s"] for p in pairs]
    result[name] = {
      "first_s": common.median(firsts),
      "rerun_s": common.median(reruns),
      "rerun_ratio": common.median([b / a for a, b in zip(firsts, reruns, strict=True)]),
      "process_wall_s": common.median([p[0]["wall_s"] for p in pairs]),
      "peak_rss_mb": common.median([p[0]["peak_rss_mb"] for p in pairs]),
      "all_first_s": [round(x, 2) for x in firsts],
      "all_rerun_s": [round(x, 2) for x in reruns],
    }
  ours = [p[0]["summary"] for p in runs["ours"]]
  per_component = collections.defaultdict(list)
  for s in ours:
    for c in s["components"]:
      per_component[c["name"]].append(c["seconds"])
  result["ours"]["components_s"] = {k: common.median(v) for k, v in per_component.items()}
  result["ours"]["eval_accuracy"] = common.median(
    [s["eval_metrics"].get("sparse_categorical_accuracy", float("nan")) for s in ours]
  )
  result["ours"]["rerun_pushed"] = [p[1]["summary"]["pushed"]["pushed"] for p in runs["ours"]]
  result["ratio_first"] = result["ours"]["first_s"] / result["stock"]["first_s"]
  return result


def to_markdown(r: dict) -> str:
  rows = []
  for name in ("stock", "ours"):
    x = r[name]
    rows.append(
      [name, x["first_s"], x["rerun_s"], f"{x['rerun_ratio']:.2f}x", f"{x['peak_rss_mb']:,.0f}"]
    )
  table = common.markdown_table(
    ["pipeline", "first run s (median)", "cached re-run s", "re-run / first", "peak RSS MB"], rows
  )
  comp = common.markdown_table(
    ["component (ours)", "median s"], [[k, v] for k, v in r["ours"]["components_s"].items()]
  )
  return (
    f"{table}\n\nOurs / stock, first run: **{r['ratio_first']:.2f}x** the time "
    f"({r['repeats']} runs each, {r['train_steps']} train steps). "
    f"Ours reaches eval accuracy {r['ours']['eval_accuracy']:.4f}; re-runs pushed a new "
    f"version: {r['ours']['rerun_pushed']}.\n\nWhere our time goes (what the extra time buys):\n\n"
    f"{comp}\n"
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--train-steps", type=int, default=600)
  parser.add_argument("--eval-steps", type=int, default=50)
  parser.add_argument("--json")
  args = parser.parse_args(argv)
  result = run(args.repeats, args.train_steps, args.eval_steps)
  report = {"machine": common.machine(), "result": result, "markdown": to_markdown(result)}
  print(report["markdown"])
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=2, default=str)
  return report


if __name__ == "__main__":
  main()
