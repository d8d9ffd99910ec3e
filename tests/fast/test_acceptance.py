"""Accepting a data change: `schedule.py local accept` and `unaccept`, and `--accept-changes`.

Each name is checked against the live version's training schema and tonight's data before
anything is recorded; an acceptance records why and who; `unaccept` takes it back, and the
reader the data gate uses (`history.acceptances`) no longer returns it.
"""

import argparse
import json
import pathlib

import pytest

from components.data_gate import report as gate_report
from components.serving import history, layout, nights, publish
from pipeline.cli import flags, resolve, schedule
from tests.support.cli_runs import run_script

MODEL = "taxi"
SCHEMA = "".join(
  f'feature {{\n  name: "{name}"\n  type: {kind}\n}}\n'
  for name, kind in (("trip_miles", "FLOAT"), ("fare", "FLOAT"), ("payment_type", "BYTES"))
)


def _push(tmp_path: pathlib.Path, serving: pathlib.Path, name: str, schema: str | None) -> None:
  src = tmp_path / f"model-{name}"
  (src / "variables").mkdir(parents=True)
  (src / "saved_model.pb").write_bytes(name.encode())
  extra = {}
  if schema is not None:
    data = tmp_path / f"training-{name}"
    data.mkdir()
    (data / layout.TRAINING_SCHEMA_FILE).write_text(schema)
    extra = {layout.TRAINING_DATA_DIR: str(data)}
  publish.push_version(str(serving), MODEL, str(src), extra_trees=extra)


@pytest.fixture
def serving(tmp_path: pathlib.Path) -> pathlib.Path:
  """A serving folder whose live version 1 was trained on trip_miles, fare and payment_type."""
  root = tmp_path / "serving"
  _push(tmp_path, root, "one", SCHEMA)
  return root


@pytest.fixture
def someone(monkeypatch):
  monkeypatch.setattr("getpass.getuser", lambda: "alice")
  monkeypatch.setattr("socket.gethostname", lambda: "box")


def _schedule(serving: pathlib.Path, action: str, *args: str) -> int:
  return schedule.main(
    ["local", action, "--serving-dir", str(serving), "--model-name", MODEL, *args]
  )


def _history_file(serving: pathlib.Path) -> pathlib.Path:
  return serving / MODEL / layout.HISTORY.file


def _one_error_line(capsys) -> str:
  err = capsys.readouterr().err.strip()
  assert "\n" not in err and "Traceback" not in err
  return err


def test_a_typo_is_refused_with_did_you_mean_and_nothing_recorded(serving, someone, capsys):
  before = _history_file(serving).read_bytes()
  status = _schedule(serving, "accept", "--columns", "trip_mils", "--reason", "new meters")
  assert status == 1
  assert _one_error_line(capsys) == (
    "schedule.py: error: no column 'trip_mils' in live version 1 of 'taxi' or in tonight's "
    "data; did you mean 'trip_miles'?"
  )
  assert _history_file(serving).read_bytes() == before
  # Among good names, the bad one alone is named; still nothing is recorded.
  assert _schedule(serving, "accept", "--columns", "fare,farez", "--reason", "x") == 1
  assert "no column 'farez'" in _one_error_line(capsys)
  assert _history_file(serving).read_bytes() == before
  assert history.accepted_changes(str(serving), MODEL, 1) == []


def test_a_real_column_is_accepted_with_its_reason_and_who(serving, someone, capsys):
  reason = "the feed reports kilometres now"
  assert _schedule(serving, "accept", "--columns", "trip_miles", "--reason", reason) == 0
  said = capsys.readouterr().out
  assert "Accepted changes to trip_miles against live version 1 of 'taxi' (by alice@box" in said
  assert "schedule.py local unaccept" in said
  entry = history.read_history(str(serving), MODEL)[-1]
  assert entry["event"] == history.ACCEPT_EVENT and entry["columns"] == ["trip_miles"]
  assert (entry["reason"], entry["user"], entry["host"]) == (reason, "alice", "box")
  assert entry["time"].endswith("Z") and entry["live_version"] == 1
  # The gate reads it, and its facts for the night carry the reason and who, once per name.
  recorded = history.acceptances(str(serving), MODEL, 1)
  assert list(recorded) == ["trip_miles"]
  carried = gate_report.acceptances(["trip_miles", "fare", "trip_miles"], recorded)
  assert carried == {
    "trip_miles": {
      "via": gate_report.ACCEPTED_RECORDED,
      "reason": reason,
      "who": "alice@box",
      "time": entry["time"],
    },
    "fare": {"via": gate_report.ACCEPTED_FLAG, "reason": "", "who": "", "time": ""},
  }
  report = gate_report.GateReport(live_version=1, accepted=("trip_miles",))
  report = gate_report.with_acceptances(report, recorded)
  again = gate_report.GateReport.from_json(json.loads(json.dumps(report.to_json())))
  assert again.acceptances["trip_miles"]["who"] == "alice@box"


def test_columns_new_tonight_and_special_names_are_accepted(tmp_path, serving, someone, capsys):
  # A column the live version never saw is one tonight's data has: the last night named it.
  night = {"night": "n1", "gate": {"drift": {"fare": {}}, "findings": [{"column": "tip_rate"}]}}
  nights.append_record(str(serving), MODEL, night)
  assert _schedule(serving, "accept", "--columns", "tip_rate", "--reason", "new column") == 0
  assert _schedule(serving, "accept", "--columns", ":row_count,all", "--reason", "more") == 0
  assert history.accepted_changes(str(serving), MODEL, 1) == ["tip_rate", ":row_count", "all"]
  # A version pushed without its training schema: only tonight's columns are known.
  _push(tmp_path, serving, "two", None)
  capsys.readouterr()
  assert _schedule(serving, "accept", "--columns", "trip_miles", "--reason", "x") == 1
  err = _one_error_line(capsys)
  assert "no column 'trip_miles' in live version 2 of 'taxi', which kept no training schema," in err
  assert _schedule(serving, "accept", "--columns", "fare", "--reason", "x") == 0


def test_unaccept_takes_an_acceptance_back(serving, someone, capsys):
  reason = ("--reason", "deliberate")
  assert _schedule(serving, "accept", "--columns", "trip_miles,fare", *reason) == 0
  assert _schedule(serving, "unaccept", "--columns", "trip_miles") == 0
  assert "Took back the acceptance of trip_miles" in capsys.readouterr().out
  entry = history.read_history(str(serving), MODEL)[-1]
  assert entry["event"] == history.UNACCEPT_EVENT and entry["columns"] == ["trip_miles"]
  assert (entry["user"], entry["host"], entry["live_version"]) == ("alice", "box", 1)
  assert history.accepted_changes(str(serving), MODEL, 1) == ["fare"]
  # Taking back what is not accepted: one line naming what is, and nothing recorded.
  before = _history_file(serving).read_bytes()
  assert _schedule(serving, "unaccept", "--columns", "trip_miles") == 1
  assert _one_error_line(capsys) == (
    "schedule.py: error: 'trip_miles' is not accepted against live version 1 of 'taxi'; "
    "accepted: fare."
  )
  assert _history_file(serving).read_bytes() == before
  # Accepted again, then everything taken back at once.
  assert _schedule(serving, "accept", "--columns", "trip_miles", *reason) == 0
  assert history.accepted_changes(str(serving), MODEL, 1) == ["fare", "trip_miles"]
  assert _schedule(serving, "unaccept", "--columns", "all") == 0
  assert history.read_history(str(serving), MODEL)[-1]["columns"] == ["fare", "trip_miles"]
  assert history.acceptances(str(serving), MODEL, 1) == {}
  capsys.readouterr()
  assert _schedule(serving, "unaccept", "--columns", "all") == 1
  assert "nothing is accepted against live version 1 of 'taxi'" in _one_error_line(capsys)


def _data(tmp_path: pathlib.Path) -> pathlib.Path:
  data = tmp_path / "data"
  data.mkdir()
  rows = [f"{i % 9},{i * 0.5},{'yes' if i % 3 == 0 else 'no'}" for i in range(300)]
  (data / "d.csv").write_text("trip_miles,fare,tipped\n" + "".join(f"{r}\n" for r in rows))
  return data


def test_run_local_refuses_an_accepted_change_to_no_column(tmp_path):
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    *("--data-root", _data(tmp_path), "--label-key", "tipped", "--output-dir", out),
    *("--accept-changes", "fares"),
    timeout=120,
  )
  assert proc.returncode == 2
  lines = proc.stderr.strip().splitlines()
  assert len(lines) == 1 and "Traceback" not in proc.stderr
  assert lines[0].endswith(
    "error: --accept-changes: no column 'fares' in tonight's data; did you mean 'fare'?"
  )


def test_accept_changes_may_name_a_column_gone_from_tonight_but_in_the_live_version(tmp_path):
  serving = tmp_path / "serving"
  _push(tmp_path, serving, "one", SCHEMA)
  data = _data(tmp_path)

  def config(*names: str):
    parser = argparse.ArgumentParser()
    flags.add_pipeline_args(parser)
    argv = ["--data-root", str(data), "--label-key", "tipped", "--model-name", MODEL]
    args = parser.parse_args([*argv, *(a for n in names for a in ("--accept-changes", n))])
    return resolve.config_from_args(args, str(tmp_path / "root"), str(serving))

  # payment_type is gone from tonight's files, but live version 1 was trained on it.
  assert config("payment_type,fare", ":row_count").accept_changes == (
    "payment_type",
    "fare",
    ":row_count",
  )
  with pytest.raises(resolve.checks.CheckError) as raised:
    config("paymnt_type")
  assert str(raised.value) == (
    "--accept-changes: no column 'paymnt_type' in live version 1 of 'taxi' or in tonight's "
    "data; did you mean 'payment_type'?"
  )
