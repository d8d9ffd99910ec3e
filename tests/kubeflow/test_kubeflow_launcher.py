"""The compiled pipeline run task by task as open-source KFP 2.x runs it (support.kfp_launcher)."""

import copy
import json
import os
import pathlib
import shutil

import pytest

from tests.support import kfp_launcher
from tests.support.cli_runs import REPO_ROOT, moto_s3, project_env, run_script
from tests.support.kfp_launcher import CACHED, RAN

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


def _ran(results) -> set[str]:
  """The tasks that ran (were not served from KFP's cache)."""
  return {n for n, s in kfp_launcher.states(results).items() if s == RAN}


def _trained_on(results) -> int:
  """The span the trained model's data fingerprint names (read by the Trainer from Examples)."""
  model = results["DistributedTrainer"].artifacts["model"]
  (fingerprint,) = json.loads(model.value("data_fingerprints"))
  return int(fingerprint.split(";")[0].removeprefix("span="))


class _LocalStore:
  """Data, pipeline root and serving folder in local folders."""

  artifact_root = None

  def __init__(self, root):
    self.root = root

  def uri(self, path: str) -> str:
    return str(self.root / path)

  def put(self, path: str, text: str) -> None:
    (self.root / path).parent.mkdir(parents=True, exist_ok=True)
    (self.root / path).write_text(text)

  def read(self, path: str) -> str:
    return (self.root / path).read_text()

  def versions(self) -> list[str]:
    return sorted(p.name for p in (self.root / "serving" / "digits").iterdir() if p.name.isdigit())


class _S3Store:
  """The same on moto's S3 server; output artifacts go under s3:// as KFP provisions them."""

  def __init__(self, client, bucket):
    self.client, self.bucket = client, bucket
    self.artifact_root = f"s3://{bucket}/kfp-root"

  def uri(self, path: str) -> str:
    return f"s3://{self.bucket}/{path}"

  def put(self, path: str, text: str) -> None:
    self.client.put_object(Bucket=self.bucket, Key=path, Body=text.encode())

  def read(self, path: str) -> str:
    return self.client.get_object(Bucket=self.bucket, Key=path)["Body"].read().decode()

  def versions(self) -> list[str]:
    listed = self.client.list_objects_v2(
      Bucket=self.bucket, Prefix="serving/digits/", Delimiter="/"
    )
    names = [p["Prefix"].split("/")[-2] for p in listed.get("CommonPrefixes", [])]
    return sorted(n for n in names if n.isdigit())


def _four_nights(tmp_path, store, env) -> None:
  """Night 1 pushes span-1, night 2 (same data) pushes nothing, night 3 pushes span-2, and
  night 4, after a rollback, evaluates against the rolled-back model and pushes nothing."""
  rows = (REPO_ROOT / "data" / "digits" / "digits.csv").read_text().splitlines(keepends=True)
  store.put("data/span-1/digits.csv", "".join(rows[:1201]))
  package_path = tmp_path / "digits.json"
  proc = kfp_launcher.compile_package(
    package_path,
    "--image",
    "registry.example/kit:test",
    "--pipeline-root",
    store.uri("compile-root"),
    "--data-root",
    store.uri("data"),
    "--input-pattern",
    "span-{SPAN}/*.csv",
    "--serving-dir",
    store.uri("serving"),
    "--task",
    "multiclass",
    "--model-name",
    "digits",
    "--train-steps",
    "200",
    "--optimizer-variants",
    "tflite_float32",
    env=env,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  package = kfp_launcher.load_package(package_path)
  launcher = kfp_launcher.LocalKfp(
    tmp_path / "kfp-root", env=env, artifact_root=store.artifact_root
  )

  first = launcher.run(package, "night-1")
  assert set(kfp_launcher.states(first).values()) == {RAN}
  assert _pushed(first) and store.versions() == ["1"]
  assert json.loads(first["CsvExampleGen_span"].parameters["span_key"])["span"] == 1
  assert _trained_on(first) == 1

  # Same data: the span resolver and the live key task run (never cached) and find what they
  # found last night (the live version carries the key night 1's LiveModel had), so everything
  # else is served from KFP's cache; the Pusher always runs and finds the same training live.
  second = launcher.run(package, "night-2")
  assert _ran(second) == {
    "CsvExampleGen_span",
    "LiveModel_key",
    "Pusher",
  }
  assert (
    second["LiveModel_key"].parameters["live_key"] == first["LiveModel_key"].parameters["live_key"]
  )
  assert not _pushed(second) and store.versions() == ["1"]
  reason = second["Pusher"].artifacts["pushed_model"].value("pushed_reason")
  assert reason.startswith("nothing new to push: live version 1")

  # A new span: its key changes, so the ExampleGen and everything after it run, and it pushes.
  store.put("data/span-2/digits.csv", "".join(rows))
  third = launcher.run(package, "night-3")
  assert set(kfp_launcher.states(third).values()) == {RAN}
  assert _trained_on(third) == 2
  assert _pushed(third) and store.versions() == ["1", "2"]
  assert json.loads(store.read("serving/digits/2/manifest.json"))["data_spans"] == [2]

  # A rollback to version 1 (re-published as version 3) changes the live key: LiveModel runs
  # again and its baseline is the rolled-back model; the Trainer and Optimizer stay cached, and
  # the Pusher does not undo the rollback.
  proc = run_script(
    "rollback.py",
    "--serving-dir",
    store.uri("serving"),
    "--model-name",
    "digits",
    "--to",
    "1",
    env=env,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  fourth = launcher.run(package, "night-4")
  assert _ran(fourth) == {
    "CsvExampleGen_span",
    "LiveModel_key",
    "LiveModel",
    "Evaluator",
    "Pusher",
  }
  assert fourth["LiveModel"].artifacts["baseline"].value("live_version") == 3
  assert not _pushed(fourth) and store.versions() == ["1", "2", "3"]
  reason = fourth["Pusher"].artifacts["pushed_model"].value("pushed_reason")
  assert reason.startswith("not pushed: a rollback moved away from this training")


@pytest.mark.e2e
def test_nightly_runs_on_the_kfp_launcher_push_only_new_spans(tmp_path):
  _four_nights(tmp_path, _LocalStore(tmp_path / "store"), project_env())


@pytest.mark.e2e
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
  os.environ.get("KFP_LAUNCHER_S3") != "1",
  reason="the same four nights on moto's S3 server take minutes more; set KFP_LAUNCHER_S3=1",
)
def test_nightly_runs_on_the_kfp_launcher_with_everything_on_s3(tmp_path):
  with moto_s3("kit") as (client, env):
    _four_nights(tmp_path, _S3Store(client, "kit"), env)


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
