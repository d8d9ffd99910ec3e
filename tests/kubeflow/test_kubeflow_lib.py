"""Post-processing of compiled Kubeflow packages and the container entrypoint's helpers."""

import argparse
import json
import os
import pathlib
import time

import pytest

from pipeline.cli import kubeflow as run_kubeflow
from pipeline.definition import kfp_entrypoint, kubeflow_lib
from pipeline.definition.config import DEFAULT_IMAGE, PipelineConfig

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
  doc = kubeflow_lib.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])
  spec = doc["pipelineSpec"]
  tasks = kubeflow_lib.tasks(spec)
  resolver = "Gen" + kubeflow_lib.SPAN_RESOLVER_SUFFIX
  assert tasks[resolver]["cachingOptions"] == {"enableCache": False}
  assert set(tasks[resolver]["inputs"]["parameters"]) == {
    "input_base",
    "input_config",
    "rolling_spans",
  }
  assert tasks["Gen"]["inputs"]["parameters"][kubeflow_lib.SPAN_KEY] == {
    "taskOutputParameter": {"producerTask": resolver, "outputParameterKey": kubeflow_lib.SPAN_KEY}
  }
  assert tasks["Gen"]["dependentTasks"] == [resolver]
  assert tasks["Gen"]["cachingOptions"] == {"enableCache": True}
  gen = spec["deploymentSpec"]["executors"]["Gen_executor"]["container"]
  assert "lifecycle" not in gen
  declared = json.loads(kubeflow_lib.flag_value(gen["args"], kubeflow_lib.INPUTS_SPEC_FLAG))
  assert declared["parameters"][kubeflow_lib.SPAN_KEY] == {"parameterType": "STRING"}
  assert spec["components"]["Gen"]["inputDefinitions"]["parameters"][kubeflow_lib.SPAN_KEY]
  out = spec["components"][resolver]["outputDefinitions"]["parameters"]
  assert out == {kubeflow_lib.SPAN_KEY: {"parameterType": "STRING"}}
  command = spec["deploymentSpec"]["executors"][resolver + "_executor"]["container"]["command"]
  assert command == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE, kubeflow_lib.RESOLVE_SPAN]


def test_both_targets_disable_the_cache_of_never_cached_tasks_and_use_our_entrypoint():
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_lib.postprocess(_package(), target, ["Pusher"])["pipelineSpec"]
    tasks = kubeflow_lib.tasks(spec)
    assert tasks["LiveModel"]["cachingOptions"] == {"enableCache": True}
    assert tasks["Pusher"]["cachingOptions"] == {"enableCache": False}
    for name in ("Gen", "LiveModel", "Pusher"):
      command = kubeflow_lib.executor(spec, name)["container"]["command"]
      assert command == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE]
    assert kubeflow_lib.executor_class_paths(spec) == {
      "Gen": "a.Gen",
      "LiveModel": "a.Live",
      "Pusher": "a.Push",
    }


def test_both_targets_key_live_model_by_an_uncached_task_that_reads_the_serving_folder():
  for target in kubeflow_lib.TARGETS:
    spec = kubeflow_lib.postprocess(_package(), target, ["Pusher"])["pipelineSpec"]
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
      assert tasks[name]["inputs"]["parameters"][kubeflow_lib.LIVE_KEY] == {
        "taskOutputParameter": {"producerTask": key_task, "outputParameterKey": "live_key"}
      }
      assert key_task in tasks[name]["dependentTasks"]
      args = kubeflow_lib.executor(spec, name)["container"]["args"]
      declared = json.loads(kubeflow_lib.flag_value(args, kubeflow_lib.INPUTS_SPEC_FLAG))
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
    kubeflow_lib.postprocess(_package(), "argo", [])
  with pytest.raises(kubeflow_lib.PackageError, match="'Missing' is not in the compiled"):
    kubeflow_lib.postprocess(_package(), kubeflow_lib.KFP, ["Missing"])
  doc = _package()
  doc["pipelineSpec"]["deploymentSpec"]["executors"]["Pusher_executor"] = {"resolver": {}}
  with pytest.raises(kubeflow_lib.PackageError, match="'Pusher' is not a container task"):
    kubeflow_lib.postprocess(doc, kubeflow_lib.KFP, [])


def test_volumes_become_a_platform_spec_that_kfp_client_reads(tmp_path):
  from kfp.client import client as kfp_client

  assert kubeflow_lib.parse_volume("serving-pvc:/mnt/serving") == ("serving-pvc", "/mnt/serving")
  for bad in ("serving-pvc", ":/mnt", "pvc:relative"):
    with pytest.raises(ValueError, match="PVC_NAME:/mount/path"):
      kubeflow_lib.parse_volume(bad)
  doc = kubeflow_lib.postprocess(_package(), kubeflow_lib.KFP, ["Pusher"])
  path = tmp_path / "toy.kfp.yaml"
  secret = ("minio-creds", "accesskey", "AWS_ACCESS_KEY_ID")
  path.write_text(kubeflow_lib.kfp_package(doc, [("serving-pvc", "/mnt/serving")], [secret]))
  # The kfp 2.5 client's own reader: pipeline spec first, platform spec second.
  parsed = kfp_client._extract_pipeline_yaml(str(path))
  assert parsed.pipeline_spec.schema_version == "2.1.0"
  assert "Gen_span" in parsed.pipeline_spec.root.dag.tasks
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
  assert set(kubeflow_lib.serving_tasks(doc["pipelineSpec"])) == {
    "LiveModel",
    "Pusher",
    "LiveModel_key",
    "NightEnd",
  }
  # Without volumes and a night, the package is the spec alone.
  bare = kubeflow_lib.postprocess(_package(without_pusher=True), kubeflow_lib.KFP, [])
  assert "---" not in kubeflow_lib.kfp_package(bare)


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
  config = PipelineConfig(pipeline_root="gs://b/root", serving_dir="/mnt/serving")
  volume = [("serving", "/mnt")]
  assert run_kubeflow.compile_warnings(_args(), config, volume) == []
  placeholders = PipelineConfig(
    pipeline_root=run_kubeflow.PLACEHOLDER_PIPELINE_ROOT, serving_dir="s3://b/serving"
  )
  lines = run_kubeflow.compile_warnings(_args(image=DEFAULT_IMAGE), placeholders, [])
  assert len(lines) == 2
  assert DEFAULT_IMAGE in lines[0] and "--image REGISTRY" in lines[0]
  assert run_kubeflow.PLACEHOLDER_PIPELINE_ROOT in lines[1]
  (line,) = run_kubeflow.compile_warnings(_args(), config, [])
  assert line.startswith("--serving-dir /mnt/serving is on no --volume")
  (line,) = run_kubeflow.compile_warnings(
    _args(), PipelineConfig(pipeline_root="/local/root", serving_dir="gs://b/s"), []
  )
  assert "neither gs:// nor s3://" in line
  vertex = _args(target=kubeflow_lib.VERTEX)
  (line,) = run_kubeflow.compile_warnings(vertex, config, [])
  assert "Vertex AI mounts no volumes" in line
  on_gcs = PipelineConfig(pipeline_root="gs://b/root", serving_dir="gs://b/serving")
  assert run_kubeflow.compile_warnings(vertex, on_gcs, []) == []


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
