"""Post-processing of compiled Kubeflow packages and the container entrypoint's helpers."""

import argparse
import copy
import dataclasses
import json
import os
import pathlib
import time

import pytest
import yaml

from components.arguments import flag_value
from components.nights import nights_lib
from components.serving import nights
from core import properties
from pipeline.cli import kubeflow as run_kubeflow
from pipeline.definition import kfp_entrypoint, kubeflow_lib, kubeflow_night, kubeflow_package
from pipeline.definition.config import DEFAULT_IMAGE, PipelineConfig
from tests.support import kfp_launcher

STOCK = ["python", "-m", kubeflow_lib.STOCK_ENTRYPOINT]
EXAMPLES_SCHEMA = "title: tfx.Examples\ntype: object\n"


def _container(class_path, inputs_spec, lifecycle=False):
  container = {
    "image": "reg/kit:1",
    "command": list(STOCK),
    "args": [
      "--executor_class_path",
      class_path,
      "--json_serialized_invocation_args",
      "{{$}}",
      kubeflow_lib.INPUTS_SPEC_FLAG,
      json.dumps(inputs_spec),
    ],
  }
  if lifecycle:
    container["lifecycle"] = {"preCacheCheck": {"command": ["python", "-m", "driver"]}}
  return {"container": container}


def _const(value):
  return {"runtimeValue": {"constant": value}}


def _package(without_pusher=False):
  """A PipelineJob shaped like TFX's: an ExampleGen with a span driver, LiveModel, Pusher."""
  gen_params = {
    "input_base": {"parameterType": "STRING"},
    "input_config": {"parameterType": "STRING"},
    "rolling_spans": {"parameterType": "NUMBER_INTEGER"},
    "label_key": {"parameterType": "STRING"},
  }
  live_params = {
    "serving_dir": {"parameterType": "STRING"},
    "model_name": {"parameterType": "STRING"},
  }
  examples = {"artifactType": {"instanceSchema": EXAMPLES_SCHEMA}}
  spec = {
    "schemaVersion": "2.1.0",
    "pipelineInfo": {"name": "toy"},
    "components": {
      "Gen": {
        "executorLabel": "Gen_executor",
        "inputDefinitions": {"parameters": gen_params},
        "outputDefinitions": {"artifacts": {"examples": examples}},
      },
      "LiveModel": {
        "executorLabel": "LiveModel_executor",
        "inputDefinitions": {"parameters": live_params, "artifacts": {"examples": examples}},
      },
      "Pusher": {
        "executorLabel": "Pusher_executor",
        "inputDefinitions": {"parameters": live_params, "artifacts": {"examples": examples}},
      },
    },
    "deploymentSpec": {
      "executors": {
        "Gen_executor": _container("a.Gen", {"parameters": gen_params}, lifecycle=True),
        "LiveModel_executor": _container("a.Live", {"parameters": live_params}),
        "Pusher_executor": _container("a.Push", {"parameters": live_params}),
      }
    },
    "root": {
      "dag": {
        "tasks": {
          "Gen": {
            "taskInfo": {"name": "Gen"},
            "componentRef": {"name": "Gen"},
            "cachingOptions": {"enableCache": True},
            "inputs": {
              "parameters": {
                "input_base": _const("/data"),
                "input_config": _const('{"splits": [{"name": "s", "pattern": "span-{SPAN}/*"}]}'),
                "rolling_spans": _const(1.0),
                "label_key": _const("label"),
              }
            },
          },
          **{
            name: {
              "taskInfo": {"name": name},
              "componentRef": {"name": name},
              "cachingOptions": {"enableCache": True},
              "dependentTasks": ["Gen"],
              "inputs": {
                "parameters": {
                  "serving_dir": _const("/mnt/serving"),
                  "model_name": _const("toy"),
                },
                "artifacts": {
                  "examples": {
                    "taskOutputArtifact": {"producerTask": "Gen", "outputArtifactKey": "examples"}
                  }
                },
              },
            }
            for name in ("LiveModel", "Pusher")
          },
        }
      }
    },
  }
  if without_pusher:
    del spec["root"]["dag"]["tasks"]["Pusher"]
    del spec["components"]["Pusher"]
    del spec["deploymentSpec"]["executors"]["Pusher_executor"]
  return {"displayName": "toy", "pipelineSpec": spec, "runtimeConfig": {}}


def test_kfp_target_replaces_the_span_driver_by_an_uncached_resolver_task():
  doc = kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])
  spec = doc["pipelineSpec"]
  tasks = kubeflow_lib.tasks(spec)
  resolver = "Gen" + kubeflow_lib.SPAN_RESOLVER_SUFFIX
  assert tasks[resolver]["cachingOptions"] == {"enableCache": False}
  # With a Pusher, the night: the resolver notes tonight's spans in the night's record too.
  assert set(tasks[resolver]["inputs"]["parameters"]) == {
    "input_base",
    "input_config",
    "rolling_spans",
    "night_id",
    "serving_dir",
    "model_name",
    "stale_after_s",
  }
  assert tasks["Gen"]["inputs"]["parameters"][kubeflow_lib.SPAN_KEY] == {
    "taskOutputParameter": {"producerTask": resolver, "outputParameterKey": kubeflow_lib.SPAN_KEY}
  }
  assert tasks["Gen"]["dependentTasks"] == [resolver]
  assert tasks["Gen"]["cachingOptions"] == {"enableCache": True}
  gen = spec["deploymentSpec"]["executors"]["Gen_executor"]["container"]
  assert "lifecycle" not in gen
  declared = json.loads(flag_value(gen["args"], kubeflow_lib.INPUTS_SPEC_FLAG))
  assert declared["parameters"][kubeflow_lib.SPAN_KEY] == {"parameterType": "STRING"}
  assert spec["components"]["Gen"]["inputDefinitions"]["parameters"][kubeflow_lib.SPAN_KEY]
  out = spec["components"][resolver]["outputDefinitions"]["parameters"]
  assert out == {kubeflow_lib.SPAN_KEY: {"parameterType": "STRING"}}
  command = spec["deploymentSpec"]["executors"][resolver + "_executor"]["container"]["command"]
  assert command == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE, kubeflow_lib.RESOLVE_SPAN]


def test_both_targets_disable_the_cache_of_never_cached_tasks_and_use_our_entrypoint():
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_package.postprocess(_package(), target, ["Pusher"])["pipelineSpec"]
    tasks = kubeflow_lib.tasks(spec)
    assert tasks["LiveModel"]["cachingOptions"] == {"enableCache": True}
    assert tasks["Pusher"]["cachingOptions"] == {"enableCache": False}
    for name in ("Gen", "LiveModel", "Pusher"):
      command = kubeflow_lib.executor(spec, name)["container"]["command"]
      assert command == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE]
    assert kfp_launcher.executor_class_paths(spec) == {
      "Gen": "a.Gen",
      "LiveModel": "a.Live",
      "Pusher": "a.Push",
    }


def test_both_targets_key_live_model_by_an_uncached_task_that_reads_the_serving_folder():
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_package.postprocess(_package(), target, ["Pusher"])["pipelineSpec"]
    tasks = kubeflow_lib.tasks(spec)
    key_task = "LiveModel" + kubeflow_lib.LIVE_KEY_SUFFIX
    assert tasks[key_task]["cachingOptions"] == {"enableCache": False}
    assert tasks[key_task]["inputs"]["parameters"] == {
      "serving_dir": _const("/mnt/serving"),
      "model_name": _const("toy"),
      "pipeline_name": _const("toy"),
    }
    command = kubeflow_lib.executor(spec, key_task)["container"]["command"]
    assert command == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE, "live-key"]
    # LiveModel is cached by the key; the Pusher records it in the manifest.
    for name in ("LiveModel", "Pusher"):
      assert tasks[name]["inputs"]["parameters"][properties.LIVE_KEY_KEY] == {
        "taskOutputParameter": {"producerTask": key_task, "outputParameterKey": "live_key"}
      }
      assert key_task in tasks[name]["dependentTasks"]
      args = kubeflow_lib.executor(spec, name)["container"]["args"]
      declared = json.loads(flag_value(args, kubeflow_lib.INPUTS_SPEC_FLAG))
      assert declared["parameters"]["live_key"] == {"parameterType": "STRING"}


def test_live_key_task_writes_the_key_of_what_is_live(tmp_path):
  from components.live_model import live_model_lib

  serving = tmp_path / "serving"
  output_file = tmp_path / "task" / "executor_output.json"
  executor_input = {
    "inputs": {
      "parameterValues": {
        "serving_dir": str(serving),
        "model_name": "toy",
        "pipeline_name": "toy",
      }
    },
    "outputs": {"outputFile": str(output_file)},
  }
  args = ["live-key", "--executor_input", json.dumps(executor_input)]
  assert kfp_entrypoint.main(args) == 0
  written = json.loads(output_file.read_text())["parameterValues"]["live_key"]
  assert written == live_model_lib.live_model_key(str(serving), "toy", "toy")
  assert json.loads(written) == {"pipeline": "toy", "live": "none"}


def test_unknown_target_task_or_non_container_task_is_refused():
  with pytest.raises(ValueError, match="unknown target"):
    kubeflow_package.postprocess(_package(), "argo", [])
  with pytest.raises(kubeflow_lib.PackageError, match="'Missing' is not in the compiled"):
    kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Missing"])
  doc = _package()
  doc["pipelineSpec"]["deploymentSpec"]["executors"]["Pusher_executor"] = {"resolver": {}}
  with pytest.raises(kubeflow_lib.PackageError, match="'Pusher' is not a container task"):
    kubeflow_package.postprocess(doc, kubeflow_lib.KFP, [])


def test_volumes_become_a_platform_spec_that_kfp_client_reads(tmp_path):
  from kfp.client import client as kfp_client

  assert kubeflow_lib.parse_volume("serving-pvc:/mnt/serving") == ("serving-pvc", "/mnt/serving")
  for bad in ("serving-pvc", ":/mnt", "pvc:relative"):
    with pytest.raises(ValueError, match="PVC_NAME:/mount/path"):
      kubeflow_lib.parse_volume(bad)
  doc = kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])
  path = tmp_path / "toy.kfp.yaml"
  secret = ("minio-creds", "accesskey", "AWS_ACCESS_KEY_ID")
  path.write_text(kubeflow_package.kfp_package(doc, [("serving-pvc", "/mnt/serving")], [secret]))
  # The kfp 2.5 client's own reader: pipeline spec first, platform spec second.
  parsed = kfp_client._extract_pipeline_yaml(str(path))
  assert parsed.pipeline_spec.schema_version == "2.1.0"
  assert "Gen_span" in parsed.pipeline_spec.components[kubeflow_night.NIGHT_DAG].dag.tasks
  executors = parsed.platform_spec.platforms["kubernetes"].deployment_spec.executors
  assert set(executors) == {
    "Gen_executor",
    "Gen_span_executor",
    "LiveModel_executor",
    "LiveModel_key_executor",
    "Pusher_executor",
    "NightEnd_executor",
  }
  mount = executors["Pusher_executor"]["pvcMount"][0]
  assert (mount["constant"], mount["mountPath"]) == ("serving-pvc", "/mnt/serving")
  (from_secret,) = executors["Gen_executor"]["secretAsEnv"]
  assert from_secret["secretName"] == "minio-creds"
  assert dict(from_secret["keyToEnv"][0]) == {
    "secretKey": "accesskey",
    "envVar": "AWS_ACCESS_KEY_ID",
  }
  # The span resolver records the night's span notes in the serving folder.
  assert set(kubeflow_lib.serving_tasks(doc["pipelineSpec"])) == {
    "Gen_span",
    "LiveModel",
    "Pusher",
    "LiveModel_key",
    "NightEnd",
  }
  # Without volumes and a night, the package is the spec alone.
  bare = kubeflow_package.postprocess(_package(without_pusher=True), kubeflow_lib.KFP, [])
  assert "---" not in kubeflow_package.kfp_package(bare)


def _kfp_executor_input(artifact_type):
  return {
    "inputs": {
      "artifacts": {
        "examples": {
          "artifacts": [
            {"name": "7", "uri": "/a", "type": artifact_type, "metadata": {"custom:span": 1.0}}
          ]
        }
      }
    },
    "outputs": {"outputFile": "/tmp/out.json"},
  }


def test_entrypoint_gives_untyped_kfp_input_artifacts_their_declared_type():
  inputs_spec = {"artifacts": {"examples": {"artifactType": {"instanceSchema": EXAMPLES_SCHEMA}}}}
  executor_input = _kfp_executor_input({"instanceSchema": ""})
  assert kfp_entrypoint.fill_input_artifact_types(executor_input, inputs_spec) == ["examples"]
  artifact = executor_input["inputs"]["artifacts"]["examples"]["artifacts"][0]
  assert artifact["type"] == {"instanceSchema": EXAMPLES_SCHEMA}
  # TFX's `custom:span` (span recorded by ExampleGen's span resolution) becomes `span` again.
  assert artifact["metadata"] == {"span": 1.0}
  # A typed artifact (Vertex AI) is left alone.
  typed = _kfp_executor_input({"schemaTitle": "tfx.Model"})
  assert kfp_entrypoint.fill_input_artifact_types(typed, inputs_spec) == []
  args = [
    "--executor_class_path",
    "a.B",
    "--json_serialized_invocation_args",
    json.dumps(_kfp_executor_input({"instanceSchema": ""})),
    kubeflow_lib.INPUTS_SPEC_FLAG,
    json.dumps(inputs_spec),
    "--runner=DirectRunner",
  ]
  patched = kfp_entrypoint.patch_args(args)
  assert patched[:3] == args[:3] and patched[4:] == args[4:]
  invocation = json.loads(patched[3])
  assert invocation["inputs"]["artifacts"]["examples"]["artifacts"][0]["type"]["instanceSchema"]


def test_stock_tfx_entrypoint_cannot_read_kfp_input_artifacts_and_the_patched_one_can():
  # tensorflow/tfx#7768: KFP's driver passes upstream artifacts with an empty instanceSchema.
  from google.protobuf import json_format
  from kfp.pipeline_spec import pipeline_spec_pb2
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils

  def parse(executor_input):
    message = pipeline_spec_pb2.ExecutorInput()
    json_format.ParseDict(executor_input, message)
    return utils.parse_raw_artifact_dict(message.inputs.artifacts)

  raw = _kfp_executor_input({"instanceSchema": ""})
  with pytest.raises(AttributeError):
    parse(raw)
  inputs_spec = {"artifacts": {"examples": {"artifactType": {"instanceSchema": EXAMPLES_SCHEMA}}}}
  kfp_entrypoint.fill_input_artifact_types(raw, inputs_spec)
  (examples,) = parse(raw)["examples"]
  assert examples.type_name == "Examples"
  assert examples.span == 1


def _write_span(root: pathlib.Path, span: int, text: str, mtime: float) -> None:
  folder = root / f"span-{span}"
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / "data.csv"
  path.write_text(text)
  os.utime(path, (mtime, mtime))


def test_span_key_changes_exactly_when_the_data_does(tmp_path):
  data = tmp_path / "data"
  now = time.time() - 100
  _write_span(data, 1, "a,label\n1,0\n", now)
  params = {
    "input_base": str(data),
    "input_config": json.dumps({"splits": [{"name": "single_split", "pattern": "span-{SPAN}/*"}]}),
    "rolling_spans": 1,
  }
  first = kfp_entrypoint.span_key(params)
  assert json.loads(first)["span"] == 1
  assert kfp_entrypoint.span_key(params) == first
  _write_span(data, 2, "a,label\n2,1\n", now)
  second = kfp_entrypoint.span_key(params)
  assert json.loads(second)["span"] == 2 and second != first
  _write_span(data, 2, "a,label\n2,1\n3,0\n", now + 10)
  assert kfp_entrypoint.span_key(params) != second
  # A rolling window fingerprints the older spans too.
  window = json.loads(kfp_entrypoint.span_key({**params, "rolling_spans": 2}))
  assert set(window["fingerprints"]) == {"1", "2"}


def _args(**overrides):
  values = {"image": "reg/kit:1", "target": kubeflow_lib.KFP}
  values.update(overrides)
  return argparse.Namespace(**values)


def test_compile_warnings_name_each_placeholder_and_a_serving_dir_on_no_volume():
  config = PipelineConfig(
    pipeline_root="gs://b/root", serving_dir="/mnt/serving", data_root="gs://b/data"
  )
  volume = [("serving", "/mnt")]
  assert run_kubeflow.compile_warnings(_args(), config, volume) == []
  placeholders = PipelineConfig(
    pipeline_root=run_kubeflow.PLACEHOLDER_PIPELINE_ROOT,
    serving_dir="s3://b/serving",
    data_root="/pipeline/data/digits",  # The image's copy of the bundled data.
  )
  lines = run_kubeflow.compile_warnings(_args(image=DEFAULT_IMAGE), placeholders, [])
  assert len(lines) == 2
  assert DEFAULT_IMAGE in lines[0] and "--image REGISTRY" in lines[0]
  assert run_kubeflow.PLACEHOLDER_PIPELINE_ROOT in lines[1]
  (line,) = run_kubeflow.compile_warnings(_args(), config, [])
  assert line.startswith("--serving-dir /mnt/serving is on no --volume")
  (line,) = run_kubeflow.compile_warnings(
    _args(),
    PipelineConfig(pipeline_root="/local/root", serving_dir="gs://b/s", data_root="s3://b/d"),
    [],
  )
  assert "neither gs:// nor s3://" in line
  vertex = _args(target=kubeflow_lib.VERTEX)
  (line,) = run_kubeflow.compile_warnings(vertex, config, [])
  assert "Vertex AI mounts no volumes" in line
  on_gcs = PipelineConfig(
    pipeline_root="gs://b/root", serving_dir="gs://b/serving", data_root="gs://b/data"
  )
  assert run_kubeflow.compile_warnings(vertex, on_gcs, []) == []
  # A data root or a schema on the compiling machine: the steps read them in their containers,
  # and the package held the path without a word.
  local = dataclasses.replace(config, data_root="/home/me/data", schema_path="/home/me/s.pbtxt")
  lines = run_kubeflow.compile_warnings(_args(), local, volume)
  assert lines == [
    "--data-root /home/me/data is read in the steps' containers, where it is on no --volume; "
    "put it on gs:// or s3://, or (kfp) on a claim you mount with --volume.",
    "--schema /home/me/s.pbtxt is read in the steps' containers, where it is on no --volume; "
    "put it on gs:// or s3://, or (kfp) on a claim you mount with --volume.",
  ]
  mounted = dataclasses.replace(local, data_root="/mnt/data", schema_path="/mnt/s.pbtxt")
  assert run_kubeflow.compile_warnings(_args(), mounted, volume) == []


def test_step_env_is_plain_values_only_and_secret_env_names_a_secret_key():
  assert kubeflow_lib.parse_env("S3_ENDPOINT=http://minio:9000") == (
    "S3_ENDPOINT",
    "http://minio:9000",
  )
  for bad in ("NOVALUE", "1X=y", "=y"):
    with pytest.raises(ValueError, match="NAME=VALUE"):
      kubeflow_lib.parse_env(bad)
  for credential in ("AWS_SECRET_ACCESS_KEY=x", "AWS_ACCESS_KEY_ID=x", "KFP_TOKEN=x"):
    with pytest.raises(ValueError, match="--secret-env"):
      kubeflow_lib.parse_env(credential)
  assert kubeflow_lib.parse_secret_env("s:k:V") == ("s", "k", "V")
  with pytest.raises(ValueError, match="SECRET_NAME:KEY:ENV_VAR"):
    kubeflow_lib.parse_secret_env("s:k")
  spec = _package()["pipelineSpec"]
  kubeflow_lib.add_env(spec, [("S3_USE_HTTPS", "0")])
  for name in ("Gen", "LiveModel", "Pusher"):
    assert kubeflow_lib.executor(spec, name)["container"]["env"] == [
      {"name": "S3_USE_HTTPS", "value": "0"}
    ]


# The night: the run's id in every TFX step, and the exit handler that closes it.

NIGHT_DAG, NIGHT_END = kubeflow_night.NIGHT_DAG, kubeflow_night.NIGHT_END


def _kfp_exit_handler_spec(tmp_path):
  """What kfp 2.5's own compiler writes for `dsl.ExitHandler` with a final-status input."""
  from kfp import compiler, dsl

  @dsl.container_component
  def step(msg: str):
    return dsl.ContainerSpec(image="alpine", command=["echo"], args=[msg])

  @dsl.container_component
  def night_end(status: dsl.PipelineTaskFinalStatus, night_id: str):
    return dsl.ContainerSpec(image="alpine", command=["echo"], args=[night_id])

  @dsl.pipeline(name="toy")
  def toy():
    end = night_end(night_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER).set_caching_options(False)
    with dsl.ExitHandler(end):
      first = step(msg="a")
      step(msg="b").after(first)

  path = tmp_path / "toy.yaml"
  compiler.Compiler().compile(toy, str(path))
  return yaml.safe_load(path.read_text())


def _add_exit_handler(spec, **overrides):
  settings = {"serving_dir": "/mnt/serving", "model_name": "toy", "notify": ["env:HOOK"]}
  return kubeflow_night.add_exit_handler(spec, **{"every_night": False, **settings, **overrides})


def test_exit_handler_has_the_shape_kfp_compiles_for_dsl_exit_handler(tmp_path):
  from google.protobuf import json_format
  from kfp.pipeline_spec import pipeline_spec_pb2

  kfp_spec = _kfp_exit_handler_spec(tmp_path)
  kfp_end = kfp_spec["root"]["dag"]["tasks"]["night-end"]
  kfp_dag = kfp_spec["root"]["dag"]["tasks"]["exit-handler-1"]

  def ours(value):  # kfp's names for the DAG task, ours
    return json.loads(json.dumps(value).replace("exit-handler-1", NIGHT_DAG))

  spec = _package()["pipelineSpec"]
  before = copy.deepcopy(spec["root"]["dag"]["tasks"])
  assert _add_exit_handler(spec) == NIGHT_END
  root = spec["root"]["dag"]["tasks"]
  assert set(root) == {NIGHT_DAG, NIGHT_END}
  # The DAG task: a component that is a DAG of the original tasks, unchanged.
  assert set(root[NIGHT_DAG]) == set(kfp_dag) == {"taskInfo", "componentRef"}
  assert set(kfp_spec["components"][kfp_dag["componentRef"]["name"]]) == {"dag"}
  assert spec["components"][root[NIGHT_DAG]["componentRef"]["name"]] == {"dag": {"tasks": before}}
  # The exit task: after the DAG whatever its end, with its final status and the run's id.
  end = root[NIGHT_END]
  assert end["dependentTasks"] == ours(kfp_end["dependentTasks"]) == [NIGHT_DAG]
  assert end["triggerPolicy"] == kfp_end["triggerPolicy"]
  params, kfp_params = end["inputs"]["parameters"], kfp_end["inputs"]["parameters"]
  assert params["status"] == ours(kfp_params["status"])
  assert params["night_id"] == kfp_params["night_id"]
  definitions = spec["components"][NIGHT_END]["inputDefinitions"]["parameters"]
  kfp_component = kfp_spec["components"][kfp_end["componentRef"]["name"]]
  kfp_definitions = kfp_component["inputDefinitions"]["parameters"]
  assert definitions["status"] == kfp_definitions["status"]
  assert definitions["night_id"] == kfp_definitions["night_id"]
  # kfp writes an uncached task's options as {}: enableCache's default, false.
  assert end["cachingOptions"] == {"enableCache": False} and not kfp_end["cachingOptions"]
  constants = {k: v["runtimeValue"]["constant"] for k, v in params.items() if "runtimeValue" in v}
  assert constants == {
    "serving_dir": "/mnt/serving",
    "model_name": "toy",
    "night_id": "{{$.pipeline_job_uuid}}",
    "notify": '["env:HOOK"]',
    "every_night": "false",
  }
  assert set(definitions) == {*constants, "status"}
  container = kubeflow_lib.executor(spec, NIGHT_END)["container"]
  assert container == {
    "image": kubeflow_lib.executor(spec, "Pusher")["container"]["image"],
    "command": ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE, "night-end"],
    "args": ["--executor_input", "{{$}}"],
  }
  # A PipelineSpec as kfp's protos define it.
  json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())


def test_postprocess_gives_a_package_with_a_pusher_its_night_on_both_targets():
  config = PipelineConfig(
    serving_dir="/mnt/serving",
    model_name="toy",
    notify=("json://127.0.0.1:1/night",),
    notify_every_night=True,
  )
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_package.postprocess(_package(), target, ["Pusher"], config)["pipelineSpec"]
    params = kubeflow_lib.tasks(spec)[NIGHT_END]["inputs"]["parameters"]
    # Open-source KFP up to 2.5 refuses a run whose package has a final-status input.
    assert ("status" in params) == (target in kubeflow_night.FINAL_STATUS_TARGETS)
    assert params["notify"] == _const('["json://127.0.0.1:1/night"]')
    assert params["every_night"] == _const("true")
  assert kubeflow_night.FINAL_STATUS_TARGETS == (kubeflow_lib.VERTEX,)
  # Without a config: the Pusher's serving folder and model, and no notices.
  spec = kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])["pipelineSpec"]
  params = kubeflow_lib.tasks(spec)[NIGHT_END]["inputs"]["parameters"]
  assert params["serving_dir"] == _const("/mnt/serving") and params["model_name"] == _const("toy")
  assert params["notify"] == _const("[]")
  # Without a Pusher there is no night.
  bare = kubeflow_package.postprocess(_package(without_pusher=True), kubeflow_lib.KFP, [])
  assert not kubeflow_night.has_exit_handler(bare["pipelineSpec"])
  assert kubeflow_night.RUN_ID_PLACEHOLDER not in json.dumps(bare)


def _without_night(target):
  """postprocess's steps before the night, for comparison."""
  spec = _package()["pipelineSpec"]
  kubeflow_lib.disable_cache(spec, ["Pusher"])
  if target == kubeflow_lib.KFP:
    kubeflow_lib.add_span_resolvers(spec)
  kubeflow_lib.add_live_key_task(spec)
  kubeflow_lib.use_entrypoint(spec)
  return spec


def test_night_id_is_a_parameter_of_the_steps_that_record_the_night_and_no_argument():
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_package.postprocess(_package(), target, ["Pusher"])["pipelineSpec"]
    plain = _without_night(target)
    for name, task in kubeflow_lib.tasks(plain).items():
      # No step's command or arguments carry the run's id ...
      args = kubeflow_lib.executor(spec, name)["container"]["args"]
      assert args == kubeflow_lib.executor(plain, name)["container"]["args"], name
      if name.endswith(kubeflow_lib.SPAN_RESOLVER_SUFFIX):
        # The span resolver (uncached) notes the spans under the night: its output, the
        # ExampleGen's cache key, is computed as before.
        got = kubeflow_lib.tasks(spec)[name]["inputs"]["parameters"]
        assert got[properties.NIGHT_ID_KEY]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"
        added = {properties.NIGHT_ID_KEY, properties.SERVING_DIR_KEY, properties.MODEL_NAME_KEY}
        assert set(got) - set(task["inputs"]["parameters"]) == {*added, "stale_after_s"}
        continue
      if name not in kubeflow_night.NIGHT_STEPS:
        # ... and the steps that record nothing keep their parameters, so their cache keys.
        assert kubeflow_lib.tasks(spec)[name] == task, name
        continue
      # The Pusher gets it as a parameter the orchestrator fills in, and is never cached.
      got = kubeflow_lib.tasks(spec)[name]
      assert got["inputs"]["parameters"][properties.NIGHT_ID_KEY] == {
        "runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}
      }
      assert got["cachingOptions"] == {"enableCache": False}
      declared = kubeflow_lib.component(spec, name)["inputDefinitions"]["parameters"]
      assert declared[properties.NIGHT_ID_KEY] == {"parameterType": "STRING", "isOptional": True}
      rest = copy.deepcopy(got)
      del rest["inputs"]["parameters"][properties.NIGHT_ID_KEY]
      assert rest == task, name
    text = json.dumps(kubeflow_lib.tasks(spec))
    # The Pusher's and NightEnd's night_id, and on KFP the span resolver's.
    assert text.count("{{$.pipeline_job_uuid}}") == 2 + (target == kubeflow_lib.KFP)
    assert "{{$.pipeline_job_uuid}}" not in json.dumps(spec["deploymentSpec"])


def test_a_second_exit_handler_is_refused_and_the_night_id_is_added_once():
  spec = kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])["pipelineSpec"]
  snapshot = copy.deepcopy(spec)
  with pytest.raises(kubeflow_lib.PackageError, match="has an exit handler"):
    _add_exit_handler(spec)
  assert kubeflow_night.add_night_id(spec) == ["Pusher"]  # the same parameter again
  assert spec == snapshot
  with pytest.raises(kubeflow_lib.PackageError, match="has no Pusher"):
    _add_exit_handler(_package(without_pusher=True)["pipelineSpec"])


def test_every_helper_finds_the_steps_inside_the_exit_handler():
  doc = kubeflow_package.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])
  spec = doc["pipelineSpec"]
  steps = {"Gen_span", "Gen", "LiveModel_key", "LiveModel", "Pusher"}
  assert set(spec["components"][NIGHT_DAG]["dag"]["tasks"]) == steps
  assert set(kubeflow_lib.tasks(spec)) == {*steps, NIGHT_END}
  kubeflow_lib.check_container_tasks(spec)  # the DAG task is no step, and is not refused
  kubeflow_lib.disable_cache(spec, ["LiveModel"])
  live = spec["components"][NIGHT_DAG]["dag"]["tasks"]["LiveModel"]
  assert live["cachingOptions"] == {"enableCache": False}
  assert kfp_launcher.executor_class_paths(spec) == {
    "Gen": "a.Gen",
    "LiveModel": "a.Live",
    "Pusher": "a.Push",
  }
  assert kubeflow_lib.use_entrypoint(spec) == 0
  kubeflow_lib.add_env(spec, [("S3_USE_HTTPS", "0")])
  assert kubeflow_lib.executor(spec, NIGHT_END)["container"]["env"] == [
    {"name": "S3_USE_HTTPS", "value": "0"}
  ]
  # Every step, NightEnd too, gets the volumes and the secrets; the run's id is no pod label.
  secret = ("hooks", "url", "HOOK")
  platform = kubeflow_package.platform_spec(spec, [("serving-pvc", "/mnt/serving")], [secret])
  executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
  assert set(executors) == {f"{name}_executor" for name in (*steps, NIGHT_END)}
  for config in executors.values():
    assert config["pvcMount"] == [{"constant": "serving-pvc", "mountPath": "/mnt/serving"}]
    assert config["secretAsEnv"][0]["keyToEnv"] == [{"secretKey": "url", "envVar": "HOOK"}]
    assert "fieldPathAsEnv" not in config
  # A key task added after the exit handler goes beside its source, inside the sub-DAG.
  late = _package()["pipelineSpec"]
  _add_exit_handler(late)
  kubeflow_lib.add_live_key_task(late)
  assert "LiveModel_key" in late["components"][NIGHT_DAG]["dag"]["tasks"]
  assert "live_key" not in kubeflow_lib.tasks(late)[NIGHT_END]["inputs"]["parameters"]
  # Task names are unique across DAGs.
  late["components"][NIGHT_DAG]["dag"]["tasks"][NIGHT_END] = {"componentRef": {"name": "Gen"}}
  with pytest.raises(kubeflow_lib.PackageError, match="two DAGs"):
    kubeflow_lib.tasks(late)


def test_a_step_reads_the_night_from_its_parameter_else_from_the_environment(monkeypatch):
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV, raising=False)
  assert nights_lib.night_id({properties.NIGHT_ID_KEY: "run-7"}) == "run-7"
  assert nights_lib.night_id({}) is None
  # A placeholder the orchestrator left as is names no night; run_local.py's variable does.
  assert nights_lib.night_id({properties.NIGHT_ID_KEY: "{{$.pipeline_job_uuid}}"}) is None
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "local-night")
  assert nights_lib.night_id({properties.NIGHT_ID_KEY: "{{$.pipeline_job_uuid}}"}) == "local-night"
  assert nights_lib.night_id(None) == "local-night"
  assert nights_lib.night_id({properties.NIGHT_ID_KEY: "run-7"}) == "run-7"


def test_night_outcome_comes_from_the_final_status_or_else_from_the_facts():
  from components.data_gate import report as gate_report
  from components.data_gate.executor import how_to_accept

  outcome = kfp_entrypoint.night_outcome
  # Vertex AI's state, and KFP's (2.14 on: the ML Metadata state of the DAG's execution).
  assert outcome({"state": "SUCCEEDED", "error": {}}, {}, "/s", "toy") == (True, "")
  assert outcome({"state": "COMPLETE", "error": {}}, {}, "/s", "toy") == (True, "")
  vertex = {"state": "FAILED", "error": {"code": 9, "message": "The DAG failed.\n  Trainer: OOM"}}
  assert outcome(vertex, {}, "/s", "toy") == (False, "The DAG failed. Trainer: OOM")
  # No status (KFP before 2.14), or a state it left at RUNNING: the Pusher's facts decide.
  pushed = {nights_lib.PUSHER_STEP: {"pushed": True, "version": 3}}
  assert outcome(None, pushed, "/s", "toy") == (True, "")
  assert outcome({"state": "RUNNING"}, {}, "/s", "toy") == (False, "")
  # A night the data gate stopped ends with the gate's own line, as on run_local.py.
  finding = gate_report.Finding("label", "label", gate_report.STOP, "the label 'label' flipped")
  report = gate_report.GateReport(live_version=1, findings=(finding,))
  stopped = {nights_lib.GATE_STEP: {"report": report.to_json()}}
  succeeded, line = outcome({"state": "FAILED", "error": {}}, stopped, "/s", "toy")
  assert not succeeded
  assert line == gate_report.stop_message(report, how_to_accept("/s", "toy"))
  assert "the label 'label' flipped" in line and "--accept-changes label" in line


def test_night_end_records_a_failed_night_notifies_and_exits_0(tmp_path, monkeypatch, capsys):
  from tests.support import notify_servers

  serving = str(tmp_path / "serving")
  (tmp_path / "serving" / "toy").mkdir(parents=True)  # A version was pushed before.
  monkeypatch.setenv(nights_lib.NIGHT_ID_ENV, "run-1")
  assert nights_lib.record_step(serving, "toy", nights_lib.GATE_STEP, {"rows": {"train": 10}})
  monkeypatch.delenv(nights_lib.NIGHT_ID_ENV)
  output_file = tmp_path / "task" / "executor_output.json"
  status = {
    "state": "FAILED",
    "pipelineJobResourceName": "toy-run",
    "pipelineTaskName": NIGHT_DAG,
    "error": {"code": 9, "message": "Trainer ran out of memory"},
  }
  with notify_servers.http_server() as hook:
    values = {
      "serving_dir": serving,
      "model_name": "toy",
      "night_id": "run-1",
      "notify": json.dumps([f"json://127.0.0.1:{hook.server_address[1]}/night"]),
      "every_night": "false",
      "status": status,
    }
    executor_input = {
      "inputs": {"parameterValues": values},
      "outputs": {"outputFile": str(output_file)},
    }
    assert kfp_entrypoint.main(["night-end", "--executor_input", json.dumps(executor_input)]) == 0
  (record,) = nights.read_records(serving, "toy")
  assert (record["night"], record["outcome"]) == ("run-1", "failed")
  assert record["line"] == "Trainer ran out of memory" and record["rows"] == {"train": 10}
  assert nights.open_facts(serving, "toy", "run-1") == {}
  (posted,) = hook.requests
  assert "night failed" in posted["json"]["title"]
  out = capsys.readouterr().out
  assert "night run-1: failed: Trainer ran out of memory" in out
  assert f"notified json://127.0.0.1:{hook.server_address[1]}/night" in out
  assert json.loads(output_file.read_text()) == {}


def test_an_html_output_gets_the_kits_page_type_back_so_tfx_can_read_it():
  from google.protobuf import json_format
  from kfp.pipeline_spec import pipeline_spec_pb2
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as utils

  from components import artifacts

  def parse(executor_input):
    message = pipeline_spec_pb2.ExecutorInput()
    json_format.ParseDict(executor_input, message)
    return utils.parse_raw_artifact_dict(message.outputs.artifacts)

  executor_input = {
    "outputs": {
      "artifacts": {
        "page": {
          "artifacts": [{"name": "p", "uri": "/r/page", "type": kubeflow_lib.KFP_HTML_TYPE}]
        },
        "model": {
          "artifacts": [{"name": "m", "uri": "/r/m", "type": {"schemaTitle": "tfx.Model"}}]
        },
      },
      "outputFile": "/tmp/out.json",
    }
  }
  # As KFP hands it over, TFX cannot find a class for system.HTML.
  with pytest.raises((ImportError, AttributeError, ValueError)):
    parse(executor_input)
  assert kfp_entrypoint.type_html_outputs(executor_input) == ["page"]
  outputs = parse(executor_input)
  assert isinstance(outputs["page"][0], artifacts.HtmlReport)
  assert outputs["page"][0].uri == "/r/page" and outputs["model"][0].type_name == "Model"


def test_only_report_page_outputs_are_declared_html():
  page_schema = "title: components.HtmlReport\ntype: object\n"
  spec = {
    "components": {
      "comp-RunReport": {
        "outputDefinitions": {
          "artifacts": {"page": {"artifactType": {"instanceSchema": page_schema}}}
        }
      },
      "comp-Pusher": {
        "outputDefinitions": {
          "artifacts": {
            "pushed_model": {"artifactType": {"instanceSchema": "title: tfx.PushedModel\n"}}
          }
        }
      },
    }
  }
  assert kubeflow_lib.declare_html_outputs(spec) == ["comp-RunReport.page"]
  page = spec["components"]["comp-RunReport"]["outputDefinitions"]["artifacts"]["page"]
  assert page["artifactType"] == kubeflow_lib.KFP_HTML_TYPE
  pushed = spec["components"]["comp-Pusher"]["outputDefinitions"]["artifacts"]["pushed_model"]
  assert pushed["artifactType"] == {"instanceSchema": "title: tfx.PushedModel\n"}
