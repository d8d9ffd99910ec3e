"""A column new tonight that answers the label alone: scored on held-out rows, numpy only."""

from __future__ import annotations

import numpy as np
import pytest

from components.data_gate import leak_check
from components.data_gate import thresholds as th

ROWS = 2000


def _text(values) -> np.ndarray:
  return np.array([None if v is None else str(v).encode() for v in values], dtype=object)


@pytest.fixture(scope="module")
def binary():
  rng = np.random.default_rng(0)
  label = (rng.random(ROWS) < 0.3).astype(np.float64)
  noisy = np.where(rng.random(ROWS) < 0.8, label, 1 - label)
  return {
    "label": label,
    # A flag written after the outcome, with a few empty cells.
    "refunded": _text([None if i % 50 == 0 else ("Y" if v else "N") for i, v in enumerate(label)]),
    # The label as an amount: zero or a positive number.
    "refund_amount": np.where(label > 0, rng.uniform(5, 500, ROWS), 0.0),
    "useful": _text(["A" if v else "B" for v in noisy]),
    "id": _text(range(ROWS)),
    "score": rng.normal(size=ROWS) + label,
  }


def _found(columns, new, classification=True, thresholds=None):
  return leak_check.findings(
    columns,
    label_key="label",
    new_columns=new,
    classification=classification,
    thresholds=thresholds or th.Thresholds(),
  )


def test_a_copy_of_a_class_label_is_found_and_a_useful_column_is_not(binary):
  found = _found(binary, ["refunded", "refund_amount", "useful", "id", "score"])
  assert [f.column for f in found] == ["refunded", "refund_amount"]
  assert all(f.check == th.LEAK and f.stops for f in found)
  assert found[0].value == found[1].value == 1.0
  assert found[0].text.startswith("'refunded' is new tonight and gives the label away: alone it")
  assert "(the most frequent class: 69.6%)" in found[0].text
  accuracy, majority = leak_check.lookup_score(binary["useful"], binary["label"], True)
  assert 0.75 < accuracy < 0.85 and 0.65 < majority < 0.75
  # Ids answer nothing on rows the lookup never saw.
  accuracy, majority = leak_check.lookup_score(binary["id"], binary["label"], True)
  assert accuracy == majority


def test_on_a_first_night_every_column_is_scored_and_a_leak_is_a_note(binary):
  # Nothing live: no version says which columns are the model's own, so nothing stops.
  found = leak_check.findings(
    binary,
    label_key="label",
    new_columns=["refunded", "refund_amount", "useful", "id", "score"],
    classification=True,
    thresholds=th.Thresholds(),
    first_night=True,
  )
  assert [f.column for f in found] == ["refunded", "refund_amount"]
  assert not any(f.stops for f in found) and {f.kind for f in found} == {"info"}
  assert found[0].text.startswith("'refunded' gives the label away: alone it answers 'label'")
  assert found[0].text.endswith("; --exclude-columns refunded leaves it out")


def test_the_threshold_is_set_per_column_and_off(binary):
  off = th.parse_thresholds(["refunded:leak=off"])
  assert [f.column for f in _found(binary, ["refunded"], thresholds=off)] == []
  lower = th.parse_thresholds(["leak=0.76"])
  found = _found(binary, ["refunded", "useful"], thresholds=lower)
  assert [f.column for f in found] == ["refunded", "useful"]


def test_a_label_that_barely_varies_cannot_be_given_away():
  label = np.zeros(ROWS)
  label[::100] = 1.0
  columns = {"label": label, "copy": label.copy()}
  assert _found(columns, ["copy"]) == []


def test_a_number_label_in_other_units_is_found_by_its_rank_correlation():
  rng = np.random.default_rng(1)
  fare = rng.gamma(2.0, 10.0, ROWS)
  columns = {
    "label": fare,
    "fare_cents": np.round(fare * 100),
    "miles": fare / 2.5 + rng.normal(0, 4, ROWS),
    "text": _text(rng.choice(["a", "b", "c"], ROWS)),
  }
  found = _found(columns, ["fare_cents", "miles", "text"], classification=False)
  assert [f.column for f in found] == ["fare_cents"]
  assert "with an R-squared of 1.000 on held-out rows" in found[0].text


def test_too_few_labelled_rows_are_not_scored():
  label = np.array([0.0, 1.0] * 10)
  assert leak_check.lookup_score(label.copy(), label, True) is None
