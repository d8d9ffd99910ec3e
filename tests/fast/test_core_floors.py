"""The blessing floor (core/floors.py): the flags', the automatic one from the whole label
column (before the run) and from the eval split's label counts (the Evaluator's)."""

import pytest

from core import defaults, floors

STATS = {
  "train": {"rows": 100, "counts": {"a": 58, "b": 42}, "overflow": False},
  "eval": {"rows": 40, "counts": {"a": 29, "b": 11}, "overflow": False},
}


def test_classification_floor_is_the_eval_splits_majority_share_plus_the_margin():
  floor = floors.from_label_stats(STATS, "binary")
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
  floor = floors.from_label_stats(stats, "regression")
  assert floor.value == pytest.approx(defaults.AUTO_MSE_SHARE * variance)


def test_no_counts_no_floor():
  assert floors.from_label_stats({}, "binary") is None
  assert floors.from_label_stats({"eval": {"rows": 3, "counts": {}}}, "regression") is None


def test_the_eval_splits_regression_ceiling_names_the_split():
  stats = {"eval": {"rows": 2, "counts": {}, "total": 4.0, "total_sq": 10.0}}  # 1 and 3
  floor = floors.from_label_stats(stats, "regression")
  assert floor.auto and floor.value == pytest.approx(0.99)
  assert floor.reason == (
    "auto: mean squared error below 0.99 x the eval split's label variance (1), i.e. better "
    "than always predicting the mean"
  )


def test_the_flags_set_the_floor_first():
  assert floors.given("binary", 0.9, None) == floors.Floor(0.9, "--min-accuracy 0.9")
  assert floors.given("regression", 0.9, 2.5) == floors.Floor(2.5, "--max-mse 2.5")
  assert floors.given("regression", 0.9, None) is None
  assert floors.given("multiclass", None, 2.5) is None
  assert floors.decide("binary", 0.9, None, majority=0.5) == floors.Floor(0.9, "--min-accuracy 0.9")
  assert floors.decide("regression", None, 3.0, variance=8.0).value == 3.0


def test_decide_without_flags_is_the_automatic_floor_of_the_whole_column():
  floor = floors.decide("binary", None, None, majority=0.75)
  assert floor.auto and floor.value == pytest.approx(0.76)
  assert floor.reason == (
    "auto: accuracy at least 0.76, i.e. 0.01 better than always answering the most frequent "
    "class (0.75 of the rows; --min-accuracy sets another floor)"
  )
  assert floor.reason.startswith(floors.AUTO_ACCURACY)
  # Capped at 0.99 while that still beats the most frequent class.
  assert floors.decide("multiclass", None, None, majority=0.985).value == 0.99
  # Past it, never at or below the most frequent class's share: 0.99 blessed models that did
  # worse than always answering 'Pave' (0.995 of the rows).
  paved = floors.decide("multiclass", None, None, majority=0.995)
  assert paved.value == 1.0
  assert paved.reason == (
    "auto: accuracy at least 1, i.e. above always answering the most frequent class, which "
    "already scores 0.995 of the rows (--min-accuracy sets another floor)"
  )
  assert floors.decide("binary", None, None, majority=0.9933).value == pytest.approx(1.0)
  # One class in every row: not 'above' it, and not '1 of its 654 rows'.
  alone = floors.from_label_stats({"eval": {"rows": 654, "counts": {"USA": 654}}}, "multiclass")
  assert (alone.value, alone.auto) == (1.0, True)
  assert alone.reason == (
    "auto: accuracy at least 1: all its 654 rows of the eval split are of one class, so always "
    "answering it scores 1 and accuracy cannot show a better model (--min-accuracy sets another "
    "floor)"
  )
  assert floors.decide("binary", None, None, majority=0.9900).value == pytest.approx(1.0)
  assert floors.decide("binary", None, None, majority=0.9899).value == pytest.approx(0.99)
  ceiling = floors.decide("regression", None, None, variance=4.0)
  assert ceiling.auto and ceiling.value == pytest.approx(defaults.AUTO_MSE_SHARE * 4.0)
  assert ceiling.reason == (
    "auto: mean squared error below 0.99 x the label variance (4), i.e. better than always "
    "predicting the mean"
  )
  assert floors.decide("regression", None, None) == floors.Floor(
    None, "no ceiling (--max-mse not given)"
  )


def test_a_label_the_transform_computes_sets_no_automatic_floor():
  assert floors.label_sets_floor("tips", None, "binary")
  assert floors.label_sets_floor("tips", "tips", "binary")
  assert floors.label_sets_floor("tips", "tips_xf", "auto")
  assert not floors.label_sets_floor("tips", "tips_xf", "binary")
  assert floors.automatic("auto", "tips", "tips_xf", None, None)
  assert not floors.automatic("binary", "tips", "tips_xf", None, None)
  assert not floors.automatic("binary", "tips", None, 0.8, None)
  assert not floors.automatic("regression", "tips", None, None, 1.0)
  assert floors.computed_label_reason("binary", None, None, "tips", "tips_xf") == (
    "no floor (the model learns 'tips_xf', which the Transform computes, so the column 'tips' "
    "sets no automatic one)"
  )
  assert floors.computed_label_reason("regression", None, 2.0, "y", "y_xf").startswith(
    "--max-mse 2 (the model learns 'y_xf'"
  )
  assert floors.computed_label_reason("regression", None, None, "y", "y_xf").startswith(
    "no ceiling (the model"
  )
  assert floors.computed_label_reason("multiclass", 0.7, None, "y", "y_xf").startswith(
    "--min-accuracy 0.7 (the model"
  )


def test_a_count_kept_as_classes_has_no_accuracy_floor_and_says_what_blesses_it():
  floor = floors.count_classes_floor()
  assert (floor.value, floor.auto) == (0.0, True)
  assert "expected value" in floor.reason and "--min-accuracy" in floor.reason


def test_the_expected_value_error_weighs_normalized_scores_over_the_class_values():
  # Scores that do not sum to 1 are normalized first: [1, 1] over values 0 and 4 expects 2.
  scores = [[1.0, 1.0], [0.0, 0.5], [0.25, 0.0]]
  assert floors.expected_value_rmse(scores, [0.0, 4.0], [2.0, 4.0, 0.0]) == 0.0
  assert floors.expected_value_rmse(scores, [0.0, 4.0], [4.0, 4.0, 3.0]) == pytest.approx(
    ((4 + 0 + 9) / 3) ** 0.5
  )
