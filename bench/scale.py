"""The whole pipeline at scale: ours and the stock full pipeline, each component against its floor.

One table shape: 64 integer columns (`pixel_0`..`pixel_63`, 0..16) and a 10-class `label`
that a model can learn (the class whose random linear score is highest, with noise), at 20,000,
200,000 and 1,000,000 rows. Ours is `pipeline/run_local.py` with its defaults; the stock full
pipeline is CsvExampleGen, StatisticsGen, SchemaGen, ExampleValidator, Trainer, Resolver,
Evaluator and Pusher (`stock_pipeline_once.py --full`). Runs alternate, each in a fresh process.

Each component of ours is set against its floor: the cheapest honest way to do its job on the
same data, measured in a fresh process after the run (`python bench/scale.py floors ...`):
  - CsvExampleGen: read the CSV with pyarrow, encode tf.Examples with tfx_bsl, write them
    gzipped;
  - StatisticsGen: decode the Examples to Arrow with tfx_bsl and make one pass of Arrow
    compute over every column (count, nulls, min, max, mean, variance);
  - DistributedTrainer: the fit itself (the Model artifact's train_seconds);
  - Evaluator: decode the eval split and one batched predict of the trained model;
  - Optimizer: converting each variant (the report's convert_seconds, summed).

    .venv/bin/python bench/scale.py [--rows 20000 200000 1000000] [--stock-rows 20000 200000]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

NUM_FEATURES = 64
NUM_CLASSES = 10
# The stock Trainer's steps (its module trains one epoch of this many batches of 64).
STOCK_TRAIN_STEPS = 2000
COMPONENTS = (
  "CsvExampleGen",
  "StatisticsGen",
  "SchemaGen",
  "ExampleValidator",
  "LiveModel",
  "DistributedTrainer",
  "Evaluator",
  "Optimizer",
  "Pusher",
)


def make_csv(path: str, rows: int, seed: int = 0) -> None:
  """Writes rows x (64 ints in 0..16 and a learnable 10-class label), in blocks."""
  rng = np.random.default_rng(seed)
  weights = np.random.default_rng(1234).normal(size=(NUM_FEATURES, NUM_CLASSES))
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path + ".tmp", "w") as f:
    f.write(",".join([f"pixel_{i}" for i in range(NUM_FEATURES)] + ["label"]) + "\n")
    for start in range(0, rows, 50_000):
      n = min(50_000, rows - start)
      x = rng.integers(0, 17, size=(n, NUM_FEATURES))
      score = (x - 8) @ weights + rng.normal(scale=8.0, size=(n, NUM_CLASSES))
      label = score.argmax(axis=1)[:, None]
      np.savetxt(f, np.concatenate([x, label], axis=1), fmt="%d", delimiter=",")
  os.replace(path + ".tmp", path)


# ----------------------------------------------------------------------------- runs


def run_ours(data: str, out: str) -> dict:
  cmd = [common.python(), os.path.join(common.REPO_ROOT, "pipeline", "run_local.py")]
  cmd += ["--data-root", data, "--output-dir", out, "--quiet"]
  measured = common.run_measured(cmd, timeout=7200)
  with open(os.path.join(out, "run_summary.json")) as f:
    summary = json.load(f)
  if summary.get("status") != "succeeded":
    raise RuntimeError(f"our pipeline failed: {summary.get('error')}")
  return {
    "pipeline_s": summary["seconds"],
    "process_s": measured["wall_s"],
    "cpu_s": measured["process_cpu_s"],
    "peak_rss_mb": measured["peak_rss_mb"],
    "peak_pss_mb": measured["peak_pss_mb"],
    "peak_processes": measured["peak_processes"],
    "components": {c["name"]: c["seconds"] for c in summary["components"]},
    "accuracy": summary["eval_metrics"].get("sparse_categorical_accuracy"),
  }


def run_stock(data: str, out: str) -> dict:
  cmd = [common.python(), os.path.join(common.REPO_ROOT, "bench", "stock_pipeline_once.py")]
  cmd += ["--full", "--data", data, "--out", out, "--train-steps", str(STOCK_TRAIN_STEPS)]
  measured = common.run_measured(cmd, timeout=7200)
  if measured["returncode"] != 0:
    raise RuntimeError(f"the stock pipeline failed: {measured.get('stderr_tail')}")
  return {
    "pipeline_s": measured["pipeline_s"],
    "process_s": measured["wall_s"],
    "cpu_s": measured["process_cpu_s"],
    "peak_rss_mb": measured["peak_rss_mb"],
    "peak_pss_mb": measured["peak_pss_mb"],
    "peak_processes": measured["peak_processes"],
    "accuracy": measured.get("eval_accuracy"),
  }


def run_floors(csv_path: str, out: str) -> dict:
  cmd = [common.python(), os.path.abspath(__file__), "floors", "--csv", csv_path, "--out", out]
  measured = common.run_measured(cmd, timeout=7200)
  if measured["returncode"] != 0:
    raise RuntimeError(f"the floors failed: {measured.get('stderr_tail')}")
  return {k: measured[k] for k in ("CsvExampleGen", "StatisticsGen", "Evaluator") if k in measured}


# ----------------------------------------------------------------------------- floors


def _timed(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def floors(csv_path: str, out: str) -> dict:
  """The floors of the components that read the data, measured in this process."""
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  import pyarrow as pa
  import pyarrow.compute as pc
  import pyarrow.csv as pv
  import tensorflow as tf
  from tfx_bsl.coders import example_coder

  scratch = tempfile.mkdtemp(prefix="floor-")
  try:

    def example_gen():
      table = pv.read_csv(csv_path)
      encoder = example_coder.RecordBatchToExamplesEncoder()
      with tf.io.TFRecordWriter(os.path.join(scratch, "out.gz"), options="GZIP") as writer:
        for batch in table.to_batches(max_chunksize=65_536):
          # tf.Example features are lists: one value per cell.
          offsets = pa.array(np.arange(batch.num_rows + 1, dtype=np.int32))
          lists = [pa.ListArray.from_arrays(offsets, column) for column in batch.columns]
          for record in encoder.encode(pa.RecordBatch.from_arrays(lists, batch.schema.names)):
            writer.write(record)

    examples = sorted(
      glob.glob(os.path.join(out, "pipeline_root", "CsvExampleGen", "examples", "*"))
    )[-1]

    def split_batches(split: str):
      files = sorted(glob.glob(os.path.join(examples, f"Split-{split}", "*")))
      decoder = example_coder.ExamplesToRecordBatchDecoder()
      dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(65_536)
      for records in dataset.as_numpy_iterator():
        yield decoder.DecodeBatch(list(records))

    def statistics():
      for split in ("train", "eval"):
        for batch in split_batches(split):
          for column in batch.columns:
            is_list = pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
            values = pc.list_flatten(column) if is_list else column
            pc.min_max(values), pc.mean(values), pc.variance(values), column.null_count

    model_dir = sorted(
      glob.glob(os.path.join(out, "pipeline_root", "DistributedTrainer", "model", "*"))
    )[-1]
    loaded = tf.saved_model.load(os.path.join(model_dir, "Format-Serving"))
    serve = loaded.signatures["serving_default"]

    def evaluate():
      files = sorted(glob.glob(os.path.join(examples, "Split-eval", "*")))
      dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(8192)
      for records in dataset:
        serve(examples=records)

    evaluate()  # The first call traces the signature; a component pays that once too.
    return {
      "CsvExampleGen": _timed(example_gen),
      "StatisticsGen": _timed(statistics),
      "Evaluator": _timed(evaluate),
    }
  finally:
    shutil.rmtree(scratch, ignore_errors=True)


def _own_floors(out: str) -> dict:
  """Trainer and Optimizer floors from what the run recorded: fit time, conversion times."""
  result = {}
  pattern = os.path.join(out, "pipeline_root", "DistributedTrainer", "model_run", "*")
  for path in sorted(glob.glob(os.path.join(pattern, "distributed_trainer", "results", "*.json"))):
    with open(path) as f:
      train = json.load(f).get("train_seconds")
    if train:
      result["DistributedTrainer"] = float(train)
  reports = sorted(
    glob.glob(os.path.join(out, "pipeline_root", "Optimizer", "report", "*", "report.json"))
  )
  if reports:
    with open(reports[-1]) as f:
      report = json.load(f)
    result["Optimizer"] = sum(v.get("convert_seconds", 0.0) for v in report["variants"])
  return result


# ----------------------------------------------------------------------------- the table


def bench(rows_list: list[int], stock_rows: list[int], repeats: int, data_root: str) -> dict:
  results = []
  for rows in rows_list:
    data = os.path.join(data_root, f"rows{rows}")
    csv_path = os.path.join(data, "data.csv")
    if not os.path.exists(csv_path):
      make_csv(csv_path, rows)
    entry = {"rows": rows, "ours": [], "stock": [], "floors": None}
    for _ in range(repeats):
      if rows in stock_rows:
        out = tempfile.mkdtemp(prefix="bench-scale-stock-")
        try:
          entry["stock"].append(run_stock(data, out))
        finally:
          shutil.rmtree(out, ignore_errors=True)
      out = tempfile.mkdtemp(prefix="bench-scale-ours-")
      try:
        entry["ours"].append(run_ours(data, out))
        if entry["floors"] is None:
          entry["floors"] = {**run_floors(csv_path, out), **_own_floors(out)}
      finally:
        shutil.rmtree(out, ignore_errors=True)
    print(json.dumps(entry), flush=True)
    results.append(entry)
  return {"markdown": markdown(results), "result": results}


def _med(runs: list[dict], key: str) -> float | None:
  values = [r[key] for r in runs if r.get(key) is not None]
  return common.median(values) if values else None


def markdown(results: list[dict]) -> str:
  rows = []
  for entry in results:
    ours, stock = entry["ours"], entry["stock"]
    ratio = ""
    if stock:
      ratio = f"{_med(ours, 'pipeline_s') / _med(stock, 'pipeline_s'):.2f}x"
    rows.append(
      [
        f"{entry['rows']:,}",
        f"{len(ours)}",
        f"{_med(ours, 'pipeline_s'):.1f}",
        f"{_med(ours, 'process_s'):.1f}",
        f"{_max(ours, 'peak_rss_mb'):,.0f}",
        f"{_max(ours, 'peak_pss_mb'):,.0f}",
        f"{_med(ours, 'accuracy'):.4f}",
        f"{_med(stock, 'pipeline_s'):.1f}" if stock else "",
        f"{_med(stock, 'process_s'):.1f}" if stock else "",
        f"{_max(stock, 'peak_rss_mb'):,.0f}" if stock else "",
        f"{_max(stock, 'peak_pss_mb'):,.0f}" if stock else "",
        ratio,
      ]
    )
  head = common.markdown_table(
    [
      "rows",
      "runs",
      "ours: pipeline s",
      "ours: process s",
      "ours: peak RSS MB",
      "ours: peak PSS MB",
      "ours: eval accuracy",
      "stock full: pipeline s",
      "stock full: process s",
      "stock full: peak RSS MB",
      "stock full: peak PSS MB",
      "ours / stock (pipeline s)",
    ],
    rows,
  )
  detail = []
  for entry in results:
    floors_ = entry["floors"] or {}
    for name in COMPONENTS:
      seconds = common.median([r["components"].get(name, 0.0) for r in entry["ours"]])
      floor = floors_.get(name)
      detail.append(
        [
          f"{entry['rows']:,}",
          name,
          f"{seconds:.1f}",
          f"{floor:.1f}" if floor else "",
          f"{seconds / floor:.1f}x" if floor else "",
        ]
      )
  table = common.markdown_table(["rows", "component (ours)", "s", "floor s", "s / floor"], detail)
  return (
    f"{head}\n\nMedians of the runs listed, each in a fresh process, ours and stock alternating. "
    "*pipeline s* is the pipeline run itself (LocalDagRunner's run); *process s* adds the "
    "interpreter and imports. Peak memory is the highest of the runs, over the whole process "
    "tree: RSS summed every 50 ms (a forked child's pages shared with its parent count twice) "
    "and PSS summed every 0.5 s (shared pages counted once). The stock full pipeline "
    f"trains its module for {STOCK_TRAIN_STEPS} steps of 64; ours trains the default model "
    "for epochs sized to the rows. Both run the DirectRunner in-process.\n\n"
    f"Each component of ours against its floor (the floors are defined in `bench/scale.py`):\n\n"
    f"{table}\n{_peak_processes(results)}"
  )


def _max(runs: list[dict], key: str) -> float:
  return max(r.get(key, 0.0) for r in runs)


def _peak_processes(results: list[dict]) -> str:
  """Where a run's RSS peak held more than one process: which, so the peak can be read."""
  lines = []
  for entry in results:
    for who in ("ours", "stock"):
      for i, run in enumerate(entry[who]):
        if len(run.get("peak_processes", [])) > 1:
          shown = "; ".join(run["peak_processes"])
          lines.append(f"- {entry['rows']:,} rows, {who} run {i + 1}: {shown}")
  if not lines:
    return ""
  return (
    "\nProcesses alive at the RSS peak, for runs that had more than one:\n\n"
    + "\n".join(lines)
    + "\n"
  )


def main(argv=None) -> dict:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  sub = parser.add_subparsers(dest="command")
  floor = sub.add_parser("floors", help="measure the floors on a finished run (internal)")
  floor.add_argument("--csv", required=True)
  floor.add_argument("--out", required=True)
  parser.add_argument("--rows", type=int, nargs="+", default=[20_000, 200_000, 1_000_000])
  parser.add_argument("--stock-rows", type=int, nargs="*", default=[20_000, 200_000])
  parser.add_argument("--repeats", type=int, default=2)
  parser.add_argument(
    "--data-root", default=os.path.join(tempfile.gettempdir(), "bench-scale-data")
  )
  args = parser.parse_args(argv)
  if args.command == "floors":
    print(json.dumps(floors(args.csv, args.out)))
    return {}
  return bench(args.rows, args.stock_rows, args.repeats, args.data_root)


if __name__ == "__main__":
  result = main()
  if result:
    print(result["markdown"])
