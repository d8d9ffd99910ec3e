"""The data gate's settings, and the nights' records as plain values: built from a night's facts
and read back as history rows."""

import json

import pytest

from components.data_gate import thresholds as th
from components.nights import nights_lib
from pipeline.cli import nights as nights_cli
from tests.support.night_facts import gate_facts

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


def test_records_tell_pushed_not_pushed_stopped_and_failed_nights():
  common = {"night": "n", "error": "", "started": "s", "ended": "e", "seconds": 1.0}
  pusher = {"pushed": True, "version": 2, "live_version": 2, "blessed": True, "metrics": {}}
  facts = {nights_lib.GATE_STEP: gate_facts(True), nights_lib.PUSHER_STEP: pusher}
  record = nights_lib.build_record(facts, succeeded=True, **common)
  assert record["outcome"] == nights_lib.PUSHED and record["version"] == 2
  assert record["spans"] == [2] and record["rows"] == {"train": 80, "eval": 20}
  declined = {**pusher, "pushed": False, "reason": "model not blessed by Evaluator: ..."}
  record = nights_lib.build_record({nights_lib.PUSHER_STEP: declined}, succeeded=True, **common)
  assert record["outcome"] == nights_lib.NOT_PUSHED and record["version"] is None
  assert record["line"].startswith("model not blessed")
  stopped = {nights_lib.GATE_STEP: gate_facts(False)}
  record = nights_lib.build_record(stopped, succeeded=False, **{**common, "error": "gate line"})
  assert record["outcome"] == nights_lib.STOPPED and record["line"] == "gate line"
  record = nights_lib.build_record({}, succeeded=False, **{**common, "error": "bad csv"})
  assert record["outcome"] == nights_lib.FAILED and record["spans"] is None


def test_every_night_shows_the_live_version_pushed_or_not():
  common = {"night": "n", "error": "", "started": "s", "ended": "e", "seconds": 1.0}
  gate = gate_facts(True)  # The gate compared with live version 1.
  kept = {"pushed": False, "version": None, "live_version": 1, "reason": "model not blessed"}
  record = nights_lib.build_record(
    {nights_lib.GATE_STEP: gate, nights_lib.PUSHER_STEP: kept}, succeeded=True, **common
  )
  assert (record["version"], record["live_version"]) == (None, 1)
  assert nights_cli.rows([record])[0]["live"] == "1"
  # A Pusher that could not tell (facts from before it recorded the live version) and a night
  # stopped before the Pusher keep the gate's.
  unknown = {**kept, "live_version": None}
  for facts in ({nights_lib.GATE_STEP: gate, nights_lib.PUSHER_STEP: unknown}, {"gate": gate}):
    record = nights_lib.build_record(facts, succeeded=True, **common)
    assert record["live_version"] == 1
  pushed = {**kept, "pushed": True, "version": 2, "live_version": 2}
  record = nights_lib.build_record(
    {nights_lib.GATE_STEP: gate, nights_lib.PUSHER_STEP: pushed}, succeeded=True, **common
  )
  assert (record["version"], record["live_version"]) == (2, 2)


def test_history_rows_read_like_the_nights():
  gate = {
    "passed": True,
    "compared": True,
    "findings": [
      {"column": "fare", "kind": "stop", "accepted": True},
      {"column": "x", "kind": "info", "accepted": False},
      {"column": "fare", "kind": "stop", "accepted": True},  # Drift and scale, both accepted.
    ],
    # x drifted more, but fare came closer to its own bound.
    "drift": {"fare": {"value": 0.5, "threshold": 0.4}, "x": {"value": 0.6, "threshold": 2.0}},
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
  assert row["gate"] == "passed (accepted fare)"
  assert row["drift"] == "fare 0.5 (bound 0.4)"
  assert row["metric"] == "accuracy 0.91 (+0.01 vs live)"
  assert (row["rows"], row["pushed"], row["outcome"]) == ("100/25", "3", "pushed")
  first = {"gate": {"compared": False, "reason": "nothing was live"}, "outcome": "pushed"}
  assert nights_cli.rows([first])[0]["gate"] == "first"
  assert nights_cli.rows([first])[0]["drift"] == "-"
  assert json.dumps(nights_cli.rows([first]))  # plain text throughout


def test_history_tells_apart_the_nights_of_output_folders_that_share_a_serving_folder(capsys):
  """Two output folders push to one serving folder: the table adds who ran each night."""
  import pathlib
  import tempfile

  from components.serving import layout, store

  with tempfile.TemporaryDirectory() as serving:
    folder = pathlib.Path(serving) / "m"
    folder.mkdir()
    for night, owner in (("a", "host:/out/a"), ("b", "host:/out/b")):
      record = {"night": night, "started": "2026-11-26T01:00:00Z", "outcome": "pushed"}
      store.folder(str(folder)).append_log(layout.NIGHTS, {**record, "owner": owner})
    assert nights_cli.print_history(serving, "m", as_json=False, last=None) == 0
  out = capsys.readouterr().out
  assert "run from" in out and "host:/out/a" in out and "host:/out/b" in out
  assert [r["owner"] for r in nights_cli.rows([{"outcome": "pushed"}])] == ["-"]
