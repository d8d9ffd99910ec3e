"""The data gate on a real table over nights: the Chicago taxi sample inside the tfx wheel.

Each night is a CSV run through the kit's own ExampleGen and StatisticsGen executors, as the
pipeline runs them; the faults are the ones upstream sources deliver.
"""

import dataclasses
import json
import os

import numpy as np
import pytest
from tfx.types import standard_artifacts

from components.artifact_files import gate_result
from components.data_gate import executor as gate_executor
from components.data_gate import gate_lib, live_check
from components.data_gate import report as gate_report
from components.data_gate import thresholds as th
from components.model_scoring import outputs_lib
from core import properties
from core.errors import UserInputError
from tests.support import gate_data

LABEL = gate_data.TAXI_LABEL


@pytest.fixture(scope="module")
def taxi(tmp_path_factory):
  """The reference night (the first half) and tonight's variants of the second half."""
  work = tmp_path_factory.mktemp("taxi")
  frame = gate_data.taxi_frame()
  half = len(frame) // 2
  first, second = frame.iloc[:half], frame.iloc[half:]
  payment_codes = {v: str(i) for i, v in enumerate(sorted(set(second["payment_type"])))}
  variants = {
    "reference": first,
    "normal": second,
    "metres": gate_data.unit_change(second, "trip_miles", 1609.34),
    "cents": gate_data.unit_change(second, "fare", 100),
    "renamed": gate_data.rename_values(
      second, "payment_type", {"Cash": "CSH", "Credit Card": "CRD"}
    ),
    "codes": gate_data.rename_values(second, "payment_type", payment_codes),
    "missing": gate_data.drop_column(second, "trip_seconds"),
    "emptied": gate_data.empty_column(second, "fare"),
    "inverted": gate_data.invert_label(second, LABEL),
    "new_class": gate_data.new_label_class(second, LABEL, "2", every=20),
    "small": second.iloc[::12],
    # The second half again, its rows shuffled.
    "repeated": second.sample(frac=1.0, random_state=3),
  }
  nights = {}
  for name, data in variants.items():
    path = gate_data.write_csv(data, work / name / "csv")
    nights[name] = gate_data.night_from_csv(path, work / name, LABEL)
  return nights


def _gate(taxi, name, **kwargs):
  options = {
    "live_version": 1,
    "label_key": LABEL,
    "classification": True,
    "read_columns": None,
    "thresholds": th.Thresholds(),
  }
  options.update(kwargs)
  return gate_lib.evaluate(taxi[name], taxi["reference"], **options)


def _stops(report):
  return {(f.column, f.check) for f in report.stopping}


def test_a_normal_night_passes_and_notes_the_column_that_filled_in(taxi):
  report = _gate(taxi, "normal")
  assert report.passed, [f.text for f in report.stopping]
  # pickup_census_tract is empty in every row of the first half, filled once in the second.
  [note] = [f for f in report.findings if f.column == "pickup_census_tract"]
  assert note.kind == gate_report.INFO and note.check == gate_report.NEW_COLUMN
  # Every column with values on both nights got a drift measurement from TFDV.
  assert {"fare", "trip_miles", "payment_type", "company"} <= set(report.drift)
  assert report.drift["payment_type"]["statistic"] == "L-infinity distance"
  assert report.drift["fare"]["statistic"] == "Jensen-Shannon divergence"
  assert all(m["value"] < m["threshold"] for m in report.drift.values())
  tonight, reference = taxi["normal"].statistics, taxi["reference"].statistics
  assert report.rows == {"tonight": tonight.num_examples, "reference": reference.num_examples}


@pytest.mark.parametrize(
  ("night", "column", "checks"),
  [
    ("metres", "trip_miles", {"drift", "scale"}),
    ("cents", "fare", {"drift", "scale"}),
    ("renamed", "payment_type", {"drift", "new_values"}),
    ("codes", "payment_type", {"type"}),
    ("missing", "trip_seconds", {"missing_column"}),
    ("emptied", "fare", {"emptied"}),
    ("inverted", LABEL, {"label"}),
  ],
)
def test_each_fault_stops_the_night_naming_its_column(taxi, night, column, checks):
  report = _gate(taxi, night)
  assert not report.passed
  assert {c for col, c in _stops(report) if col == column} >= checks
  # Nothing else stops it: the rest of the night is the normal one.
  assert {col for col, _ in _stops(report)} == {column}
  line = gate_report.stop_message(report, "pass --accept-changes {columns}")
  assert "\n" not in line and repr(column) in line
  assert f"--accept-changes {column}" in line
  assert "live version 1 stays live" in line


def test_a_label_class_the_live_data_never_had_stops_the_night_however_rare(taxi):
  # 5% of tonight's rows: within the class shares' bound (0.15) and TFDV's domain mass (10%).
  report = _gate(taxi, "new_class")
  [finding] = report.stopping
  assert (finding.column, finding.check) == (LABEL, th.LABEL)
  assert finding.text.startswith(f"the label {LABEL!r} has classes the live version was not")
  # Counted on the train split (4 in 5 rows).
  assert "not trained on: '2' (295 rows, 4.9%)" in finding.text and 0.04 < finding.value < 0.06
  assert _gate(taxi, "new_class", accepted=[LABEL]).passed
  assert _gate(taxi, "new_class", thresholds=th.parse_thresholds(["label=off"])).passed


def test_the_stop_line_gives_the_statistic_and_its_threshold(taxi):
  report = _gate(taxi, "metres")
  [drift] = [f for f in report.stopping if f.check == th.DRIFT]
  assert drift.value > drift.threshold == 0.4
  assert f"{drift.value:.3f} > 0.4" in drift.text
  [scale] = [f for f in report.stopping if f.check == th.SCALE]
  assert 1000 < scale.value < 2500 and scale.threshold == 2.0


def test_accepted_columns_pass_and_stay_in_the_report(taxi):
  report = _gate(taxi, "metres", accepted=["trip_miles"])
  assert report.passed
  accepted = [f for f in report.findings if f.accepted]
  assert {f.check for f in accepted} == {"drift", "scale"}
  assert report.accepted == ("trip_miles",)
  assert _gate(taxi, "emptied", accepted=[th.ALL]).passed
  assert not _gate(taxi, "emptied", accepted=["trip_miles"]).passed


def test_thresholds_are_set_per_column_and_can_be_turned_off(taxi):
  loose = th.parse_thresholds(["trip_miles:drift=off", "trip_miles:scale=5000"])
  assert _gate(taxi, "metres", thresholds=loose).passed
  # The same settings leave other columns at the defaults.
  assert not _gate(taxi, "cents", thresholds=loose).passed
  strict = th.parse_thresholds(["drift=0.01"])
  assert not _gate(taxi, "normal", thresholds=strict).passed


def test_a_column_the_live_model_does_not_read_only_informs(taxi):
  columns = [f.name for f in taxi["reference"].schema.feature if f.name != "trip_miles"]
  report = _gate(taxi, "metres", read_columns=columns)
  [drift] = [f for f in report.findings if f.check == th.DRIFT]
  assert drift.kind == gate_report.INFO and "does not read it" in drift.text
  # A unit change still stops it: the column is still in the data, wrong.
  assert ("trip_miles", th.SCALE) in _stops(report)


def test_a_night_far_smaller_than_the_live_versions_stops_on_the_row_count(taxi):
  report = _gate(taxi, "small")
  assert (th.ROW_COUNT, th.ROWS) in _stops(report)
  assert _gate(taxi, "small", accepted=[th.ROW_COUNT]).passed


def test_a_span_holding_the_rows_the_live_version_was_trained_on_stops_the_night(taxi):
  def as_span(night, span):
    [digest] = night.span_digests.values()
    return dataclasses.replace(night, span_digests={str(span): digest})

  options = {"live_version": 2, "label_key": LABEL, "classification": True}
  options.update(read_columns=None, thresholds=th.Thresholds())
  live = as_span(taxi["normal"], 2)
  report = gate_lib.evaluate(as_span(taxi["repeated"], 3), live, **options)
  assert _stops(report) == {(th.REPEATED_DATA, gate_lib.REPEATED)}
  assert report.stopping[0].text.startswith(
    "span 3 holds the same 7,501 rows as span 2, which live version 2 was trained on"
  )
  again = as_span(taxi["repeated"], 3)
  assert gate_lib.evaluate(again, live, **options, accepted=[th.REPEATED_DATA]).passed
  # The same span read again (a rerun), and a new span of other rows, are no repeat.
  assert gate_lib.evaluate(as_span(taxi["repeated"], 2), live, **options).passed
  other = gate_lib.evaluate(as_span(taxi["reference"], 3), live, **options)
  assert gate_lib.REPEATED not in {f.check for f in other.findings}
  # Rows an earlier version still kept was trained on: span 1 delivered again as span 4 (the
  # live version 2 was trained on span 2, so the repeat went unnoticed and was pushed).
  earlier = {1: as_span(taxi["reference"], 1).span_digests}
  older = gate_lib.evaluate(as_span(taxi["reference"], 4), live, **options, earlier=earlier)
  [repeat] = [f for f in older.stopping if f.check == gate_lib.REPEATED]
  assert repeat.text.startswith("span 4 holds the same 7,501 rows as span 1, which version 1 was")
  # Span 1 itself read again, as a retrain after a rollback to it does, is no repeat.
  again = gate_lib.evaluate(as_span(taxi["reference"], 1), live, **options, earlier=earlier)
  assert gate_lib.REPEATED not in {f.check for f in again.findings}


def test_the_report_round_trips_through_json(taxi):
  report = _gate(taxi, "metres")
  again = gate_report.GateReport.from_json(json.loads(json.dumps(report.to_json())))
  assert again.findings == report.findings and again.passed is False


# ----------------------------------------------------------------------------- the executor


def _artifact(kind, uri, **properties):
  artifact = kind()
  artifact.uri = str(uri)
  for key, value in properties.items():
    if isinstance(value, int):
      artifact.set_int_custom_property(key, value)
    else:
      artifact.set_string_custom_property(key, value)
  return artifact


def _statistics_artifact(night, folder):
  from tensorflow_metadata.proto.v0 import statistics_pb2

  split = folder / "Split-train"
  split.mkdir(parents=True)
  stats = statistics_pb2.DatasetFeatureStatisticsList()
  stats.datasets.add().CopyFrom(night.statistics)
  (split / "FeatureStats.pb").write_bytes(stats.SerializeToString())
  artifact = _artifact(standard_artifacts.ExampleStatistics, folder)
  artifact.split_names = '["train"]'
  return artifact


def _schema_artifact(night, folder):
  import tensorflow_data_validation as tfdv

  folder.mkdir(parents=True)
  tfdv.write_schema_text(night.schema, str(folder / "schema.pbtxt"))
  return _artifact(standard_artifacts.Schema, folder)


def _gate_inputs(taxi, tmp_path, tonight, live_version=1):
  examples = _artifact(standard_artifacts.Examples, tmp_path / "examples")
  examples.split_names = '["train", "eval"]'
  counts = taxi[tonight].label_counts
  examples.set_string_custom_property(
    "label_stats", json.dumps({"train": {"counts": counts, "rows": sum(counts.values())}})
  )
  reference = _statistics_artifact(taxi["reference"], tmp_path / "ref_stats")
  baseline = _artifact(standard_artifacts.Model, tmp_path / "baseline")
  for artifact in (reference, baseline):
    if live_version is None:
      artifact.set_int_custom_property(properties.LIVE_AVAILABLE_PROPERTY, 0)
      artifact.set_string_custom_property(properties.LIVE_REASON_PROPERTY, "nothing was live")
    else:
      artifact.set_int_custom_property(properties.LIVE_AVAILABLE_PROPERTY, 1)
      artifact.set_int_custom_property(properties.LIVE_VERSION_PROPERTY, live_version)
  ref_counts = taxi["reference"].label_counts
  reference.set_string_custom_property(
    properties.LIVE_TRAINING_DATA_PROPERTY,
    json.dumps({"label_stats": {"train": {"counts": ref_counts}}}),
  )
  # No model under the baseline: the live-model check is left to the end-to-end tests.
  baseline.set_int_custom_property(properties.LIVE_AVAILABLE_PROPERTY, 0)
  return {
    "statistics": [_statistics_artifact(taxi[tonight], tmp_path / "stats")],
    "schema": [_schema_artifact(taxi[tonight], tmp_path / "schema")],
    "examples": [examples],
    "reference_statistics": [reference],
    "reference_schema": [_schema_artifact(taxi["reference"], tmp_path / "ref_schema")],
    "baseline": [baseline],
  }


def _run_executor(inputs, tmp_path, **props):
  result = _artifact(standard_artifacts.ExampleAnomalies, tmp_path / "result")
  exec_props = {
    "label_key": LABEL,
    "task": "binary",
    "serving_dir": str(tmp_path / "serving"),
    "model_name": "taxi",
    "thresholds": th.Thresholds().to_json(),
    "accept": "[]",
  }
  exec_props.update(props)
  gate_executor.Executor().Do(inputs, {"result": [result]}, exec_props)
  return result


def test_executor_stops_in_one_line_and_still_writes_its_report(taxi, tmp_path):
  inputs = _gate_inputs(taxi, tmp_path, "renamed")
  with pytest.raises(UserInputError) as raised:
    _run_executor(inputs, tmp_path)
  message = str(raised.value)
  assert "\n" not in message and "'payment_type'" in message
  assert "schedule.py local accept" in message and str(tmp_path / "serving") in message
  report = json.loads((tmp_path / "result" / "gate.json").read_text())
  assert report["passed"] is False
  assert os.path.exists(tmp_path / "result" / "Split-train" / "SchemaDiff.pb")


def test_executor_passes_a_first_night_and_an_accepted_change(taxi, tmp_path):
  first = _run_executor(
    _gate_inputs(taxi, tmp_path / "a", "renamed", live_version=None), tmp_path / "a"
  )
  assert first.get_int_custom_property("passed") == 1
  assert "nothing was live" in first.get_string_custom_property("summary")
  accepted = _run_executor(
    _gate_inputs(taxi, tmp_path / "b", "renamed"), tmp_path / "b", accept='["payment_type"]'
  )
  assert accepted.get_int_custom_property("passed") == 1
  report = gate_result.read_report(accepted)
  assert {f["column"] for f in report["findings"] if f["accepted"]} == {"payment_type"}


def test_executor_lets_through_what_the_history_accepted_until_it_is_taken_back(taxi, tmp_path):
  log = tmp_path / "serving" / "taxi" / "history.jsonl"
  log.parent.mkdir(parents=True)
  who = {"user": "alice", "host": "box", "time": "2026-12-01T09:00:00Z"}
  accepted = {"event": "accept", "live_version": 1, "columns": ["payment_type"], **who}
  log.write_text(json.dumps({**accepted, "reason": "renamed upstream"}) + "\n")
  result = _run_executor(_gate_inputs(taxi, tmp_path / "a", "renamed"), tmp_path)
  report = gate_result.read_report(result)
  assert report["passed"] and report["accepted"] == ["payment_type"]
  assert report["acceptances"] == {
    "payment_type": {
      "via": gate_report.ACCEPTED_RECORDED,
      "reason": "renamed upstream",
      "who": "alice@box",
      "time": who["time"],
    }
  }
  with log.open("a") as f:
    f.write(json.dumps({**accepted, "event": "unaccept"}) + "\n")
  with pytest.raises(UserInputError):
    _run_executor(_gate_inputs(taxi, tmp_path / "b", "renamed"), tmp_path)


# ----------------------------------------------------------------------------- the live model


@pytest.fixture(scope="module")
def regression_live(tmp_path_factory):
  """A live model that learned y = 2x (x standard normal, noise of standard deviation 1)."""
  import tensorflow as tf

  root = tmp_path_factory.mktemp("regression_live")
  spec = {"x": tf.io.FixedLenFeature([1], tf.float32)}

  class Model(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
      return {"outputs": 2.0 * tf.io.parse_example(examples, spec)["x"]}

  model = Model()
  tf.saved_model.save(model, str(root / "model"), signatures={"serving_default": model.serve})
  return root


def _eval_rows(path, x, y):
  import tensorflow as tf

  with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
    for value, label in zip(x, y, strict=True):
      example = tf.train.Example()
      example.features.feature["x"].float_list.value.append(float(value))
      example.features.feature["y"].float_list.value.append(float(label))
      writer.write(example.SerializeToString())
  return [str(path)]


@pytest.mark.parametrize("rows", [400, 3000])
def test_the_live_model_stops_a_night_whose_number_label_was_shuffled(regression_live, rows):
  rng = np.random.default_rng(rows)
  x = rng.normal(size=rows)
  y = 2.0 * x + rng.normal(size=rows)
  options = dict(label_key="y", classification=False, preprocessing=False, tonight_types={},
                 baseline_types={}, thresholds=th.Thresholds(), live_version=4)  # fmt: skip
  model = str(regression_live / "model")
  normal = _eval_rows(regression_live / f"normal{rows}.gz", x, y)
  assert live_check.finding(model, normal, **options) is None
  # Tonight's labels 3 units higher (the level moved): drift, not a fault.
  higher = _eval_rows(regression_live / f"higher{rows}.gz", x, y + 3.0)
  assert live_check.finding(model, higher, **options) is None
  # Tonight's labels joined from other rows: the same distribution, no relation to x.
  shuffled = _eval_rows(regression_live / f"shuffled{rows}.gz", x, rng.permutation(y))
  found = live_check.finding(model, shuffled, **options)
  assert found is not None and found.check == th.LIVE_MODEL and found.stops
  # R-squared near -0.8 (the model's predictions spread 4 of the labels' 5 units of variance).
  assert -1.3 < found.value < -0.4 and found.threshold <= -0.1
  assert found.text.startswith(
    f"live version 4 answers tonight's {rows:,} eval rows worse than always answering their mean"
  )
  assert live_check.finding(model, shuffled, **{**options, "thresholds": th.parse_thresholds(
    ["live_model=off"])}) is None  # fmt: skip


def test_r_squared_and_its_standard_error_on_known_outputs():
  rng = np.random.default_rng(0)
  labels = rng.normal(size=20_000)
  outputs = outputs_lib.ModelOutputs(np.zeros((20_000, 1)) + labels.mean(), labels)
  r2, error = live_check.r_squared(outputs)
  assert abs(r2) < 1e-9 and error < 0.02
  perfect = outputs_lib.ModelOutputs(labels[:, None].copy(), labels)
  assert live_check.r_squared(perfect)[0] == pytest.approx(1.0)
  shifted = outputs_lib.ModelOutputs(labels[:, None] + 5.0, labels)
  assert live_check.r_squared(shifted)[0] == pytest.approx(1.0)
  labels[::2] = np.nan
  assert live_check.r_squared(outputs_lib.ModelOutputs(labels[:, None], labels))[0] == 1.0
  assert live_check.r_squared(outputs_lib.ModelOutputs(np.ones((3, 1)), np.ones(3))) is None
