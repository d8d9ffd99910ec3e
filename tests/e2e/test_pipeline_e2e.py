"""End to end: the real run_local.py on LocalDagRunner, on the bundled digits and on new data."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from tests import serving_clients
from tests.pipeline_utils import REPO_ROOT, load_summary, run_script, states

pytestmark = pytest.mark.e2e


def _eval_records(pipeline_root):
  files = glob.glob(
    os.path.join(pipeline_root, "CsvExampleGen", "examples", "*", "Split-eval", "*.gz")
  )
  assert files, "no eval split written"
  return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _accuracy_of_pushed_model(version_dir, records, label_key):
  model = tf.saved_model.load(str(version_dir))
  serve = model.signatures["serving_default"]
  probs = serve(examples=tf.constant(records))["outputs"].numpy()
  labels = np.array(
    [
      tf.train.Example.FromString(r).features.feature[label_key].int64_list.value[0]
      for r in records
    ]
  )
  return float(np.mean(probs.argmax(axis=1) == labels))


@pytest.mark.timeout(900)
def test_default_run_pushes_a_model_that_scores_090_and_rerun_is_cached(tmp_path):
  out = tmp_path / "out"
  first = run_script("run_local.py", "--output-dir", out)
  assert first.returncode == 0, first.stderr[-3000:]
  # The default view: the component table and the summary, the full log in a file.
  printed = (first.stdout + first.stderr).splitlines()
  assert len(printed) <= 60, "\n".join(printed)
  assert list((out / "logs").glob("run-*.log"))
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  assert set(states(summary).values()) == {"ran"}
  assert summary["blessed"] is True
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.90
  pushed = summary["pushed"]
  assert pushed["pushed"] and pushed["version"] == 1
  version_dir = out / "serving" / "digits" / "1"
  assert pushed["path"] == str(version_dir)
  assert (version_dir / "saved_model.pb").exists()
  acc = _accuracy_of_pushed_model(version_dir, _eval_records(out / "pipeline_root"), "label")
  assert acc >= 0.90
  # Every default variant, each in its own runtime, through the README's clients.
  agreement = serving_clients.check_every_variant(version_dir, _eval_records(out / "pipeline_root"))
  assert {"tflite_int8", "onnx"} <= set(agreement)
  manifest = json.loads((version_dir / "manifest.json").read_text())
  assert manifest["version"] == 1
  report = summary["optimizer"]
  assert report and {v["name"] for v in report["variants"]} >= {"tflite_int8", "pruned"}
  # A variant left out says which bound of its gate it missed.
  for variant in report["variants"]:
    if variant["status"] == "ok" and not variant["blessed"]:
      assert variant["gate_reason"].startswith(("metric: ", "agreement: ")), variant
  assert "pushed version 1" in first.stdout and "Optimizer variants" in first.stdout

  second = run_script("run_local.py", "--output-dir", out, "--quiet")
  assert second.returncode == 0, second.stderr[-3000:]
  rerun = load_summary(out)
  s = states(rerun)
  for name in ("CsvExampleGen", "StatisticsGen", "SchemaGen", "DistributedTrainer", "Optimizer"):
    assert s[name] == "cached", (name, s)
  assert rerun["new_data"] is False
  assert rerun["pushed"]["pushed"] is False
  assert sorted(p.name for p in (out / "serving" / "digits").iterdir() if p.name.isdigit()) == ["1"]
  assert "no new data" in second.stdout


@pytest.mark.timeout(900)
def test_other_csv_with_unseen_stock_tfx_module(tmp_path):
  from sklearn.datasets import load_breast_cancer

  data = load_breast_cancer()
  root = tmp_path / "data"
  root.mkdir()
  cols = [f"f{i:02d}" for i in range(data.data.shape[1])]
  with open(root / "cancer.csv", "w") as f:
    f.write(",".join([*cols, "diagnosis"]) + "\n")
    for row, label in zip(data.data, data.target, strict=True):
      f.write(",".join(f"{v:.6g}" for v in row) + f",{label}\n")
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--data-root",
    root,
    "--label-key",
    "diagnosis",
    "--module-file",
    REPO_ROOT / "tests" / "data" / "stock_tfx_module.py",
    "--output-dir",
    out,
    "--train-steps",
    "150",
    "--eval-steps",
    "5",
    "--min-accuracy",
    "0.8",
    "--model-name",
    "digits",
    "--quiet",
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  assert summary["pushed"]["pushed"] is True
  version_dir = out / "serving" / "digits" / "1"
  acc = _accuracy_of_pushed_model(version_dir, _eval_records(out / "pipeline_root"), "diagnosis")
  assert acc >= 0.8
  # The Optimizer converts a stock run_fn's model too (no contract: inputs read with the schema).
  [report] = (out / "pipeline_root" / "Optimizer" / "report").glob("*/report.json")
  variants = {v["name"]: v for v in json.loads(report.read_text())["variants"]}
  for name in ("tflite_float32", "onnx"):
    assert variants[name]["status"] == "ok", variants[name].get("reason")
    assert variants[name]["agreement"] >= 0.99, (name, variants[name]["agreement"])
