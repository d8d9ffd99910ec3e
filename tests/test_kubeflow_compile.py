"""The same pipeline compiled for Kubeflow Pipelines v2 and parsed into the PipelineSpec proto."""

import json

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from tests.pipeline_utils import project_env, run_script

SENTINEL = "sentinel-secret-7f3a9c"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  out = tmp_path_factory.mktemp("kfp") / "pipeline.json"
  env = project_env(
    KFP_TOKEN=SENTINEL,
    KF_PIPELINES_SA_TOKEN_PATH=f"/tmp/{SENTINEL}",
    AWS_SECRET_ACCESS_KEY=SENTINEL,
  )
  proc = run_script(
    "run_kubeflow.py", "--output", out, "--image", "registry.example/kit:test", timeout=300, env=env
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return out, proc


def test_package_parses_into_pipeline_spec(compiled):
  out, _ = compiled
  doc = json.loads(out.read_text())
  assert set(doc) >= {"displayName", "pipelineSpec", "runtimeConfig"}
  spec = json_format.ParseDict(
    doc["pipelineSpec"], pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=True
  )
  tasks = spec.root.dag.tasks
  expected = {
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "DistributedTrainer",
    "Evaluator",
    "Optimizer",
    "Pusher",
  }
  assert expected <= set(tasks)
  deps = {name: set(t.dependent_tasks) for name, t in tasks.items()}
  assert deps["StatisticsGen"] == {"CsvExampleGen"}
  assert "SchemaGen" in deps["DistributedTrainer"]
  assert "DistributedTrainer" in deps["Evaluator"]
  assert any(d.startswith("latest_blessed_model_resolver") for d in deps["Evaluator"])
  assert {"Evaluator", "Optimizer", "DistributedTrainer"} <= deps["Pusher"]
  assert "DistributedTrainer" in deps["Optimizer"]


def test_custom_executors_are_importable_paths_in_the_image(compiled):
  out, _ = compiled
  spec = json.loads(out.read_text())["pipelineSpec"]
  executors = spec["deploymentSpec"]["executors"]
  paths = {}
  for name, ex in executors.items():
    if "container" not in ex:
      continue
    c = ex["container"]
    assert c["image"] == "registry.example/kit:test"
    args = c["args"]
    paths[name] = args[args.index("--executor_class_path") + 1]
  assert paths["CsvExampleGen_executor"] == "components.example_gen.executor.Executor"
  assert paths["DistributedTrainer_executor"] == "components.distributed_trainer.executor.Executor"
  assert paths["Optimizer_executor"] == "components.optimizer.executor.Executor"
  assert paths["Pusher_executor"] == "components.pusher.executor.Executor"
  assert not any("__main__" in p for p in paths.values())
  # Only FileBasedExampleGens get TFX's span-resolving driver on Kubeflow.
  lifecycle = executors["CsvExampleGen_executor"]["container"].get("lifecycle", {})
  assert "preCacheCheck" in lifecycle


def test_no_secret_reaches_the_package_or_the_output(compiled):
  out, proc = compiled
  assert SENTINEL not in out.read_text()
  assert SENTINEL not in proc.stdout + proc.stderr
