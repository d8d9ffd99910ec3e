"""The data gate alone over a sequence of nights: each column's band, and shape changes.

Each table (`gate.py`'s) is cut in two random halves (seeded): the first is the live version's
training data (night 1). Nights 2 to N + 1 are normal: each a random 80% of the other half
(seeded per night), so two nights share about two thirds of their rows (their history varies
less than independent nights would: a harder test of the bands) and none shares a row with
the reference. Each night's statistics and schema come from the kit's ExampleGen and StatisticsGen
executors (`tests.support.gate_data.night_from_csv`); the gate (`gate_lib.evaluate`) compares
it with night 1 given the gate reports of the nights before it, as the nights log holds them,
and a night it passes joins the history. No model is trained: the live model's and the leak
checks (which need one, or the columnar copy) are not run; the others are.

The column faults (`gate.faults`: unit x1000, unit x2.2, offset, affine, periodic, renamed,
missing, emptied) are applied to night 2's rows, with no history (the fixed bounds), and to
night 7's, after five normal nights (each column's band).

    .venv/bin/python bench/gate.py --sequence 10 [--tables taxi,penguins] [--seed 0]
"""

from __future__ import annotations

import os
import time

import common
import gate
import numpy as np

from components.data_gate import gate_lib
from components.data_gate import thresholds as th
from tests.support import gate_data

COLUMN_FAULTS = gate.COLUMN_FAULTS
# The nights the faults are delivered on: the first after night 1 (no history), and the first
# with five normal nights before it (bands.MIN_NIGHTS).
FAULT_NIGHTS = (2, 7)


def _night(frame, folder: str, label: str) -> gate_lib.Night:
  path = gate_data.write_csv(frame, os.path.join(folder, "csv"))
  return gate_data.night_from_csv(path, folder, label)


def _gate(night, reference, label: str, classification: bool, history) -> dict:
  report = gate_lib.evaluate(
    night,
    reference,
    live_version=1,
    label_key=label,
    classification=classification,
    read_columns=None,
    thresholds=th.Thresholds(),
    history=history,
  )
  data = report.to_json()
  worst = max(
    report.drift.items(), key=lambda item: item[1]["value"] / item[1]["threshold"], default=None
  )
  return {
    "passed": report.passed,
    "stops": [f.text for f in report.stopping],
    "banded": sum("band" in m for m in report.drift.values()),
    "worst": None
    if worst is None
    else {"column": worst[0], "value": worst[1]["value"], "threshold": worst[1]["threshold"]},
    "report": data,
  }


def run_table(name: str, load, label: str, workdir: str, seed: int, normal: int) -> dict:
  frame = gate._as_text(load())
  order = np.random.default_rng(seed).permutation(len(frame))
  half = len(frame) // 2
  first, pool = frame.iloc[order[:half]], frame.iloc[order[half:]]
  classes = set(frame[label]) - {""}
  classification = len(classes) <= 50
  base = os.path.join(workdir, name)
  reference = _night(first, os.path.join(base, "night1"), label)
  out = {"table": name, "rows": len(frame), "normal": {}, "faults": {}}
  history: list[dict] = []
  slices = {n: pool.sample(frac=0.8, random_state=seed * 1000 + n) for n in range(2, normal + 2)}
  for number, rows in slices.items():
    if number in FAULT_NIGHTS:
      for fault, (data, column) in gate.faults(rows, label).items():
        if fault not in COLUMN_FAULTS:
          continue
        folder = os.path.join(base, f"night{number}_{fault.replace(' ', '_')}")
        result = _gate(_night(data, folder, label), reference, label, classification, history)
        result.pop("report")
        out["faults"].setdefault(fault, {})[number] = {"column": column, **result}
        print(f"{name:16} night {number:2} {fault:11} {column[:24]:24} passed={result['passed']}")
        for text in result["stops"][:2]:
          print(f"{'':20}{text[:160]}")
    night = _night(rows, os.path.join(base, f"night{number}"), label)
    result = _gate(night, reference, label, classification, history)
    if result["passed"]:
      history.append(result["report"])
    result.pop("report")
    out["normal"][number] = result
    worst = result["worst"] or {}
    print(
      f"{name:16} night {number:2} normal      passed={result['passed']} banded="
      f"{result['banded']} worst {worst.get('column')} {worst.get('value', 0):.3f} / "
      f"{worst.get('threshold', 0):.3f}",
      flush=True,
    )
    for text in result["stops"][:3]:
      print(f"{'':20}{text[:160]}")
  return out


def markdown(results: list[dict]) -> str:
  head = ["table", "rows", "normal nights passed", "largest normal value / bound"]
  head += [f"{f} (night {' / '.join(map(str, FAULT_NIGHTS))})" for f in COLUMN_FAULTS]
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for r in results:
    normal = r["normal"].values()
    passed = sum(n["passed"] for n in normal)
    ratios = [n["worst"]["value"] / n["worst"]["threshold"] for n in normal if n["worst"]]
    cells = [r["table"], f"{r['rows']:,}", f"{passed} of {len(normal)}"]
    cells.append(f"{max(ratios):.2f}" if ratios else "-")
    for fault in COLUMN_FAULTS:
      nights = r["faults"].get(fault)
      if not nights:
        cells.append("-")
        continue
      cells.append(
        " / ".join(
          "**pass**" if nights[n]["passed"] else "stop" for n in FAULT_NIGHTS if n in nights
        )
      )
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines)


def main(tables: dict, workdir: str, seed: int, normal: int) -> list[dict]:
  if normal < max(FAULT_NIGHTS) - 1:
    raise SystemExit(f"--sequence {normal}: the faults' last night is {max(FAULT_NIGHTS)}")
  started = time.perf_counter()
  results = [
    run_table(name, load, label, workdir, seed, normal) for name, (load, label) in tables.items()
  ]
  print(markdown(results))
  payload = {
    "machine": common.machine(),
    "seed": seed,
    "normal_nights": normal,
    "fault_nights": FAULT_NIGHTS,
    "seconds": round(time.perf_counter() - started, 1),
    "results": results,
  }
  print(f"wrote {common.write_results('gate-sequence', payload)}")
  return results
