"""tasks.infer_task: the task a label asks for, and one-line errors for labels it cannot be."""

import pytest

from core import errors, tasks
from core.column_types import CSV_FLOAT, CSV_INT, CSV_STRING


def infer(kind, distinct, count=None, requested=tasks.AUTO, max_classes=1000):
  count = len(distinct) if count is None else count
  return tasks.infer_task("y", kind, distinct, count, requested, max_classes)


@pytest.mark.parametrize(
  ("kind", "distinct", "expected"),
  [
    (CSV_STRING, ["benign", "malignant"], tasks.BINARY),
    (CSV_INT, [0, 1], tasks.BINARY),
    (CSV_FLOAT, [0.0, 1.0], tasks.BINARY),
    (CSV_STRING, ["setosa", "versicolor", "virginica"], tasks.MULTICLASS),
    (CSV_INT, list(range(10)), tasks.MULTICLASS),
    (CSV_FLOAT, [0.5, 1.25, 3.0], tasks.REGRESSION),
  ],
)
def test_auto_task_from_the_label_values(kind, distinct, expected):
  assert infer(kind, distinct) == expected


def test_many_integer_values_are_classes_up_to_the_cap_and_regression_when_asked():
  assert infer(CSV_INT, list(range(50))) == tasks.MULTICLASS
  assert infer(CSV_INT, list(range(50)), requested=tasks.REGRESSION) == tasks.REGRESSION
  assert infer(CSV_STRING, ["a", "b"], requested=tasks.MULTICLASS) == tasks.MULTICLASS


def test_whole_numbers_past_twenty_values_are_classes_only_as_a_run_of_codes():
  assert infer(CSV_INT, list(range(1, 51))) == tasks.MULTICLASS  # codes 1..50
  # penguins-raw "Body Mass (g)": 94 values from 2,700 to 6,300 in steps of 25.
  assert infer(CSV_INT, list(range(2700, 2700 + 25 * 94, 25))) == tasks.REGRESSION
  # randhie "mdvis", doctor visits: 59 values from 0 to 77, with gaps.
  visits = [*range(59 - 10), 57, 58, 62, 63, 65, 69, 72, 74, 76, 77]
  assert infer(CSV_INT, visits) == tasks.REGRESSION
  assert infer(CSV_INT, visits, requested=tasks.MULTICLASS) == tasks.MULTICLASS
  # Up to twenty whole numbers are classes whatever they are (wine quality 3..9, years).
  assert infer(CSV_INT, [3, 4, 5, 6, 7, 8, 9]) == tasks.MULTICLASS
  assert infer(CSV_INT, list(range(1990, 2010))) == tasks.MULTICLASS


def test_class_cap_names_the_column_and_the_count():
  with pytest.raises(tasks.LabelError) as raised:
    infer(CSV_INT, list(range(10)), requested=tasks.MULTICLASS, max_classes=3)
  message = str(raised.value)
  assert message.startswith("label column 'y' has 10 distinct values, over the 3-class cap;")
  assert "--max-classes N" in message and "--task regression" in message
  assert "\n" not in message
  # Text is no quantity: the fix it is offered is not one that --task regression refuses.
  with pytest.raises(tasks.LabelError) as raised:
    infer(CSV_STRING, [f"c{i}" for i in range(10)], max_classes=3)
  assert str(raised.value) == (
    "label column 'y' has 10 distinct values, over the 3-class cap; it holds text, so it is no "
    "quantity: pass another --label-key, or --max-classes N to allow more classes."
  )


def test_many_distinct_integers_are_a_quantity():
  # A price column: thousands of whole numbers, no classes.
  assert infer(CSV_INT, list(range(20)), count=5919, max_classes=10) == tasks.REGRESSION
  with pytest.raises(tasks.LabelError, match="over the 10-class cap"):
    infer(CSV_INT, list(range(20)), count=5919, requested=tasks.MULTICLASS, max_classes=10)


def test_class_cap_with_a_count_that_stopped_early_says_at_least():
  # A profile that stopped after 4 values passes what it counted plus one.
  with pytest.raises(tasks.LabelError, match="has at least 4 distinct values, over the 3-class"):
    infer(CSV_STRING, ["a", "b", "c", "d"], count=5, max_classes=3)
  with pytest.raises(tasks.LabelError, match="has at least 12 distinct values"):
    infer(CSV_STRING, [], count=13, max_classes=3)


def test_class_cap_applies_to_a_requested_classification_but_not_to_regression():
  with pytest.raises(tasks.LabelError, match="over the 5-class cap"):
    infer(CSV_FLOAT, [float(i) for i in range(6)], requested=tasks.MULTICLASS, max_classes=5)
  floats = [float(i) for i in range(6)]
  assert infer(CSV_FLOAT, floats, max_classes=5) == tasks.REGRESSION


def test_one_value_is_refused_naming_it():
  with pytest.raises(tasks.LabelError) as raised:
    infer(CSV_STRING, ["spam"])
  assert "label column 'y' has one value only ('spam')" in str(raised.value)
  assert "--label-key" in str(raised.value)
  # The trainer sees the train split alone: a column of 1,258 yes and 61 no, whose no all fell
  # in eval, was said to have one value only.
  with pytest.raises(tasks.LabelError) as raised:
    tasks.infer_task("y", CSV_STRING, ["yes"], 1, rows="the train split")
  assert str(raised.value).startswith(
    "label column 'y' has one value only in the train split ('yes'), though other rows may hold"
  )


@pytest.mark.parametrize(("kind", "count"), [(None, 0), (CSV_INT, 0)])
def test_empty_label_is_refused(kind, count):
  with pytest.raises(tasks.LabelError, match="label column 'y' is empty in every row") as raised:
    infer(kind, [], count=count)
  # A later night's feed that lost its labels is as likely as a wrong column on a first run.
  assert "fix the data" in str(raised.value) and "--label-key" in str(raised.value)


def test_text_values_that_differ_only_in_spaces_around_them_are_refused_naming_them():
  # A padded export (" yes", "yes "): eight classes for a yes/no label, at 0.55 accuracy.
  for requested in (tasks.AUTO, tasks.MULTICLASS, tasks.BINARY):
    with pytest.raises(tasks.LabelError) as raised:
      infer(CSV_STRING, [" no", " yes", "no", "yes", "yes "], requested=requested)
    assert str(raised.value) == (
      "label column 'y' has values that differ only in the spaces around them (' no', 'no'), "
      "which would train as different classes; strip the spaces from that column in the data "
      "and run again."
    )
  # Padded the same way throughout (UCI Adult's " <=50K", " >50K"), or spaces inside a value:
  # classes as they are.
  assert infer(CSV_STRING, [" <=50K", " >50K"]) == tasks.BINARY
  assert infer(CSV_STRING, ["new york", "newyork", "boston"]) == tasks.MULTICLASS
  # Numbers are read as numbers, whatever their padding.
  assert infer(CSV_INT, [0, 1]) == tasks.BINARY


def test_text_values_that_differ_only_in_case_are_refused_unless_multiclass_is_asked():
  # AER's CreditCard with a third of its "yes" written "Yes": 3 classes, accuracy 0.73 (0.96).
  with pytest.raises(tasks.LabelError) as raised:
    infer(CSV_STRING, ["Yes", "no", "yes"])
  assert str(raised.value) == (
    "label column 'y' has values that differ only in case ('Yes', 'yes'), which would train as "
    "different classes; write each class one way in the data, or pass --task multiclass if they "
    "are different classes."
  )
  # Where case is the class (a chess piece: K the white king, k the black), on request.
  assert infer(CSV_STRING, ["K", "k", "Q"], requested=tasks.MULTICLASS) == tasks.MULTICLASS
  assert infer(CSV_STRING, ["Yes", "No"]) == tasks.BINARY


def test_requested_task_checks():
  with pytest.raises(tasks.LabelError, match="--task binary needs exactly two label values"):
    infer(CSV_STRING, ["a", "b", "c"], requested=tasks.BINARY)
  # fair's affairs (0.111, 3.23, ...): the advice was --task multiclass, 77 float classes.
  with pytest.raises(tasks.LabelError, match=r"has 3; pass --task regression \(or auto\)\.$"):
    infer(CSV_FLOAT, [0.111, 3.23, 7.0], requested=tasks.BINARY)
  with pytest.raises(tasks.LabelError, match=r"pass --task multiclass \(or auto\)\.$"):
    infer(CSV_INT, [0, 1, 2], requested=tasks.BINARY)
  with pytest.raises(tasks.LabelError, match="holds text, so it cannot be a regression target"):
    infer(CSV_STRING, ["a", "b", "c"], requested=tasks.REGRESSION)
  with pytest.raises(tasks.LabelError, match="--task 'ranking' is unknown"):
    infer(CSV_STRING, ["a", "b"], requested="ranking")


def test_label_errors_are_user_input_errors_found_through_the_cause_chain():
  try:
    try:
      infer(CSV_STRING, ["only"])
    except tasks.LabelError as e:
      raise RuntimeError("wrapped by an orchestrator") from e
  except RuntimeError as outer:
    found = errors.find(outer, errors.UserInputError)
  assert isinstance(found, tasks.LabelError)
  assert "one value only" in str(found)


def test_label_info_sorts_classes_and_round_trips_json():
  info = tasks.label_info("species", tasks.MULTICLASS, ["virginica", "setosa", "versicolor"])
  assert info.classes == ("setosa", "versicolor", "virginica")
  assert tasks.LabelInfo.from_json(info.to_json()) == info
  assert tasks.label_info("price", tasks.REGRESSION, [1.0, 2.0]).classes == ()


@pytest.mark.parametrize(
  ("kind", "distinct", "count", "requested", "reason"),
  [
    (CSV_INT, list(range(10)), 10, tasks.AUTO, "10 whole-number values"),
    (CSV_INT, list(range(1, 30)), 29, tasks.AUTO, "whole-number codes 1..29"),
    (
      CSV_INT,
      [1, 2, 5, 9, 13, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 40],
      22,
      tasks.AUTO,
      "22 whole-number values (1..40), more than 20 and not a run of codes from 0 or 1",
    ),
    (CSV_INT, list(range(1000)), 1001, tasks.AUTO, "at least 1,000 whole-number values"),
    # What csv_profile passes once it stopped counting: no values, the count so far plus one.
    (CSV_INT, [], 1001, tasks.AUTO, "at least 1,000 whole-number values"),
    (CSV_STRING, ["a", "b", "c"], 3, tasks.AUTO, "3 text values"),
    (CSV_STRING, ["female", "male"], 2, tasks.AUTO, "two label values"),
    (CSV_FLOAT, [0.5, 1.25, 3.0], 3, tasks.AUTO, "numbers with a decimal point"),
    # pandas writes integer codes with an empty cell among them as 1.0, 2.0 (mi's nlsyV).
    (
      CSV_FLOAT,
      [1.0, 2.0, 3.0, 4.0],
      4,
      tasks.AUTO,
      "numbers with a decimal point, though its 4 values 1..4 are whole; --task multiclass reads "
      "them as classes",
    ),
    (CSV_FLOAT, [float(v) for v in range(30)], 30, tasks.AUTO, "numbers with a decimal point"),
    (CSV_INT, list(range(10)), 10, tasks.REGRESSION, "--task regression"),
  ],
)
def test_the_reason_for_the_task_names_what_decided_it(kind, distinct, count, requested, reason):
  task = tasks.infer_task("y", kind, distinct, count, requested, 1000)
  assert tasks.task_reason(kind, distinct, count, requested, task, 1000) == reason


def test_the_reason_names_the_class_cap_a_whole_number_label_is_over():
  values = list(range(30))
  task = tasks.infer_task("y", CSV_INT, values, 30, tasks.AUTO, 20)
  assert task == tasks.REGRESSION
  assert tasks.task_reason(CSV_INT, values, 30, tasks.AUTO, task, 20) == (
    "30 whole-number values, over --max-classes 20"
  )


# ----------------------------------------------------------------------------- count readings


@pytest.mark.parametrize(
  ("kind", "distinct", "requested", "task", "expected"),
  [
    (CSV_INT, list(range(10)), tasks.AUTO, tasks.MULTICLASS, True),  # digits, or visits
    (CSV_INT, [0, 1, 2, 3, 7, 12], tasks.AUTO, tasks.MULTICLASS, True),  # Affairs' counts
    (CSV_INT, list(range(1, 29)), tasks.AUTO, tasks.MULTICLASS, True),  # spell lengths
    (CSV_INT, [0, 1], tasks.AUTO, tasks.BINARY, False),  # two values: binary
    (CSV_INT, [-1, 0, 1], tasks.AUTO, tasks.MULTICLASS, False),  # a negative: no count
    (CSV_INT, list(range(10)), tasks.MULTICLASS, tasks.MULTICLASS, False),  # --task wins
    (CSV_INT, list(range(10)), tasks.REGRESSION, tasks.REGRESSION, False),
    (CSV_FLOAT, [0.0, 1.0, 2.0], tasks.AUTO, tasks.REGRESSION, False),
    (CSV_STRING, ["a", "b", "c"], tasks.AUTO, tasks.MULTICLASS, False),
  ],
)
def test_which_labels_are_read_both_as_classes_and_as_a_quantity(
  kind, distinct, requested, task, expected
):
  assert tasks.reads_both(kind, distinct, len(distinct), requested, task) is expected


def test_a_count_whose_values_were_not_all_counted_is_not_read_both_ways():
  assert not tasks.reads_both(CSV_INT, [0, 1, 2], 4, tasks.AUTO, tasks.MULTICLASS)


def test_the_reading_that_errs_less_wins_and_the_sentence_says_by_how_much():
  quantity = tasks.Readings(classes_rmse=0.561, quantity_rmse=0.5, rows=1200)
  assert (quantity.winner, quantity.task) == (tasks.QUANTITY_READING, tasks.REGRESSION)
  assert quantity.describe() == (
    "read as a quantity: held-out RMSE 0.561 as classes against 0.5 as a quantity on 1,200 "
    "rows, 10.9% lower (--task multiclass or --task regression sets one)"
  )
  classes = tasks.Readings(classes_rmse=0.2, quantity_rmse=1.0, rows=50)
  assert (classes.winner, classes.task) == (tasks.CLASSES_READING, tasks.MULTICLASS)
  assert classes.describe().startswith("read as classes: held-out RMSE 0.2 as classes against 1")
  assert "80.0% lower" in classes.describe()
  # A tie keeps the classes, which the automatic rule chose before the evidence.
  assert tasks.Readings(1.0, 1.0, 10).winner == tasks.CLASSES_READING
  assert tasks.Readings.from_json(quantity.to_json()) == quantity


@pytest.mark.parametrize(
  "transformed, raw_text, expected",
  [
    ({"species_xf", "species"}, True, tasks.TRANSFORMED),  # the Transform's own label first
    ({"species_xf"}, False, tasks.RAW),  # renamed by the Transform; its raw number serves
    (None, False, tasks.RAW),  # no Transform: the column as written
  ],
)
def test_the_label_is_read_transformed_first_then_raw_as_tfma_reads_it(
  transformed, raw_text, expected
):
  assert tasks.label_view("species", transformed, raw_text) == expected


@pytest.mark.parametrize(
  "transformed, raw_text, message",
  [
    ({"species_xf"}, True, "Transform does not pass it on under that name"),
    (None, True, "scored against the label as the examples hold it"),
    ({"species_xf"}, None, "not among the transformed features"),
    (None, None, "not among the features"),
  ],
)
def test_a_label_with_no_number_to_score_against_names_the_flag(transformed, raw_text, message):
  with pytest.raises(tasks.LabelError, match=message) as caught:
    tasks.label_view("species", transformed, raw_text)
  assert str(caught.value).count(". ") == 0 and str(caught.value).endswith("."), caught.value
  assert "--eval-label-key" in str(caught.value)
