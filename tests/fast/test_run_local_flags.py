"""run_local.py's help and flag errors, and a busy output folder: each a runner stopped before
TensorFlow is imported."""

import pytest
from filelock import FileLock

from tests.support.cli_runs import run_script


def test_help_lists_every_option_with_defaults():
  proc = run_script("run_local.py", "--help", timeout=120)
  assert proc.returncode == 0
  for flag in (
    "--data-root",
    "--label-key",
    "--module-file",
    "--output-dir",
    "--train-steps",
    "--strategy",
    "--local-workers",
    "--input-pattern",
    "--rolling-spans",
  ):
    assert flag in proc.stdout
  assert "default" in proc.stdout


@pytest.mark.parametrize(
  "args, message",
  [
    (["--data-root", "/nonexistent/folder"], "--data-root /nonexistent/folder does not exist"),
    (["--module-file", "/nonexistent/module.py"], "does not exist"),
    (["--train-steps", "0"], "--train-steps must be at least 1"),
    (["--optimizer-variants", "tflite_int4"], "unknown optimizer variants"),
    (["--label-key", "  "], "argument --label-key: a column's name, not blanks"),
  ],
)
def test_bad_flags_fail_in_one_line_before_running(tmp_path, args, message):
  proc = run_script("run_local.py", "--output-dir", tmp_path / "out", *args, timeout=120)
  assert proc.returncode == 2
  assert message in proc.stderr
  assert "Traceback" not in proc.stderr
  assert not (tmp_path / "out").exists()


def test_column_flags_are_read_as_the_header_is_without_surrounding_spaces():
  # linearmodels' birthweight.csv writes `, cigs`: the header's name is 'cigs', and
  # --exclude-columns ' cigs' already found it.
  from pipeline.cli import local

  parser = local.build_parser()
  args = parser.parse_args(
    ["--label-key", " cigs", "--split-column", "id ", "--eval-label-key", " y"]
  )
  assert (args.label_key, args.split_column, args.eval_label_key) == ("cigs", "id", "y")
  assert parser.parse_args(["--exclude-columns", " cigs, packs"]).exclude_columns == (
    "cigs",
    "packs",
  )


def test_second_run_on_a_busy_output_folder_is_refused(tmp_path):
  out = tmp_path / "out"
  out.mkdir()
  with FileLock(str(out / ".run.lock")):
    proc = run_script("run_local.py", "--output-dir", out, timeout=120)
  assert proc.returncode == 75  # EX_TEMPFAIL: the nightly job records a skipped night
  assert "another run_local.py is already using" in proc.stderr
  assert "Traceback" not in proc.stderr
