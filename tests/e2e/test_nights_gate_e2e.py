"""Nights of a real mixed-type table, as a cron job runs them: the Chicago taxi sample inside
the tfx wheel, label `big_tip`, delivered in spans.

One module-scoped sequence of nights, each a `run_local.py` process with the same flags:
night 1 pushes version 1; night 2 (a column that was empty fills in) pushes version 2; each of
six faults, and span 2's rows delivered again as span 3, stop their night in one line and push
nothing; a change accepted with `schedule.py local accept` trains and pushes; a failed night is
reported to a loopback webhook and a loopback mail server; a dead notification endpoint changes
no exit status; and `schedule.py local history` lists every night.
"""

import json
import shutil

import numpy as np
import pytest

from components.nights import nights_lib
from components.serving import history, versions
from components.serving import nights as serving_nights
from tests.support import gate_data, notify_servers
from tests.support.cli_runs import load_summary, run_script, states

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

MODEL = "taxi"
FLAGS = (
  "--label-key", gate_data.TAXI_LABEL,
  "--model-name", MODEL,
  "--optimizer-variants", "none",
  # One network for a fixed number of steps (eval accuracy 0.893 on span 1, as the default
  # model's 3 networks and linear member reach): 40 s a night instead of 108 s on 2 cores.
  "--train-steps", "300",
  "--quiet",
)  # fmt: skip
FAULTS = {
  "unit": ("trip_miles", lambda f: gate_data.unit_change(f, "trip_miles", 1609.34)),
  "renamed": (
    "payment_type",
    lambda f: gate_data.rename_values(f, "payment_type", {"Cash": "CSH", "Credit Card": "CRD"}),
  ),
  "missing": ("trip_seconds", lambda f: gate_data.drop_column(f, "trip_seconds")),
  "emptied": ("fare", lambda f: gate_data.empty_column(f, "fare")),
  "inverted": (gate_data.TAXI_LABEL, lambda f: gate_data.invert_label(f, gate_data.TAXI_LABEL)),
  # A new column written after the outcome: whether the tip was large, as a flag.
  "leak": (
    "tip_flag",
    lambda f: f.assign(tip_flag=f[gate_data.TAXI_LABEL].map({"1": "Y", "0": "N"})),
  ),
}


class Nights:
  """The data root, the output folder and every night run so far."""

  def __init__(self, root):
    self.data = root / "data"
    self.out = root / "out"
    self.serving = self.out / "serving"
    self.frame = gate_data.taxi_frame()
    self.runs = []

  def span(self, number, frame):
    folder = self.data / f"span-{number}"
    shutil.rmtree(folder, ignore_errors=True)
    gate_data.write_csv(frame, folder)

  def night(self, *extra):
    proc = run_script("run_local.py", "--data-root", self.data, "--output-dir", self.out,
                      *FLAGS, *extra, timeout=900, warm=True)  # fmt: skip
    self.runs.append(proc)
    return proc, load_summary(self.out)

  def versions(self):
    return versions.list_versions(str(self.serving), MODEL)

  def records(self):
    return serving_nights.read_records(str(self.serving), MODEL)


@pytest.fixture(scope="module")
def nights(tmp_path_factory):
  run = Nights(tmp_path_factory.mktemp("nights"))
  half = len(run.frame) // 2
  run.first, run.second = run.frame.iloc[:half], run.frame.iloc[half:]
  return run


def _one_error_line(proc):
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
  assert len(lines) == 1, proc.stderr[-3000:]
  return lines[0]


def test_night_1_pushes_version_1(nights):
  nights.span(1, nights.first)
  proc, summary = nights.night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert summary["pushed"]["version"] == 1
  assert summary["night"]["gate"]["compared"] is False
  # Every column is scored alone against the label on a first night: none gives it away.
  assert summary["night"]["gate"]["findings"] == []
  # Version 1 carries what it was trained on: the next night's reference.
  data = nights.serving / MODEL / "1" / "training_data"
  assert (data / "schema.pbtxt").exists()
  assert (data / "statistics" / "Split-train" / "FeatureStats.pb").exists()
  manifest = json.loads((nights.serving / MODEL / "1" / "manifest.json").read_text())
  assert manifest["training_data"]["label_stats"]["train"]["counts"]
  assert manifest["evaluation"]["candidate"]["binary_accuracy"] > 0.8


def test_night_2_with_a_column_that_fills_in_pushes_version_2(nights):
  # pickup_census_tract is empty in every row of span 1 (text to version 1) and holds a
  # number in span 2: the live version is scored on tonight's rows in its own types.
  nights.span(2, nights.second)
  proc, summary = nights.night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert states(summary)["Evaluator"] == "ran"
  assert summary["pushed"]["version"] == 2
  assert "binary_accuracy_diff_vs_baseline" in summary["eval_metrics"]
  gate = summary["night"]["gate"]
  assert gate["passed"] and gate["compared"] and gate["live_version"] == 1
  [note] = [f for f in gate["findings"] if f["column"] == "pickup_census_tract"]
  assert note["kind"] == "info"
  assert nights.versions() == [1, 2]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_fault_stops_its_night_in_one_line_and_pushes_nothing(nights, fault):
  column, make = FAULTS[fault]
  nights.span(3, make(nights.second))
  proc, summary = nights.night()
  assert proc.returncode == 1
  line = _one_error_line(proc)
  assert "data gate stopped this night" in line and repr(column) in line
  assert f"--accept-changes {column}" in line and "version 2 stays live" in line
  assert summary["status"] == "stopped"
  ran = states(summary)
  assert ran["DataGate"] == "failed"
  assert "DistributedTrainer" not in ran and "Pusher" not in ran
  assert nights.versions() == [1, 2]
  assert nights.records()[-1]["outcome"] == "stopped"


def test_a_span_that_repeats_the_live_versions_rows_stops_its_night(nights):
  # A stuck export: span 3 holds span 2's rows again, shuffled.
  nights.span(3, nights.second.sample(frac=1.0, random_state=1))
  proc, summary = nights.night()
  assert proc.returncode == 1
  line = _one_error_line(proc)
  rows = len(nights.second)
  assert "tonight's data repeats data a version was trained on: span 3 holds" in line
  assert f"span 3 holds the same {rows:,} rows as span 2, which live version 2 was" in line
  assert "--accept-changes :repeated_data" in line
  assert states(summary)["DataGate"] == "failed" and "DistributedTrainer" not in states(summary)
  assert nights.versions() == [1, 2]


def test_an_accepted_change_trains_and_is_recorded(nights):
  column, make = FAULTS["unit"]
  nights.span(3, make(nights.second))
  proc = run_script(
    "schedule.py", "local", "accept", "--output-dir", nights.out, "--columns", column,
    "--reason", "the feed reports metres from now on",
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr
  assert "version 2" in proc.stdout
  proc, summary = nights.night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  gate = summary["night"]["gate"]
  assert gate["passed"] and column in gate["accepted"]
  assert gate["acceptances"][column]["reason"] == "the feed reports metres from now on"
  assert gate["acceptances"][column]["via"] == "schedule.py local accept"
  assert {f["check"] for f in gate["findings"] if f["accepted"]} >= {"scale"}
  assert "DistributedTrainer" in states(summary)
  entries = history.read_history(str(nights.serving), MODEL)
  assert any(e["event"] == "accept" and e["columns"] == [column] for e in entries)


def test_stopped_and_failed_nights_are_reported_to_a_webhook_and_by_mail(nights, tmp_path):
  mail = tmp_path / "mail.url"
  with notify_servers.http_server() as webhook, notify_servers.smtp_server() as (smtp, mailbox):
    mail.write_text(notify_servers.mail_url(smtp.port) + "\n")
    mail.chmod(0o600)
    notify = ("--notify", f"json://127.0.0.1:{webhook.server_address[1]}/night",
              "--notify", f"file:{mail}")  # fmt: skip
    # A stopped night (the label inverted again) ...
    nights.span(3, FAULTS["inverted"][1](nights.second))
    stopped, summary = nights.night(*notify)
    assert stopped.returncode == 1 and summary["night"]["outcome"] == "stopped"
    # ... and one that fails before anything runs: tonight's span has lost the label column.
    (nights.data / "span-4").mkdir()
    nights.second.drop(columns=[gate_data.TAXI_LABEL]).to_csv(
      nights.data / "span-4" / "data.csv", index=False
    )
    failed, failed_summary = nights.night(*notify)
    assert failed.returncode == 2
    line = _one_error_line(failed)
    # The last run's summary and page now say this one failed, not how the stopped one ended.
    assert failed_summary["status"] == "failed"
    assert failed_summary["error"] == line[len("error: ") :]
    assert "Run of the pipeline: failed" in (nights.out / "report.html").read_text()
    record = failed_summary["night"]
    assert record["owner"] == nights_lib.local_owner(str(nights.out))
    assert record["live_version"] == nights.versions()[-1]
    assert [r["json"]["type"] for r in webhook.requests] == ["failure", "failure"]
    first, second = (r["json"] for r in webhook.requests)
    assert "night stopped" in first["title"] and "'big_tip'" in first["message"]
    assert "night failed" in second["title"]
    assert line[len("error: ") :][:60] in second["message"]
    assert [m["message"]["subject"] for m in mailbox.messages] == [first["title"], second["title"]]
    output = "".join(p.stdout + p.stderr for p in (stopped, failed))
    assert notify_servers.SMTP_PASSWORD not in output
  shutil.rmtree(nights.data / "span-4")
  assert nights.records()[-1]["outcome"] == "failed"
  # Back to the accepted night's span, for the next test.
  nights.span(3, FAULTS["unit"][1](nights.second))


def test_a_dead_notification_endpoint_changes_no_exit_status(nights):
  # The accepted night's span again: nothing new, nothing pushed; reported, to nobody.
  dead = notify_servers.dead_port()
  proc, summary = nights.night(
    "--notify", f"json://127.0.0.1:{dead}/night", "--notify-every-night"
  )  # fmt: skip
  assert proc.returncode == 0, proc.stderr[-3000:]
  [notice] = summary["notifications"]
  assert notice["ok"] is False and notice["attempts"] == 3
  assert summary["night"]["outcome"] in ("pushed", "not_pushed")
  assert nights.records()[-1]["night"] == summary["night"]["night"]


def test_history_lists_every_night(nights):
  proc = run_script("schedule.py", "local", "history", "--output-dir", nights.out, "--json")
  assert proc.returncode == 0, proc.stderr
  records = [json.loads(line) for line in proc.stdout.splitlines()]
  assert len(records) == len(nights.runs)
  outcomes = [r["outcome"] for r in records]
  assert outcomes[:2] == ["pushed", "pushed"]
  # The faults, the span delivered again and the notified night stopped.
  assert outcomes.count("stopped") == len(FAULTS) + 2 and outcomes.count("failed") == 1
  table = run_script("schedule.py", "local", "history", "--output-dir", nights.out)
  assert table.returncode == 0 and f"Nights of '{MODEL}'" in table.stdout
  assert table.stdout.count("stopped") >= len(FAULTS)


def _as_pushed_before_the_gate(version_dir):
  """The version as the kit pushed it before the data gate: no training_data/, in its folder
  or in its manifest's list of files (a file listed and missing is a damaged version)."""
  from components.serving import manifest

  shutil.rmtree(version_dir / "training_data")
  found = json.loads((version_dir / "manifest.json").read_text())
  files = {k: v for k, v in found["files"].items() if not k.startswith("training_data/")}
  found.update(files=files, content_sha256=manifest.content_digest(files))
  (version_dir / "manifest.json").write_text(json.dumps(found))


def test_a_version_pushed_without_its_training_data_is_not_a_crash(tmp_path):
  # Versions pushed before the data gate carry no training_data/: the live version cannot be
  # converted to, so it is left out of the evaluation instead of failing the night.
  run = Nights(tmp_path)
  half = len(run.frame) // 2
  run.span(1, run.frame.iloc[:half])
  proc, _ = run.night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  _as_pushed_before_the_gate(run.serving / MODEL / "1")
  run.span(2, run.frame.iloc[half:])
  proc, summary = run.night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  gate = summary["night"]["gate"]
  assert gate["compared"] is False and "without its training data" in gate["reason"]
  assert summary["pushed"]["version"] == 2
  assert "binary_accuracy_diff_vs_baseline" not in summary["eval_metrics"]


def test_a_number_label_joined_from_other_rows_is_stopped_by_the_live_model(tmp_path):
  # The taxi sample with `fare` as a number label: a shuffled label keeps its distribution,
  # which every column check compares; the live version's R-squared on tonight's rows notices.
  run = Nights(tmp_path)
  flags = ("--label-key", "fare", "--model-name", "fare", "--optimizer-variants", "none",
           "--train-steps", "300", "--quiet")  # fmt: skip

  def night():
    proc = run_script("run_local.py", "--data-root", run.data, "--output-dir", run.out, *flags,
                      timeout=900, warm=True)  # fmt: skip
    return proc, load_summary(run.out)

  half = len(run.frame) // 2
  first, second = run.frame.iloc[:half], run.frame.iloc[half:]
  run.span(1, first)
  proc, summary = night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert summary["pushed"]["version"] == 1
  shuffled = np.random.default_rng(0).permutation(second["fare"].to_numpy())
  run.span(2, second.assign(fare=shuffled))
  proc, summary = night()
  assert proc.returncode == 1
  line = _one_error_line(proc)
  assert "live version 1 answers tonight's" in line and "'fare' looks shuffled" in line
  assert "--accept-changes fare" in line
  [stop] = [f for f in summary["night"]["gate"]["findings"] if f["kind"] == "stop"]
  assert stop["check"] == "live_model" and stop["value"] < -0.3
  # The same rows with their own fares pass the gate.
  run.span(2, second)
  proc, summary = night()
  assert proc.returncode == 0, proc.stderr[-3000:]
  gate = summary["night"]["gate"]
  assert gate["passed"] and gate["compared"]
  assert "live_model" not in {f["check"] for f in gate["findings"]}
