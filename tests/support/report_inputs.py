"""Small, real inputs for the report page's tests: statistics protos, a run summary, the files
the trainer and the Evaluator leave."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from core import properties, sources


def write_statistics(folder: pathlib.Path, rows: int = 100, shift: float = 0.0) -> pathlib.Path:
  """An ExampleStatistics folder: Split-train and Split-eval, a number and a text column."""
  from tensorflow_metadata.proto.v0 import statistics_pb2

  for split in (properties.TRAIN_SPLIT, properties.EVAL_SPLIT):
    stats = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = stats.datasets.add(num_examples=rows)
    age = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.FLOAT)
    age.path.step.append("age")
    age.num_stats.common_stats.num_missing = 10
    age.num_stats.mean, age.num_stats.min, age.num_stats.max = 40.0 + shift, 18.0, 90.0
    hist = age.num_stats.histograms.add(type=statistics_pb2.Histogram.STANDARD)
    for low, count in ((18, 30), (42, 40), (66, 20)):
      hist.buckets.add(low_value=low + shift, high_value=low + 24 + shift, sample_count=count)
    plan = dataset.features.add(type=statistics_pb2.FeatureNameStatistics.STRING)
    plan.path.step.append("plan<b>")
    plan.string_stats.common_stats.num_missing = 0
    plan.string_stats.unique = 2
    plan.string_stats.top_values.add(value="basic", frequency=70)
    plan.string_stats.top_values.add(value="<pro>", frequency=30)
    out = folder / f"Split-{split}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "FeatureStats.pb").write_bytes(stats.SerializeToString())
  return folder


def write_run(root: pathlib.Path) -> dict[str, Any]:
  """A succeeded run's summary whose artifacts are real files under `root`."""
  stats = write_statistics(root / "statistics")
  reference = write_statistics(root / "reference", shift=5.0)
  model_run = root / "model_run"
  model_run.mkdir(parents=True)
  epochs = [
    {"epoch": e, "loss": 1.0 / (e + 1), "accuracy": 0.5 + e / 10, "val_loss": 1.1 / (e + 1)}
    for e in range(4)
  ]
  (model_run / sources.EPOCH_HISTORY_FILE).write_text(json.dumps({"epochs": epochs}))
  evaluation = root / "evaluation"
  evaluation.mkdir()
  matrix = {"task": "binary", "rows": 10, "matrix": [[5, 1], [2, 2]]}
  quarantine = root / "bad_rows.csv"
  quarantine.write_text('file,chunk,line,reason,row\nd.csv,0,7,"not a number: <x>","1,<x>"\n')
  return {
    "status": "succeeded",
    "error": None,
    "seconds": 12.5,
    "components": [
      {"name": "CsvExampleGen", "state": "ran", "seconds": 1.5, "execution_id": 1},
      {"name": "Pusher", "state": "cached", "seconds": 0.2, "execution_id": 2},
    ],
    "eval_metrics": {"binary_accuracy": 0.7},
    "blessed": True,
    "validation": {"ok": True, "failures": []},
    "floor": {"value": 0.6, "reason": "auto: accuracy at least 0.6"},
    "task": "binary",
    "label_classes": ["no", "yes"],
    "strategy": {"strategy": "one_device", "num_replicas_in_sync": 1, "strategy_reason": "auto"},
    "training_plan": {
      "batch_size": 64,
      "epochs": 10,
      "steps_per_epoch": 3,
      "epochs_run": 4,
      "best_epoch": 3,
      "reason": "up to 10 epochs",
    },
    "optimizer": {
      "metric": "accuracy",
      "baseline": {
        "name": "baseline",
        "status": "ok",
        "metric_value": 0.7,
        "size_bytes": 4096,
        "latency_ms_p50": 0.3,
      },
      "variants": [
        {
          "name": "tflite_int8",
          "status": "ok",
          "metric_value": 0.69,
          "size_bytes": 1024,
          "latency_ms_p50": 0.1,
          "blessed": True,
        },
        {
          "name": "pruned",
          "status": "ok",
          "metric_value": 0.5,
          "size_bytes": 2048,
          "latency_ms_p50": 0.2,
          "blessed": False,
          "gate_reason": "accuracy dropped 0.2",
        },
        {"name": "onnx", "status": "skipped", "reason": "<no onnxruntime>", "blessed": False},
      ],
    },
    "pushed": {"pushed": False, "version": None, "path": None, "reason": "not blessed"},
    "night": {
      "night": "2026-01-01T000000Z-abc",
      "started": "2026-01-01T00:00:00Z",
      "gate": {
        "compared": True,
        "passed": True,
        "live_version": 1,
        "drift": {"age": {"value": 0.05, "threshold": 0.1}},
        "findings": [],
      },
      "metrics": {
        "candidate": {"binary_accuracy": 0.7},
        "baseline": {"binary_accuracy": 0.65},
        "diff_vs_baseline": {"binary_accuracy": 0.05},
      },
    },
    "config": {"pipeline_name": "churn", "data_root": str(root / "data"), "label_key": "churn"},
    sources.ARTIFACTS: {
      sources.EXAMPLES: {
        "uri": str(root / "examples"),
        "properties": {
          properties.examples_rows("train"): 90,
          properties.examples_rows("eval"): 10,
          properties.EXAMPLES_BAD_ROWS: 1,
          properties.EXAMPLES_QUARANTINE: str(quarantine),
        },
      },
      sources.STATISTICS: {"uri": str(stats), "properties": {}},
      sources.REFERENCE_STATISTICS: {"uri": str(reference), "properties": {"available": 1}},
      sources.MODEL_RUN: {"uri": str(model_run), "properties": {}},
      sources.EVALUATION: {
        "uri": str(evaluation),
        "properties": {properties.PREDICTIONS_PROPERTY: json.dumps(matrix)},
      },
    },
  }


def failed_run() -> dict[str, Any]:
  """A run that failed in its first component: no artifacts, an error with markup in it."""
  return {
    "status": "failed",
    "error": "data.csv: column <script>alert(1)</script> is not a number",
    "seconds": 2.0,
    "components": [{"name": "CsvExampleGen", "state": "failed", "seconds": 1.0, "execution_id": 1}],
    "eval_metrics": {},
    "blessed": None,
    "pushed": None,
    "optimizer": None,
    "config": {"pipeline_name": "churn"},
    sources.ARTIFACTS: {},
  }
