"""Tests of `python pipeline/rollback.py`: --list, --to, --previous, history and clean errors."""

import errno
import json
import os
import pathlib
import subprocess
import sys

import pytest

from components.serving import history, live, publish, versions

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
  env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(REPO_ROOT))
  return subprocess.run(
    [sys.executable, "pipeline/rollback.py", *args],
    cwd=REPO_ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=60,
    check=False,
  )


@pytest.fixture
def serving(tmp_path: pathlib.Path) -> pathlib.Path:
  """A serving tree with versions 1 (good), 2 (good, tflite variant), 3 (bad)."""
  root = tmp_path / "serving"
  for name in ("good1", "good2", "bad3"):
    src = tmp_path / name
    (src / "variables").mkdir(parents=True)
    (src / "saved_model.pb").write_bytes(name.encode())
    (src / "variables" / "variables.index").write_bytes(name.encode() * 3)
    variants, metrics = {}, {}
    if name == "good2":
      (tmp_path / "tfl").mkdir()
      (tmp_path / "tfl" / "model.tflite").write_bytes(b"t")
      variants, metrics = {"tflite": str(tmp_path / "tfl")}, {"tflite": {"accuracy": 0.9312}}
    publish.push_version(str(root), "digits", str(src), variants=variants, variant_metrics=metrics)
  return root


def _pb(serving: pathlib.Path, version: int) -> bytes:
  return (serving / "digits" / str(version) / "saved_model.pb").read_bytes()


def test_list_shows_versions_live_marker_and_metrics(serving):
  result = _cli("--serving-dir", str(serving), "--model-name", "digits", "--list")
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  [live] = [line for line in lines if line.startswith("*")]
  assert live.split()[1] == "3"
  [v2] = [line for line in lines if line.split()[:1] == ["2"]]
  assert "tflite(accuracy=0.9312)" in v2 and " ok " in v2

  as_json = _cli("--serving-dir", str(serving), "--model-name", "digits", "--list", "--json")
  data = json.loads(as_json.stdout)
  assert [(v["version"], v["live"]) for v in data["versions"]] == [
    (1, False),
    (2, False),
    (3, True),
  ]
  assert [h["event"] for h in data["history"]] == ["push", "push", "push"]


def test_rollback_to_and_previous_record_history(serving):
  result = _cli(
    "--serving-dir", str(serving), "--model-name", "digits", "--to", "1", "--reason", "drift"
  )
  assert result.returncode == 0, result.stderr
  assert "version 1 is live again as version 4 (was 3)" in result.stdout
  assert live.live_version(str(serving), "digits").version == 4
  assert _pb(serving, 4) == b"good1"
  assert versions.verify_version(str(serving / "digits" / "4")) == []

  # --previous from live 4 (= good1): 3 was rolled back from, 2 is the newest other content.
  result = _cli("--serving-dir", str(serving), "--model-name", "digits", "--previous")
  assert result.returncode == 0, result.stderr
  assert live.live_version(str(serving), "digits").version == 5
  assert _pb(serving, 5) == b"good2"
  assert (serving / "digits" / "5" / "assets.extra" / "variants" / "tflite").is_dir()

  rollbacks = [h for h in history.read_history(str(serving), "digits") if h["event"] == "rollback"]
  assert [(h["from"], h["to"], h["version"], h["reason"]) for h in rollbacks] == [
    (3, 1, 4, "drift"),
    (4, 2, 5, "manual rollback"),
  ]
  listing = _cli("--serving-dir", str(serving), "--model-name", "digits", "--list").stdout
  assert "rollback of 2" in listing and "3 -> 1 (published as 4): drift" in listing


@pytest.mark.parametrize(
  ("args", "message"),
  [
    (["--model-name", "../etc", "--list"], "Invalid model name '../etc'"),
    (["--model-name", "/abs", "--previous"], "Invalid model name '/abs'"),
    (["--model-name", "digits", "--to", "../1"], "Invalid version '../1'"),
    (["--model-name", "digits", "--to", "-2"], "Invalid version '-2'"),
    (["--model-name", "digits", "--to", "3"], "already live"),
    (["--model-name", "digits", "--to", "99"], "does not exist"),
    (["--model-name", "other", "--previous"], "has no model 'other'; the models there are"),
    (["--model-name", "digits", "--to", "1", "--keep-versions", "0"], "keep_versions"),
    (["--model-name", "digits", "--to", "1", "--previous"], "not allowed with argument"),
    (["--model-name", "digits"], "one of the arguments"),
  ],
)
def test_user_errors_are_one_line_without_traceback(serving, args, message):
  result = _cli("--serving-dir", str(serving), *args)
  assert result.returncode != 0
  assert message in result.stderr
  assert len(result.stderr.strip().splitlines()) == 1, result.stderr
  assert "Traceback" not in result.stderr
  assert versions.list_versions(str(serving), "digits") == [1, 2, 3]
  assert not (serving / "etc").exists() and not (serving.parent / "etc").exists()


HINT = "pass the --serving-dir the pipeline pushes to (run_local.py's is <output-dir>/serving)."


@pytest.mark.parametrize(
  "action", [["--list"], ["--list", "--json"], ["--previous"], ["--to", "1"]]
)
def test_missing_serving_dir_is_named_with_the_fix(tmp_path, action):
  # A misspelt --serving-dir used to list as "No versions" with no hint.
  missing = tmp_path / "servng"
  result = _cli("--serving-dir", str(missing), "--model-name", "digits", *action)
  assert result.returncode == 1
  assert result.stderr == f"rollback.py: error: serving dir {missing} does not exist; {HINT}\n"
  assert result.stdout == ""
  assert not missing.exists()


def test_relative_serving_dir_is_shown_absolute(tmp_path):
  result = _cli("--serving-dir", "no/such/serving", "--model-name", "digits", "--list")
  assert result.returncode == 1
  shown = REPO_ROOT / "no" / "such" / "serving"
  assert result.stderr == f"rollback.py: error: serving dir {shown} does not exist; {HINT}\n"


def test_serving_dir_that_is_a_file(tmp_path):
  file = tmp_path / "serving"
  file.write_text("")
  result = _cli("--serving-dir", str(file), "--model-name", "digits", "--list")
  assert result.returncode == 1
  assert result.stderr == f"rollback.py: error: serving dir {file} is not a folder; {HINT}\n"


@pytest.mark.parametrize("action", [["--list"], ["--previous"], ["--to", "2"]])
def test_missing_model_folder_lists_the_models_there(serving, action):
  (serving / "mnist").mkdir()
  (serving / ".hidden").mkdir()
  (serving / "notes.txt").write_text("")
  result = _cli("--serving-dir", str(serving), "--model-name", "digts", *action)
  assert result.returncode == 1
  assert result.stderr == (
    f"rollback.py: error: serving dir {serving} has no model 'digts'; the models there are: "
    "digits, mnist. Pass one of them as --model-name.\n"
  )
  assert versions.list_versions(str(serving), "digits") == [1, 2, 3]
  assert not (serving / "digts").exists()


def test_empty_serving_dir_says_nothing_was_pushed(tmp_path):
  empty = tmp_path / "serving"
  empty.mkdir()
  result = _cli("--serving-dir", str(empty), "--model-name", "digits", "--list")
  assert result.returncode == 1
  assert result.stderr == (
    f"rollback.py: error: serving dir {empty} has no model 'digits', and no models at all: "
    f"nothing has been pushed there yet; {HINT}\n"
  )
  assert os.listdir(empty) == []


def test_existing_model_folder_without_versions_still_lists(tmp_path):
  (tmp_path / "serving" / "digits").mkdir(parents=True)
  result = _cli("--serving-dir", str(tmp_path / "serving"), "--model-name", "digits", "--list")
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith("No versions under ")


def test_malformed_url_serving_dir_is_one_line():
  result = _cli("--serving-dir", "gs:///serving", "--model-name", "digits", "--list")
  assert result.returncode == 1
  assert result.stderr.startswith(
    "rollback.py: error: serving_dir 'gs:///serving' is not a valid URI"
  )
  assert len(result.stderr.splitlines()) == 1


@pytest.fixture
def read_only_serving(tmp_path):
  """The serving tree of `serving`, on a tmpfs remounted read-only (as a read-only volume)."""
  mount = tmp_path / "ro"
  mount.mkdir()
  mounted = subprocess.run(
    ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, check=False
  )
  if mounted.returncode != 0:
    pytest.skip("a tmpfs cannot be mounted here (needs root)")
  try:
    root = mount / "serving"
    src = tmp_path / "model"
    (src / "variables").mkdir(parents=True)
    for version in (1, 2):
      (src / "saved_model.pb").write_bytes(b"v%d" % version)
      (src / "variables" / "variables.index").write_bytes(b"i%d" % version)
      publish.push_version(str(root), "digits", str(src))
    subprocess.run(["mount", "-o", "remount,ro", str(mount)], check=True)
    yield root
  finally:
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_read_only_serving_folder_is_one_line_naming_it_and_the_fix(read_only_serving):
  result = _cli("--serving-dir", str(read_only_serving), "--model-name", "digits", "--previous")
  assert result.returncode == 1
  model = read_only_serving / "digits"
  assert result.stderr == (
    f"rollback.py: error: the model folder {model} cannot be written (Read-only file system at "
    f"{model / '.lock'}); a rollback publishes a new version there: run it as a user who can "
    "write that folder (the one the Pusher runs as), or remount it read-write.\n"
  )
  assert versions.list_versions(str(read_only_serving), "digits") == [1, 2]


@pytest.mark.parametrize(
  ("code", "expected"),
  [
    (errno.EACCES, "cannot be written (Permission denied at {lock}); a rollback publishes"),
    (errno.ENOSPC, "no space left for a new version in {model} (No space left on device at"),
  ],
)
def test_a_serving_folder_it_cannot_write_is_one_line(serving, monkeypatch, capsys, code, expected):
  # Tests run as root, whom permissions do not stop: the lock's open fails as it would.
  from components.serving import rollback as serving_rollback
  from pipeline.cli import rollback

  model = serving / "digits"

  def refused(*args, **kwargs):
    raise OSError(code, os.strerror(code), str(model / ".lock"))

  monkeypatch.setattr(serving_rollback, "rollback", refused)
  assert rollback.main(["--serving-dir", str(serving), "--model-name", "digits", "--previous"]) == 1
  err = capsys.readouterr().err
  assert len(err.splitlines()) == 1 and err.startswith("rollback.py: error: ")
  assert expected.format(model=model, lock=model / ".lock") in err
