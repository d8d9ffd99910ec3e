"""run_local.py as a user meets it: bad data, a long cell, our own bug's traceback, and the run
path's imports. Its help, flag errors and busy folder: tests/fast/test_run_local_flags.py."""

import pathlib

import pytest

from tests.support.cli_runs import REPO_ROOT, load_summary, run_python, run_script


@pytest.mark.timeout(300)
def test_a_bug_of_ours_keeps_its_traceback_in_the_log_and_on_the_terminal(tmp_path):
  # A stand-in for a bug of ours: building the runner's IR raises. The summary points at the
  # log, so the log must hold the traceback (the terminal gets it too).
  out = tmp_path / "out"
  script = (
    "import runpy, sys\n"
    "from pipeline.definition import factory\n"
    "def broken(pipeline):\n"
    "  raise RuntimeError('stand-in bug 1234')\n"
    "factory.local_ir = broken\n"
    f"sys.argv = ['run_local.py', '--output-dir', {str(out)!r}]\n"
    f"runpy.run_path({str(REPO_ROOT / 'pipeline' / 'run_local.py')!r}, run_name='__main__')\n"
  )
  proc = run_python(script, timeout=240)
  assert proc.returncode == 1
  assert "RuntimeError: stand-in bug 1234" in proc.stderr and "Traceback" in proc.stderr
  summary = load_summary(out)
  assert summary["error"] == "internal error, see the traceback in the log"
  log = pathlib.Path(summary["log"]).read_text()
  assert "Traceback" in log and "RuntimeError: stand-in bug 1234" in log


@pytest.mark.timeout(300)
def test_bad_csv_fails_with_one_line_and_pushes_nothing(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  rows = "".join(f"{i % 7},{i % 10}\n" for i in range(50))
  # Stock type rules make a column with text in it a text column, so the bad row is one with
  # a field too many.
  (data / "d.csv").write_text("x,label\n" + rows + "3,4,5\n")
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py", "--data-root", data, "--output-dir", out, "--min-eval-examples", "5", "--quiet"
  )
  assert proc.returncode == 1
  assert "Traceback" not in proc.stderr
  errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
  assert len(errors) == 1
  assert "1 of 51 rows" in errors[0] and "quarantine.csv" in errors[0]
  summary = load_summary(out)
  assert summary["status"] == "failed"
  assert summary["components"][0] == {
    **summary["components"][0],
    "name": "CsvExampleGen",
    "state": "failed",
  }
  assert not (out / "serving").exists()


@pytest.mark.timeout(300)
def test_a_cell_over_the_csv_modules_128_kib_limit_is_read(tmp_path):
  # Python's csv module refuses fields over 131,072 characters unless told otherwise; a long
  # free-text cell is valid data, read by the up-front checks and by the ExampleGen alike.
  data = tmp_path / "data"
  data.mkdir()
  rows = [f"{i % 7},{i % 5},short note {i},{i % 2}\n" for i in range(300)]
  rows[3] = f'3,3,"{"a long note, " * 25_000}",1\n'  # 300 KiB
  (data / "d.csv").write_text("x,y,note,label\n" + "".join(rows))
  out = tmp_path / "out"
  proc = run_script(
    "run_local.py",
    "--data-root",
    data,
    "--output-dir",
    out,
    "--optimizer-variants",
    "none",
    "--train-steps",
    "20",
    "--min-accuracy",
    "0",
    "--quiet",
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  summary = load_summary(out)
  assert summary["status"] == "succeeded"
  assert summary["pushed"]["pushed"]


def test_the_run_path_does_not_import_tfx_v1(tmp_path):
  # `from tfx import v1` also imports the Vertex AI and BigQuery clients of its extensions:
  # about 5 s of every run's start-up here (docs/performance.md). The check builds and compiles
  # the fullest local pipeline (Transform and Tuner from TFX's penguin module) and imports the
  # executor of each of its nodes, as run_local.py does before and while it runs.
  import tfx.examples

  module = pathlib.Path(tfx.examples.__file__).parent / "penguin" / "penguin_utils_keras.py"
  code = f"""
import sys
from components import tf_compat
tf_compat.keras_tuner_on_tf_keras()
tf_compat.install_user_modules_once()
from pipeline.cli import local
from pipeline.definition import config, factory
from tfx.orchestration import metadata
from tfx.orchestration.local import local_dag_runner
root = {str(tmp_path)!r}
pipeline = factory.create_pipeline(
  config.PipelineConfig(
    pipeline_root=root + "/root", serving_dir=root + "/serving", module_file={str(module)!r},
    transform=True, tune=True,
  ),
  metadata.sqlite_metadata_connection_config(root + "/metadata.sqlite"),
  [],
)
factory.local_ir(pipeline)
for node in pipeline.components:
  node.executor_spec.executor_class
print(sorted(node.id for node in pipeline.components))
print("tfx.v1" in sys.modules, any(m.startswith("google.cloud.aiplatform") for m in sys.modules))
"""
  proc = run_python(code)
  assert proc.returncode == 0, proc.stderr[-3000:]
  nodes, imported = proc.stdout.splitlines()[-2:]
  assert "'Transform'" in nodes and "'Tuner'" in nodes
  assert imported == "False False"


def test_run_local_refuses_a_read_only_model_folder_before_the_run(read_only_folder, tmp_path):
  serving, model = read_only_folder.parent, read_only_folder.name
  proc = run_script(
    "run_local.py", "--output-dir", str(tmp_path / "out"), "--serving-dir", str(serving),
    "--model-name", model, timeout=300,
  )  # fmt: skip
  assert proc.returncode == 2, proc.stderr[-2000:]
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith(f"error: the model folder {read_only_folder} under --serving-dir")
  assert not (tmp_path / "out" / "metadata.sqlite").exists()
