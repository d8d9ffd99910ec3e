"""The Evaluator's side of the floor: its TFMA config, the quantity and answers checks
(components/evaluator/floor_lib.py), and the label check that comes before TFMA."""

import json

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format

from components.evaluator import floor_lib
from core import floors


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


def test_only_three_or_more_number_classes_are_checked_as_a_quantity():
  assert floor_lib.number_classes([0, 1, 2]) == [0.0, 1.0, 2.0]
  assert floor_lib.number_classes([1.5, 2, 3]) == [1.5, 2.0, 3.0]
  assert floor_lib.number_classes([0, 1]) is None  # binary
  assert floor_lib.number_classes(["a", "b", "c"]) is None
  assert floor_lib.number_classes([True, False, 2]) is None
  assert floor_lib.number_classes(None) is None


def _scores(index, classes, right):
  """Class scores that put `right` of their mass on the true class, the rest spread evenly."""
  import numpy as np

  p = np.full((len(index), len(classes)), (1 - right) / (len(classes) - 1))
  p[np.arange(len(index)), index] = right
  return p


def test_codes_pass_and_a_count_spread_over_its_classes_fails_against_the_mean():
  import numpy as np

  rng = np.random.default_rng(0)
  classes = [float(c) for c in range(10)]
  index = rng.integers(0, 10, 500)
  stats = {"train": {"rows": 1000, "counts": {str(c): 100 for c in range(10)}}}
  # Codes a classifier gets right (digits): the expected value is the right value.
  good = floor_lib.quantity_check(_scores(index, classes, 0.97), index, classes, stats)
  assert good.passed and good.rmse < 0.5 < good.bound
  assert "errs less than always answering the train mean 4.5" in good.reason
  # Spell lengths 1..28 mostly short, scores spread over every class: worse than the mean.
  classes = [float(c) for c in range(1, 29)]
  index = np.minimum(rng.geometric(0.3, 800) - 1, 27)
  counts = {
    str(c): int(n) for c, n in zip(range(1, 29), np.bincount(index, minlength=28), strict=True)
  }
  values = np.asarray(classes)[index]
  flat = floor_lib.quantity_check(
    np.full((800, 28), 1 / 28), values, classes, {"train": {"rows": 800, "counts": counts}}
  )
  assert not flat.passed and flat.rmse > flat.bound
  assert "errs no less" in flat.reason and "28 classes of numbers" in flat.reason
  # Without train counts there is no mean to hold it to.
  assert floor_lib.quantity_check(np.full((800, 28), 1 / 28), values, classes, {}) is None


def test_an_eval_value_no_training_row_has_counts_as_itself():
  # StrikeNb: an eval label of 18, beyond the train split's largest value 16, was scored as
  # class 16 (its index), so the RMSEs on the summary line were both too low.
  import numpy as np

  classes = [0.0, 1.0, 16.0]
  stats = {"train": {"rows": 3, "counts": {"0": 1, "1": 1, "16": 1}}}
  certain = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
  check = floor_lib.quantity_check(certain, [18.0, 0.0, np.nan], classes, stats)
  mean = 17 / 3
  assert check.rmse == np.sqrt((18 - 16) ** 2 / 2)
  assert np.isclose(check.bound, np.sqrt(((18 - mean) ** 2 + mean**2) / 2))


def test_a_failed_quantity_check_fails_the_validation_and_names_the_fix(tmp_path):
  from tensorflow_model_analysis.metrics import metric_types

  from components.artifact_files import evaluation_metrics
  from components.evaluator import evaluation_lib

  config = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec(name="candidate", label_key="y")],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[
      tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="SparseCategoricalAccuracy")])
    ],
  )
  key = metric_types.MetricKey(name="sparse_categorical_accuracy", model_name="candidate")
  result = evaluation_lib.write_evaluation(
    config,
    {key: 0.19},
    str(tmp_path),
    {"candidate": "/m"},
    "<data>",
    [(floors.EXPECTED_VALUE_RMSE, 6.1, 5.56)],
  )
  assert not result.validation_ok
  report = evaluation_metrics.read_validation(str(tmp_path))
  assert report["ok"] is False
  assert report["failures"] == [
    "the label's classes are numbers, and the expected value of the model's class scores errs "
    "more than always answering the train mean (RMSE 6.1 against 5.56): the label reads as a "
    "quantity; pass --task regression"
  ]


def test_a_label_through_a_transform_signature_the_model_lacks_is_one_line(tmp_path):
  # TFX's IMDB module exports serving_default only; with --eval-label-key label_xf the run ended
  # in three chained TFMA tracebacks ("transform_features not found in model signatures").
  from components.model_scoring import outputs_lib
  from core import tasks
  from tests.support import tiny_models

  model = tiny_models.write_saved_model(tmp_path / "model", 0.0)
  spec = tfma.ModelSpec(label_key="label_xf", preprocessing_function_names=["transform_features"])
  with pytest.raises(tasks.LabelError) as raised:
    outputs_lib.check_label(model, spec, [])
  assert str(raised.value) == (
    "the model has no 'transform_features' signature, so the Evaluator cannot make label "
    "'label_xf' from the eval examples; export one in the module's run_fn (TFX's taxi and "
    "penguin modules do), or pass a label column the examples hold as --eval-label-key, or "
    "leave it out."
  )
