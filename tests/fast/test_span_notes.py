"""The notes a night gets of its spans, made once from one listing (`span_notes.night_notes`),
and recorded by Kubeflow's span resolver task as run_local.py records them before its run.
The single notes (a newer folder without files, unread spans, stale data) are in
tests/fast/test_cli_checks.py; the resolver on a whole KFP night is in
tests/kubeflow/test_kubeflow_launcher.py.
"""

from __future__ import annotations

import datetime

from components.nights import nights_lib, span_notes
from components.serving import nights
from core import properties
from pipeline.definition import kfp_entrypoint, kubeflow_night

NOW = datetime.datetime(2026, 12, 5, 2, tzinfo=datetime.timezone.utc)


def _spans(root, *names):
  for name in names:
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("x\n1\n")


def test_every_note_in_one_call_in_order_and_none_for_fresh_data(tmp_path):
  data, serving = tmp_path / "data", str(tmp_path / "serving")
  _spans(data, "span-1/a.csv", "span-2/a.csv", "span-3/a.csv")
  (data / "span-4").mkdir()
  for started, read in (("2026-12-01T02:00:00Z", [1]), ("2026-12-02T02:00:00Z", [3])):
    nights.append_record(serving, "m", {"night": started, "started": started, "spans": read})

  notes = span_notes.night_notes(
    str(data), "span-{SPAN}/*.csv", serving, "m", rolling_spans=1, stale_after_s=86400, now=NOW
  )

  assert notes == [
    "span-4/ holds no *.csv file (it is empty); the newest span read is 3",
    span_notes.unread_span_note(str(data), "span-{SPAN}/*.csv", serving, "m", 1),
    "no new data for 3.0 days: span 3 was first read 2026-12-02 02:00 UTC",
  ]
  assert notes[1].startswith("span 2 has files that no night read")
  # Without --stale-after, no stale note; with every span read, no unread one.
  assert span_notes.night_notes(str(data), "span-{SPAN}/*.csv", serving, "m", 3) == notes[:1]


def test_a_data_root_that_cannot_be_listed_makes_no_note_and_no_error(tmp_path):
  serving = str(tmp_path / "serving")
  # A span that is not a number: TFX's driver refuses it, and the run says so in one line.
  _spans(tmp_path / "data", "span-x/a.csv")
  assert span_notes.night_notes(str(tmp_path / "data"), "span-{SPAN}/*.csv", serving, "m", 1) == []


def test_the_kubeflow_span_resolver_records_the_notes_under_the_night(tmp_path):
  data, serving = tmp_path / "data", str(tmp_path / "serving")
  _spans(data, "span-1/a.csv")
  (data / "span-2").mkdir()
  (data / "span-2" / "a.csv.part").write_text("x\n")
  values = {
    properties.NIGHT_ID_KEY: "run-7",
    properties.SERVING_DIR_KEY: serving,
    properties.MODEL_NAME_KEY: "m",
    kubeflow_night.STALE_AFTER_PARAMETER: "0",
  }

  kfp_entrypoint._note_spans(values, str(data), "span-{SPAN}/*.csv", 1)

  facts = nights.open_facts(serving, "m", "run-7")
  assert facts[nights_lib.DATA_STEP] == {
    nights_lib.NOTES_FIELD: [
      "span-2/ holds no *.csv file (it holds a.csv.part); the newest span read is 1"
    ]
  }
  assert facts[nights_lib.NIGHT_STEP]["owner"] == nights_lib.KUBEFLOW_OWNER
  # A package compiled before the notes (no serving folder given), or a run outside a night (the
  # placeholder left unfilled), records nothing.
  for missing in (properties.SERVING_DIR_KEY, properties.NIGHT_ID_KEY):
    other = {**values, missing: ""}
    kfp_entrypoint._note_spans(other, str(data), "span-{SPAN}/*.csv", 1)
  unfilled = {**values, properties.NIGHT_ID_KEY: kubeflow_night.RUN_ID_PLACEHOLDER}
  kfp_entrypoint._note_spans(unfilled, str(data), "span-{SPAN}/*.csv", 1)
  assert nights.open_facts(serving, "m", kubeflow_night.RUN_ID_PLACEHOLDER) == {}
