"""What the report page reads of a run: statistics protos, quarantine, epochs, predictions."""

import json

import numpy as np

from components.evaluator import evaluation_lib
from components.model_scoring import outputs_lib
from components.report import inputs
from core import properties, sources
from models.tabular import history
from tests.support import report_inputs


def test_statistics_of_both_splits_read_from_the_protos(tmp_path):
  stats = inputs.statistics(str(report_inputs.write_statistics(tmp_path, rows=100)))
  assert set(stats) == {"train", "eval"}
  age, plan = stats["train"]["age"], stats["train"]["plan<b>"]
  assert age.type == "float" and age.missing == 0.1 and age.mean == 40.0
  assert age.edges == [18, 42, 66, 90] and age.counts == [30, 40, 20]
  assert plan.type == "text" and plan.distinct == 2 and plan.top[0] == ("basic", 70)


def test_a_missing_artifact_reads_as_nothing(tmp_path):
  assert inputs.statistics(str(tmp_path / "absent")) == {}
  assert inputs.statistics(None) == {}
  assert inputs.epoch_history(str(tmp_path)) == []
  assert inputs.quarantine({}) == {"count": None, "unlabeled": None, "tokens": {}, "first": []}


def test_quarantine_count_and_first_reasons(tmp_path):
  summary = report_inputs.write_run(tmp_path)
  found = inputs.quarantine(inputs.artifact(summary, sources.EXAMPLES))
  assert found["count"] == 1
  assert found["first"] == [{"line": "7", "reason": "not a number: <x>", "row": "1,<x>"}]


def test_the_tabular_model_writes_the_history_the_page_reads(tmp_path):
  class History:  # what Keras leaves on model.history
    epoch = [0, 1]
    history = {"loss": [0.9, 0.5], "val_loss": [1.0, float("nan")], "accuracy": [0.5, 0.8]}

  history.write_history(str(tmp_path), History())
  assert inputs.epoch_history(str(tmp_path)) == [
    {"epoch": 0, "loss": 0.9, "val_loss": 1.0, "accuracy": 0.5},
    {"epoch": 1, "loss": 0.5, "val_loss": None, "accuracy": 0.8},
  ]
  assert history.write_history(str(tmp_path / "none"), None) is None


def test_the_evaluator_summarises_predictions_as_a_confusion_matrix_or_points():
  multiclass = outputs_lib.ModelOutputs(
    np.array([[0.9, 0.1, 0.0], [0.2, 0.7, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]]),
    np.array([0.0, 1.0, 1.0, np.nan]),
  )
  found = evaluation_lib.prediction_summary(multiclass, "multiclass")
  assert found == {"task": "multiclass", "rows": 3, "matrix": [[1, 0, 0], [0, 1, 1], [0, 0, 0]]}
  binary = outputs_lib.ModelOutputs(np.array([[0.8], [0.3]]), np.array([1.0, 1.0]))
  assert evaluation_lib.prediction_summary(binary, "binary")["matrix"] == [[0, 0], [1, 1]]
  many = outputs_lib.ModelOutputs(np.arange(5000.0)[:, None], np.arange(5000.0) + 1)
  points = evaluation_lib.prediction_summary(many, "regression")
  assert points["rows"] == 5000 and len(points["actual"]) <= evaluation_lib.MAX_POINTS
  assert points["predicted"][1] + 1 == points["actual"][1]
  kept = {"properties": {properties.PREDICTIONS_PROPERTY: json.dumps(found)}}
  assert inputs.evaluation(kept) == {"metrics": {}, "predictions": found}
  wide = outputs_lib.ModelOutputs(np.eye(60)[:3], np.array([0.0, 1.0, 2.0]))
  assert evaluation_lib.prediction_summary(wide, "multiclass")["matrix"] is None
