"""End to end: the real run_local.py on LocalDagRunner, on the bundled digits and on new data."""

import glob
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.support import serving_clients
from tests.support.cli_runs import REPO_ROOT, load_summary, run_script, states

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


def test_default_run_succeeds_in_a_short_view_and_pushes_version_1(digits_run):
  summary = digits_run.summary
  # The default view: the component table and the summary, the full log in a file.
  assert digits_run.printed_lines <= 60
  assert list((digits_run.out / "logs").glob("run-*.log"))
  assert summary["status"] == "succeeded"
  assert set(states(summary).values()) == {"ran"}
  assert summary["blessed"] is True
  assert summary["eval_metrics"]["sparse_categorical_accuracy"] >= 0.90
  pushed = summary["pushed"]
  version_dir = digits_run.out / "serving" / "digits" / "1"
  assert pushed["pushed"] and pushed["version"] == 1
  assert pushed["path"] == str(version_dir)
  assert (version_dir / "saved_model.pb").exists()
  assert json.loads((version_dir / "manifest.json").read_text())["version"] == 1
  assert "pushed version 1" in digits_run.stdout and "Optimizer variants" in digits_run.stdout
  # Nothing left in the temporary folder (AutoGraph's sources were, at every run, once).
  assert list(digits_run.tmp.iterdir()) == []


def test_pushed_model_scores_090_on_the_eval_split(digits_run):
  records = _eval_records(digits_run.out / "pipeline_root")
  version_dir = digits_run.out / "serving" / "digits" / "1"
  assert _accuracy_of_pushed_model(version_dir, records, "label") >= 0.90


def test_every_pushed_variant_answers_through_the_documented_clients(digits_run):
  version_dir = digits_run.out / "serving" / "digits" / "1"
  records = _eval_records(digits_run.out / "pipeline_root")
  agreement = serving_clients.check_every_variant(version_dir, records)
  assert {"tflite_int8", "onnx"} <= set(agreement)
  report = digits_run.summary["optimizer"]
  assert report and {v["name"] for v in report["variants"]} >= {"tflite_int8", "pruned"}
  # A variant left out says which bound of its gate it missed.
  for variant in report["variants"]:
    if variant["status"] == "ok" and not variant["blessed"]:
      assert variant["gate_reason"].startswith(("metric: ", "agreement: ")), variant


@pytest.mark.timeout(900)
def test_rerun_on_the_same_data_is_cached_and_pushes_nothing(digits_run, tmp_path):
  # A copy, so that the shared run stays as it was for the tests that read it.
  out = tmp_path / "out"
  shutil.copytree(digits_run.out, out)
  second = run_script("run_local.py", "--output-dir", out, "--quiet", warm=True)
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
    # The two variants checked below.
    "--optimizer-variants",
    "tflite_float32,onnx",
    "--quiet",
    warm=True,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  assert summary["pushed"]["pushed"] is True
  # A run_fn module's model names no task; the summary gives the run's (it gave null).
  assert summary["task"] == "binary"
  version_dir = out / "serving" / "digits" / "1"
  acc = _accuracy_of_pushed_model(version_dir, _eval_records(out / "pipeline_root"), "diagnosis")
  assert acc >= 0.8
  # The Optimizer converts a stock run_fn's model too (no contract: inputs read with the schema).
  [report] = (out / "pipeline_root" / "Optimizer" / "report").glob("*/report.json")
  variants = {v["name"]: v for v in json.loads(report.read_text())["variants"]}
  for name in ("tflite_float32", "onnx"):
    assert variants[name]["status"] == "ok", variants[name].get("reason")
    assert variants[name]["agreement"] >= 0.99, (name, variants[name]["agreement"])
