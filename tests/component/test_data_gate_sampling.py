"""The data gate on a small table through the kit's ExampleGen and StatisticsGen executors and
TFDV: values a new sample of a many-valued text column is expected to hold, and a pure scale of
a whole-number column under the unit bound."""

import numpy as np
import pandas as pd
import pytest

from components.data_gate import column_checks, gate_lib
from components.data_gate import report as gate_report
from components.data_gate import stats_view as sv
from components.data_gate import thresholds as th
from tests.support import gate_data

LABEL = "label"


@pytest.fixture(scope="module")
def cars(tmp_path_factory):
  """Two disjoint samples of one table (like mpg's halves): `model` has 90 values, many rare,
  `credit` is whole amounts from near zero with a long tail."""
  work = tmp_path_factory.mktemp("gate_sampling")
  rng = np.random.default_rng(0)
  rows = 400
  weights = 1.0 / np.arange(1, 91) ** 0.7
  models = rng.choice([f"model {i}" for i in range(90)], rows, p=weights / weights.sum())
  credit = np.round(rng.exponential(30000, rows)).astype(int)
  frame = pd.DataFrame(
    {
      "model": models,
      "maker": rng.choice(["a", "b", "c", "d"], rows),
      "credit": credit.astype(str),
      "x": np.round(rng.normal(10, 2, rows), 3).astype(str),
      LABEL: rng.choice(["0", "1"], rows),
    }
  )
  reference, tonight = frame.iloc[: rows // 2], frame.iloc[rows // 2 :]
  scaled = pd.to_numeric(tonight["credit"]) * 1.8 + 32
  variants = {
    "reference": reference,
    "normal": tonight,
    "fahrenheit": tonight.assign(credit=[f"{v:.6g}" for v in scaled]),
    "renamed": tonight.assign(model=[f"C{i % 40}" for i in range(len(tonight))]),
  }
  nights = {}
  for name, data in variants.items():
    path = gate_data.write_csv(data, work / name / "csv")
    nights[name] = gate_data.night_from_csv(path, work / name, LABEL)
  return nights


def _gate(cars, name):
  return gate_lib.evaluate(
    cars[name],
    cars["reference"],
    live_version=1,
    label_key=LABEL,
    classification=True,
    read_columns=None,
    thresholds=th.Thresholds(),
  )


def test_a_new_sample_of_a_many_valued_column_passes_naming_the_expected_unseen_share(cars):
  """About 20% of tonight's cells hold models the reference never had (past the bound of 10%,
  which stopped such nights before), while 13% of the reference's cells hold models seen once."""
  report = _gate(cars, "normal")
  ref = sv.column_stats(cars["reference"].statistics)["model"]
  now = sv.column_stats(cars["normal"].statistics)["model"]
  expected, _ = column_checks.unseen_share(ref)
  assert column_checks.new_value_share(now, ref) > 0.1 and expected > 0.1
  assert report.passed, [f.text for f in report.stopping]
  [note] = [f for f in report.findings if f.check == th.NEW_VALUES]
  assert note.kind == gate_report.INFO and note.value > 0.1
  assert "as a new sample of it does (expected" in note.text


def test_renamed_values_still_stop_naming_the_expected_unseen_share(cars):
  report = _gate(cars, "renamed")
  [stop] = [f for f in report.stopping if f.check == th.NEW_VALUES]
  assert stop.column == "model" and stop.value == pytest.approx(1.0)
  assert "a new sample: expected" in stop.text


def test_a_pure_scale_under_the_unit_bound_that_makes_whole_numbers_decimal_stops(cars):
  """x 1.8 + 32 on amounts in the tens of thousands: a scale of 1.8 (under the unit bound of 2)
  that gives whole numbers decimals (information) and stays under the drift bound."""
  report = _gate(cars, "fahrenheit")
  [stop] = report.stopping
  assert stop.check == th.SHAPE and stop.column == "credit"
  assert "looks like the reference x 1.8" in stop.text and "of its size" in stop.text
