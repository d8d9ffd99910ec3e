"""The data gate's settings, tonight's rows converted for the live model, and the nights' record."""

import json

import pytest
import tensorflow as tf

from components.data_gate import thresholds as th
from components.live_model import conform_lib
from components.nights import nights_lib
from pipeline.cli import nights as nights_cli

# ----------------------------------------------------------------------------- settings


def test_thresholds_parse_for_every_column_and_for_one():
  parsed = th.parse_thresholds(["drift=0.5", "fare:scale=3", "trip_miles:drift=off", "rows=0.1"])
  assert parsed.get(th.DRIFT, "anything") == 0.5
  assert parsed.get(th.DRIFT, "trip_miles") is None
  assert parsed.get(th.SCALE, "fare") == 3.0
  assert parsed.get(th.SCALE, "other") == th.DEFAULTS[th.SCALE]
  assert parsed.get(th.ROWS) == 0.1
  again = th.Thresholds.from_json(parsed.to_json())
  assert again == parsed


def test_text_columns_have_their_own_drift_default():
  defaults = th.Thresholds()
  assert defaults.get(th.DRIFT, "x") == th.DEFAULTS[th.DRIFT]
  assert defaults.get(th.DRIFT, "x", text=True) == th.TEXT_DRIFT_DEFAULT
  # A setting for every column applies to text columns too.
  assert th.parse_thresholds(["drift=0.2"]).get(th.DRIFT, "x", text=True) == 0.2


@pytest.mark.parametrize(
  ("setting", "words"),
  [
    ("drift", "CHECK=VALUE"),
    ("speed=1", "unknown check"),
    ("fare:rows=0.5", "whole night"),
    ("drift=-1", "at least 0"),
    ("scale=0.5", "at least 1"),
    ("drift=abc", "a number"),
  ],
)
def test_bad_threshold_settings_are_one_line_naming_the_form(setting, words):
  with pytest.raises(th.GateSettingsError) as raised:
    th.parse_thresholds([setting])
  assert words in str(raised.value) and "\n" not in str(raised.value)


def test_accepted_names_split_on_commas_and_keep_their_order():
  assert th.parse_accepted(["fare, trip_miles", "fare", ":row_count"]) == [
    "fare",
    "trip_miles",
    ":row_count",
  ]
  with pytest.raises(th.GateSettingsError):
    th.parse_accepted(["fare,,x"])
  assert th.is_accepted("x", ["all"]) and not th.is_accepted("x", ["y"])


# ----------------------------------------------------------------------------- conforming


def _example(**features):
  example = tf.train.Example()
  for name, (kind, values) in features.items():
    getattr(example.features.feature[name], kind).value.extend(values)
  return example.SerializeToString()


def _features(record):
  example = tf.train.Example.FromString(record)
  return {
    name: (f.WhichOneof("kind"), list(getattr(f, f.WhichOneof("kind")).value))
    for name, f in example.features.feature.items()
  }


def test_conform_gives_each_changed_column_the_live_models_type():
  record = _example(
    tract=("int64_list", [17031081800]),
    miles=("float_list", [2.5]),
    seconds=("int64_list", [300]),
    code=("bytes_list", [b"12", b"x"]),
    empty=("int64_list", []),
    new=("float_list", [1.0]),
  )
  baseline = {
    "tract": "BYTES",
    "miles": "INT",
    "seconds": "FLOAT",
    "code": "FLOAT",
    "empty": "BYTES",
  }
  [out] = conform_lib.conform_records([record], baseline)
  features = _features(out)
  assert features["tract"] == ("bytes_list", [b"17031081800"])
  assert features["miles"] == ("int64_list", [2])  # rounded to the nearest (half to even)
  assert features["seconds"] == ("float_list", [300.0])
  assert features["code"] == ("float_list", [12.0])  # 'x' is not a number: left out
  assert features["empty"] == ("bytes_list", [])
  assert features["new"] == ("float_list", [1.0])  # unknown to the live model: as it was


def test_conform_leaves_records_alone_when_no_type_changed():
  record = _example(a=("int64_list", [1]))
  assert conform_lib.conform_records([record], {"a": "INT"}) == [record]
  assert conform_lib.conformer({"a": "INT"}, {"a": "INT"}) is None
  assert conform_lib.conformer({"a": "INT"}, None) is None
  conform = conform_lib.conformer({"a": "INT", "b": "BYTES"}, {"a": "BYTES", "b": "BYTES"})
  assert conform.columns == {"a": ("INT", "BYTES")}
  [out] = conform(tf.constant([record])).numpy().tolist()
  assert _features(out)["a"] == ("bytes_list", [b"1"])


# ----------------------------------------------------------------------------- the record


def _gate_facts(passed):
  return {
    "report": {"passed": passed, "compared": True, "findings": [], "drift": {}},
    "live_version": 1,
    "spans": [2],
    "rows": {"train": 80, "eval": 20},
  }


def test_records_tell_pushed_not_pushed_stopped_and_failed_nights():
  common = {"night": "n", "error": "", "started": "s", "ended": "e", "seconds": 1.0}
  pusher = {"pushed": True, "version": 2, "live_version": 2, "blessed": True, "metrics": {}}
  facts = {nights_lib.GATE_STEP: _gate_facts(True), nights_lib.PUSHER_STEP: pusher}
  record = nights_lib.build_record(facts, succeeded=True, **common)
  assert record["outcome"] == nights_lib.PUSHED and record["version"] == 2
  assert record["spans"] == [2] and record["rows"] == {"train": 80, "eval": 20}
  declined = {**pusher, "pushed": False, "reason": "model not blessed by Evaluator: ..."}
  record = nights_lib.build_record({nights_lib.PUSHER_STEP: declined}, succeeded=True, **common)
  assert record["outcome"] == nights_lib.NOT_PUSHED and record["version"] is None
  assert record["line"].startswith("model not blessed")
  stopped = {nights_lib.GATE_STEP: _gate_facts(False)}
  record = nights_lib.build_record(stopped, succeeded=False, **{**common, "error": "gate line"})
  assert record["outcome"] == nights_lib.STOPPED and record["line"] == "gate line"
  record = nights_lib.build_record({}, succeeded=False, **{**common, "error": "bad csv"})
  assert record["outcome"] == nights_lib.FAILED and record["spans"] is None


def test_a_night_is_closed_into_the_log_and_its_open_facts_removed(tmp_path, monkeypatch):
  serving = str(tmp_path / "serving")
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  assert not nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, {"x": 1})
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "night-1")
  assert nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, _gate_facts(False))
  record = nights_lib.close_night(serving, "m", "night-1", succeeded=False, error="stopped")
  assert record["outcome"] == nights_lib.STOPPED
  assert nights_lib.read_records(serving, "m") == [record]
  assert not list((tmp_path / "serving" / "m" / nights_lib.OPEN_DIR).iterdir())
  # A second night appends; nothing recorded for it: a failed night with no facts.
  nights_lib.close_night(serving, "m", "night-2", succeeded=False, error="bad csv")
  assert [r["outcome"] for r in nights_lib.read_records(serving, "m")] == ["stopped", "failed"]


def test_end_night_survives_an_unwritable_folder_and_still_reports(tmp_path):
  (tmp_path / "m").write_text("a file where the model folder should be")
  record, notices = nights_lib.end_night(
    str(tmp_path), "m", "n", succeeded=False, error="bad csv", notify=()
  )
  assert record["outcome"] == nights_lib.FAILED and "record_error" in record
  assert notices == []


def test_a_first_failed_try_with_nobody_to_notify_leaves_no_serving_folder(tmp_path):
  serving = tmp_path / "serving"
  record, _ = nights_lib.end_night(str(serving), "m", "n", succeeded=False, error="bad csv")
  assert record["outcome"] == nights_lib.FAILED
  assert not serving.exists()


def test_history_rows_read_like_the_nights():
  gate = {
    "passed": True,
    "compared": True,
    "findings": [{"column": "fare", "kind": "stop", "accepted": True}],
    "drift": {"fare": {"value": 0.5, "threshold": 0.4}, "x": {"value": 0.1, "threshold": 0.4}},
  }
  record = {
    "started": "2026-11-26T01:00:00Z",
    "spans": [3],
    "rows": {"train": 100, "eval": 25},
    "gate": gate,
    "metrics": {
      "candidate": {"binary_accuracy": 0.91},
      "diff_vs_baseline": {"binary_accuracy": 0.01},
    },
    "blessed": True,
    "version": 3,
    "live_version": 3,
    "outcome": "pushed",
    "seconds": 30.2,
  }
  [row] = nights_cli.rows([record])
  assert row["night"] == "2026-11-26 01:00:00"
  assert row["gate"] == "passed (accepted fare), max drift 0.50 fare"
  assert row["metric"] == "accuracy 0.91 (+0.01 vs live)"
  assert (row["rows"], row["pushed"], row["outcome"]) == ("100/25", "3", "pushed")
  first = {"gate": {"compared": False, "reason": "nothing was live"}, "outcome": "pushed"}
  assert nights_cli.rows([first])[0]["gate"] == "first"
  assert json.dumps(nights_cli.rows([first]))  # plain text throughout
