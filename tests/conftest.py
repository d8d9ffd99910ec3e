"""Shared pytest fixtures; forces Keras 2 before anything imports TensorFlow."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pathlib
import shutil
import subprocess
import tempfile

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DIGITS_CSV = REPO_ROOT / "data" / "digits" / "digits.csv"
_SESSION_TMP = pytest.StashKey[tuple]()


def pytest_configure(config):
  """The session's temporary files (Beam's, TensorFlow's, the components' and those of the
  processes the tests start) go to a folder of its own, removed when the session ends: a
  whole suite left about 860 folders and files in the system's temporary folder. pytest's own
  `tmp_path` folders stay where pytest keeps them (PYTEST_DEBUG_TEMPROOT), the last few kept
  for reading after a failure. Under xdist each worker's folder lies in the controller's."""
  os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
  folder = tempfile.mkdtemp(prefix="kit-tests-")
  config.stash[_SESSION_TMP] = (folder, os.environ.get("TMPDIR"))
  os.environ["TMPDIR"] = folder
  tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def pytest_unconfigure(config):
  folder, before = config.stash.get(_SESSION_TMP, (None, None))
  if folder is None:
    return
  if before is None:
    os.environ.pop("TMPDIR", None)
  else:
    os.environ["TMPDIR"] = before
  tempfile.tempdir = None
  shutil.rmtree(folder, ignore_errors=True)


def pytest_collection_finish(session):
  """Freezes what collecting imported (TensorFlow, TFX, Beam, TFDV and TFMA in every session but
  the fast layer's), as the project's entry points do before their work
  (`components.memory.freeze_imports`): the components that tests run in this process then
  collect garbage as they do in a pipeline run. On the Evaluator's tests, full collections took
  14.6 s of 104 s without it (docs/testing.md)."""
  from components import memory

  memory.freeze_imports()


@pytest.fixture
def repo_root() -> pathlib.Path:
  return REPO_ROOT


@pytest.fixture
def digits_csv() -> pathlib.Path:
  return DIGITS_CSV


@pytest.fixture(scope="session")
def tabular_model(tmp_path_factory) -> dict:
  """The default tabular model trained briefly on generated multiclass Examples (text labels).

  Returns:
    {"root", "examples", "schema", "serving_dir", "model_uri", "result", "train", "eval"}: the
    Examples uri, the schema.pbtxt path, the exported SavedModel folder (a Model artifact's
    Format-Serving), the TrainResult and the generated rows.
  """
  from components.distributed_trainer import trainer_api
  from models.tabular import plan as tabular_plan
  from models.tabular import runner
  from tests.support import tabular_data

  root = tmp_path_factory.mktemp("tabular_model")
  data = tabular_data.write_examples(str(root), "multiclass")
  model_uri = root / "model"
  settings = tabular_plan.RunSettings(
    train_files=[f"{data['examples']}/Split-train/*"],
    eval_files=[f"{data['examples']}/Split-eval/*"],
    schema_path=data["schema"],
    serving_model_dir=str(model_uri / "Format-Serving"),
    model_run_dir=str(root / "model_run"),
    label_key=tabular_data.LABEL,
    hparams={"learning_rate": 0.01},
    train_steps=100,
    num_epochs=2,
  )
  result = runner.train(settings, trainer_api.default_strategy())
  return {
    **data,
    "root": root,
    "serving_dir": model_uri / "Format-Serving",
    "model_uri": model_uri,
    "result": result,
  }


@pytest.fixture
def read_only_folder(tmp_path):
  """A folder this process cannot write: chmod 500, or for root a read-only tmpfs mount."""
  folder = tmp_path / "read_only"
  folder.mkdir()
  folder.chmod(0o500)
  mounted = False
  if os.access(folder, os.W_OK):
    folder.chmod(0o700)
    done = subprocess.run(
      ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
      capture_output=True,
      check=False,
    )
    if done.returncode != 0:
      pytest.skip("this user writes into read-only folders and cannot mount a read-only one")
    mounted = True
  try:
    yield folder
  finally:
    if mounted:
      subprocess.run(["umount", "-l", str(folder)], check=False)
    folder.chmod(0o700)
