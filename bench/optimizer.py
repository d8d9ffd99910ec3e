"""Benchmark: the Optimizer on the default digits model, checked against the issue's targets.

Reads the Optimizer's report (report.json, as run_summary.json carries it) of pipeline runs
with `run_local.py`'s defaults: `make bench` passes the first runs of the full-pipeline
benchmark, so the model is the one that benchmark trained; alone, this script runs the
pipeline itself.

    .venv/bin/python bench/optimizer.py [--repeats 2] [--variants pruned,tflite_int8,...]
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

from core import defaults

ELAPSED_TARGET_S = 6.0
INT8_SIZE_TARGET = 0.30
PRUNED_INT8_GZIP_TARGET = 0.10
LATENCY_TARGET = 0.5


def _pipeline_run(variants: str | None) -> tuple[dict, float]:
  out = tempfile.mkdtemp(prefix="bench-opt-")
  cmd = [
    common.python(),
    os.path.join(common.REPO_ROOT, "pipeline", "run_local.py"),
    "--output-dir",
    out,
    "--quiet",
  ]
  if variants:
    cmd += ["--optimizer-variants", variants]
  try:
    r = common.run_measured(cmd)
    if r["returncode"] != 0:
      raise RuntimeError(f"run_local.py failed:\n{r.get('stderr_tail')}")
    with open(os.path.join(out, "run_summary.json")) as f:
      summary = json.load(f)
  finally:
    shutil.rmtree(out, ignore_errors=True)
  seconds = next(c["seconds"] for c in summary["components"] if c["name"] == "Optimizer")
  return summary["optimizer"], seconds


def _variant(report: dict, name: str) -> dict | None:
  for entry in report.get("variants", []):
    if entry["name"] == name and entry.get("status") == "ok":
      return entry
  return None


def figures(report: dict) -> dict:
  """The issue's figures from one Optimizer report (None where a variant did not run)."""
  base = report["baseline"]
  int8, f32 = _variant(report, defaults.TFLITE_INT8), _variant(report, defaults.TFLITE_FLOAT32)
  pruned, pruned_int8 = _variant(report, defaults.PRUNED), _variant(report, defaults.PRUNED_INT8)
  out = {
    "elapsed_s": report.get("elapsed_seconds"),
    "int8_over_float32_size": int8["size_bytes"] / f32["size_bytes"] if int8 and f32 else None,
    "int8_drop": int8.get("metric_drop") if int8 else None,
    "pruned_int8_over_baseline_gzip": (
      pruned_int8["gzipped_size_bytes"] / base["gzipped_size_bytes"] if pruned_int8 else None
    ),
    "int8_over_baseline_latency": (
      int8["latency_ms_p50"] / base["latency_ms_p50"] if int8 else None
    ),
  }
  for name, entry in ((defaults.PRUNED, pruned), (defaults.PRUNED_INT8, pruned_int8)):
    out[f"{name}_drop"] = entry.get("metric_drop") if entry else None
    out[f"{name}_blessed"] = bool(entry and entry.get("blessed"))
  return out


def summarize(reports: list[dict], component_s: list[float]) -> dict:
  """Medians over runs of the figures, and every run's gate results."""
  per_run = [figures(r) for r in reports]

  def med(key):
    values = [f[key] for f in per_run if f[key] is not None]
    return common.median(values) if values else None

  keys = per_run[0].keys()
  result = {k: med(k) for k in keys if not k.endswith("_blessed")}
  result["component_s"] = common.median(component_s)
  result["runs"] = len(reports)
  result["per_run"] = per_run
  result["all_component_s"] = component_s
  for name in (defaults.PRUNED, defaults.PRUNED_INT8):
    result[f"{name}_blessed_runs"] = [f[f"{name}_blessed"] for f in per_run]
  return result


def _met(value, target, below=True) -> str:
  if value is None:
    return "not measured"
  return "yes" if (value <= target if below else value >= target) else "**no**"


def to_markdown(summary: dict, reports: list[dict]) -> str:
  from components.optimizer import report as report_lib

  s = summary
  n = s["runs"]

  def x(v, spec=".3f", unit="x"):
    return "n/a" if v is None else f"{v:{spec}}{unit}"

  def gate(name):
    drops = ", ".join(
      "n/a" if f[f"{name}_drop"] is None else f"{f[f'{name}_drop']:+.2f}" for f in s["per_run"]
    )
    passed = s[f"{name}_blessed_runs"]
    return [
      f"{name} within the 1-point accuracy gate",
      "drop <= 1.0 point",
      f"passed in {sum(passed)} of {len(passed)} runs (drops: {drops} points)",
      "yes" if all(passed) else "**no**",
    ]

  rows = [
    [
      "Optimizer's own time (report.json `elapsed_seconds`)",
      f"<= {ELAPSED_TARGET_S:.0f} s",
      x(s["elapsed_s"], ".2f", " s")
      + f" (runs: {', '.join(x(f['elapsed_s'], '.2f', ' s') for f in s['per_run'])})",
      _met(s["elapsed_s"], ELAPSED_TARGET_S),
    ],
    [
      "Optimizer component in the pipeline (run_summary.json)",
      "",
      x(s["component_s"], ".2f", " s")
      + f" (runs: {', '.join(f'{v:.2f} s' for v in s['all_component_s'])})",
      "",
    ],
    [
      "int8 TFLite size / float32 TFLite size",
      f"<= {INT8_SIZE_TARGET:.2f}x",
      x(s["int8_over_float32_size"]) + f", int8 accuracy drop {x(s['int8_drop'], '+.2f', '')}"
      " points",
      _met(s["int8_over_float32_size"], INT8_SIZE_TARGET),
    ],
    [
      "pruned_int8 gzipped / baseline gzipped",
      f"<= {PRUNED_INT8_GZIP_TARGET:.2f}x",
      x(s["pruned_int8_over_baseline_gzip"]),
      _met(s["pruned_int8_over_baseline_gzip"], PRUNED_INT8_GZIP_TARGET),
    ],
    [
      "int8 TFLite p50 latency / TensorFlow baseline p50 latency, batch 1",
      f"<= {LATENCY_TARGET:.1f}x",
      x(s["int8_over_baseline_latency"]),
      _met(s["int8_over_baseline_latency"], LATENCY_TARGET),
    ],
    gate(defaults.PRUNED),
    gate(defaults.PRUNED_INT8),
  ]
  runs = f"median of {n} runs" if n > 1 else "1 run"
  targets = common.markdown_table(["figure", "target", f"measured ({runs})", "met"], rows)
  # Variants that did not run are listed under the table with their reason.
  first = reports[0]
  ran = {**first, "variants": [v for v in first["variants"] if v.get("status") == "ok"]}
  detail = report_lib.markdown(ran).replace("# Optimizer report\n", "").strip()
  not_run = [
    f"- {v['name']}: {v.get('status')}, {v.get('reason', '')}"
    for v in first["variants"]
    if v.get("status") != "ok"
  ]
  return (
    f"{targets}\n\nEach ratio is variant / reference (below 1: the variant is smaller or "
    "faster), from the Optimizer's report of each pipeline run; sizes do not vary between "
    "runs, latencies and times do. The baseline is the trained Keras model as TensorFlow runs "
    "it; *Optimizer's own time* covers measuring the baseline and building, measuring and "
    "gating every default variant, *component* adds loading the model and the data.\n\n"
    f"The first run's report in full (accuracy on the eval split; x columns are variant / "
    f"baseline):\n\n{detail}\n"
    + (f"\nVariants that did not run:\n\n{chr(10).join(not_run)}\n" if not_run else "")
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument("--variants", default=None, help="run_local.py's --optimizer-variants")
  parser.add_argument("--json")
  args = parser.parse_args(argv)
  runs = [_pipeline_run(args.variants) for _ in range(args.repeats)]
  return report([r for r, _ in runs], [s for _, s in runs], args.json)


def report(reports: list[dict], component_s: list[float], json_path: str | None = None) -> dict:
  """The section for `make bench` from Optimizer reports and the component's seconds."""
  summary = summarize(reports, component_s)
  result = {
    "machine": common.machine(),
    "summary": summary,
    "reports": reports,
    "markdown": to_markdown(summary, reports),
  }
  print(result["markdown"])
  if json_path:
    with open(json_path, "w") as f:
      json.dump(result, f, indent=2, default=str)
  return result


if __name__ == "__main__":
  main()
