"""The nights' record written to a serving folder and read back. A local folder is written
without TensorFlow (`storage.LocalFiles`; the fast layer refuses its import), so the night job
records a night that timed out or was skipped in a second; an object store's folder goes
through TFX's fileio (tests/cli/test_night_job.py). The settings, and the records as plain
values, are in tests/fast/test_nights_settings.py."""

from components.nights import night_notices, nights_lib, notify_lib
from components.serving import layout, nights
from pipeline.cli import nights as nights_cli
from tests.support.night_facts import gate_facts

# ----------------------------------------------------------------------------- the record


def test_a_night_is_closed_into_the_log_and_its_open_facts_removed(tmp_path, monkeypatch):
  serving = str(tmp_path / "serving")
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  assert not nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, {"x": 1})
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "night-1")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  (tmp_path / "serving" / "m" / "1").mkdir()  # Something was pushed before.
  assert nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, gate_facts(False))
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
    assert nights_lib.record_step(str(serving), "m", nights_lib.GATE_STEP, gate_facts(False))
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
  first_night = {**gate_facts(True), "report": {"passed": True, "compared": False}}
  assert nights_lib.record_step(str(serving), "m", nights_lib.GATE_STEP, first_night)
  declined = {"pushed": False, "blessed": False, "reason": "model not blessed by Evaluator: x"}
  assert nights_lib.record_step(str(serving), "m", nights_lib.PUSHER_STEP, declined)
  record, _ = nights_lib.end_night(str(serving), "m", "first", succeeded=True)
  assert record["outcome"] == nights_lib.NOT_PUSHED
  assert nights.read_records(str(serving), "m") == [record]
  assert record["blessed"] is False and record["spans"] == [2]
  assert sorted(p.name for p in (serving / "m").iterdir()) == ["nights.jsonl"]
  assert nights_cli.model_name_in(str(serving), None) == "m"


def test_a_night_that_could_not_be_opened_is_recorded_under_its_owner(tmp_path):
  # Its serving folder was full when the night began, so no facts named who ran it: the record
  # had no owner, and history added a "run from" column for it. run_local.py passes its owner.
  serving = tmp_path / "serving"
  nights.append_record(str(serving), "m", {"night": "1", "outcome": "pushed", "owner": "host:/out"})
  record, _ = nights_lib.end_night(
    str(serving), "m", "tonight", succeeded=False, error="no space", owner="host:/out"
  )
  assert record["owner"] == "host:/out"
  assert nights.read_records(str(serving), "m")[-1]["owner"] == "host:/out"


def test_a_night_killed_before_it_closed_is_recorded_by_a_later_one(tmp_path, monkeypatch):
  import os
  import time

  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "killed")
  assert nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, gate_facts(True))
  old = time.time() - nights_lib.INTERRUPTED_AFTER_S - 60
  for path in (tmp_path / "serving" / "m" / layout.OPEN_DIR / "killed").iterdir():
    os.utime(path, (old, old))
  nights_lib.close_night(serving, "m", "tonight", succeeded=False, error="bad csv")
  tonight, killed = nights.read_records(serving, "m")
  assert tonight["night"] == "tonight"
  assert killed["night"] == "killed" and killed["outcome"] == nights_lib.INTERRUPTED
  assert "interrupted" in killed["line"] and killed["spans"] == [2]
  assert sorted(p.name for p in (tmp_path / "serving" / "m").iterdir()) == ["nights.jsonl"]


def test_the_owners_next_night_closes_its_killed_night_at_once(tmp_path, monkeypatch):
  """The lock proves the owner's open night dead: no day's wait. Another owner's stays open."""
  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  nights_lib.begin_night(serving, "m", "killed", owner="host:/out-a")
  nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, gate_facts(True), night="killed")
  nights_lib.begin_night(serving, "m", "other", owner="host:/out-b")
  closed = nights_lib.begin_night(serving, "m", "tonight", owner="host:/out-a")
  assert [r["night"] for r in closed] == ["killed"]
  assert closed[0]["outcome"] == nights_lib.INTERRUPTED and closed[0]["owner"] == "host:/out-a"
  assert nights.read_records(serving, "m") == closed
  assert nights.open_nights(serving, "m") == ["other", "tonight"]
  record = nights_lib.close_night(serving, "m", "tonight", succeeded=False, error="bad csv")
  assert record["owner"] == "host:/out-a" and record["outcome"] == nights_lib.FAILED
  assert nights.open_nights(serving, "m") == ["other"]


def _publish(model_dir, number: int) -> None:
  """A version folder with its manifest, as the Pusher leaves it (no model files)."""
  from components.serving import manifest

  version = model_dir / str(number)
  version.mkdir()
  (version / layout.MANIFEST_FILE).write_text(
    manifest.dumps(
      manifest.push_manifest(
        model_name=model_dir.name, version=number, created_at=layout.utc_now(), content="",
        files={}, variant_metrics={}, source={}, extra={},
      )
    )
  )  # fmt: skip


def test_a_night_killed_after_it_pushed_names_its_version(tmp_path, monkeypatch):
  """Killed between publishing and recording: the version's time in the serving folder tells."""
  serving = tmp_path / "serving"
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  (serving / "m").mkdir(parents=True)
  nights_lib.begin_night(str(serving), "m", "killed", owner="o")
  _publish(serving / "m", 1)
  [closed] = nights_lib.begin_night(str(serving), "m", "next", owner="o")
  assert closed["outcome"] == nights_lib.INTERRUPTED and closed["version"] == 1
  assert "after it pushed version 1" in closed["line"]


def test_timed_out_and_skipped_nights_are_recorded_and_notified_as_such(tmp_path, monkeypatch):
  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  sent = []
  monkeypatch.setattr(
    night_notices, "send", lambda record, *a, **k: sent.append(record["outcome"]) or []
  )
  nights_lib.begin_night(serving, "m", "slow", owner="o")
  opened = nights.open_facts(serving, "m", "slow")[nights_lib.NIGHT_STEP]["started"]
  record, _ = nights_lib.end_night(
    serving, "m", "slow", succeeded=False, error="timed out after 6 h", outcome=nights_lib.TIMED_OUT
  )
  assert (record["outcome"], record["line"]) == (nights_lib.TIMED_OUT, "timed out after 6 h")
  # Stopped from outside, it keeps the start its run recorded, and the seconds since.
  assert record["started"] == opened and record["seconds"] is not None and record["seconds"] >= 0
  record, _ = nights_lib.end_night(
    serving, "m", "busy", succeeded=False, error="skipped", outcome=nights_lib.SKIPPED, owner="o"
  )
  assert [r["outcome"] for r in nights.read_records(serving, "m")] == ["timed_out", "skipped"]
  assert sent == ["timed_out", "skipped"]
  # A night that never opened is still its owner's, and names the version that stayed live.
  assert record["owner"] == "o" and record["live_version"] is None
  _publish(tmp_path / "serving" / "m", 3)
  record, _ = nights_lib.end_night(
    serving, "m", "busy-2", succeeded=False, error="skipped", outcome=nights_lib.SKIPPED
  )
  assert record["live_version"] == 3


def test_a_nights_notes_on_its_data_are_recorded_shown_and_notified(tmp_path, monkeypatch):
  serving = str(tmp_path / "serving")
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  sent = []
  monkeypatch.setattr(notify_lib, "send", lambda targets, title, *a, **k: sent.append(title) or [])
  nights_lib.begin_night(serving, "m", "n1", owner="o")
  note = "span-3/ holds no *.csv file (it is empty); the newest span read is 2"
  nights_lib.record_step(serving, "m", nights_lib.DATA_STEP, {"notes": [note]}, "n1")
  nights_lib.record_step(serving, "m", nights_lib.PUSHER_STEP, {"reason": "nothing new"}, "n1")

  record, _ = nights_lib.end_night(serving, "m", "n1", succeeded=True, notify=["json://h/n"])

  assert record["outcome"] == nights_lib.NOT_PUSHED and record["notes"] == [note]
  assert nights_lib.outcome_line(record) == f"not_pushed: nothing new (and {note})"
  assert sent == [f"m: night not_pushed: nothing new (and {note})"]  # A good night, notified.
  nights_lib.begin_night(serving, "m", "n2", owner="o")
  nights_lib.record_step(serving, "m", nights_lib.PUSHER_STEP, {"reason": "nothing new"}, "n2")
  record, _ = nights_lib.end_night(serving, "m", "n2", succeeded=True, notify=["json://h/n"])
  assert "notes" not in record and len(sent) == 1


def test_the_heartbeat_is_pinged_after_every_night_and_told_of_a_bad_one(tmp_path, monkeypatch):
  """healthchecks-style: the URL after a good night, the URL + /fail after a bad one."""
  from tests.support import notify_servers

  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  with notify_servers.http_server() as hook:
    beat = f"json://127.0.0.1:{hook.server_address[1]}/ping/abc"
    nights_lib.record_step(serving, "m", nights_lib.PUSHER_STEP, {"pushed": 1}, night="good")
    _, good = nights_lib.end_night(serving, "m", "good", succeeded=True, heartbeat=beat)
    _, bad = nights_lib.end_night(
      serving, "m", "slow", succeeded=False, error="timed out", outcome=nights_lib.TIMED_OUT,
      heartbeat=beat,
    )  # fmt: skip
  assert [r["path"] for r in hook.requests] == ["/ping/abc", "/ping/abc/fail"]
  assert good[0]["ok"] and good[0]["target"].startswith(f"heartbeat {beat}")
  assert bad[0]["ok"] and bad[0]["target"].endswith(" (fail)")
  assert hook.requests[1]["json"]["title"] == "m: night timed out"


def test_a_nights_line_is_prefixed_by_its_outcome_once():
  def line(outcome, text):
    return nights_lib.outcome_line({"outcome": outcome, "line": text})

  assert line("timed_out", "timed out: past 6 h") == "timed out: past 6 h"
  assert line("pushed", "pushed version 2") == "pushed version 2"
  assert line("not_pushed", "not pushed: a rollback") == "not pushed: a rollback"
  assert line("stopped", "'price' was numbers") == "stopped: 'price' was numbers"
  assert line("failed", "") == "failed: "


def test_a_night_whose_gate_was_an_interrupted_nights_cached_run_keeps_that_gate(tmp_path):
  """Killed after its gate, a night leaves its gate facts; the next night, whose DataGate is that
  run cached, records them as its own once the runner says so (it knows what was cached)."""
  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "m").mkdir(parents=True)
  nights_lib.begin_night(serving, "m", "killed", owner="o")
  nights_lib.record_step(serving, "m", nights_lib.GATE_STEP, gate_facts(True), night="killed")
  [closed] = nights_lib.begin_night(serving, "m", "resumed", owner="o")
  assert closed["outcome"] == nights_lib.INTERRUPTED and closed["gate"] is not None
  # Not taken unless the runner asks: a gate that did not run tonight is no gate of tonight's.
  assert nights_lib.GATE_STEP not in nights.open_facts(serving, "m", "resumed")
  assert nights_lib.use_carried_gate(serving, "m", "resumed")
  nights_lib.record_step(serving, "m", nights_lib.PUSHER_STEP, {"pushed": 1, "version": 1},
                         night="resumed")  # fmt: skip
  record = nights_lib.close_night(serving, "m", "resumed", succeeded=True)
  assert record["outcome"] == nights_lib.PUSHED
  assert record["gate"] == closed["gate"] and record["spans"] == closed["spans"]
  # A night with a gate of its own keeps it.
  nights_lib.begin_night(serving, "m", "next", owner="o")
  assert not nights_lib.use_carried_gate(serving, "m", "next")
