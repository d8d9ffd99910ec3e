"""Benchmark: this project's CsvExampleGen against stock TFX CsvExampleGen, side by side.

Both run as the only component of a LocalDagRunner pipeline, in fresh processes,
on the same generated CSV (N rows x 64 integer features + label), alternating.
Both infer column types from the whole input (stock in a Beam combine, ours in
a streamed pre-pass), and write the same tf.Examples. Peak RSS sums the whole
process tree (the launcher and any Beam worker processes).

    .venv/bin/python bench/example_gen.py --rows 200000 1000000 --repeats 3
    # Stock takes about 10 minutes at 1M rows; 0 stock runs skips it at that size:
    .venv/bin/python bench/example_gen.py --rows 200000 1000000 --repeats 2 --stock-repeats 2 0
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

NUM_FEATURES = 64


def make_csv(path: str, rows: int, seed: int = 0) -> None:
  """Writes rows x (64 int features in 0..16 + label in 0..9), like scaled-up digits."""
  rng = np.random.default_rng(seed)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    f.write(",".join([f"f{i}" for i in range(NUM_FEATURES)] + ["label"]) + "\n")
    for start in range(0, rows, 50_000):
      n = min(50_000, rows - start)
      block = np.concatenate(
        [rng.integers(0, 17, size=(n, NUM_FEATURES)), rng.integers(0, 10, size=(n, 1))], axis=1
      )
      np.savetxt(f, block, fmt="%d", delimiter=",")
  os.replace(path + ".tmp", path)


def bench(rows: int, repeats: int, stock_repeats: int, data_root: str) -> dict:
  data = os.path.join(data_root, f"rows{rows}")
  csv_path = os.path.join(data, "data.csv")
  if not os.path.exists(csv_path):
    make_csv(csv_path, rows)
  runs = {"ours": [], "stock": []}
  for i in range(max(repeats, stock_repeats)):
    for impl in ("stock", "ours"):
      if (impl == "stock" and i >= stock_repeats) or (impl == "ours" and i >= repeats):
        continue
      out = tempfile.mkdtemp(prefix=f"bench-eg-{impl}-")
      try:
        r = common.run_measured(
          [
            common.python(),
            os.path.join(common.REPO_ROOT, "bench", "example_gen_once.py"),
            "--impl",
            impl,
            "--data",
            data,
            "--out",
            out,
          ]
        )
      finally:
        shutil.rmtree(out, ignore_errors=True)
      if r["returncode"] != 0:
        raise RuntimeError(f"{impl} ExampleGen failed:\n{r.get('stderr_tail')}")
      print(
        f"  rows={rows} {impl} run {i + 1}: {r['pipeline_s']:.1f} s "
        f"({r['cpu_s']:.1f} CPU s), peak RSS {r['peak_rss_mb']:.0f} MB",
        flush=True,
      )
      runs[impl].append(r)
  size_mb = os.path.getsize(csv_path) / 2**20
  out = {"rows": rows, "csv_mb": round(size_mb, 1)}
  for impl, rs in runs.items():
    if not rs:
      continue
    secs = common.median([r["pipeline_s"] for r in rs])
    out[impl] = {
      "runs": len(rs),
      "median_s": secs,
      "rows_per_s": rows / secs,
      "median_cpu_s": common.median([r["cpu_s"] for r in rs]),
      "median_peak_rss_mb": common.median([r["peak_rss_mb"] for r in rs]),
      "output_mb": rs[0]["output_mb"],
      "all_s": [round(r["pipeline_s"], 2) for r in rs],
    }
  if "stock" in out and "ours" in out:
    out["speedup"] = out["stock"]["median_s"] / out["ours"]["median_s"]
  return out


def to_markdown(results: list[dict]) -> str:
  rows = []
  for r in results:
    for impl in ("stock", "ours"):
      if impl not in r:
        continue
      x = r[impl]
      rows.append(
        [
          f"{r['rows']:,}",
          f"{r['csv_mb']} MB",
          impl,
          x["runs"],
          x["median_s"],
          x["median_cpu_s"],
          f"{x['rows_per_s']:,.0f}",
          f"{x['median_peak_rss_mb']:,.0f}",
          f"{x['output_mb']:.1f}",
          f"{r['speedup']:.2f}x" if impl == "ours" and "speedup" in r else "",
        ]
      )
  return common.markdown_table(
    [
      "rows",
      "CSV",
      "ExampleGen",
      "runs",
      "median s",
      "median CPU s",
      "rows/s",
      "peak RSS MB",
      "output MB",
      "speed-up vs stock",
    ],
    rows,
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 1_000_000])
  parser.add_argument("--repeats", type=int, default=3, help="runs of ours per size")
  parser.add_argument(
    "--stock-repeats",
    type=int,
    nargs="+",
    default=[3, 1],
    help="runs of stock per size (stock takes minutes at 1M rows)",
  )
  parser.add_argument("--data-root", default=os.path.join(tempfile.gettempdir(), "tfxkit-bench"))
  parser.add_argument("--json", help="also write the results here")
  args = parser.parse_args(argv)
  stock = args.stock_repeats + [args.stock_repeats[-1]] * len(args.rows)
  results = [bench(n, args.repeats, stock[i], args.data_root) for i, n in enumerate(args.rows)]
  report = {"machine": common.machine(), "results": results, "markdown": to_markdown(results)}
  print(report["markdown"])
  if args.json:
    with open(args.json, "w") as f:
      json.dump(report, f, indent=2)
  return report


if __name__ == "__main__":
  main()
