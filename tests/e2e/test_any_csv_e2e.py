"""run_local.py on CSVs the kit has never seen: a user's mistakes, each one line before any work.

The tables themselves (regression, text labels, missing label tokens, a split column, a table a
linear model wins, messy cells, every pushed variant through the clients) go through the
executors in `tests/component/test_any_csv_tables.py`.
"""

from __future__ import annotations

import pytest

from tests.support.cli_runs import run_script
from tests.support.csv_tables import write_csv


@pytest.mark.timeout(300)
def test_too_small_for_an_evaluation_fails_in_one_line_and_writes_nothing(tmp_path):
  folder = write_csv(tmp_path / "data", ["x", "label"], [[i, i % 2] for i in range(60)])
  out = tmp_path / "out"
  proc = run_script("run_local.py", "--data-root", folder, "--output-dir", out, timeout=240)
  assert proc.returncode == 2
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.strip()]
  assert errors == [
    "error: the data has 60 rows, and the eval split gets 15 of them, fewer than "
    "--min-eval-examples 50; add rows (about 175 more) or lower --min-eval-examples."
  ]
  assert not (out / "pipeline_root").exists()
  assert not (out / "serving").exists()


@pytest.mark.timeout(300)
def test_label_over_the_class_cap_fails_in_one_line_naming_column_and_count(tmp_path):
  rows = [[i, f"{i % 7}.5", f"kind_{i % 10}"] for i in range(400)]
  folder = write_csv(tmp_path / "data", ["x", "y", "kind"], rows)
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--data-root",
    folder,
    "--label-key",
    "kind",
    "--max-classes",
    "3",
    "--output-dir",
    out,
    timeout=240,
  )
  assert proc.returncode == 2
  errors = [line for line in proc.stderr.splitlines() if line.strip()]
  assert len(errors) == 1, proc.stderr
  assert errors[0].startswith("error: label column 'kind' has at least 10 distinct values, over ")
  assert "3-class cap" in errors[0] and "--max-classes N" in errors[0]
  assert not (out / "pipeline_root").exists()
