"""CSV tables the kit has never seen, and how their pushed models are read back and scored.

`write_csv` writes a table; `messy_rows` makes one as people export them. The readers take a
run's output folder (`<out>/pipeline_root/CsvExampleGen/...`, as run_local.py and
`executor_runs` lay it out) and a pushed version's folder.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import pathlib

import numpy as np
import tensorflow as tf


def write_csv(folder: pathlib.Path, header, rows, name="data.csv") -> pathlib.Path:
  """Writes `rows` under `header` as folder/name (quoting as the csv module does); returns the
  folder."""
  folder.mkdir(parents=True, exist_ok=True)
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(header)
  writer.writerows(rows)
  (folder / name).write_text(buf.getvalue())
  return folder


def eval_records(out: pathlib.Path, split: str = "eval") -> list[bytes]:
  """The serialized tf.Examples of one split ExampleGen wrote under the output folder `out`."""
  pattern = out / "pipeline_root" / "CsvExampleGen" / "examples" / "*" / f"Split-{split}" / "*.gz"
  files = glob.glob(str(pattern))
  assert files, f"no {split} split written"
  return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def split_frame(records: list[bytes]):
  """The rows of serialized tf.Examples as a pandas frame (first value of each feature)."""
  import pandas as pd

  rows = []
  for record in records:
    row = {}
    for name, feature in tf.train.Example.FromString(record).features.feature.items():
      values = getattr(feature, feature.WhichOneof("kind")).value
      row[name] = (
        (values[0].decode() if isinstance(values[0], bytes) else values[0]) if values else None
      )
    rows.append(row)
  return pd.DataFrame(rows)


def contract_of(version_dir: pathlib.Path) -> dict:
  """A pushed version's contract.json."""
  return json.loads((version_dir / "assets.extra" / "contract.json").read_text())


def score_saved_model(version_dir: pathlib.Path, records: list[bytes]) -> dict:
  """Reloads a pushed version and scores serialized tf.Examples through its signatures.

  Labels are the model's own view of them (`transform_features`), checked against the
  contract's classes. Returns the task and accuracy (classification) or rmse (regression).
  """
  contract = contract_of(version_dir)
  key, task = contract["label"]["key"], contract["task"]
  model = tf.saved_model.load(str(version_dir))
  examples = tf.constant(records)
  outputs = model.signatures["serving_default"](examples=examples)["outputs"].numpy()
  labels = model.signatures["transform_features"](examples=examples)[key].numpy()
  if task == "regression":
    return {"task": task, "rmse": float(np.sqrt(np.mean((outputs[:, 0] - labels) ** 2)))}
  classes = contract["label"]["classes"]
  raw = [tf.train.Example.FromString(r).features.feature[key] for r in records]
  names = [
    f.bytes_list.value[0].decode() if f.bytes_list.value else f.int64_list.value[0] for f in raw
  ]
  # The label the model was measured against is the contract's class index of the raw value.
  assert [classes[int(i)] for i in labels] == names
  predicted = (outputs[:, 0] >= 0.5).astype(int) if task == "binary" else outputs.argmax(1)
  counts = np.bincount(labels.astype(int), minlength=len(classes))
  return {
    "task": task,
    "accuracy": float(np.mean(predicted == labels)),
    "majority": float(counts.max() / counts.sum()),
  }


PLANS = ("basic", "pro", "enterprise, annual")  # the last one needs quoting
REGIONS = ("north", "south", "east", "west")
MESSY_HEADER = ["row_id", "phone", "income", "age", "plan", "region", "note", "churn"]


def messy_rows(n: int = 700, seed: int = 0) -> list[list[str]]:
  """Rows of a CSV as people export them: unscaled numbers, empty cells, quoted text.

  Columns: row_id, phone (12 digits), income (unscaled, gaps), age (gaps), plan (text with a
  comma), region (gaps), note (free text, some with an embedded newline), churn (the label).
  """
  rng = np.random.default_rng(seed)
  rows = []
  for i in range(n):
    plan = PLANS[int(rng.integers(0, 3))]
    region = REGIONS[int(rng.integers(0, 4))]
    income = float(rng.uniform(15_000, 250_000))
    age = int(rng.integers(18, 80))
    score = (
      (1.2 if plan == "basic" else -0.8 if plan == "enterprise, annual" else 0.0)
      + (1.0 if region == "north" else -0.3)
      - (income - 100_000) / 60_000
    )
    churn = "yes" if score + rng.normal(0, 0.3) > 0 else "no"
    note = "call back\nafter 5pm" if i % 17 == 0 else ("" if i % 3 == 0 else f"ticket {i % 50}")
    rows.append(
      [
        str(i),
        str(int(rng.integers(10**11, 10**12))),
        "" if i % 11 == 0 else f"{income:.2f}",
        "" if i % 13 == 0 else str(age),
        plan,
        "" if i % 9 == 0 else region,
        note,
        churn,
      ]
    )
  return rows
