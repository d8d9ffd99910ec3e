"""A run's own temporary folder (pipeline/cli/scratch.py): used for the run, removed after it,
and a killed run's removed by the next one."""

import os
import subprocess
import tempfile

import pytest

from pipeline.cli import scratch


@pytest.fixture
def base(tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  monkeypatch.setenv("TMPDIR", "/somewhere/else")
  return tmp_path


def test_the_runs_temporary_files_go_to_its_folder_which_goes_with_it(base):
  with scratch.run_folder() as folder:
    assert os.path.dirname(folder) == str(base)
    assert tempfile.gettempdir() == folder and os.environ["TMPDIR"] == folder
    with tempfile.NamedTemporaryFile(delete=False) as f:  # As AutoGraph writes its sources.
      assert os.path.dirname(f.name) == folder
    # A process the run starts writes there too.
    child = subprocess.run(
      ["python3", "-c", "import tempfile; print(tempfile.gettempdir())"],
      capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert child.stdout.strip() == folder
  assert list(base.iterdir()) == []
  assert tempfile.gettempdir() == str(base) and os.environ["TMPDIR"] == "/somewhere/else"


def test_the_folder_goes_when_the_run_fails(base):
  with pytest.raises(RuntimeError), scratch.run_folder() as folder:
    (open(os.path.join(folder, "x"), "w")).close()
    raise RuntimeError("the run failed")
  assert list(base.iterdir()) == []


def test_a_killed_runs_folder_is_removed_by_the_next_run_and_a_live_ones_kept(base):
  dead = subprocess.Popen(["true"])
  dead.wait()
  killed = base / f"{scratch.PREFIX}{dead.pid}-abc"
  (killed / "sub").mkdir(parents=True)
  live = base / f"{scratch.PREFIX}{os.getppid()}-def"
  live.mkdir()
  other = base / "someone-elses"
  other.mkdir()
  with scratch.run_folder():
    pass
  assert sorted(p.name for p in base.iterdir()) == sorted([live.name, other.name])
