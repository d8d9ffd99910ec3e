"""The local crontab target: install/list/remove on a crontab file, and the entry really runs."""

import json
import os
import pathlib
import shutil
import stat
import subprocess

import pytest

from components.serving import nights
from pipeline.cli import schedule
from pipeline.cli.scheduling import crontab as crontab_lib
from tests.conftest import DIGITS_CSV

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
USER_LINES = (
  "MAILTO=ops@example.com\n"
  "# my own jobs\n"
  "\n"
  "*/5 * * * * /usr/local/bin/backup --quiet\n"
  "0 3 * * 0 echo '50% done' > /tmp/x\n"
)


def _executable(path: pathlib.Path, text: str) -> str:
  path.write_text(text)
  path.chmod(path.stat().st_mode | stat.S_IXUSR)
  return str(path)


def _main(*args: str) -> int:
  return schedule.main(list(args))


def test_install_list_remove_cycle_preserves_user_lines(tmp_path, capsys):
  crontab = tmp_path / "crontab"
  crontab.write_text(USER_LINES)
  out_a, out_b = tmp_path / "out-a", tmp_path / "out-b"
  common = ["--crontab-file", str(crontab)]

  assert _main("local", "install", "--cron", "0 2 * * *", "--output-dir", str(out_a), *common) == 0
  first = crontab.read_text()
  assert first.startswith(USER_LINES)
  job_a = crontab_lib.default_job_name(str(out_a))
  begin, entry, end = first[len(USER_LINES) :].splitlines()
  assert (begin, end) == (f"# BEGIN tfx-pipeline-kit {job_a}", f"# END tfx-pipeline-kit {job_a}")
  assert entry.startswith("0 2 * * * cd ")
  night = f"{REPO_ROOT}/.venv/bin/python pipeline/schedule.py local night --output-dir {out_a}"
  assert f"{night} --job-name {job_a} --time-limit 6h --" in entry
  assert "TF_USE_LEGACY_KERAS=1" in entry and entry.endswith(f">> {out_a}/logs/nightly.log 2>&1")
  assert json.loads((out_a / "schedule.json").read_text())["cron"] == "0 2 * * *"

  # Idempotent: the same install again changes nothing.
  assert _main("local", "install", "--cron", "0 2 * * *", "--output-dir", str(out_a), *common) == 0
  assert crontab.read_text() == first
  # A new schedule replaces the entry in place.
  assert _main("local", "install", "--cron", "@daily", "--output-dir", str(out_a), *common) == 0
  assert crontab.read_text() == first.replace(entry, "0 0 * * *" + entry[len("0 2 * * *") :])
  # Another output folder is another job.
  assert _main("local", "install", "--cron", "30 1 * * *", "--output-dir", str(out_b), *common) == 0
  entries = crontab_lib.list_entries(crontab.read_text())
  assert [(e.job, e.schedule) for e in entries] == [
    (job_a, "0 0 * * *"),
    (crontab_lib.default_job_name(str(out_b)), "30 1 * * *"),
  ]
  capsys.readouterr()
  assert _main("local", "list", "--output-dir", str(out_a), *common) == 0
  listed = capsys.readouterr().out
  assert f"* {job_a}: 0 0 * * *" in listed and "30 1 * * *" in listed

  assert _main("local", "remove", "--output-dir", str(out_a), *common) == 0
  assert f"Removed {job_a!r}" in capsys.readouterr().out
  remaining = crontab.read_text()
  assert remaining.startswith(USER_LINES)
  assert [e.job for e in crontab_lib.list_entries(remaining)] == [
    crontab_lib.default_job_name(str(out_b))
  ]
  assert _main("local", "remove", "--output-dir", str(out_a), *common) == 0
  assert f"Nothing to remove: {crontab} has no {job_a!r} entry." in capsys.readouterr().out
  assert crontab.read_text() == remaining
  assert _main("local", "remove", "--output-dir", str(out_b), *common) == 0
  assert crontab.read_text() == USER_LINES


def test_run_local_args_and_job_name_are_passed_through(tmp_path):
  crontab = tmp_path / "crontab"
  data = tmp_path / "my digits"
  data.mkdir()
  shutil.copy(DIGITS_CSV, data)
  status = _main(
    "local", "install", "--cron", "0 2 * * *", "--output-dir", str(tmp_path / "o"),
    "--job-name", "digits-nightly", "--crontab-file", str(crontab),
    "--", "--train-steps", "50", "--data-root", str(data),
  )  # fmt: skip
  assert status == 0
  [entry] = crontab_lib.list_entries(crontab.read_text())
  assert entry.job == "digits-nightly"
  assert f"--train-steps 50 --data-root '{data}' >>" in entry.line


def test_relative_paths_are_made_absolute_from_the_folder_install_runs_in(tmp_path, monkeypatch):
  """cron runs the job from the repository root: `--data-root data` from a project folder
  named the repository's `data` and was refused there."""
  project = tmp_path / "project"
  (project / "data").mkdir(parents=True)
  shutil.copy(DIGITS_CSV, project / "data")
  monkeypatch.chdir(project)
  crontab = tmp_path / "crontab"
  status = _main(
    "local", "install", "--cron", "0 2 * * *", "--output-dir", "out",
    "--crontab-file", str(crontab), "--", "--data-root", "data", "--serving-dir=srv",
    "--pipeline-root", "gs://bucket/root",
  )  # fmt: skip
  assert status == 0
  [entry] = crontab_lib.list_entries(crontab.read_text())
  assert f"--data-root {project / 'data'} " in entry.line, entry.line
  assert f"--serving-dir={project / 'srv'} " in entry.line, entry.line
  assert "--pipeline-root gs://bucket/root " in entry.line, entry.line
  assert f"--output-dir {project / 'out'} " in entry.line, entry.line


def test_install_refuses_run_local_flags_that_would_fail_every_night(tmp_path, capsys):
  crontab = tmp_path / "crontab"
  for extra, message in (
    (
      ["--trian-steps", "5"],
      "unrecognized arguments: --trian-steps 5; did you mean --train-steps? (see --help)",
    ),
    (["--min-accuracy", "2"], "--min-accuracy must be between 0 and 1, got 2."),
    (["--data-root", str(tmp_path / "nowhere")], "does not exist; pass an existing folder."),
  ):
    try:
      status = _main(
        "local", "install", "--cron", "0 2 * * *", "--output-dir", str(tmp_path / "o"),
        "--crontab-file", str(crontab), "--", *extra,
      )  # fmt: skip
    except SystemExit as e:  # argparse's own exit for an unknown flag
      status = e.code
    assert status != 0
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not crontab.exists()


def test_percent_signs_are_escaped_for_cron(tmp_path):
  command = crontab_lib.crontab_command(
    repo_root="/repo", python="/repo/.venv/bin/python", output_dir="/out/100%",
    job_name="j", run_local_args=["--note", "50%"],
  )  # fmt: skip
  assert "%" not in command.replace("\\%", "")
  assert "/out/100\\%/logs/nightly.log" in command


def test_entry_runs_the_night_job_from_the_repo_with_cron_s_environment(tmp_path):
  out = tmp_path / "out"
  fake_python = _executable(
    tmp_path / "fake-python",
    '#!/bin/sh\necho "ran: $* | cwd=$(pwd) | TF_USE_LEGACY_KERAS=$TF_USE_LEGACY_KERAS"\nexit 3\n',
  )
  command = crontab_lib.crontab_command(
    repo_root=str(REPO_ROOT), python=fake_python, output_dir=str(out), job_name="j",
    run_local_args=["--quiet"], time_limit="90m",
  )  # fmt: skip
  env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}  # cron's sparse environment
  proc = subprocess.run(["sh", "-c", command], env=env, cwd=tmp_path, check=False, timeout=30)
  assert proc.returncode == 3  # The line exits with the night's own status.
  log = out / "logs" / "nightly.log"
  assert log.read_text().splitlines() == [
    f"ran: pipeline/schedule.py local night --output-dir {out} --job-name j --time-limit 90m "
    f"-- --quiet | cwd={REPO_ROOT} | TF_USE_LEGACY_KERAS=1"
  ]


def test_default_crontab_goes_through_the_crontab_command(tmp_path, monkeypatch, capsys):
  # A stand-in `crontab` on PATH keeps the real user crontab out of reach.
  store = tmp_path / "store"
  bin_dir = tmp_path / "bin"
  bin_dir.mkdir()
  _executable(
    bin_dir / "crontab",
    "#!/bin/sh\n"
    f'STORE="{store}"\n'
    'if [ "$1" = "-l" ]; then\n'
    '  [ -f "$STORE" ] || { echo "no crontab for $(id -un)" >&2; exit 1; }\n'
    '  cat "$STORE"\n'
    'elif [ "$1" = "-" ]; then cat > "$STORE"\n'
    "else exit 2; fi\n",
  )
  monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
  assert _main("local", "install", "--cron", "0 2 * * *", "--output-dir", str(tmp_path / "o")) == 0
  assert len(crontab_lib.list_entries(store.read_text())) == 1
  assert _main("local", "remove", "--output-dir", str(tmp_path / "o")) == 0
  assert store.read_text() == ""


def test_missing_crontab_command_names_the_fix(tmp_path, monkeypatch, capsys):
  empty = tmp_path / "empty"
  empty.mkdir()
  monkeypatch.setenv("PATH", str(empty))
  assert _main("local", "list", "--output-dir", str(tmp_path / "o")) == 1
  err = capsys.readouterr().err.strip()
  assert err.startswith("schedule.py: error: crontab: command not found")
  assert "--crontab-file" in err and "\n" not in err


@pytest.mark.parametrize(
  ("args", "message"),
  [
    (["--cron", "0 0 2 * * *", "--seconds-field"], None),  # seconds 0: fine for cron
    (["--cron", "30 0 2 * * *", "--seconds-field"], "seconds field"),
    (["--cron", "0 2 * *"], "has 4 fields"),
    ([], "needs --cron"),
    (["--cron", "@daily", "--job-name", "bad name"], "Invalid job name"),
    (["--cron", "@daily", "--python", "/nonexistent/python"], "Interpreter"),
  ],
)
def test_install_errors(tmp_path, capsys, args, message):
  crontab = tmp_path / "crontab"
  crontab.write_text(USER_LINES)
  status = _main(
    "local", "install", "--output-dir", str(tmp_path / "o"), "--crontab-file", str(crontab), *args
  )
  err = capsys.readouterr().err
  if message is None:
    assert status == 0
    return
  assert status == 1 and message in err and len(err.strip().splitlines()) == 1
  assert crontab.read_text() == USER_LINES


def test_history_before_any_recorded_night_says_how_the_last_run_ended(tmp_path, capsys):
  out = tmp_path / "out"
  assert _main("local", "history", "--output-dir", str(out)) == 1
  err = capsys.readouterr().err.strip()
  assert "no night has run with this serving folder yet" in err and "\n" not in err
  out.mkdir()
  night = {"outcome": "failed", "started": "2026-11-28T02:00:05Z", "line": "bad csv: row 3."}
  (out / "run_summary.json").write_text(json.dumps({"status": "failed", "night": night}))
  assert _main("local", "history", "--output-dir", str(out)) == 1
  err = capsys.readouterr().err.strip()
  assert "\n" not in err and "Traceback" not in err
  assert f"the last run in {out} (2026-11-28 02:00:05) ended failed: bad csv: row 3 (see " in err
  assert "a first try that fails is not recorded" in err
  assert not (out / "serving").exists()


def test_history_of_runs_that_pushed_elsewhere_reads_their_serving_folder(tmp_path, capsys):
  """Runs given --serving-dir record their nights there; history --output-dir blamed the last
  run (which had pushed) for a serving folder under the output folder that never existed."""
  out, serving = tmp_path / "out", tmp_path / "shared"
  out.mkdir()
  night = {"night": "n1", "outcome": "pushed", "started": "2026-11-28T02:00:05Z", "line": "ok"}
  config = {"serving_dir": str(serving), "model_name": "churn"}
  summary = {"status": "succeeded", "night": night, "config": config}
  (out / "run_summary.json").write_text(json.dumps(summary))
  nights.append_record(str(serving), "churn", {**night, "line": "pushed version 1"})
  assert _main("local", "history", "--output-dir", str(out)) == 0
  assert f"Nights of 'churn' ({serving})" in capsys.readouterr().out
  # A mistyped model name is named, with the models the folder holds.
  assert _main("local", "history", "--serving-dir", str(serving), "--model-name", "chrun") == 1
  err = capsys.readouterr().err.strip()
  assert err == (
    f"schedule.py: error: {serving} holds no model 'chrun' (it holds churn); pass one of "
    "those to --model-name."
  )
  # A serving folder no run used, beside a last run that ended well: not blamed on that run.
  assert _main("local", "history", "--serving-dir", str(tmp_path / "typo")) == 1
  assert "no night has run with this serving folder yet" in capsys.readouterr().err


def test_history_and_the_nights_page_show_a_nights_notes_and_no_owner_column_for_one_folder(
  tmp_path, capsys
):
  """A not-pushed night with a span note: history printed no line for it and the page had no
  note; a night that failed before it opened (no owner) added a 'run from' column."""
  from components.report import nights_page

  serving = tmp_path / "serving"
  note = "span-2/ holds no *.csv file (it holds data.csv.part); the newest span read is 1"
  base = {"owner": "vm:/out", "started": "2026-11-28T02:00:05Z"}
  nights.append_record(str(serving), "churn", {**base, "night": "a", "outcome": "pushed"})
  noted = {**base, "night": "b", "outcome": "not_pushed", "line": "nothing new", "notes": [note]}
  nights.append_record(str(serving), "churn", noted)
  failed = {"night": "c", "outcome": "failed", "line": "no space", "owner": None}
  nights.append_record(str(serving), "churn", {**failed, "started": base["started"]})
  assert _main("local", "history", "--serving-dir", str(serving), "--model-name", "churn") == 0
  out = capsys.readouterr().out
  assert f"not_pushed: nothing new (and {note})" in " ".join(out.split())
  assert "run from" not in out
  page = nights_page.render_nights_page(nights.read_records(str(serving), "churn"), "churn", "", {})
  assert f"nothing new; {note}" in page.replace("&#x27;", "'").replace("&#39;", "'")


@pytest.mark.parametrize("never", ["0 2 30 2 *", "0 2 31 4 *"])
def test_an_installed_job_keeps_its_crontab_when_a_new_schedule_never_fires(
  tmp_path, capsys, never
):
  """February 30th and April 31st never come."""
  out, crontab = tmp_path / "out", tmp_path / "crontab"
  common = ["--output-dir", str(out), "--crontab-file", str(crontab)]
  notify = ["--", "--notify", "json://127.0.0.1:9/n"]
  assert _main("local", "install", "--cron", "0 2 * * *", *common, *notify) == 0
  before = crontab.read_bytes()
  capsys.readouterr()
  assert _main("local", "install", "--cron", never, *common) == 1
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "does not run in the next year" in err
  assert "Traceback" not in err
  assert crontab.read_bytes() == before
  assert crontab_lib.find_entries(before.decode(), None)


def test_output_into_a_pipe_whose_reader_left_ends_quietly(tmp_path):
  """`schedule.py ... | head` where head has gone: 128 + SIGPIPE and no 'error: Broken pipe'."""
  import signal
  import sys

  from tests.support.cli_runs import REPO_ROOT, project_env

  crontab = tmp_path / "crontab"
  crontab.write_text("".join(f"# line {i}\n" for i in range(10)))
  command = [sys.executable, str(REPO_ROOT / "pipeline" / "schedule.py"), "local", "install"]
  command += ["--cron", "0 2 * * *", "--output-dir", str(tmp_path / "out")]
  command += ["--crontab-file", str(crontab), "--", "--data-root", str(DIGITS_CSV.parent)]
  proc = subprocess.Popen(
    command, env=project_env(), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
  )
  proc.stdout.close()
  assert proc.wait(timeout=120) == 128 + signal.SIGPIPE, proc.stderr.read()
  assert proc.stderr.read() == b""
  proc.stderr.close()
