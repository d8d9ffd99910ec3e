"""Pusher component construction, executor Do on real artifacts, and a real-MLMD local run."""

import hashlib
import json
import os
import pathlib

import pytest
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.components.common import importer
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.local import local_dag_runner
from tfx.types import standard_artifacts

from components.pusher import OptimizedModel, Pusher, pusher_lib
from components.pusher import executor as pusher_executor
from components.pusher import spec as s


def _write_saved_model(path: pathlib.Path | str, bias: float) -> str:
  """Saves a tiny real SavedModel with the project's serving signature (examples -> outputs)."""

  class Tiny(tf.Module):
    def __init__(self):
      super().__init__()
      self.bias = tf.Variable(tf.fill([10], bias))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
      logits = tf.zeros([tf.shape(examples)[0], 10]) + self.bias
      return {"outputs": tf.nn.softmax(logits)}

  module = Tiny()
  tf.saved_model.save(module, str(path), signatures={"serving_default": module.serve})
  return str(path)


def _model(tmp_path: pathlib.Path, name: str = "model", bias: float = 0.0) -> types.Artifact:
  model = standard_artifacts.Model()
  model.uri = str(tmp_path / name)
  _write_saved_model(tmp_path / name / "Format-Serving", bias)
  model.id = 11
  return model


def _blessing(tmp_path: pathlib.Path, blessed: int | None) -> types.Artifact:
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = str(tmp_path / "blessing")
  os.makedirs(blessing.uri, exist_ok=True)
  blessing.id = 12
  if blessed is not None:
    blessing.set_int_custom_property(s.BLESSED_PROPERTY, blessed)
    marker = "BLESSED" if blessed else "NOT_BLESSED"
    pathlib.Path(blessing.uri, marker).write_text("")
    blessing.set_int_custom_property("current_model_id", 11)
    blessing.set_int_custom_property("baseline_model_id", 5)
  return blessing


def _optimized(tmp_path: pathlib.Path) -> types.Artifact:
  """An OptimizedModel laid out as components/optimizer writes it (metrics as properties)."""
  optimized = OptimizedModel()
  optimized.uri = str(tmp_path / "optimized")
  for name, payload in (("tflite", b"f32"), ("tflite_int8", b"int8"), ("onnx", b"onnx")):
    os.makedirs(os.path.join(optimized.uri, name))
    pathlib.Path(optimized.uri, name, "model.bin").write_bytes(payload)
  optimized.set_string_custom_property("optimizer_status", "ok")
  for name, blessed, accuracy in (("tflite", 0, 0.40), ("tflite_int8", 1, 0.93), ("onnx", 1, 0.94)):
    optimized.set_int_custom_property(f"{name}_blessed", blessed)
    optimized.set_string_custom_property(f"{name}_status", "ok")
    optimized.set_string_custom_property(f"{name}_path", f"{name}/model.bin")
    optimized.set_float_custom_property(f"{name}_accuracy", accuracy)
  optimized.set_int_custom_property("tflite_int8_size_bytes", 11800)
  # Older/other optimizers may put metrics in a report.json under the uri instead.
  report = {"variants": {"onnx": {"max_abs_diff": 0.0}}}
  pathlib.Path(optimized.uri, "report.json").write_text(json.dumps(report))
  # "tflite" failed its own gate, so the Optimizer does not list it as blessed.
  optimized.set_string_custom_property(
    s.BLESSED_VARIANTS_PROPERTY, json.dumps(["tflite_int8", "onnx"])
  )
  optimized.id = 13
  return optimized


def _pushed_model(tmp_path: pathlib.Path, name: str = "pushed") -> types.Artifact:
  pushed = standard_artifacts.PushedModel()
  pushed.uri = str(tmp_path / name)
  return pushed


def _run_do(tmp_path, input_dict, pushed, keep_versions=5):
  context = base_executor.BaseExecutor.Context(
    tmp_dir=str(tmp_path / "tmp"), unique_id="42", pipeline_run_id="run-1"
  )
  pusher_executor.Executor(context).Do(
    input_dict,
    {s.PUSHED_MODEL_KEY: [pushed]},
    {
      s.SERVING_DIR_KEY: str(tmp_path / "serving"),
      s.MODEL_NAME_KEY: "digits",
      s.KEEP_VERSIONS_KEY: keep_versions,
    },
  )


def _sha256(path: pathlib.Path) -> str:
  return hashlib.sha256(path.read_bytes()).hexdigest()


def test_component_wires_channels_and_parameters():
  pusher = Pusher(
    model=types.Channel(type=standard_artifacts.Model),
    model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
    optimized_model=types.Channel(type=OptimizedModel),
    serving_dir="/srv/models/",
    model_name="digits",
    keep_versions=3,
  )
  assert pusher.outputs[s.PUSHED_MODEL_KEY].type is standard_artifacts.PushedModel
  assert set(pusher.inputs) >= {s.MODEL_KEY, s.MODEL_BLESSING_KEY, s.OPTIMIZED_MODEL_KEY}
  assert pusher.exec_properties == {
    s.SERVING_DIR_KEY: "/srv/models",
    s.MODEL_NAME_KEY: "digits",
    s.KEEP_VERSIONS_KEY: 3,
  }
  # Importable module path, so the executor can be found on Kubeflow.
  assert pusher.executor_spec.executor_class.__module__ == "components.pusher.executor"


def test_component_accepts_a_differently_defined_optimized_model_class():
  # The Optimizer defines its own artifact class; TFX matches channel types by class name.
  class OptimizedModel(types.Artifact):
    TYPE_NAME = "components.OptimizedModel"

  pusher = Pusher(
    model=types.Channel(type=standard_artifacts.Model),
    model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
    optimized_model=types.Channel(type=OptimizedModel),
    serving_dir="/srv/models",
    model_name="digits",
  )
  assert pusher.inputs[s.OPTIMIZED_MODEL_KEY].type_name == "components.OptimizedModel"


@pytest.mark.parametrize(
  ("kwargs", "message"),
  [
    ({"serving_dir": "relative/dir"}, "relative"),
    ({"serving_dir": "gs://bucket/models"}, "URL"),
    ({"model_name": "../escape"}, "Invalid model name"),
    ({"model_name": ""}, "Invalid model name"),
    ({"keep_versions": 0}, "keep_versions"),
  ],
)
def test_component_rejects_nonsense_arguments(kwargs, message):
  args = {"serving_dir": "/srv/models", "model_name": "digits", "keep_versions": 5, **kwargs}
  with pytest.raises(ValueError, match=message):
    Pusher(
      model=types.Channel(type=standard_artifacts.Model),
      model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
      **args,
    )


def test_do_pushes_blessed_model_and_blessed_variants_with_manifest(tmp_path):
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / "examples")
  examples.span = 4
  examples.id = 14
  pushed = _pushed_model(tmp_path)
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)],
    s.OPTIMIZED_MODEL_KEY: [_optimized(tmp_path)],
    s.EXAMPLES_KEY: [examples],
  }
  _run_do(tmp_path, input_dict, pushed)

  version_dir = tmp_path / "serving" / "digits" / "1"
  assert pushed.get_int_custom_property(s.PUSHED_PROPERTY) == 1
  assert pushed.get_string_custom_property(s.PUSHED_VERSION_PROPERTY) == "1"
  assert pushed.get_string_custom_property(s.PUSHED_DESTINATION_PROPERTY) == str(version_dir)
  assert pushed.get_int_custom_property(s.LIVE_VERSION_PROPERTY) == 1

  manifest = json.loads((version_dir / "manifest.json").read_text())
  assert json.loads((tmp_path / "pushed" / "manifest.json").read_text()) == manifest
  assert pushed.get_string_custom_property(s.CONTENT_SHA256_PROPERTY) == manifest["content_sha256"]
  assert set(manifest["variants"]) == {"tflite_int8", "onnx"}  # "tflite" failed its gate.
  assert manifest["variants"]["tflite_int8"]["metrics"] == {
    "accuracy": 0.93,
    "blessed": 1,
    "path": "tflite_int8/model.bin",
    "size_bytes": 11800,
    "status": "ok",
  }
  assert manifest["variants"]["onnx"]["metrics"]["max_abs_diff"] == 0.0
  assert manifest["variants"]["onnx"]["metrics"]["accuracy"] == 0.94
  assert not (version_dir / "assets.extra" / "variants" / "tflite").exists()
  assert manifest["data_spans"] == [4]
  assert manifest["blessing"] == {"blessed": 1, "current_model_id": 11, "baseline_model_id": 5}
  lineage = manifest["lineage"]
  assert lineage["execution_id"] == 42
  assert lineage["pipeline_run_id"] == "run-1"
  assert lineage["artifacts"][s.MODEL_KEY][0]["id"] == 11
  assert lineage["artifacts"][s.MODEL_BLESSING_KEY][0]["id"] == 12
  assert lineage["artifacts"][s.OPTIMIZED_MODEL_KEY][0]["id"] == 13
  assert lineage["artifacts"][s.EXAMPLES_KEY][0]["id"] == 14
  # Every file is listed and its sha256 verifies, independently of pusher_lib.
  listed = set(manifest["files"])
  on_disk = {str(p.relative_to(version_dir)) for p in version_dir.rglob("*") if p.is_file()} - {
    "manifest.json"
  }
  assert listed == on_disk
  assert "saved_model.pb" in listed and "variables/variables.index" in listed
  for rel, info in manifest["files"].items():
    assert _sha256(version_dir / rel) == info["sha256"], rel
  # The published version is a loadable SavedModel with the serving signature.
  loaded = tf.saved_model.load(str(version_dir))
  probs = loaded.signatures["serving_default"](examples=tf.constant([b"", b""]))["outputs"]
  assert probs.shape == (2, 10)


def test_do_skips_unblessed_model_without_failing(tmp_path):
  pushed = _pushed_model(tmp_path)
  input_dict = {s.MODEL_KEY: [_model(tmp_path)], s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 0)]}
  _run_do(tmp_path, input_dict, pushed)
  assert pushed.get_int_custom_property(s.PUSHED_PROPERTY) == 0
  reason = pushed.get_string_custom_property(s.PUSHED_REASON_PROPERTY)
  assert reason.startswith("model not blessed by Evaluator: blessed=0")
  assert "NOT_BLESSED marker" in reason and "baseline_model_id=5" in reason
  assert not pushed.has_custom_property(s.PUSHED_VERSION_PROPERTY)
  assert pusher_lib.list_versions(str(tmp_path / "serving"), "digits") == []


def test_do_explains_blessing_without_thresholds(tmp_path):
  pushed = _pushed_model(tmp_path)
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, None)],
  }
  _run_do(tmp_path, input_dict, pushed)
  assert pushed.get_int_custom_property(s.PUSHED_PROPERTY) == 0
  assert "thresholds" in pushed.get_string_custom_property(s.PUSHED_REASON_PROPERTY)


def test_do_rerun_with_same_model_pushes_nothing_new_then_new_model_pushes(tmp_path):
  model = _model(tmp_path)
  model.set_string_custom_property(s.DATA_SPANS_PROPERTY, "[7, 8]")
  input_dict = {s.MODEL_KEY: [model], s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)]}
  first = _pushed_model(tmp_path, "pushed1")
  _run_do(tmp_path, input_dict, first)
  manifest = pusher_lib.read_manifest(str(tmp_path / "serving" / "digits" / "1"))
  assert manifest["data_spans"] == [7, 8]  # The model's own property wins over examples.
  assert manifest["variants"] == {}

  second = _pushed_model(tmp_path, "pushed2")
  _run_do(tmp_path, input_dict, second)
  assert second.get_int_custom_property(s.PUSHED_PROPERTY) == 0
  assert "identical to live version 1" in second.get_string_custom_property(
    s.PUSHED_REASON_PROPERTY
  )
  assert second.get_int_custom_property(s.LIVE_VERSION_PROPERTY) == 1

  third = _pushed_model(tmp_path, "pushed3")
  input_dict[s.MODEL_KEY] = [_model(tmp_path, "model2", bias=1.0)]
  _run_do(tmp_path, input_dict, third)
  assert third.get_string_custom_property(s.PUSHED_VERSION_PROPERTY) == "2"


def test_do_fails_loudly_when_a_blessed_variant_folder_is_missing(tmp_path):
  optimized = _optimized(tmp_path)
  optimized.set_string_custom_property(s.BLESSED_VARIANTS_PROPERTY, '["tflite_int8", "gone"]')
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)],
    s.OPTIMIZED_MODEL_KEY: [optimized],
  }
  with pytest.raises(RuntimeError, match="'gone'"):
    _run_do(tmp_path, input_dict, _pushed_model(tmp_path))
  assert pusher_lib.list_versions(str(tmp_path / "serving"), "digits") == []


def test_local_run_records_real_mlmd_lineage_in_manifest(tmp_path):
  """Runs Importers + Pusher on LocalDagRunner with a real MLMD (SQLite) store."""
  model_uri = tmp_path / "model"
  _write_saved_model(model_uri / "Format-Serving", 0.5)
  (tmp_path / "blessing").mkdir()
  optimized = _optimized(tmp_path)
  model_importer = importer.Importer(
    source_uri=str(model_uri),
    artifact_type=standard_artifacts.Model,
    custom_properties={s.DATA_SPANS_PROPERTY: "[3]"},
  ).with_id("model_importer")
  blessing_importer = importer.Importer(
    source_uri=str(tmp_path / "blessing"),
    artifact_type=standard_artifacts.ModelBlessing,
    custom_properties={s.BLESSED_PROPERTY: 1},
  ).with_id("blessing_importer")
  optimized_importer = importer.Importer(
    source_uri=optimized.uri,
    artifact_type=OptimizedModel,
    custom_properties={s.BLESSED_VARIANTS_PROPERTY: '["onnx"]'},
  ).with_id("optimized_importer")
  pusher = Pusher(
    model=model_importer.outputs["result"],
    model_blessing=blessing_importer.outputs["result"],
    optimized_model=optimized_importer.outputs["result"],
    serving_dir=str(tmp_path / "serving"),
    model_name="digits",
  )
  metadata_path = str(tmp_path / "metadata.sqlite")
  local_dag_runner.LocalDagRunner().run(
    tfx_pipeline.Pipeline(
      pipeline_name="pusher-lineage",
      pipeline_root=str(tmp_path / "root"),
      components=[model_importer, blessing_importer, optimized_importer, pusher],
      metadata_connection_config=metadata.sqlite_metadata_connection_config(metadata_path),
    )
  )

  manifest = pusher_lib.read_manifest(str(tmp_path / "serving" / "digits" / "1"))
  assert pusher_lib.verify_version(str(tmp_path / "serving" / "digits" / "1")) == []
  assert manifest["data_spans"] == [3]
  assert set(manifest["variants"]) == {"onnx"}
  with metadata.Metadata(metadata.sqlite_metadata_connection_config(metadata_path)) as m:
    store = m.store
    [pushed] = store.get_artifacts_by_type("PushedModel")
    assert pushed.custom_properties[s.PUSHED_PROPERTY].int_value == 1
    assert pushed.custom_properties[s.PUSHED_VERSION_PROPERTY].string_value == "1"
    [model] = store.get_artifacts_by_type("Model")
    [blessing] = store.get_artifacts_by_type("ModelBlessing")
    [pushed_event] = [
      e for e in store.get_events_by_artifact_ids([pushed.id]) if e.type == e.OUTPUT
    ]
  lineage = manifest["lineage"]
  assert lineage["execution_id"] == pushed_event.execution_id
  assert lineage["pipeline_name"] == "pusher-lineage"
  assert lineage["artifacts"][s.MODEL_KEY][0]["id"] == model.id
  assert lineage["artifacts"][s.MODEL_BLESSING_KEY][0]["id"] == blessing.id


def test_pusher_compiles_for_kubeflow_v2_with_importable_executor(tmp_path):
  from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

  model_importer = importer.Importer(
    source_uri="gs://bucket/model", artifact_type=standard_artifacts.Model
  ).with_id("model_importer")
  blessing_importer = importer.Importer(
    source_uri="gs://bucket/blessing", artifact_type=standard_artifacts.ModelBlessing
  ).with_id("blessing_importer")
  pusher = Pusher(
    model=model_importer.outputs["result"],
    model_blessing=blessing_importer.outputs["result"],
    serving_dir="/mnt/serving",
    model_name="digits",
    keep_versions=4,
  )
  kubeflow_v2_dag_runner.KubeflowV2DagRunner(
    config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(default_image="kit:test"),
    output_dir=str(tmp_path),
    output_filename="pipeline.json",
  ).run(
    tfx_pipeline.Pipeline(
      pipeline_name="pusher-compile",
      pipeline_root="gs://bucket/root",
      components=[model_importer, blessing_importer, pusher],
    )
  )
  spec = json.loads((tmp_path / "pipeline.json").read_text())["pipelineSpec"]
  args = spec["deploymentSpec"]["executors"]["Pusher_executor"]["container"]["args"]
  assert args[args.index("--executor_class_path") + 1] == "components.pusher.executor.Executor"
  params = spec["root"]["dag"]["tasks"]["Pusher"]["inputs"]["parameters"]
  assert params["keep_versions"]["runtimeValue"]["constantValue"] == {"intValue": "4"}
  assert params["serving_dir"]["runtimeValue"]["constantValue"] == {"stringValue": "/mnt/serving"}


def test_optimized_model_type_resolves_inside_a_kubeflow_v2_container():
  from kfp.pipeline_spec import pipeline_spec_pb2
  from tfx.orchestration.kubeflow.v2 import compiler_utils
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils

  runtime_artifact = pipeline_spec_pb2.RuntimeArtifact(
    uri="/pipeline/Optimizer/optimized_model/7",
    type=pipeline_spec_pb2.ArtifactTypeSchema(
      instance_schema=compiler_utils.get_artifact_schema(OptimizedModel)
    ),
  )
  parsed = kubeflow_v2_entrypoint_utils.parse_raw_artifact_dict(
    {s.OPTIMIZED_MODEL_KEY: pipeline_spec_pb2.ArtifactList(artifacts=[runtime_artifact])}
  )
  [artifact] = parsed[s.OPTIMIZED_MODEL_KEY]
  assert artifact.type_name == OptimizedModel.TYPE_NAME
  assert artifact.uri == "/pipeline/Optimizer/optimized_model/7"


def test_do_reads_remote_artifact_uris_through_fileio(tmp_path):
  """Kubeflow artifact URIs are remote (gs://); TF's ram:// file system stands in for them."""
  from tfx.dsl.io import fileio

  root = f"ram://pusher-test-{os.getpid()}"
  model = standard_artifacts.Model()
  model.uri = f"{root}/model"
  _write_saved_model(f"{root}/model/Format-Serving", 2.0)
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = f"{root}/blessing"
  blessing.set_int_custom_property(s.BLESSED_PROPERTY, 1)
  optimized = OptimizedModel()
  optimized.uri = f"{root}/optimized"
  fileio.makedirs(f"{root}/optimized/onnx")
  with fileio.open(f"{root}/optimized/onnx/model.onnx", "wb") as f:
    f.write(b"onnx-bytes")
  optimized.set_string_custom_property(s.BLESSED_VARIANTS_PROPERTY, '["onnx"]')
  pushed = standard_artifacts.PushedModel()
  pushed.uri = f"{root}/pushed"
  input_dict = {
    s.MODEL_KEY: [model],
    s.MODEL_BLESSING_KEY: [blessing],
    s.OPTIMIZED_MODEL_KEY: [optimized],
  }
  _run_do(tmp_path, input_dict, pushed)

  version_dir = tmp_path / "serving" / "digits" / "1"
  assert pusher_lib.verify_version(str(version_dir)) == []
  variant = version_dir / "assets.extra" / "variants" / "onnx" / "model.onnx"
  assert variant.read_bytes() == b"onnx-bytes"
  manifest = pusher_lib.read_manifest(str(version_dir))
  assert manifest["source"]["saved_model"] == f"{root}/model/Format-Serving"
  with fileio.open(f"{root}/pushed/manifest.json", "r") as f:
    assert json.loads(f.read()) == manifest
  loaded = tf.saved_model.load(str(version_dir))
  assert loaded.signatures["serving_default"](examples=tf.constant([b""]))["outputs"].shape == (
    1,
    10,
  )
