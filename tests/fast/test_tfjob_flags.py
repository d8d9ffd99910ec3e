"""run_kubeflow.py's TFJob flags: a combination that cannot work, or a resource quantity Kubernetes
would refuse, is one error line before anything is compiled."""

import pytest

from pipeline.cli import kubeflow as run_kubeflow


@pytest.mark.parametrize(
  ("flags", "says"),
  [
    (["--workers", "2", "--strategy", "mirrored"], "--strategy multi_worker_mirrored or auto"),
    (
      ["--workers", "2", "--ps", "1", "--strategy", "multi_worker_mirrored"],
      "--strategy parameter_server or auto",
    ),
    (["--workers", "1", "--strategy", "multi_worker_mirrored"], "gets no TF_CONFIG"),
    (["--workers", "2", "--local-workers", "2"], "leave them out"),
    (["--ps", "1"], "--ps configures the TFJob of --workers N; pass --workers too"),
    (["--workers", "2", "--ps-resources", "cpu=2"], "--ps-resources sizes the PS replicas"),
    (["--workers", "-1"], "--workers must be at least 1"),
    (["--workers", "2", "--tfjob-namespace", "Team_A"], "is not a Kubernetes namespace"),
    (
      ["--workers", "2", "--target", "vertex", "--pipeline-root", "gs://b/root"],
      "on Vertex train on one machine with --strategy mirrored and GPUs",
    ),
  ],
)
def test_tfjob_flags_that_cannot_work_are_one_error_line(tmp_path, capsys, flags, says):
  output = tmp_path / "p.json"
  code = run_kubeflow.main(["--output", str(output), "--task", "multiclass", *flags])
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
  assert says in lines[0], lines[0]
  assert list(tmp_path.iterdir()) == []


def test_bad_resource_quantities_are_refused_by_the_parser(tmp_path, capsys):
  with pytest.raises(SystemExit) as exit_:
    run_kubeflow.main(["--output", str(tmp_path / "p.json"), "--worker-resources", "memory=1GB"])
  assert exit_.value.code == 2
  assert "'1GB' is not a Kubernetes quantity" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["p.yaml", "p.YML"])
def test_an_output_named_yaml_is_refused_before_the_compiler_writes_yaml(tmp_path, capsys, name):
  # TFX's compiler writes a *.yaml PipelineJob as YAML, which the JSON post-processing then
  # failed on with a traceback (JSONDecodeError) after compiling.
  code = run_kubeflow.main(["--output", str(tmp_path / name), "--task", "multiclass"])
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 2 and len(lines) == 1, err
  stem = tmp_path / "p"
  assert lines[0] == (
    f"error: --output {tmp_path / name}: run_kubeflow.py writes the PipelineJob as JSON; pass a "
    f"name ending in .json, e.g. {stem}.json (with --target kfp, the package to upload is "
    f"written beside it as {stem}.kfp.yaml)."
  )
  assert list(tmp_path.iterdir()) == []


def test_a_model_name_kubeflow_cannot_take_names_the_pipeline_in_its_form():
  # run_local.py takes the data folder's name ('penguins_processed'); TFX's Kubeflow compiler
  # refused it with a ValueError traceback after the checks.
  assert run_kubeflow.kfp_pipeline_name("digits") == "digits"
  assert run_kubeflow.kfp_pipeline_name("penguins_processed") == "penguins-processed"
  assert run_kubeflow.kfp_pipeline_name("My Model.v2_") == "my-model-v2"
  assert run_kubeflow.kfp_pipeline_name("x" * 200) == "x" * 128
