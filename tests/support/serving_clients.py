"""Clients of a pushed version, as the docs show them, run on every variant it holds.

A version folder is all a client gets. The Optimizer's page (docs/optimizer.md) shows two
clients, and the tests run that page's own code (read from between its markers, so it cannot
drift from what is checked):
  - `score_rows(version_dir, variant, rows)`: CSV rows -> labels with one variant's runtime
    (TFLite interpreter, onnxruntime or a SavedModel loaded by TensorFlow), from its
    signature.json alone;
  - `rows_request(version_dir, rows)`: CSV rows -> the JSON body of a TF Serving REST
    `predict` call on the SavedModel's `rows` signature, from contract.json alone.

No TF Serving binary runs here, so `tf_serving_predict` stands in for its REST handler the way
its documentation describes the row format: `instances` is a list of objects whose keys are
the signature's inputs; values with one key are stacked into one batch tensor per input.
"""

from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import tensorflow as tf

from tests.support.cli_runs import REPO_ROOT

# The page that shows the clients (it was README.md before the README became a front page).
CLIENTS_PAGE = "docs/optimizer.md"


def readme_function(marker: str, name: str):
  """The function `name` defined in the python block of CLIENTS_PAGE between
  `<!-- marker-start -->` and `<!-- marker-end -->`."""
  text = (REPO_ROOT / CLIENTS_PAGE).read_text()
  block = text.split(f"<!-- {marker}-start -->")[1].split(f"<!-- {marker}-end -->")[0]
  code = block.split("```python\n", 1)[1].split("```", 1)[0]
  namespace: dict = {}
  exec(compile(code, f"{CLIENTS_PAGE} {marker}", "exec"), namespace)
  return namespace[name]


def rows_from_examples(records: list[bytes], columns: list[str]) -> list[dict[str, str]]:
  """CSV-like rows (column -> cell text, '' when missing) from serialized tf.Examples."""
  rows = []
  for record in records:
    feature = tf.train.Example.FromString(record).features.feature
    row = {}
    for column in columns:
      f = feature.get(column)
      if f is None:
        row[column] = ""
      elif f.bytes_list.value:
        row[column] = f.bytes_list.value[0].decode()
      elif f.int64_list.value:
        row[column] = str(f.int64_list.value[0])
      elif f.float_list.value:
        row[column] = repr(f.float_list.value[0])
      else:
        row[column] = ""
    rows.append(row)
  return rows


def tf_serving_predict(version_dir: pathlib.Path, body: str) -> np.ndarray:
  """What TF Serving's `POST /v1/models/<m>:predict` computes for a row-format body."""
  request = json.loads(body)  # TF Serving accepts NaN in requests, as Python's json does.
  signature = tf.saved_model.load(str(version_dir)).signatures[request["signature_name"]]
  specs = signature.structured_input_signature[1]
  instances = request["instances"]
  assert all(set(i) == set(specs) for i in instances), "every input is required in each row"
  feed = {}
  for name, spec in specs.items():
    values = [i[name] for i in instances]
    feed[name] = tf.constant(values, dtype=spec.dtype)
  [output] = signature(**feed).values()
  return output.numpy()


def check_every_variant(version_dir: pathlib.Path, records: list[bytes]) -> dict[str, float]:
  """Scores the eval records with every pushed variant through the docs' clients.

  Checks that no runtime is left out, that each variant agrees with the SavedModel as the
  Optimizer measured it, and that the `rows` REST body gives the SavedModel's own outputs.

  Returns:
    variant -> share of rows on which it agrees with the SavedModel (the baseline).
  """
  version_dir = pathlib.Path(version_dir)
  manifest = json.loads((version_dir / "manifest.json").read_text())
  contract = json.loads((version_dir / "assets.extra" / "contract.json").read_text())
  columns = [c["column"] for i in contract["inputs"] for c in i["columns"]]
  rows = rows_from_examples(records, columns)
  loaded = tf.saved_model.load(str(version_dir))
  baseline = loaded.signatures["serving_default"](examples=tf.constant(records))["outputs"]
  baseline = baseline.numpy()

  # The SavedModel through TF Serving's JSON API: the same outputs as from tf.Examples.
  body = readme_function("rest-client", "rows_request")(version_dir, rows)
  assert json.loads(body)["signature_name"] == "rows"
  np.testing.assert_allclose(tf_serving_predict(version_dir, body), baseline, rtol=1e-5, atol=1e-5)

  score_rows = readme_function("client-snippet", "score_rows")
  classes = contract["label"]["classes"]
  task = contract["task"]
  if task == "regression":
    reference = baseline[:, 0]
  elif task == "binary":
    reference = np.array([classes[int(p >= 0.5)] for p in baseline[:, 0]])
  else:
    reference = np.array([classes[int(i)] for i in baseline.argmax(axis=1)])
  agreement = {}
  runtimes = set()
  for variant, entry in manifest["variants"].items():
    runtimes.add(entry["metrics"]["signature"]["runtime"])
    predicted = np.array(score_rows(version_dir, variant, rows))
    if task == "regression":
      spread = float(np.std(reference)) or 1.0
      agrees = np.abs(predicted.astype(np.float64) - reference) <= 0.1 * spread
    else:
      agrees = predicted == reference
    agreement[variant] = float(np.mean(agrees))
    # The Optimizer measured this variant on a sample of the same split and blessed it.
    measured = entry["metrics"]["agreement"]
    assert agreement[variant] >= measured - 0.05 and not math.isnan(agreement[variant]), (
      variant,
      agreement[variant],
      measured,
    )
  return agreement
