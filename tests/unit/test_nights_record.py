"""The data gate's settings and the nights' record."""

import json

import pytest

from components.data_gate import thresholds as th
from components.nights import nights_lib
from components.serving import layout, nights
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
    ("fare:leak=2", "from 0 to 1"),
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
  (tmp_path / "serving" / "m").mkdir(parents=True)
  (tmp_path / "serving" / "m" / "1").mkdir()  # Something was pushed before.
  assert nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, _gate_facts(False))
  record = nights_lib.close_night(serving, "m", "night-1", succeeded=False, error="stopped")
  assert record["outcome"] == nights_lib.STOPPED
  assert nights.read_records(serving, "m") == [record]
  # The open facts are gone, and with them the open-nights folder.
  assert sorted(p.name for p in (tmp_path / "serving" / "m").iterdir()) == ["1", "nights.jsonl"]
  # A second night appends; nothing recorded for it: a failed night with no facts.
  nights_lib.close_night(serving, "m", "night-2", succeeded=False, error="bad csv")
  assert [r["outcome"] for r in nights.read_records(serving, "m")] == ["stopped", "failed"]


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


def test_a_first_night_keeps_its_facts_and_leaves_the_serving_folder_as_it_was(
  tmp_path, monkeypatch
):
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "first")
  fresh, kept = tmp_path / "fresh", tmp_path / "kept"
  kept.mkdir()  # An empty serving folder the user made (a mount point, say) stays.
  for serving in (fresh, kept):
    assert nights_lib.record_step(str(serving), "m", nights_lib.GATE_STEP, _gate_facts(False))
    record, _ = nights_lib.end_night(
      str(serving), "m", "first", succeeded=False, error="the gate stopped"
    )
    # The record carries the gate's facts, and nothing of the night stays behind.
    assert record["outcome"] == nights_lib.STOPPED and record["gate"]["passed"] is False
  assert not fresh.exists() and kept.is_dir() and not any(kept.iterdir())


def test_a_first_night_that_ran_through_is_recorded_though_it_pushed_nothing(tmp_path, monkeypatch):
  # A model not good enough to push is a night's answer, not a failed try: `history` shows it.
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "first")
  serving = tmp_path / "serving"
  first_night = {**_gate_facts(True), "report": {"passed": True, "compared": False}}
  assert nights_lib.record_step(str(serving), "m", nights_lib.GATE_STEP, first_night)
  declined = {"pushed": False, "blessed": False, "reason": "model not blessed by Evaluator: x"}
  assert nights_lib.record_step(str(serving), "m", nights_lib.PUSHER_STEP, declined)
  record, _ = nights_lib.end_night(str(serving), "m", "first", succeeded=True)
  assert record["outcome"] == nights_lib.NOT_PUSHED
  assert nights.read_records(str(serving), "m") == [record]
  assert record["blessed"] is False and record["spans"] == [2]
  assert sorted(p.name for p in (serving / "m").iterdir()) == ["nights.jsonl"]
  assert nights_cli.model_name_in(str(serving), None) == "m"


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


def test_a_night_killed_before_it_closed_is_recorded_by_a_later_one(tmp_path, monkeypatch):
  import os
  import time

  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "killed")
  assert nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, _gate_facts(True))
  old = time.time() - nights_lib.INTERRUPTED_AFTER_S - 60
  for path in (tmp_path / "serving" / "m" / layout.OPEN_DIR / "killed").iterdir():
    os.utime(path, (old, old))
  nights_lib.close_night(serving, "m", "tonight", succeeded=False, error="bad csv")
  tonight, killed = nights.read_records(serving, "m")
  assert tonight["night"] == "tonight"
  assert killed["night"] == "killed" and killed["outcome"] == nights_lib.FAILED
  assert "interrupted" in killed["line"] and killed["spans"] == [2]
  assert sorted(p.name for p in (tmp_path / "serving" / "m").iterdir()) == ["nights.jsonl"]
