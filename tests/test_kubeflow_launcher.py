"""The compiled pipeline run task by task as open-source KFP 2.x runs it (tests/kfp_launcher.py)."""

import copy
import json
import pathlib
import shutil

import pytest

from tests import kfp_launcher
from tests.kfp_launcher import CACHED, RAN
from tests.pipeline_utils import REPO_ROOT, project_env

# A container task in one line of Python: writes each output artifact and parameter it is given.
TOY_STEP = r"""
import json, pathlib, sys
executor_input = json.loads(sys.argv[1])
outputs = executor_input["outputs"]
if executor_input["inputs"].get("parameterValues", {}).get("fail"):
  sys.exit("toy step failed on purpose")
written = {"artifacts": {}, "parameterValues": {}}
for key, artifacts in (outputs.get("artifacts") or {}).items():
  uri = pathlib.Path(artifacts["artifacts"][0]["uri"])
  uri.mkdir(parents=True, exist_ok=True)
  (uri / "inputs.json").write_text(json.dumps(executor_input["inputs"]))
  meta = {"n": 1, "ok": True, "tags": ["a"]}
  written["artifacts"][key] = {"artifacts": [{"uri": str(uri), "metadata": meta}]}
for key in outputs.get("parameters") or {}:
  written["parameterValues"][key] = executor_input["inputs"]["parameterValues"]["value"]
pathlib.Path(outputs["outputFile"]).write_text(json.dumps(written))
"""


def _toy_package():
  """A -> (param) B -> (artifact) C, and D -> (artifact) E; A and D are never cached."""
  schema = {"artifactType": {"instanceSchema": "title: system.Artifact\ntype: object\n"}}
  value = {"value": {"parameterType": "STRING"}}
  components = {
    "A": {"inputDefinitions": {"parameters": value}, "outputDefinitions": {"parameters": value}},
    "B": {
      "inputDefinitions": {"parameters": value},
      "outputDefinitions": {"artifacts": {"out": schema}},
    },
    "C": {
      "inputDefinitions": {"artifacts": {"x": schema}},
      "outputDefinitions": {"artifacts": {"out": schema}},
    },
    "D": {"outputDefinitions": {"artifacts": {"out": schema}}},
    "E": {"inputDefinitions": {"artifacts": {"x": schema}}},
  }
  for name, comp in components.items():
    comp["executorLabel"] = f"{name}_executor"
  container = {"image": "toy", "command": ["python", "-c", TOY_STEP], "args": ["{{$}}"]}

  def task(name, cache, parameters=None, artifacts=None):
    inputs = {}
    if parameters:
      inputs["parameters"] = parameters
    if artifacts:
      inputs["artifacts"] = artifacts
    return {
      "taskInfo": {"name": name},
      "componentRef": {"name": name},
      "cachingOptions": {"enableCache": cache},
      "inputs": inputs,
    }

  def upstream(producer, key="out"):
    return {"x": {"taskOutputArtifact": {"producerTask": producer, "outputArtifactKey": key}}}

  b_value = {"taskOutputParameter": {"producerTask": "A", "outputParameterKey": "value"}}
  spec = {
    "schemaVersion": "2.1.0",
    "pipelineInfo": {"name": "toy"},
    "components": components,
    "deploymentSpec": {
      "executors": {f"{n}_executor": {"container": container} for n in components}
    },
    "root": {
      "dag": {
        "tasks": {
          "A": task("A", False, {"value": {"runtimeValue": {"constant": "v1"}}}),
          "B": task("B", True, {"value": b_value}),
          "C": task("C", True, artifacts=upstream("B")),
          "D": task("D", False),
          "E": task("E", True, artifacts=upstream("D")),
        }
      }
    },
  }
  return {"pipelineSpec": spec}


def test_launcher_emulates_kfp_cache_keys_and_artifact_passing(tmp_path):
  launcher = kfp_launcher.LocalKfp(tmp_path / "root", env=project_env())
  package = _toy_package()
  first = launcher.run(package, "run-1")
  assert kfp_launcher.states(first) == dict.fromkeys("ABCDE", RAN)
  # Upstream artifacts arrive as KFP's driver reads them back from ML Metadata.
  (x,) = first["C"].executor_input["inputs"]["artifacts"]["x"]["artifacts"]
  b_out = first["B"].artifacts["out"]
  assert x["name"] == str(b_out.id) and x["uri"] == b_out.uri
  assert x["type"] == {"instanceSchema": ""}
  assert x["metadata"] == {
    "n": 1.0,
    "ok": 1.0,
    "tags": {"list": ["a"]},
    "display_name": "out",
    "store_session_info": "{}",
  }
  assert "name" not in first["B"].executor_input["outputs"]["artifacts"]["out"]["artifacts"][0]
  assert first["B"].executor_input["inputs"]["parameterValues"] == {"value": "v1"}

  second = launcher.run(package, "run-2")
  # Uncached tasks rerun; a cached task whose inputs are unchanged reuses the same artifacts;
  # one fed by a task that reran gets a new artifact id, so a new cache key.
  assert kfp_launcher.states(second) == {"A": RAN, "B": CACHED, "C": CACHED, "D": RAN, "E": RAN}
  assert second["C"].artifacts["out"] is first["C"].artifacts["out"]

  changed = copy.deepcopy(package)
  tasks = changed["pipelineSpec"]["root"]["dag"]["tasks"]
  tasks["A"]["inputs"]["parameters"]["value"]["runtimeValue"]["constant"] = "v2"
  third = launcher.run(changed, "run-3")
  assert third["B"].state == RAN and third["C"].state == RAN
  assert third["B"].cache_key != first["B"].cache_key


def test_launcher_reports_failed_and_non_container_tasks(tmp_path):
  launcher = kfp_launcher.LocalKfp(tmp_path / "root", env=project_env())
  package = _toy_package()
  tasks = package["pipelineSpec"]["root"]["dag"]["tasks"]
  tasks["A"]["inputs"]["parameters"]["fail"] = {"runtimeValue": {"constant": "yes"}}
  package["pipelineSpec"]["components"]["A"]["inputDefinitions"]["parameters"]["fail"] = {
    "parameterType": "STRING"
  }
  with pytest.raises(kfp_launcher.LauncherError, match="toy step failed on purpose"):
    launcher.run(package, "run-1")
  package = _toy_package()
  package["pipelineSpec"]["deploymentSpec"]["executors"]["D_executor"] = {"resolver": {}}
  with pytest.raises(kfp_launcher.LauncherError, match="D is not a container task"):
    launcher.run(package, "run-2")


def _pushed(results) -> bool:
  return results["Pusher"].artifacts["pushed_model"].value("pushed") == 1.0


def _trained_on(results) -> int:
  """The span the trained model's data fingerprint names (read by the Trainer from Examples)."""
  model = results["DistributedTrainer"].artifacts["model"]
  (fingerprint,) = json.loads(model.value("data_fingerprints"))
  return int(fingerprint.split(";")[0].removeprefix("span="))


def _versions(serving) -> list[str]:
  return sorted(p.name for p in (serving / "digits").iterdir() if p.name.isdigit())


@pytest.mark.e2e
def test_nightly_runs_on_the_kfp_launcher_push_only_new_spans(tmp_path):
  data = tmp_path / "data"
  (data / "span-1").mkdir(parents=True)
  rows = (REPO_ROOT / "data" / "digits" / "digits.csv").read_text().splitlines(keepends=True)
  (data / "span-1" / "digits.csv").write_text("".join(rows[:1201]))
  serving = tmp_path / "serving"
  package_path = tmp_path / "digits.json"
  proc = kfp_launcher.compile_package(
    package_path,
    "--image",
    "registry.example/kit:test",
    "--pipeline-root",
    tmp_path / "compile-root",
    "--data-root",
    data,
    "--input-pattern",
    "span-{SPAN}/*.csv",
    "--serving-dir",
    serving,
    "--task",
    "multiclass",
    "--train-steps",
    "200",
    "--optimizer-variants",
    "tflite_float32",
    env=project_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  package = kfp_launcher.load_package(package_path)
  launcher = kfp_launcher.LocalKfp(tmp_path / "kfp-root", env=project_env())

  first = launcher.run(package, "night-1")
  assert set(kfp_launcher.states(first).values()) == {RAN}
  assert _pushed(first) and _versions(serving) == ["1"]
  assert json.loads(first["CsvExampleGen_span"].parameters["span_key"])["span"] == 1
  assert _trained_on(first) == 1

  # Same data: the span resolver and LiveModel run (never cached), the ExampleGen and everything
  # fed only by it are served from KFP's cache; the Evaluator and Pusher rerun because the
  # LiveModel's baseline is a new artifact, and the Pusher finds the same training live.
  second = launcher.run(package, "night-2")
  states = kfp_launcher.states(second)
  assert {n for n, s in states.items() if s == RAN} == {
    "CsvExampleGen_span",
    "LiveModel",
    "Evaluator",
    "Pusher",
  }
  assert not _pushed(second) and _versions(serving) == ["1"]
  reason = second["Pusher"].artifacts["pushed_model"].value("pushed_reason")
  assert reason.startswith("nothing new to push: live version 1")

  # A new span: its key changes, so the ExampleGen and everything after it run, and it pushes.
  (data / "span-2").mkdir()
  shutil.copy(REPO_ROOT / "data" / "digits" / "digits.csv", data / "span-2" / "digits.csv")
  third = launcher.run(package, "night-3")
  assert set(kfp_launcher.states(third).values()) == {RAN}
  assert _trained_on(third) == 2
  assert _pushed(third) and _versions(serving) == ["1", "2"]
  manifest = json.loads((serving / "digits" / "2" / "manifest.json").read_text())
  assert manifest["data_spans"] == [2]


@pytest.mark.e2e
def test_tuner_step_runs_under_our_entrypoint_on_the_kfp_launcher(tmp_path):
  # TFX's own entrypoint imports keras_tuner with Keras 3 before any executor code runs.
  data = tmp_path / "data"
  data.mkdir()
  shutil.copy(REPO_ROOT / "data" / "digits" / "digits.csv", data / "digits.csv")
  package_path = tmp_path / "digits.json"
  proc = kfp_launcher.compile_package(
    package_path,
    "--image",
    "registry.example/kit:test",
    "--pipeline-root",
    tmp_path / "compile-root",
    "--data-root",
    data,
    "--serving-dir",
    tmp_path / "serving",
    "--task",
    "multiclass",
    "--train-steps",
    "50",
    "--tune",
    "--tune-trials",
    "1",
    env=project_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  launcher = kfp_launcher.LocalKfp(tmp_path / "kfp-root", env=project_env())
  results = launcher.run(kfp_launcher.load_package(package_path), "tune", until="Tuner")
  assert set(results) == {
    "CsvExampleGen_span",
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "Tuner",
  }
  best = results["Tuner"].artifacts["best_hyperparameters"]
  hparams = json.loads((pathlib.Path(best.uri) / "best_hyperparameters.txt").read_text())
  assert "hidden_units" in hparams["values"]
  assert "Keras 3" not in results["Tuner"].log.read_text()
