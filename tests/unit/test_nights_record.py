"""The nights' record written to a serving folder and read back (through TFX's fileio). The
settings, and the records as plain values, are in tests/fast/test_nights_settings.py."""

from components.nights import nights_lib
from components.serving import layout, nights
from pipeline.cli import nights as nights_cli

# ----------------------------------------------------------------------------- the record


def _gate_facts(passed):
  return {
    "report": {"passed": passed, "compared": True, "findings": [], "drift": {}},
    "live_version": 1,
    "spans": [2],
    "rows": {"train": 80, "eval": 20},
  }


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
