"""Pusher component construction, executor Do on real artifacts, and a real-MLMD local run."""

import hashlib
import json
import os
import pathlib
import shutil

import pytest
import tensorflow as tf
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.components.common import importer
from tfx.orchestration import metadata
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.local import local_dag_runner
from tfx.types import standard_artifacts

from components.artifact_files import variant_index
from components.artifacts import OptimizedModel
from components.pusher import Pusher
from components.pusher import executor as pusher_executor
from components.pusher import spec as s
from components.serving import paths, versions
from components.serving.manifest import read_manifest
from core import properties
from tests.support import tiny_models


def _model(tmp_path: pathlib.Path, name: str = "model", bias: float = 0.0) -> types.Artifact:
  model = standard_artifacts.Model()
  model.uri = str(tmp_path / name)
  tiny_models.write_saved_model(tmp_path / name / "Format-Serving", bias)
  model.id = 11
  return model


def _blessing(tmp_path: pathlib.Path, blessed: int | None) -> types.Artifact:
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = str(tmp_path / "blessing")
  os.makedirs(blessing.uri, exist_ok=True)
  blessing.id = 12
  if blessed is not None:
    blessing.set_int_custom_property(properties.BLESSED_PROPERTY, blessed)
    marker = "BLESSED" if blessed else "NOT_BLESSED"
    pathlib.Path(blessing.uri, marker).write_text("")
    blessing.set_int_custom_property("current_model_id", 11)
    blessing.set_int_custom_property("baseline_model_id", 5)
  return blessing


VARIANT_ACCURACY = {"tflite": 0.40, "tflite_int8": 0.93, "onnx": 0.94}


def _signature(name: str, preprocessing_included: bool = True) -> dict:
  return {
    "variant": name,
    "inputs": [{"name": "numeric", "dtype": "float32", "shape": [-1, 64], "position": 0}],
    "label": {"key": "label", "classes": list(range(10))},
    "preprocessing_included": preprocessing_included,
  }


def _optimized(
  root: pathlib.Path | str,
  blessed: tuple[str, ...] = ("tflite_int8", "onnx"),
  without_preprocessing: tuple[str, ...] = (),
) -> types.Artifact:
  """An OptimizedModel laid out as the Optimizer writes it: variant folders + variants.json.

  "tflite" fails its own gate by default, so the index does not list it as blessed.
  """
  from tfx.dsl.io import fileio

  optimized = OptimizedModel()
  optimized.uri = str(root) if "://" in str(root) else str(root / "optimized")
  entries = []
  for name, accuracy in VARIANT_ACCURACY.items():
    folder = os.path.join(optimized.uri, name)
    fileio.makedirs(folder)
    signature = _signature(name, name not in without_preprocessing)
    with fileio.open(os.path.join(folder, "model.bin"), "wb") as f:
      f.write(name.encode())
    with fileio.open(os.path.join(folder, "signature.json"), "w") as f:
      f.write(json.dumps(signature))
    entries.append(
      {
        "name": name,
        "runtime": "onnxruntime" if name == "onnx" else "tflite",
        "status": "ok",
        "path": f"{name}/model.bin",
        "accuracy": accuracy,
        "metric_value": accuracy,
        "metric_drop": round((0.95 - accuracy) * 100, 6),
        "agreement": 0.99,
        "size_bytes": 11800,
        "blessed": name in blessed,
        "details": {"not": "copied to the manifest"},
        "signature": signature,
      }
    )
  variant_index.write_index(
    optimized.uri,
    {
      "task": "multiclass",
      "baseline": {"name": "baseline", "accuracy": 0.95},
      "variants": entries,
      "blessed_variants": list(blessed),
    },
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
      properties.SERVING_DIR_KEY: str(tmp_path / "serving"),
      properties.MODEL_NAME_KEY: "digits",
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
    properties.SERVING_DIR_KEY: "/srv/models",
    properties.MODEL_NAME_KEY: "digits",
    s.KEEP_VERSIONS_KEY: 3,
    properties.LIVE_KEY_KEY: None,
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


def test_component_takes_an_object_store_serving_dir():
  pusher = Pusher(
    model=types.Channel(type=standard_artifacts.Model),
    model_blessing=types.Channel(type=standard_artifacts.ModelBlessing),
    serving_dir="gs://bucket/models/",
    model_name="digits",
  )
  assert pusher.exec_properties[properties.SERVING_DIR_KEY] == "gs://bucket/models"


@pytest.mark.parametrize(
  ("kwargs", "message"),
  [
    ({"serving_dir": "relative/dir"}, "relative"),
    ({"serving_dir": "gs:///models"}, "is not a valid URI"),
    ({"model_name": "../escape"}, "Invalid model name"),
    ({"model_name": ""}, "Invalid model name"),
    ({"keep_versions": 0}, "keep_versions"),
  ],
)
def test_component_rejects_nonsense_arguments(kwargs, message):
  args = {"serving_dir": "/srv/models", "model_name": "digits", "keep_versions": 5, **kwargs}
  with pytest.raises(paths.PusherError, match=message):
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
  assert pushed.get_int_custom_property(properties.PUSHED_PROPERTY) == 1
  assert pushed.get_string_custom_property(properties.PUSHED_VERSION_PROPERTY) == "1"
  assert pushed.get_string_custom_property(properties.PUSHED_DESTINATION_PROPERTY) == str(
    version_dir
  )
  assert pushed.get_int_custom_property(properties.LIVE_VERSION_PROPERTY) == 1

  manifest = json.loads((version_dir / "manifest.json").read_text())
  assert json.loads((tmp_path / "pushed" / "manifest.json").read_text()) == manifest
  assert (
    pushed.get_string_custom_property(properties.CONTENT_SHA256_PROPERTY)
    == manifest["content_sha256"]
  )
  assert set(manifest["variants"]) == {"tflite_int8", "onnx"}  # "tflite" failed its gate.
  assert manifest["variants"]["tflite_int8"] == {
    "path": "assets.extra/variants/tflite_int8",
    "metrics": {
      "runtime": "tflite",
      "path": "tflite_int8/model.bin",
      "accuracy": 0.93,
      "metric_value": 0.93,
      "metric_drop": 2.0,
      "agreement": 0.99,
      "size_bytes": 11800,
      "signature": _signature("tflite_int8"),
    },
  }
  assert manifest["variants"]["onnx"]["metrics"]["accuracy"] == 0.94
  assert not (version_dir / "assets.extra" / "variants" / "tflite").exists()
  # Each variant ships with its signature.json, as a client reads it.
  shipped = version_dir / "assets.extra" / "variants" / "onnx"
  assert (shipped / "model.bin").read_bytes() == b"onnx"
  assert json.loads((shipped / "signature.json").read_text()) == _signature("onnx")
  # No variant lacks preprocessing, so no Transform graph is shipped.
  assert "transform_graph" not in manifest
  assert not (version_dir / "assets.extra" / "transform_graph").exists()
  assert manifest["optimizer"]["task"] == "multiclass"
  assert manifest["data_spans"] == [4]
  assert manifest["blessing"] == {"blessed": 1, "current_model_id": 11, "baseline_model_id": 5}
  lineage = manifest["lineage"]
  assert lineage["pipeline_run_id"] == "run-1"
  assert manifest["model"]["uri"] == str(tmp_path / "model")
  assert manifest["examples"] == [examples.uri]
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
  assert pushed.get_int_custom_property(properties.PUSHED_PROPERTY) == 0
  reason = pushed.get_string_custom_property(properties.PUSHED_REASON_PROPERTY)
  assert reason.startswith("model not blessed by Evaluator: blessed=0")
  assert "current_model_id=11" in reason and "baseline_model_id=5" in reason
  assert not pushed.has_custom_property(properties.PUSHED_VERSION_PROPERTY)
  assert versions.list_versions(str(tmp_path / "serving"), "digits") == []


def test_do_explains_blessing_without_thresholds(tmp_path):
  pushed = _pushed_model(tmp_path)
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, None)],
  }
  _run_do(tmp_path, input_dict, pushed)
  assert pushed.get_int_custom_property(properties.PUSHED_PROPERTY) == 0
  assert "thresholds" in pushed.get_string_custom_property(properties.PUSHED_REASON_PROPERTY)


def test_do_rerun_with_same_model_pushes_nothing_new_then_new_model_pushes(tmp_path):
  model = _model(tmp_path)
  input_dict = {s.MODEL_KEY: [model], s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)]}
  first = _pushed_model(tmp_path, "pushed1")
  _run_do(tmp_path, input_dict, first)
  manifest = read_manifest(str(tmp_path / "serving" / "digits" / "1"))
  assert manifest["variants"] == {}
  assert manifest["optimizer"] is None  # no Optimizer upstream

  second = _pushed_model(tmp_path, "pushed2")
  _run_do(tmp_path, input_dict, second)
  assert second.get_int_custom_property(properties.PUSHED_PROPERTY) == 0
  assert "identical to live version 1" in second.get_string_custom_property(
    properties.PUSHED_REASON_PROPERTY
  )
  assert second.get_int_custom_property(properties.LIVE_VERSION_PROPERTY) == 1

  third = _pushed_model(tmp_path, "pushed3")
  input_dict[s.MODEL_KEY] = [_model(tmp_path, "model2", bias=1.0)]
  _run_do(tmp_path, input_dict, third)
  assert third.get_string_custom_property(properties.PUSHED_VERSION_PROPERTY) == "2"


def test_do_ships_the_transform_graph_only_for_variants_that_need_it(tmp_path):
  transform = standard_artifacts.TransformGraph()
  transform.uri = str(tmp_path / "transform_graph")
  (tmp_path / "transform_graph" / "transform_fn").mkdir(parents=True)
  (tmp_path / "transform_graph" / "transform_fn" / "saved_model.pb").write_bytes(b"graph")
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)],
    s.OPTIMIZED_MODEL_KEY: [_optimized(tmp_path, without_preprocessing=("onnx",))],
    s.TRANSFORM_GRAPH_KEY: [transform],
  }
  _run_do(tmp_path, input_dict, _pushed_model(tmp_path))
  version_dir = tmp_path / "serving" / "digits" / "1"
  manifest = read_manifest(str(version_dir))
  assert manifest["transform_graph"] == {
    "path": "assets.extra/transform_graph",
    "needed_by": ["onnx"],
  }
  shipped = version_dir / "assets.extra" / "transform_graph" / "transform_fn" / "saved_model.pb"
  assert shipped.read_bytes() == b"graph"
  assert versions.verify_version(str(version_dir)) == []


def test_do_fails_loudly_when_a_blessed_variant_folder_is_missing(tmp_path):
  optimized = _optimized(tmp_path)
  shutil.rmtree(os.path.join(optimized.uri, "onnx"))
  input_dict = {
    s.MODEL_KEY: [_model(tmp_path)],
    s.MODEL_BLESSING_KEY: [_blessing(tmp_path, 1)],
    s.OPTIMIZED_MODEL_KEY: [optimized],
  }
  with pytest.raises(RuntimeError, match="'onnx'"):
    _run_do(tmp_path, input_dict, _pushed_model(tmp_path))
  assert versions.list_versions(str(tmp_path / "serving"), "digits") == []


def test_local_run_records_real_mlmd_lineage_in_manifest(tmp_path):
  """Runs Importers + Pusher on LocalDagRunner with a real MLMD (SQLite) store."""
  model_uri = tmp_path / "model"
  tiny_models.write_saved_model(model_uri / "Format-Serving", 0.5)
  (tmp_path / "blessing").mkdir()
  optimized = _optimized(tmp_path, blessed=("onnx",))
  model_importer = importer.Importer(
    source_uri=str(model_uri), artifact_type=standard_artifacts.Model
  ).with_id("model_importer")
  blessing_importer = importer.Importer(
    source_uri=str(tmp_path / "blessing"),
    artifact_type=standard_artifacts.ModelBlessing,
    custom_properties={properties.BLESSED_PROPERTY: 1},
  ).with_id("blessing_importer")
  optimized_importer = importer.Importer(
    source_uri=optimized.uri, artifact_type=OptimizedModel
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

  manifest = read_manifest(str(tmp_path / "serving" / "digits" / "1"))
  assert versions.verify_version(str(tmp_path / "serving" / "digits" / "1")) == []
  assert set(manifest["variants"]) == {"onnx"}
  with metadata.Metadata(metadata.sqlite_metadata_connection_config(metadata_path)) as m:
    store = m.store
    [pushed] = store.get_artifacts_by_type("PushedModel")
    assert pushed.custom_properties[properties.PUSHED_PROPERTY].int_value == 1
    assert pushed.custom_properties[properties.PUSHED_VERSION_PROPERTY].string_value == "1"
    [model] = store.get_artifacts_by_type("Model")
    [blessing] = store.get_artifacts_by_type("ModelBlessing")
    [pushed_event] = [
      e for e in store.get_events_by_artifact_ids([pushed.id]) if e.type == e.OUTPUT
    ]
  lineage = manifest["lineage"]
  assert lineage["pipeline_name"] == "pusher-lineage"
  assert lineage["node_id"] == "Pusher"
  assert lineage["pipeline_run_id"]
  assert manifest["model"]["uri"] == model.uri == str(model_uri)
  assert manifest["blessing"]["blessed"] == blessing.custom_properties["blessed"].int_value == 1
  assert pushed_event.execution_id > 0


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
  tiny_models.write_saved_model(f"{root}/model/Format-Serving", 2.0)
  blessing = standard_artifacts.ModelBlessing()
  blessing.uri = f"{root}/blessing"
  blessing.set_int_custom_property(properties.BLESSED_PROPERTY, 1)
  optimized = _optimized(f"{root}/optimized", blessed=("onnx",))
  pushed = standard_artifacts.PushedModel()
  pushed.uri = f"{root}/pushed"
  input_dict = {
    s.MODEL_KEY: [model],
    s.MODEL_BLESSING_KEY: [blessing],
    s.OPTIMIZED_MODEL_KEY: [optimized],
  }
  _run_do(tmp_path, input_dict, pushed)

  version_dir = tmp_path / "serving" / "digits" / "1"
  assert versions.verify_version(str(version_dir)) == []
  variant = version_dir / "assets.extra" / "variants" / "onnx"
  assert (variant / "model.bin").read_bytes() == b"onnx"
  assert json.loads((variant / "signature.json").read_text()) == _signature("onnx")
  manifest = read_manifest(str(version_dir))
  assert manifest["source"]["saved_model"] == f"{root}/model/Format-Serving"
  with fileio.open(f"{root}/pushed/manifest.json", "r") as f:
    assert json.loads(f.read()) == manifest
  loaded = tf.saved_model.load(str(version_dir))
  assert loaded.signatures["serving_default"](examples=tf.constant([b""]))["outputs"].shape == (
    1,
    10,
  )


def _examples(tmp_path: pathlib.Path, span: int) -> types.Artifact:
  examples = standard_artifacts.Examples()
  examples.uri = str(tmp_path / f"examples-{span}")
  examples.span = span
  examples.id = 20 + span
  return examples


def test_a_model_of_older_spans_than_the_live_versions_is_refused_in_one_line(tmp_path):
  """span-3/ deleted: the ExampleGen finds span 2, and an earlier night's model of it (cached)
  differs from the live version's; pushing it served older data as a new version."""
  blessing = _blessing(tmp_path, 1)
  newest = {s.MODEL_KEY: [_model(tmp_path)], s.MODEL_BLESSING_KEY: [blessing]}
  _run_do(tmp_path, {**newest, s.EXAMPLES_KEY: [_examples(tmp_path, 3)]}, _pushed_model(tmp_path))
  older = {s.MODEL_KEY: [_model(tmp_path, "model2", bias=1.0)], s.MODEL_BLESSING_KEY: [blessing]}

  with pytest.raises(paths.PusherError) as raised:
    _run_do(
      tmp_path, {**older, s.EXAMPLES_KEY: [_examples(tmp_path, 2)]}, _pushed_model(tmp_path, "p2")
    )

  assert str(raised.value).startswith(
    "the newest span this run found is 2, older than span 3 that live version 1 was trained on"
  )
  assert [name for name in os.listdir(tmp_path / "serving" / "digits") if name.isdigit()] == ["1"]
  # The same older spans beside newer ones (--rolling-spans), or newer spans, push.
  both = [_examples(tmp_path, 2), _examples(tmp_path, 4)]
  pushed = _pushed_model(tmp_path, "p3")
  _run_do(tmp_path, {**older, s.EXAMPLES_KEY: both}, pushed)
  assert pushed.get_string_custom_property(properties.PUSHED_VERSION_PROPERTY) == "2"
