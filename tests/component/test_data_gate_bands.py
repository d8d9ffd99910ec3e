"""The data gate with each column's band and the shape check, on the taxi sample through the
kit's ExampleGen and StatisticsGen executors and TFDV's comparators."""

import numpy as np
import pandas as pd
import pytest

from components.data_gate import bands, gate_lib
from components.data_gate import report as gate_report
from components.data_gate import thresholds as th
from tests.support import gate_data

LABEL = gate_data.TAXI_LABEL


@pytest.fixture(scope="module")
def taxi(tmp_path_factory):
  """The reference (a random half), a normal night (a random half of the rest) and faults."""
  work = tmp_path_factory.mktemp("taxi_bands")
  frame = gate_data.taxi_frame()
  order = np.random.default_rng(0).permutation(len(frame))
  half = len(frame) // 2
  reference, rest = frame.iloc[order[:half]], frame.iloc[order[half:]]
  tonight = rest.sample(frac=0.5, random_state=1)
  hours = pd.to_numeric(tonight["trip_start_hour"])
  variants = {
    "reference": reference,
    "normal": tonight,
    "celsius": _affine(tonight, "fare", 1.8, 32),
    "offset": _affine(tonight, "fare", 1.0, 8),
    "clock": tonight.assign(trip_start_hour=((hours + 5) % 24).astype(int).astype(str)),
  }
  nights = {}
  for name, data in variants.items():
    path = gate_data.write_csv(data, work / name / "csv")
    nights[name] = gate_data.night_from_csv(path, work / name, LABEL)
  return nights


def _affine(frame, column, factor, offset):
  values = pd.to_numeric(frame[column], errors="coerce") * factor + offset
  return frame.assign(**{column: ["" if np.isnan(v) else f"{v:.6g}" for v in values]})


def _gate(taxi, name, history=()):
  return gate_lib.evaluate(
    taxi[name],
    taxi["reference"],
    live_version=1,
    label_key=LABEL,
    classification=True,
    read_columns=None,
    thresholds=th.Thresholds(),
    history=history,
  )


def _history(report, column, value, nights=6):
  """Normal nights like `report`'s, with `column` at `value` (a low-noise column)."""
  out = []
  for i in range(nights):
    data = report.to_json()
    data["drift"] = {c: dict(m) for c, m in data["drift"].items()}
    data["drift"][column]["value"] = value * (1 + 0.1 * (i % 3 - 1))
    out.append(data)
  return out


def test_a_normal_night_passes_with_and_without_its_history(taxi):
  first = _gate(taxi, "normal")
  assert first.passed, [f.text for f in first.stopping]
  assert not any("band" in m for m in first.drift.values())
  again = _gate(taxi, "normal", [first.to_json()] * bands.MIN_NIGHTS)
  assert again.passed, [f.text for f in again.stopping]
  assert all("band" in m for m in again.drift.values())


def test_a_low_noise_column_that_moves_far_past_its_band_stops_naming_band_and_value(taxi):
  normal = _gate(taxi, "normal")
  value = normal.drift["fare"]["value"]
  report = _gate(taxi, "normal", _history(normal, "fare", value / 50))
  assert not report.passed
  [stop] = report.stopping
  assert (stop.column, stop.check) == ("fare", th.DRIFT)
  assert stop.value == pytest.approx(value) and stop.threshold < th.DEFAULTS[th.DRIFT]
  assert "its band" in stop.text and f"{value:.3f}" in stop.text
  data = report.to_json()
  assert data["drift"]["fare"]["band"]["nights"] == 6
  assert data["drift"]["fare"]["threshold"] == pytest.approx(stop.threshold)
  assert "its band" in gate_report.stop_message(report, "accept it")


@pytest.mark.parametrize(
  ("night", "column", "words"),
  [
    ("celsius", "fare", "looks like the reference x 1.8"),
    ("offset", "fare", "looks like the reference plus 8"),
    ("clock", "trip_start_hour", "(period 24)"),
  ],
)
def test_changes_that_keep_a_columns_shape_stop_and_are_named(taxi, night, column, words):
  report = _gate(taxi, night)
  found = [f for f in report.stopping if f.check == th.SHAPE]
  assert [f.column for f in found] == [column], [f.text for f in report.stopping]
  assert words[:-2] in found[0].text, found[0].text


def test_the_executor_reads_each_nights_gate_report_from_the_nights_log(tmp_path):
  from components.data_gate import executor
  from components.serving import nights
  from core import properties

  report = {"passed": True, "compared": True, "drift": {}, "findings": []}
  nights.append_record(str(tmp_path), "taxi", {"night": "a", "gate": report})
  nights.append_record(str(tmp_path), "taxi", {"night": "b", "gate": None})
  props = {properties.SERVING_DIR_KEY: str(tmp_path), properties.MODEL_NAME_KEY: "taxi"}
  assert executor._gate_history(props) == [report, None]
  assert executor._gate_history({**props, properties.MODEL_NAME_KEY: "other"}) == []
  # Span 10 read again on five nights against version 1: one normal night, its latest.
  rereads = [{**report, "live_version": 1, "drift": {"x": {"value": v}}} for v in range(5)]
  for i, gate in enumerate(rereads):
    nights.append_record(str(tmp_path), "t", {"night": f"r{i}", "spans": [10], "gate": gate})
  later = {**report, "live_version": 2}
  nights.append_record(str(tmp_path), "t", {"night": "v2", "spans": [10], "gate": later})
  nights.append_record(str(tmp_path), "t", {"night": "s11", "spans": [11], "gate": later})
  props = {**props, properties.MODEL_NAME_KEY: "t"}
  assert executor._gate_history(props) == [rereads[-1], later, later]
