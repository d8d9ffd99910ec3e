"""The compiled pipeline run task by task as open-source KFP 2.x runs it (support.kfp_launcher)."""

import copy
import json
import os
import pathlib
import shutil
import tempfile

import pandas as pd
import pytest

from components.report import executor as report_executor
from components.serving import nights
from tests.support import browser, gate_data, kfp_launcher, notify_servers
from tests.support.cli_runs import REPO_ROOT, moto_s3, project_env, run_script
from tests.support.kfp_launcher import CACHED, FAILED, RAN

# A container task in one line of Python: writes each output artifact and parameter it is given,
# and, beside them in its executor output, its other arguments and the night id it was given.
TOY_STEP = r"""
import json, os, pathlib, sys, time
executor_input = json.loads(sys.argv[1])
outputs = executor_input["outputs"]
given = executor_input["inputs"].get("parameterValues", {})
print("toy step to stdout")
print("toy step to stderr", file=sys.stderr)
time.sleep(float(given.get("sleep", 0)))
if given.get("fail"):
  sys.exit("toy step failed on purpose")
written = {"artifacts": {}, "parameterValues": {}, "argv": sys.argv[2:]}
written["night_env"] = os.environ.get("TFXKIT_NIGHT_ID")
written["process"] = {"name": __name__, "argv0": sys.argv[0], "cwd": os.getcwd()}
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
  # The run's id in the arguments: KFP's cache key holds them before substitution.
  args = ["{{$}}", "{{$.pipeline_job_uuid}}"]
  container = {"image": "toy", "command": ["python", "-c", TOY_STEP], "args": args}

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


def _given(package, task: str, key: str, value: str):
  """`package` with the constant parameter `key` given to `task`."""
  spec = package["pipelineSpec"]
  spec["root"]["dag"]["tasks"][task]["inputs"]["parameters"][key] = {
    "runtimeValue": {"constant": value}
  }
  spec["components"][task]["inputDefinitions"]["parameters"][key] = {"parameterType": "STRING"}
  return package


def test_launcher_reports_failed_and_non_container_tasks(tmp_path):
  launcher = kfp_launcher.LocalKfp(tmp_path / "root", env=project_env())
  package = _given(_toy_package(), "A", "fail", "yes")
  with pytest.raises(kfp_launcher.LauncherError, match="toy step failed on purpose"):
    launcher.run(package, "run-1")
  package = _toy_package()
  package["pipelineSpec"]["deploymentSpec"]["executors"]["D_executor"] = {"resolver": {}}
  with pytest.raises(kfp_launcher.LauncherError, match="D is not a container task"):
    launcher.run(package, "run-2")


def _module_package(steps: pathlib.Path):
  """The toy package with each step run as `python -m toy_step` (a module in `steps`)."""
  steps.mkdir()
  (steps / "toy_step.py").write_text(TOY_STEP)
  package = _toy_package()
  for executor in package["pipelineSpec"]["deploymentSpec"]["executors"].values():
    executor["container"]["command"] = ["python", "-m", "toy_step"]
  return package


def test_a_warm_launcher_runs_module_steps_as_fresh_processes_do(tmp_path):
  package = _module_package(tmp_path / "steps")
  env = project_env(PYTHONPATH=str(tmp_path / "steps"))
  fresh = kfp_launcher.LocalKfp(tmp_path / "fresh", env=env).run(package, "run-1")
  with kfp_launcher.LocalKfp(tmp_path / "warm", env=env, warm=True) as launcher:
    warm = launcher.run(package, "run-1")
    assert kfp_launcher.states(warm) == kfp_launcher.states(fresh) == dict.fromkeys("ABCDE", RAN)
    for name in "ABCDE":
      # The same module run as __main__, with the same argv[0], folder and outputs.
      assert _written(warm[name])["process"] == _written(fresh[name])["process"]
      assert _written(warm[name])["process"]["name"] == "__main__"
      assert warm[name].warm and not fresh[name].warm
      assert _written(warm[name])["parameterValues"] == _written(fresh[name])["parameterValues"]
      assert warm[name].log.read_text() == fresh[name].log.read_text()
      assert "toy step to stdout" in warm[name].log.read_text()
    assert warm["B"].parameters == fresh["B"].parameters == {}
    assert warm["A"].parameters == fresh["A"].parameters == {"value": "v1"}

    # A step's exit status and message reach the launcher; one past its time is killed, and
    # the warm process goes on serving the next run.
    with pytest.raises(kfp_launcher.LauncherError, match="toy step failed on purpose"):
      launcher.run(_given(copy.deepcopy(package), "A", "fail", "yes"), "run-2")
    launcher.timeout = 2
    with pytest.raises(kfp_launcher.LauncherError, match="task A ran past 2 s"):
      launcher.run(_given(copy.deepcopy(package), "A", "sleep", "60"), "run-3")
    launcher.timeout = 60
    assert set(kfp_launcher.states(launcher.run(package, "run-4")).values()) <= {RAN, CACHED}


def _written(result) -> dict:
  """What a toy step wrote into its executor output file."""
  return json.loads(pathlib.Path(result.executor_input["outputs"]["outputFile"]).read_text())


def _exit_handler_package(fail: bool):
  """KFP's exit handler shape: the DAG task Night (A -> B -> C) and End after it, with A's
  final status and the run's id as parameters and the run's id from the pod's label."""
  package = _toy_package()
  spec = package["pipelineSpec"]
  tasks = spec["root"]["dag"]["tasks"]
  for name in ("D", "E"):
    del (
      tasks[name],
      spec["components"][name],
      spec["deploymentSpec"]["executors"][f"{name}_executor"],
    )
  if fail:
    tasks["A"]["inputs"]["parameters"]["fail"] = {"runtimeValue": {"constant": "yes"}}
    spec["components"]["A"]["inputDefinitions"]["parameters"]["fail"] = {"parameterType": "STRING"}
  spec["components"]["Night"] = {"dag": {"tasks": tasks}}
  spec["components"]["End"] = {
    "executorLabel": "End_executor",
    "inputDefinitions": {
      "parameters": {
        "status": {"parameterType": "TASK_FINAL_STATUS", "isOptional": True},
        "night_id": {"parameterType": "STRING"},
      }
    },
  }
  spec["deploymentSpec"]["executors"]["End_executor"] = copy.deepcopy(
    spec["deploymentSpec"]["executors"]["A_executor"]
  )
  spec["root"]["dag"]["tasks"] = {
    "Night": {"taskInfo": {"name": "Night"}, "componentRef": {"name": "Night"}},
    "End": {
      "taskInfo": {"name": "End"},
      "componentRef": {"name": "End"},
      "dependentTasks": ["Night"],
      "triggerPolicy": {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"},
      "cachingOptions": {"enableCache": False},
      "inputs": {
        "parameters": {
          "status": {"taskFinalStatus": {"producerTask": "Night"}},
          "night_id": {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}},
        }
      },
    },
  }
  night_env = {"name": "TFXKIT_NIGHT_ID", "fieldPath": "metadata.labels['pipeline/runid']"}
  executors = {label: {"fieldPathAsEnv": [night_env]} for label in ("B_executor", "End_executor")}
  platform = {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}
  return package, platform


def test_launcher_runs_the_exit_task_after_a_failed_dag_with_its_final_status(tmp_path):
  launcher = kfp_launcher.LocalKfp(tmp_path / "root", env=project_env())
  package, platform = _exit_handler_package(fail=True)
  failed = launcher.run(package, "run-1", platform=platform, check=False)
  # A failed: nothing after it in its DAG started, and the exit task ran.
  assert kfp_launcher.states(failed) == {"A": FAILED, "End": RAN}
  assert "toy step failed on purpose" in failed["A"].error
  values = failed["End"].executor_input["inputs"]["parameterValues"]
  # What KFP 2.14 on passes: the ML Metadata state of the DAG's execution, no error message.
  assert values["status"] == {
    "state": "FAILED",
    "pipelineJobResourceName": "run-1",
    "pipelineTaskName": "Night",
    "error": {},
  }
  # The run's id: resolved in a parameter constant, left as is in the arguments (KFP's launcher
  # does not substitute it there), and in the environment from the pod's label.
  night = values["night_id"]
  assert night != "{{$.pipeline_job_uuid}}" and len(night) == 36
  written = _written(failed["End"])
  assert written["argv"] == ["{{$.pipeline_job_uuid}}"] and written["night_env"] == night
  # By default a failed task fails the run, after the exit task ran.
  with pytest.raises(kfp_launcher.LauncherError, match="task A exited with 1"):
    launcher.run(package, "run-2", platform=platform)
  assert (tmp_path / "root" / "toy" / "run-2" / "End.log").exists()

  package, platform = _exit_handler_package(fail=False)
  first = launcher.run(package, "run-3", platform=platform)
  assert kfp_launcher.states(first) == {"A": RAN, "B": RAN, "C": RAN, "End": RAN}
  assert first["End"].executor_input["inputs"]["parameterValues"]["status"]["state"] == "COMPLETE"
  assert _written(first["B"])["night_env"] == _written(first["End"])["night_env"]
  # One id per run; the cache keys hold the placeholder, so a rerun is served from the cache.
  second = launcher.run(package, "run-4", platform=platform)
  assert kfp_launcher.states(second) == {"A": RAN, "B": CACHED, "C": CACHED, "End": RAN}
  ids = [r["End"].executor_input["inputs"]["parameterValues"]["night_id"] for r in (first, second)]
  assert ids[0] != ids[1]
  assert kfp_launcher.topological_order(package["pipelineSpec"]) == ["A", "B", "C", "End"]
  assert kfp_launcher.upstream_closure(package["pipelineSpec"], "B") == {"A", "B", "Night"}


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

  def local_copy(self, uri: str) -> str:
    return uri

  def records(self) -> list[dict]:
    return nights.read_records(self.uri("serving"), "digits")


class _S3Store:
  """The same on moto's S3 server; output artifacts go under s3:// as KFP provisions them."""

  def __init__(self, client, bucket, scratch: pathlib.Path, env):
    self.client, self.bucket, self.scratch, self.env = client, bucket, scratch, env
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

  def local_copy(self, uri: str) -> str:
    """A local copy of the file or folder at `uri`, downloaded with boto3.

    The steps read S3 through tensorflow-io; this process does not load it, because it aborts
    the interpreter at exit (status 134 after every test passed).
    """
    prefix = uri.removeprefix(f"s3://{self.bucket}/")
    self.scratch.mkdir(parents=True, exist_ok=True)
    dest = pathlib.Path(tempfile.mkdtemp(dir=self.scratch)) / prefix.rsplit("/", 1)[-1]
    listing = self.client.get_paginator("list_objects_v2").paginate(
      Bucket=self.bucket, Prefix=prefix
    )
    for item in (o for page in listing for o in page.get("Contents", [])):
      key = item["Key"]
      if key != prefix and not key.startswith(prefix + "/"):
        continue
      target = dest if key == prefix else dest / key[len(prefix) + 1 :]
      target.parent.mkdir(parents=True, exist_ok=True)
      self.client.download_file(self.bucket, key, str(target))
    return str(dest)

  def records(self) -> list[dict]:
    """The nights' records, read by `schedule.py local history` (tensorflow-io, as above)."""
    proc = run_script(
      "schedule.py", "local", "history", "--serving-dir", self.uri("serving"),
      "--model-name", "digits", "--json", env=self.env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _five_nights(tmp_path, store, env, hook) -> None:
  """Night 1 pushes span-1, night 2 (same data) pushes nothing, night 3 pushes span-2, night
  4, after a rollback, evaluates against the rolled-back model and pushes nothing, and night 5
  (span-3 has lost a column) is stopped by the DataGate, which the exit handler records and
  posts to `hook`, a loopback webhook; the other notice of the five nights is night 2's, whose
  span-2/ held no file yet."""
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
    "--notify",
    f"json://127.0.0.1:{hook.server_address[1]}/night",
    warm=True,
    env=env,
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  # The upload package: the spec alone. The night's id reaches the steps that record it as a
  # parameter the launcher fills in, as KFP's driver does; no pod label and no argument.
  upload = tmp_path / "digits.kfp.yaml"
  package, platform = kfp_launcher.load_package(upload), kfp_launcher.load_platform_spec(upload)
  assert platform == {}
  # Some 50 steps over five nights: each is a child of one warm process (see warm_python)
  # rather than a fresh one, which would spend about 13 s importing TensorFlow and TFX.
  launcher = kfp_launcher.LocalKfp(
    tmp_path / "kfp-root", env=env, artifact_root=store.artifact_root, warm=True
  )

  first = launcher.run(package, "night-1", platform=platform)
  assert set(kfp_launcher.states(first).values()) == {RAN}
  assert _pushed(first) and store.versions() == ["1"]
  assert json.loads(first["CsvExampleGen_span"].parameters["span_key"])["span"] == 1
  assert _trained_on(first) == 1
  # The run's page is RunReport's HTML artifact (system.HTML in the package), its figures those
  # of the run: the version pushed and the metrics the Evaluator wrote.
  page = report_executor.read_page(store.local_copy(first["RunReport"].artifacts["page"].uri))
  facts = {k: json.loads(v) for k, v in browser.facts(page).items()}
  assert facts["pushed.version"] == 1 and facts["pushed.pushed"] is True
  assert facts["status"] == "succeeded" and "<svg" in page

  # Same data: the span resolver and the live key task run (never cached) and find what they
  # found last night (the live version carries the key night 1's LiveModel had), so everything
  # else is served from KFP's cache but the steps that record the night: the DataGate, the
  # Pusher (which finds the same training live) and the RunReport always run.
  # span-2/ is being written (no *.csv in it yet): tonight reads span 1 again, and the span
  # resolver notes why in the night's record, which is notified.
  store.put("data/span-2/digits.csv.part", "pixel_0\n")
  second = launcher.run(package, "night-2", platform=platform)
  assert _ran(second) == {
    "CsvExampleGen_span",
    "LiveModel_key",
    "DataGate",
    "Pusher",
    "RunReport",
    "NightEnd",
  }
  assert (
    second["LiveModel_key"].parameters["live_key"] == first["LiveModel_key"].parameters["live_key"]
  )
  assert not _pushed(second) and store.versions() == ["1"]
  reason = second["Pusher"].artifacts["pushed_model"].value("pushed_reason")
  assert reason.startswith("nothing new to push: live version 1")
  note = "span-2/ holds no *.csv file (it holds digits.csv.part); the newest span read is 1"
  assert store.records()[-1]["notes"] == [note]
  (noted,) = hook.requests
  assert note in json.dumps(noted["json"])

  # A night killed after its DataGate recorded its facts: no exit task closes it. The next
  # night's DataGate, the first step to record it, closes it as interrupted (the recurring run's
  # max_concurrency of 1 proves it dead).
  killed = launcher.run(package, "night-killed", until="DataGate")
  assert kfp_launcher.states(killed)["DataGate"] == RAN and "NightEnd" not in killed

  # A new span: its key changes, so the ExampleGen and everything after it run, and it pushes.
  # This night runs the JSON package (the PipelineJob Vertex AI takes) rather than the YAML:
  # the night's id reaches its steps through the same spec.
  store.put("data/span-2/digits.csv", "".join(rows))
  third = launcher.run(kfp_launcher.load_package(package_path), "night-3", platform=platform)
  assert set(kfp_launcher.states(third).values()) == {RAN}
  assert _trained_on(third) == 2
  assert _pushed(third) and store.versions() == ["1", "2"]
  assert json.loads(store.read("serving/digits/2/manifest.json"))["data_spans"] == [2]

  # A rollback to version 1 (re-published as version 3) changes the live key: LiveModel runs
  # again and its baseline is the rolled-back model, and the DataGate compares tonight's data
  # with that version's; the Trainer and Optimizer stay cached (the gate's verdict is no input
  # of theirs), and the Pusher does not undo the rollback.
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
  fourth = launcher.run(package, "night-4", platform=platform)
  assert _ran(fourth) == {
    "CsvExampleGen_span",
    "LiveModel_key",
    "LiveModel",
    "DataGate",
    "Evaluator",
    "Pusher",
    "RunReport",
    "NightEnd",
  }
  assert fourth["LiveModel"].artifacts["baseline"].value("live_version") == 3
  assert not _pushed(fourth) and store.versions() == ["1", "2", "3"]
  reason = fourth["Pusher"].artifacts["pushed_model"].value("pushed_reason")
  assert reason.startswith("a rollback moved away from this training")
  assert len(hook.requests) == 1  # Night 2's.

  # Tonight's span has lost a pixel column: the DataGate stops the night, nothing trains or
  # pushes, and NightEnd (the exit handler) still runs, records it and posts one notice.
  digits = pd.read_csv(REPO_ROOT / "data" / "digits" / "digits.csv", dtype=str)
  store.put("data/span-3/digits.csv", gate_data.drop_column(digits, "pixel_20").to_csv(index=False))
  fifth = launcher.run(package, "night-5", platform=platform, check=False)
  states = kfp_launcher.states(fifth)
  assert states["DataGate"] == FAILED and states["NightEnd"] == RAN
  assert "DistributedTrainer" not in states and "Pusher" not in states
  assert store.versions() == ["1", "2", "3"]
  stopped = store.records()[-1]
  assert stopped["outcome"] == "stopped" and "'pixel_20'" in stopped["line"]
  assert stopped["line"].startswith("the data gate stopped this night")
  notice = hook.requests[-1]
  assert len(hook.requests) == 2 and "stopped" in json.dumps(notice["json"])
  # Every night is recorded under its run's id, with what its steps found.
  records = store.records()
  assert [r["outcome"] for r in records] == [
    "pushed",
    "not_pushed",
    "interrupted",
    "pushed",
    "not_pushed",
    "stopped",
  ]
  nights = (first, second, killed, third, fourth, fifth)
  for results, record in zip(nights, records, strict=True):
    night = results["DataGate"].executor_input["inputs"]["parameterValues"]["night_id"]
    assert record["night"] == night and "{{" not in night
    assert record["owner"] == "kubeflow"


@pytest.mark.e2e
@pytest.mark.timeout(900)
def test_nightly_runs_on_the_kfp_launcher_push_only_new_spans(tmp_path):
  store = _LocalStore(tmp_path / "store")
  with notify_servers.http_server() as hook:
    _five_nights(tmp_path, store, project_env(), hook)
  # NightEnd closed each night under the run's id the steps recorded their facts under.
  records = store.records()
  outcomes = ["pushed", "not_pushed", "interrupted", "pushed", "not_pushed", "stopped"]
  assert [r["outcome"] for r in records] == outcomes
  assert [r["version"] for r in records] == [1, None, None, 2, None, None]


@pytest.mark.e2e
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
  os.environ.get("KFP_LAUNCHER_S3") != "1",
  reason="the same five nights on moto's S3 server take minutes more; set KFP_LAUNCHER_S3=1",
)
def test_nightly_runs_on_the_kfp_launcher_with_everything_on_s3(tmp_path):
  with moto_s3("kit") as (client, env), notify_servers.http_server() as hook:
    _five_nights(tmp_path, _S3Store(client, "kit", tmp_path / "s3-copies", env), env, hook)


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
    warm=True,
    env=project_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  # The steps before it run in children of one warm process; the Tuner's own start-up is what
  # is tested, so it runs as a fresh process, as in a pod.
  with kfp_launcher.LocalKfp(
    tmp_path / "kfp-root", env=project_env(), warm=True, fresh={"Tuner"}
  ) as launcher:
    results = launcher.run(kfp_launcher.load_package(package_path), "tune", until="Tuner")
  # The Tuner waits for the data gate, which compares with what is live.
  assert set(results) == {
    "CsvExampleGen_span",
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "LiveModel_key",
    "LiveModel",
    "DataGate",
    "Tuner",
  }
  assert not results["Tuner"].warm and results["SchemaGen"].warm
  best = results["Tuner"].artifacts["best_hyperparameters"]
  hparams = json.loads((pathlib.Path(best.uri) / "best_hyperparameters.txt").read_text())
  assert "hidden_units" in hparams["values"]
  assert "Keras 3" not in results["Tuner"].log.read_text()
