"""The fast layer's guard: TensorFlow, Beam and TFX imports are refused, loudly, in the
session and in the processes its tests start (tests/support/tf_free.py, import_blocker.py)."""

import subprocess
import sys
import textwrap

import pytest

from tests.support import import_blocker, tf_free
from tests.support.cli_runs import REPO_ROOT, project_env

FAST_LAYER = ("tests/fast", "tests/unit/test_layout.py")


@pytest.mark.parametrize(
  "name",
  [
    "tensorflow",
    "tensorflow.python.framework",
    "apache_beam",
    "tfx.types",
    "tfx_bsl",
    "tensorflow_data_validation",
    "tensorflow_model_analysis",
    "tensorflow_transform",
    "tensorflow_model_optimization",
    "tensorflow_io",
    "ml_metadata",
    "keras",
    "tf_keras",
  ],
)
def test_the_blocker_refuses_each_heavy_package_and_says_why(name):
  blocker = import_blocker.Blocker()
  with pytest.raises(ImportError, match=rf"import of '{name}' refused: the fast test layer"):
    blocker.find_spec(name)
  assert [n for n, _ in blocker.attempts] == [name]


@pytest.mark.parametrize(
  "name", ["numpy", "core.tasks", "tensorflowish", "tfx2", "tensorflow_metadata.proto.v0"]
)
def test_the_blocker_lets_other_modules_through(name):
  assert import_blocker.Blocker().find_spec(name) is None


def _pytest(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", tf_free.PLUGIN, *args],
    check=False,
    capture_output=True,
    text=True,
    cwd=REPO_ROOT,
    env=project_env(),
    timeout=300,
  )


def _write(folder, files: dict[str, str]) -> str:
  for name, text in files.items():
    (folder / name).write_text(textwrap.dedent(text))
  return str(folder)


def test_a_test_that_needs_tensorflow_fails_the_fast_layer_even_if_it_catches_the_error(tmp_path):
  done = _pytest(
    _write(
      tmp_path,
      {
        "test_heavy.py": """\
        import subprocess
        import sys

        def test_plain():
          assert sum([1, 2]) == 3

        def test_imports_beam():
          import apache_beam

        def test_catches_the_error():
          try:
            import tfx.types
          except ImportError:
            pass

        def test_starts_a_process_that_imports_tensorflow():
          subprocess.run([sys.executable, "-c", "import tensorflow"], check=True)
      """,
      },
    )
  )
  assert done.returncode == 1, done.stdout + done.stderr
  assert "3 failed, 1 passed" in done.stdout, done.stdout
  for name in ("apache_beam", "tfx", "tensorflow"):
    assert f"import of '{name}' refused" in done.stdout


def test_a_module_that_imports_tensorflow_stops_the_fast_layer(tmp_path):
  files = {
    "test_a.py": "def test_plain():\n  pass\n",
    "test_b.py": "import tensorflow as tf\n",
    "test_c.py": "try:\n  import tf_keras\nexcept ImportError:\n  tf_keras = None\n",
  }
  done = _pytest(_write(tmp_path, files))
  assert done.returncode == 2, done.stdout + done.stderr
  assert "import of 'tensorflow' refused" in done.stdout
  assert "import of 'tf_keras' refused" in done.stdout


def test_the_fast_layer_collects_without_tensorflow():
  """For the full suite, where the blocker is off: every module of the fast layer, and what it
  imports, loads without TensorFlow (a fast session checks more: each test as it runs)."""
  if tf_free.active():
    pytest.skip("this session refuses TensorFlow: it is this check, and a stronger one")
  done = _pytest("--collect-only", *FAST_LAYER)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
