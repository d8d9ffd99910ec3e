"""Crontab injection: control characters are refused, odd values are quoted, blocks stay exact."""

import os
import pathlib
import re
import shlex

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pipeline.cli import schedule
from pipeline.cli.scheduling import cron, kfp_client, kfp_health
from pipeline.cli.scheduling import crontab as crontab_lib
from tests.support import crontab_runs

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
JOB = "digits-nightly"


@pytest.fixture
def system_crontab(tmp_path, monkeypatch):
  """A stand-in `crontab` on PATH (tests.support.crontab_runs): (its table's file, its calls)."""
  return crontab_runs.fake_system_crontab(tmp_path, monkeypatch)


def _main(*args: str) -> int:
  return schedule.main(list(args))


# ----------------------------------------------------------------------------- refused


def _attacks(tmp: pathlib.Path) -> list[tuple[list[str], str, str]]:
  """(extra CLI args, the flag named in the error, the bad value) for each injection probe."""
  pwned = tmp / "PWNED"
  out = str(tmp / "out")
  newline_job = f"\n* * * * * touch {pwned} #"
  return [
    (["--output-dir", out + newline_job], "--output-dir", out + newline_job),
    ([f"--output-dir={out}{newline_job}"], "--output-dir", out + newline_job),
    (
      ["--output-dir", out, "--", "--data-root", "/data" + newline_job],
      "--data-root (after --)",
      "/data" + newline_job,
    ),
    (
      ["--output-dir", out, "--", "--train-steps", "5", "x" + newline_job],
      "argument 3 after --",
      "x" + newline_job,
    ),
    (
      ["--output-dir", out, "--", f"--data-root=/d{newline_job}"],
      "--data-root (after --)",
      "/d" + newline_job,
    ),
    (["--output-dir", out + f"\r* * * * * touch {pwned}"], "--output-dir", None),
    (["--output-dir", out, "--job-name", "j" + newline_job], "--job-name", None),
    (["--output-dir", out, "--python", "/usr/bin/python3" + newline_job], "--python", None),
    (["--output-dir", out, "--crontab-file", "/tmp/c\nx"], "--crontab-file", None),
  ]


def test_newline_attacks_are_refused_before_the_crontab_is_touched(
  tmp_path, system_crontab, capsys
):
  store, calls = system_crontab
  for extra, flag, value in _attacks(tmp_path):
    bad = value if value is not None else next(a for a in extra if "\n" in a or "\r" in a)
    for action in ("install", "list", "remove"):
      cron_flags = ["--cron", "0 2 * * *"] if action == "install" else []
      argv = ["local", action, *cron_flags, *extra]
      assert schedule.main(argv) == 1, argv
      problem = cron.control_char_problem(bad)
      assert (
        capsys.readouterr().err == f"schedule.py: error: {flag} contains {problem}; remove it.\n"
      )
  # Nothing was read, written or run.
  assert not calls.exists()
  assert store.read_bytes() == crontab_runs.USER_CRONTAB
  assert not (tmp_path / "PWNED").exists()
  assert not (tmp_path / "out").exists()


def test_the_reported_probe_message_is_exact(tmp_path, system_crontab, capsys):
  store, calls = system_crontab
  status = _main(
    "local", "install", "--cron", "0 2 * * *", "--output-dir", "out\n* * * * * touch PWNED #"
  )
  assert status == 1
  assert capsys.readouterr().err == (
    "schedule.py: error: --output-dir contains a control character (U+000A line feed at "
    "character 4); remove it.\n"
  )
  assert store.read_bytes() == crontab_runs.USER_CRONTAB and not calls.exists()


@pytest.mark.parametrize(
  ("char", "name"),
  [
    ("\n", "U+000A line feed"),
    ("\r", "U+000D carriage return"),
    ("\t", "U+0009 tab"),
    ("\x00", "U+0000 NUL"),
    ("\x1b", "U+001B escape"),
    ("\x7f", "U+007F delete"),
    ("\x85", "U+0085 next line"),
    ("\x07", "U+0007"),
    ("\u2028", "U+2028 line separator"),
    ("\u2029", "U+2029 paragraph separator"),
  ],
)
def test_every_control_character_is_refused_in_every_local_value(
  tmp_path, system_crontab, capsys, char, name
):
  store, calls = system_crontab
  out = str(tmp_path / "out")
  cases = [
    (["--output-dir", f"{out}{char}x"], "--output-dir", len(out) + 1),
    (["--output-dir", out, "--cron", f"0 2 * * *{char}"], "--cron", 10),
    (["--output-dir", out, "--job-name", f"j{char}"], "--job-name", 2),
    (["--output-dir", out, "--", "--note", f"a{char}"], "--note (after --)", 2),
  ]
  for args, flag, position in cases:
    cron_flags = [] if "--cron" in args else ["--cron", "0 2 * * *"]
    assert _main("local", "install", *cron_flags, *args) == 1
    assert capsys.readouterr().err == (
      f"schedule.py: error: {flag} contains a control character ({name} at character "
      f"{position}); remove it.\n"
    )
  assert store.read_bytes() == crontab_runs.USER_CRONTAB and not calls.exists()


def test_bytes_that_are_not_utf8_are_refused_not_crashed_on(tmp_path, system_crontab, capsys):
  store, _ = system_crontab
  bad = os.fsdecode(os.fsencode(str(tmp_path)) + b"/out\xff")
  assert _main("local", "install", "--cron", "@daily", "--output-dir", bad) == 1
  err = capsys.readouterr().err
  assert err.startswith("schedule.py: error: --output-dir contains a byte that is not valid UTF-8")
  assert "0xFF" in err and err.count("\n") == 1
  assert store.read_bytes() == crontab_runs.USER_CRONTAB


def test_library_refuses_control_characters_whatever_the_caller(tmp_path):
  common = {"repo_root": "/repo", "python": "/repo/py", "output_dir": "/out", "job_name": "j"}
  for key in ("repo_root", "python", "output_dir"):
    with pytest.raises(cron.ScheduleError, match="control character"):
      crontab_lib.crontab_command(**{**common, key: "/x\n* * * * * touch /tmp/PWNED"})
  with pytest.raises(cron.ScheduleError, match=r"argument 2 \(after --\)"):
    crontab_lib.crontab_command(**common, run_local_args=["--a", "b\rc"])
  with pytest.raises(cron.ScheduleError, match="control character"):
    crontab_lib.install_entry("", "0 2 * * *", "true\n* * * * * touch /tmp/PWNED", "j")
  with pytest.raises(cron.ScheduleError, match="five fields"):
    crontab_lib.install_entry("", "* * * * * touch /tmp/PWNED #", "true", "j")
  with pytest.raises(cron.ScheduleError, match="control character"):
    crontab_lib.install_entry("", "0 2 * * *", "true", "j\n* * * * * x")


def test_percent_is_escaped_so_cron_does_not_cut_the_command():
  command = crontab_lib.crontab_command(
    repo_root="/repo", python="/py", output_dir="/out/100%", job_name="j",
    run_local_args=["--note", "50%", "a\\%b"],
  )  # fmt: skip
  [(seen, stdin)] = crontab_runs.cron_split(f"0 2 * * * {command}")
  assert stdin is None
  words = shlex.split(seen)
  assert words[words.index("pipeline/schedule.py") :][:4] == [
    "pipeline/schedule.py", "local", "night", "--output-dir",
  ]  # fmt: skip
  assert words[words.index("--output-dir") + 1] == "/out/100%"
  assert words[words.index("--") + 1 :][:3] == ["--note", "50%", "a\\%b"]


_PRINTABLE = st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp"))


@settings(max_examples=300, deadline=None)
@example(["a\\%b", "\\\\%", "\\", "%", "'%'"])  # Backslash before %: cron's one blind spot.
@given(st.lists(st.text(_PRINTABLE, max_size=12), min_size=1, max_size=4))
def test_any_printable_argument_survives_shell_quoting_and_cron_unchanged(args):
  command = crontab_lib.crontab_command(
    repo_root="/repo", python="/py", output_dir="/out", job_name="j", run_local_args=args
  )
  [(seen, stdin)] = crontab_runs.cron_split(f"0 2 * * * {command}")
  assert stdin is None
  words = shlex.split(seen)
  start = words.index("--") + 1
  assert words[start : start + len(args)] == args
  assert words[start + len(args)] == ">>"


# ----------------------------------------------------------------------------- one block


def _without_block(data: bytes, job: str) -> bytes:
  text = data.decode("utf-8", "surrogateescape")
  pattern = rf"# BEGIN tfx-pipeline-kit {re.escape(job)}\n[^\n]*\n# END tfx-pipeline-kit {job}\n"
  stripped, count = re.subn(pattern, "", text)
  assert count == 1, text
  return stripped.encode("utf-8", "surrogateescape")


def test_install_writes_one_block_and_remove_restores_the_crontab_byte_for_byte(
  tmp_path, system_crontab, capsys
):
  store, calls = system_crontab
  out = str(tmp_path / "out")
  install = ["local", "install", "--output-dir", out, "--job-name", JOB]
  assert _main(*install, "--cron", "0 2 * * *") == 0
  first = store.read_bytes()
  assert first.startswith(crontab_runs.USER_CRONTAB)
  assert first[len(crontab_runs.USER_CRONTAB) :].decode().splitlines()[::2] == [
    f"# BEGIN tfx-pipeline-kit {JOB}",
    f"# END tfx-pipeline-kit {JOB}",
  ]
  assert _without_block(first, JOB) == crontab_runs.USER_CRONTAB
  entries = crontab_lib.list_entries(first.decode("utf-8", "surrogateescape"))
  assert [(e.job, e.legacy) for e in entries] == [("nightly-other", False), (JOB, False)]

  # Installing the same again writes nothing; a new schedule replaces the block in place.
  calls.unlink()
  assert _main(*install, "--cron", "0 2 * * *") == 0
  assert calls.read_text().split() == ["-l"]
  assert "Already installed, unchanged" in capsys.readouterr().out
  assert _main(*install, "--cron", "30 3 * * *") == 0
  second = store.read_bytes()
  assert _without_block(second, JOB) == crontab_runs.USER_CRONTAB
  assert second.count(b"tfx-pipeline-kit digits-nightly\n") == 2
  assert f"\n30 3 * * * cd {shlex.quote(str(REPO_ROOT))} ".encode() in second

  capsys.readouterr()
  assert _main("local", "remove", "--output-dir", out, "--job-name", JOB) == 0
  assert capsys.readouterr().out == f"Removed {JOB!r} from your crontab.\n"
  assert store.read_bytes() == crontab_runs.USER_CRONTAB
  calls.unlink()
  assert _main("local", "remove", "--output-dir", out, "--job-name", JOB) == 0
  assert capsys.readouterr().out == f"Nothing to remove: your crontab has no {JOB!r} entry.\n"
  assert calls.read_text().split() == ["-l"]  # read, never written
  assert store.read_bytes() == crontab_runs.USER_CRONTAB


def test_install_into_a_crontab_without_final_newline_and_an_empty_one():
  command = crontab_lib.crontab_command(
    repo_root="/repo", python="/py", output_dir="/out", job_name=JOB
  )
  text = crontab_lib.install_entry("0 1 * * * true", "0 2 * * *", command, JOB)
  assert text.startswith("0 1 * * * true\n# BEGIN tfx-pipeline-kit digits-nightly\n")
  assert text.endswith(f"\n# END tfx-pipeline-kit {JOB}\n")
  assert crontab_lib.remove_entry(text, JOB) == ("0 1 * * * true\n", 1)
  empty = crontab_lib.install_entry("", "0 2 * * *", command, JOB)
  assert (
    empty == f"# BEGIN tfx-pipeline-kit {JOB}\n0 2 * * * {command}\n# END tfx-pipeline-kit {JOB}\n"
  )
  assert crontab_lib.remove_entry(empty, JOB) == ("", 1)


def test_duplicated_blocks_and_old_one_line_entries_collapse_into_one_block():
  command = crontab_lib.crontab_command(
    repo_root="/repo", python="/py", output_dir="/out", job_name=JOB
  )
  old = f"0 2 * * * cd /repo && old command # tfx-pipeline-kit job={JOB}"
  other_old = "0 2 * * * cd /repo && other # tfx-pipeline-kit job=nightly-other"
  block = f"# BEGIN tfx-pipeline-kit {JOB}\n1 1 * * * {command}\n# END tfx-pipeline-kit {JOB}"
  text = f"A=1\n{old}\nkeep me\n{block}\n{other_old}\n{block}\n"
  new = crontab_lib.install_entry(text, "0 3 * * *", command, JOB)
  assert new == (
    f"A=1\n# BEGIN tfx-pipeline-kit {JOB}\n0 3 * * * {command}\n# END tfx-pipeline-kit {JOB}\n"
    f"keep me\n{other_old}\n"
  )
  assert crontab_lib.remove_entry(text, JOB) == (f"A=1\nkeep me\n{other_old}\n", 3)
  listed = crontab_lib.list_entries(text)
  assert [(e.job, e.legacy) for e in listed] == [
    (JOB, True), (JOB, False), ("nightly-other", True), (JOB, False),
  ]  # fmt: skip


def test_lines_edited_by_hand_inside_a_block_are_kept_and_named(tmp_path, capsys):
  """A user's own line inside the kit's block was dropped by install and remove, silently; a
  kit line commented out by hand showed an empty schedule, and status said to pass --cron."""
  crontab, out = tmp_path / "crontab", tmp_path / "o"
  common = ["--output-dir", str(out), "--job-name", JOB, "--crontab-file", str(crontab)]
  assert _main("local", "install", "--cron", "0 2 * * *", *common) == 0
  installed = crontab.read_text()
  mine = installed.replace(
    f"# END tfx-pipeline-kit {JOB}", f"30 3 * * * my-backup\n# END tfx-pipeline-kit {JOB}"
  )
  crontab.write_text(mine)
  capsys.readouterr()
  for args in (["install", "--cron", "0 4 * * *"], ["remove"]):
    assert _main("local", *args, *common) == 1
    err = capsys.readouterr().err
    assert err == (
      f"schedule.py: error: the crontab's block of {JOB!r} holds a line the kit did not write "
      "('30 3 * * * my-backup'); move it out of the block (crontab -e), then run this again.\n"
    )
    assert crontab.read_text() == mine
  disabled = installed.replace("\n0 2 * * *", "\n# 0 2 * * *")
  crontab.write_text(disabled)
  assert _main("local", "list", *common) == 0
  assert (
    f"{JOB}: disabled (its block holds no active line: install again" in capsys.readouterr().out
  )
  assert _main("local", "status", *common) == 1
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "holds no active line (its line was commented out?)" in err
  assert _main("local", "install", "--cron", "0 2 * * *", *common) == 0
  assert crontab.read_text() == installed


def test_a_block_without_its_end_line_is_refused_not_guessed(tmp_path, capsys):
  crontab = tmp_path / "crontab"
  broken = f"A=1\n# BEGIN tfx-pipeline-kit {JOB}\n0 2 * * * x\nmy own line\n"
  crontab.write_text(broken)
  for args in (["install", "--cron", "@daily"], ["remove"]):
    status = _main(
      "local", *args, "--output-dir", str(tmp_path / "o"), "--job-name", JOB,
      "--crontab-file", str(crontab),
    )  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err
    assert err == (
      f"schedule.py: error: Line 2 of the crontab, '# BEGIN tfx-pipeline-kit {JOB}', has no "
      f"matching # END tfx-pipeline-kit {JOB} line; fix or delete the block by hand "
      "(crontab -e), then run this again.\n"
    )
    assert crontab.read_text() == broken
  # Another job's broken block is just a line to us.
  other = f"# BEGIN tfx-pipeline-kit other\n{broken}".replace(JOB, "x-job")
  command = crontab_lib.crontab_command(repo_root="/r", python="/p", output_dir="/o", job_name=JOB)
  assert crontab_lib.install_entry(other, "0 2 * * *", command, JOB).startswith(other)


# ----------------------------------------------------------------------------- KFP requests


@pytest.fixture
def kfp_calls(tmp_path, monkeypatch):
  """Records schedule.py's own health check; nothing may reach it in these tests."""
  calls = []
  monkeypatch.setattr(kfp_health, "_http_get", lambda *a: calls.append(a))
  for name in ("KFP_HOST", "KFP_TOKEN", "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT"):
    monkeypatch.delenv(name, raising=False)
  return calls


def _kubeflow_argv(tmp_path: pathlib.Path, **overrides: str) -> list[str]:
  package = tmp_path / "p.yaml"
  package.write_text("{}")
  flags = {
    "--cron": "0 2 * * *",
    "--experiment": "nightly",
    "--job-name": JOB,
    "--package": str(package),
    "--build-dir": str(tmp_path / "build"),
    "--host": "http://127.0.0.1:9",
    "--namespace": "team-a",
    **overrides,
  }
  return ["kubeflow", *(part for item in flags.items() for part in item)]


@pytest.mark.parametrize(
  "flag",
  ["--cron", "--experiment", "--job-name", "--package", "--build-dir", "--host", "--namespace"],
)
@pytest.mark.parametrize("char", ["\n", "\r", "\x1b", "\u2028"])
def test_kubeflow_values_with_control_characters_are_refused_before_any_request(
  tmp_path, kfp_calls, capsys, flag, char
):
  argv = _kubeflow_argv(tmp_path)
  value = argv[argv.index(flag) + 1]
  argv[argv.index(flag) + 1] = value[:2] + char + value[2:]
  assert schedule.main(argv) == 1
  problem = cron.control_char_problem(char)
  assert capsys.readouterr().err == (
    f"schedule.py: error: {flag} contains {problem.replace('character 1', 'character 3')}; "
    "remove it.\n"
  )
  assert kfp_calls == [] and not (tmp_path / "build").exists()


def test_compile_flags_and_dry_run_are_checked_too(tmp_path, kfp_calls, capsys):
  argv = _kubeflow_argv(tmp_path)
  at = argv.index("--package")
  argv[at : at + 2] = ["--compile", "--pipeline-root", "gs://b/r\n", "--dry-run"]
  assert schedule.main(argv) == 1
  assert capsys.readouterr().err == (
    "schedule.py: error: --pipeline-root contains a control character (U+000A line feed at "
    "character 9); remove it.\n"
  )
  assert not (tmp_path / "build").exists()


@pytest.mark.parametrize(
  ("variable", "value", "flag"),
  [
    ("KFP_HOST", "http://kfp\n:80", "$KFP_HOST"),
    ("KF_PIPELINES_ENDPOINT", "http://kfp\r", "$KF_PIPELINES_ENDPOINT"),
    ("KFP_TOKEN", "abc\r\nX-Injected: 1", "$KFP_TOKEN"),
  ],
)
def test_environment_values_are_checked_before_anything_is_written(
  tmp_path, kfp_calls, capsys, monkeypatch, variable, value, flag
):
  monkeypatch.setenv(variable, value)
  argv = _kubeflow_argv(tmp_path)
  del argv[argv.index("--host") : argv.index("--host") + 2]
  assert schedule.main(argv) == 1
  err = capsys.readouterr().err
  assert err.startswith(f"schedule.py: error: {flag} contains a control character (U+000")
  assert err.count("\n") == 1 and "X-Injected" not in err
  assert kfp_calls == [] and not (tmp_path / "build").exists()


def test_token_file_with_a_line_break_inside_is_refused(tmp_path, kfp_calls, capsys):
  token = tmp_path / "token"
  token.write_text("abc\ndef\n")  # Surrounding whitespace is stripped; inner breaks are not.
  assert schedule.main([*_kubeflow_argv(tmp_path), "--token-file", str(token)]) == 1
  assert capsys.readouterr().err == (
    f"schedule.py: error: the token in --token-file {token} contains a control character "
    "(U+000A line feed at character 4); remove it.\n"
  )
  assert kfp_calls == []


def test_parameters_from_the_package_are_checked_before_it_is_converted(tmp_path):
  compiled = tmp_path / "p.json"
  compiled.write_text(
    '{"pipelineSpec": {"root": {}, "pipelineInfo": {"name": "p"}},'
    ' "runtimeConfig": {"parameterValues": {"note": "a\\nb"}}}'
  )
  with pytest.raises(cron.ScheduleError) as info:
    kfp_client.kfp_package_from_tfx(str(compiled), str(tmp_path / "build"))
  assert str(info.value) == (
    f"parameter 'note' in {compiled} contains a control character (U+000A line feed at "
    "character 2); remove it."
  )
  assert not (tmp_path / "build").exists()


def test_upsert_refuses_control_characters_before_calling_the_client():
  class Client:
    def __getattr__(self, name):
      raise AssertionError(f"client.{name} called")

  spec = cron.parse_cron("@daily")
  good = {"experiment": "e", "job_name": "j", "cron": spec, "package_path": "/p.yaml"}
  bad = [
    {"experiment": "e\n"},
    {"job_name": "j\n"},
    {"package_path": "/p\r.yaml"},
    {"namespace": "ns\x00"},
    {"pipeline_root": "gs://b\n"},
    {"params": {"note": "x\u2028y"}},
    {"params": {"k\n": "v"}},
    {"params": {"nested": ["ok", {"deep": "\x1b[2J"}]}},
  ]
  for override in bad:
    with pytest.raises(cron.ScheduleError, match="control character"):
      kfp_client.upsert_recurring_run(Client(), **{**good, **override}, log=print)
