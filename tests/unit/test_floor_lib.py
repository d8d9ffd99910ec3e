"""The Evaluator's automatic floor from the eval split (components/evaluator/floor_lib.py)."""

import json

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format

from components import defaults
from components.evaluator import floor_lib

STATS = {
  "train": {"rows": 100, "counts": {"a": 58, "b": 42}, "overflow": False},
  "eval": {"rows": 40, "counts": {"a": 29, "b": 11}, "overflow": False},
}


def test_classification_floor_is_the_eval_splits_majority_share_plus_the_margin():
  floor = floor_lib.floor_from_label_stats(STATS, "binary")
  assert floor.value == pytest.approx(29 / 40 + defaults.AUTO_FLOOR_MARGIN)
  assert floor.reason == (
    "auto: accuracy at least 0.735, i.e. 0.01 better than always answering the most frequent "
    "class of the eval split (0.725 of its 40 rows; --min-accuracy sets another floor)"
  )


def test_regression_ceiling_is_a_share_of_the_eval_splits_variance():
  values = [1.0, 2.0, 4.0, 9.0]
  stats = {
    "eval": {
      "rows": 4,
      "counts": {},
      "total": sum(values),
      "total_sq": sum(v * v for v in values),
    }
  }
  mean = sum(values) / 4
  variance = sum((v - mean) ** 2 for v in values) / 4
  floor = floor_lib.floor_from_label_stats(stats, "regression")
  assert floor.value == pytest.approx(defaults.AUTO_MSE_SHARE * variance)


def test_no_counts_no_floor():
  assert floor_lib.floor_from_label_stats({}, "binary") is None
  assert floor_lib.floor_from_label_stats({"eval": {"rows": 3, "counts": {}}}, "regression") is None


def test_with_floor_sets_the_task_metrics_value_threshold_only():
  threshold = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.5}),
    change_threshold=tfma.GenericChangeThreshold(
      direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -0.01}
    ),
  )
  count = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 50})
  )
  config = tfma.EvalConfig(
    metrics_specs=[
      tfma.MetricsSpec(
        metrics=[
          tfma.MetricConfig(class_name="BinaryAccuracy", threshold=threshold),
          tfma.MetricConfig(class_name="ExampleCount", threshold=count),
        ]
      )
    ]
  )
  out = json_format.Parse(
    floor_lib.with_floor(json_format.MessageToJson(config), "binary", 0.735), tfma.EvalConfig()
  )
  accuracy, examples = out.metrics_specs[0].metrics
  assert accuracy.threshold.value_threshold.lower_bound.value == pytest.approx(0.735)
  assert accuracy.threshold.change_threshold.absolute.value == pytest.approx(-0.01)
  assert examples.threshold.value_threshold.lower_bound.value == 50
  assert json.loads(floor_lib.auto_floor_spec("binary")) == {"task": "binary"}
