"""Benchmark: the Optimizer component on the digits model, every variant, checked against targets.

Runs the real pipeline (`run_local.py`) with every variant switched on, QAT included,
and reads the Optimizer's report from the run summary.

    .venv/bin/python bench/optimizer.py
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

ALL_VARIANTS = (
  "pruned,tflite_float32,tflite_dynamic_range,tflite_float16,tflite_int8,"
  "pruned_int8,qat,tensorrt_fp16"
)


def _by_name(report: dict) -> dict:
  return {v["name"]: v for v in report["variants"]}


def targets(report: dict) -> list[list]:
  """The issue's three targets, each with the measured figure and whether it is met."""
  v = _by_name(report)
  base = report["baseline"]
  rows = []

  def ok(variant):
    return variant in v and v[variant].get("status") == "ok"

  if ok("tflite_int8") and ok("tflite_float32"):
    ratio = v["tflite_int8"]["size_bytes"] / v["tflite_float32"]["size_bytes"]
    drop = v["tflite_int8"].get("accuracy_drop_pp")
    rows.append(
      [
        "int8 TFLite size / float32 TFLite size",
        "<= 0.30x, drop <= 1 pp",
        f"{ratio:.3f}x, drop {drop:+.2f} pp",
        ratio <= 0.30 and drop <= 1.0,
      ]
    )
  if ok("pruned_int8"):
    ratio = v["pruned_int8"]["gzipped_size_bytes"] / base["gzipped_size_bytes"]
    rows.append(
      ["pruned+int8 gzipped / baseline gzipped", "<= 0.10x", f"{ratio:.3f}x", ratio <= 0.10]
    )
  if ok("tflite_int8"):
    ratio = v["tflite_int8"]["latency_ms_p50"] / base["latency_ms_p50"]
    rows.append(
      [
        "int8 p50 latency / TensorFlow p50 latency (batch 1)",
        "<= 0.5x",
        f"{ratio:.3f}x",
        ratio <= 0.5,
      ]
    )
  return rows


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--variants", default=ALL_VARIANTS)
  parser.add_argument("--json")
  args = parser.parse_args(argv)
  out = tempfile.mkdtemp(prefix="bench-opt-")
  try:
    r = common.run_measured(
      [
        common.python(),
        os.path.join(common.REPO_ROOT, "pipeline", "run_local.py"),
        "--output-dir",
        out,
        "--optimizer-variants",
        args.variants,
        "--quiet",
      ]
    )
    if r["returncode"] != 0:
      raise RuntimeError(f"run_local.py failed:\n{r.get('stderr_tail')}")
    with open(os.path.join(out, "run_summary.json")) as f:
      report = json.load(f)["optimizer"]
  finally:
    shutil.rmtree(out, ignore_errors=True)
  from components.optimizer import report as report_lib

  table = report_lib.markdown(report).replace("# Optimizer report\n", "")
  checks = targets(report)
  md = (
    table
    + "\n"
    + common.markdown_table(
      ["target", "goal", "measured", "met"],
      [[*row[:3], "yes" if row[3] else "**no**"] for row in checks],
    )
  )
  result = {"machine": common.machine(), "report": report, "targets": checks, "markdown": md}
  print(md)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2, default=str)
  return result


if __name__ == "__main__":
  main()
