"""Writes the Optimizer report as report.json, report.md (table) and report.png (plots)."""

import json
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from core import properties

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_PNG = "report.png"


def _fmt(value, spec: str) -> str:
  return "" if value is None else format(value, spec)


def _row(entry: dict, metric: str) -> str:
  if entry.get("status") != "ok":
    reason = entry.get("reason", "").replace("|", "\\|").replace("\n", " ")
    # 15 columns: name, status, runtime, 11 empty measurement cells, then the reason as note.
    return f"| {entry['name']} | {entry.get('status')} | {entry.get('runtime', '')} |" + (
      " |" * 11 + f" {reason} |"
    )
  ratios = entry.get("ratios", {})
  value = entry.get("metric_value")
  shown = value * 100 if metric == "accuracy" else value
  notes = []
  if entry.get("select_tf_ops"):
    notes.append("needs Select TF ops")
  if entry.get("preprocessing_included") is False:
    notes.append("takes transformed features")
  if entry.get("gate_reason"):
    notes.append("not blessed: " + entry["gate_reason"])
  cells = [
    entry["name"],
    entry["status"],
    entry["runtime"],
    _fmt(shown, ".4g"),
    _fmt(entry.get("metric_drop"), "+.2f"),
    _fmt(entry.get("agreement", 1.0) * 100, ".1f"),
    _fmt(entry["size_bytes"] / 1024, ".1f"),
    _fmt(entry["gzipped_size_bytes"] / 1024, ".1f"),
    _fmt(ratios.get("size_bytes"), ".3f"),
    _fmt(ratios.get("gzipped_size_bytes"), ".3f"),
    _fmt(entry["latency_ms_p50"], ".3f"),
    _fmt(entry["latency_ms_p90"], ".3f"),
    _fmt(ratios.get("latency_ms_p50"), ".3f"),
    "yes" if entry.get("blessed") else ("" if entry["name"] == "baseline" else "no"),
    "; ".join(notes),
  ]
  return "| " + " | ".join(cells) + " |"


def _sample_line(report: dict, metric: str) -> str:
  """Which rows were measured, and how precisely the baseline's metric is known from them."""
  sampling = report.get("sampling") or {}
  evals = sampling.get(properties.EVAL_SPLIT)
  rows = report.get("rows", {}).get(properties.EVAL_SPLIT, 0)
  if evals and evals.get("batch_every", 1) > 1:
    drawn = (
      f"{evals['rows']:,} of the split's {evals['of']:,} (every {evals['every']}th record of "
      f"every {evals['batch_every']}th record batch, from random starts)"
    )
  elif evals and evals.get("every", 1) > 1:
    drawn = (
      f"{evals['rows']:,} of the split's {evals['of']:,} (every {evals['every']}th record from "
      "a random start)"
    )
  else:
    drawn = f"all {rows:,} rows of the split"
  line = f"Eval rows measured: {drawn}."
  ci = (report.get("baseline") or {}).get("ci95")
  if ci is not None:
    unit = "accuracy points" if metric == "accuracy" else "percent of the RMSE"
    line += (
      f" On them the baseline's {metric} is known to ±{ci:.2f} {unit} (95% confidence "
      "interval); a variant's drop is measured on the same rows."
    )
  train = sampling.get(properties.TRAIN_SPLIT)
  if train:
    line += (
      f" Calibration and fine-tuning rows: {train['rows']:,} of the train split's "
      f"{train['of']:,}, spread over all of it."
    )
  return line


def markdown(report: dict) -> str:
  """Renders the report as a Markdown table, one row per variant after the baseline.

  Args:
    report: the dict optimizer_lib.optimize() or skipped_report() returned.

  Returns:
    The Markdown text.
  """
  lines = ["# Optimizer report", ""]
  if report.get("status") != "ok":
    lines += [f"Nothing was optimized: {report.get('reason')}", ""]
  config = report.get("config", {})
  metric = report.get("metric", "accuracy")
  unit = "accuracy %" if metric == "accuracy" else metric
  drop = "points" if metric == "accuracy" else "percent of the RMSE"
  inside = (
    "yes"
    if report.get("preprocessing_included", True)
    else "no (the transform graph ships with them)"
  )
  agreement = config.get("min_agreement")
  agree = f" and agreeing with it on at least {agreement:.0%} of the rows" if agreement else ""
  lines += [
    f"Task: {report.get('task')}. Blessing: {metric} at most {config.get('max_accuracy_drop')} "
    f"{drop} worse than the baseline{agree}. Latency: batch 1, {config.get('latency_runs')} "
    f"timed runs. Preprocessing inside the variants: {inside}.",
    "",
    _sample_line(report, metric),
    "",
    f"Sizes: {report.get('size_basis')}.",
    "",
    f"| variant | status | runtime | {unit} | drop | agree % | size KiB | gzip KiB "
    "| size x | gzip x | p50 ms | p90 ms | p50 x | blessed | note |",
    "|" + "---|" * 15,
    _row(report["baseline"], metric),
  ]
  lines += [_row(entry, metric) for entry in report["variants"]]
  blessed = ", ".join(report.get("blessed_variants", [])) or "none"
  lines += ["", f"Blessed variants: {blessed}.", ""]
  if "elapsed_seconds" in report:
    lines += [f"Optimizer run time: {report['elapsed_seconds']:.1f} s.", ""]
  return "\n".join(lines)


def plot(report: dict, path: str) -> None:
  """Draws accuracy against gzipped size and against batch-1 latency, one point per variant.

  Args:
    report: the optimizer report.
    path: the PNG file to write.
  """
  points = [report["baseline"], *report["variants"]]
  points = [p for p in points if p.get("status") == "ok"]
  figure, axes = plt.subplots(1, 2, figsize=(12, 5))
  panels = (
    (axes[0], "gzipped_size_bytes", "gzipped size (KiB)", 1 / 1024),
    (axes[1], "latency_ms_p50", "batch-1 latency p50 (ms)", 1.0),
  )
  for axis, key, label, scale in panels:
    for index, point in enumerate(points):
      x = point[key] * scale
      y = point["metric_value"] * (100 if report.get("metric", "accuracy") == "accuracy" else 1)
      marker = "s" if point["name"] == "baseline" else "o"
      color = "tab:green" if point.get("blessed") or point["name"] == "baseline" else "tab:red"
      axis.scatter([x], [y], marker=marker, color=color)
      # Variants often share an accuracy; staggered labels stay readable when points overlap.
      offset = (5, 5 - 11 * (index % 5))
      axis.annotate(point["name"], (x, y), textcoords="offset points", xytext=offset, fontsize=8)
    axis.set_xscale("log")
    axis.set_xlabel(label)
    axis.set_ylabel(f"eval {report.get('metric', 'accuracy')}")
    axis.grid(True, alpha=0.3)
    if not points:
      axis.text(0.5, 0.5, "no variant measured", ha="center", transform=axis.transAxes)
  axes[0].set_title(f"{report.get('metric', 'accuracy')} vs size (green: blessed)")
  axes[1].set_title(f"{report.get('metric', 'accuracy')} vs latency (green: blessed)")
  figure.tight_layout()
  figure.savefig(path, dpi=100, format="png")
  plt.close(figure)


def _replace_atomically(path: str, write) -> None:
  tmp_path = path + ".tmp"
  write(tmp_path)
  os.replace(tmp_path, path)


def write_report(report: dict, report_dir: str) -> dict[str, str]:
  """Writes report.json, report.md and report.png into `report_dir`.

  Args:
    report: the optimizer report.
    report_dir: an existing folder.

  Returns:
    {file name: path} of the written files.
  """
  paths = {name: os.path.join(report_dir, name) for name in (REPORT_JSON, REPORT_MD, REPORT_PNG)}

  def write_text(text: str):
    def write(path: str) -> None:
      with open(path, "w") as f:
        f.write(text)

    return write

  _replace_atomically(paths[REPORT_JSON], write_text(json.dumps(report, indent=2)))
  _replace_atomically(paths[REPORT_MD], write_text(markdown(report)))
  _replace_atomically(paths[REPORT_PNG], lambda p: plot(report, p))
  return paths
