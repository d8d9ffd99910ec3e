"""pipeline.live_cache: the key LocalDagRunner caches LiveModel by, on a real ML Metadata store."""

import json

import pytest
from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.live_model import live_model_lib
from pipeline import live_cache


@pytest.fixture()
def store(tmp_path):
  config = metadata_store_pb2.ConnectionConfig()
  config.sqlite.filename_uri = str(tmp_path / "metadata.sqlite")
  config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
  return metadata_store.MetadataStore(config)


def _record_live_model_run(store, pipeline_name, run_id, key):
  """A LiveModel execution in a pipeline run, as TFX's launcher records it."""
  [run_type, node_type] = (
    store.put_context_type(metadata_store_pb2.ContextType(name=name))
    for name in ("pipeline_run", "node")
  )
  execution_type = store.put_execution_type(
    metadata_store_pb2.ExecutionType(name="components.live_model.component.LiveModel")
  )
  execution = metadata_store_pb2.Execution(type_id=execution_type)
  execution.custom_properties[live_cache.LIVE_KEY_PROPERTY].string_value = key
  [execution_id] = store.put_executions([execution])
  for type_name, type_id, name in (
    ("pipeline_run", run_type, run_id),
    ("node", node_type, f"{pipeline_name}.LiveModel"),
  ):
    context = store.get_context_by_type_and_name(type_name, name)
    if context is None:
      [context_id] = store.put_contexts([metadata_store_pb2.Context(type_id=type_id, name=name)])
    else:
      context_id = context.id
    store.put_attributions_and_associations(
      [], [metadata_store_pb2.Association(execution_id=execution_id, context_id=context_id)]
    )


def _publish(serving, version, lineage=None, rollback=None):
  folder = serving / "digits" / str(version)
  folder.mkdir(parents=True)
  manifest = {"version": version, "lineage": lineage or {}}
  if rollback:
    manifest["rollback"] = rollback
  (folder / "manifest.json").write_text(json.dumps(manifest))
  return live_model_lib.live_key(live_model_lib.live_version(str(serving), "digits"))


def test_nothing_live_is_none(store, tmp_path):
  assert live_cache.live_model_key(store, "digits", str(tmp_path / "serving"), "digits") == "none"


def test_a_version_pushed_by_a_run_of_this_pipeline_keeps_that_runs_key(store, tmp_path):
  serving = tmp_path / "serving"
  _record_live_model_run(store, "digits", "run-1", "none")
  own = _publish(serving, 1, {"pipeline_name": "digits", "pipeline_run_id": "run-1"})
  assert own.startswith("1:")
  assert live_cache.live_model_key(store, "digits", str(serving), "digits") == "none"


def test_other_pipelines_rollbacks_and_unknown_runs_get_the_live_versions_own_key(store, tmp_path):
  _record_live_model_run(store, "digits", "run-1", "none")
  lineage = {"pipeline_name": "digits", "pipeline_run_id": "run-1"}
  cases = {
    "other": ({"pipeline_name": "other", "pipeline_run_id": "run-1"}, None),
    "rollback": (lineage, {"from": 2, "to": 1}),
    "unknown-run": ({"pipeline_name": "digits", "pipeline_run_id": "run-9"}, None),
    "no-lineage": ({}, None),
  }
  for name, (lin, rollback) in cases.items():
    serving = tmp_path / name
    own = _publish(serving, 3, lin, rollback)
    assert live_cache.live_model_key(store, "digits", str(serving), "digits") == own, name


def test_the_key_changes_with_the_live_version_and_its_manifest(tmp_path):
  serving = tmp_path / "serving"
  first = _publish(serving, 1)
  second = _publish(serving, 2)
  assert first != second and second.startswith("2:")
  (serving / "digits" / "2" / "manifest.json").write_text(json.dumps({"version": 2, "x": 1}))
  live = live_model_lib.live_version(str(serving), "digits")
  assert live_model_lib.live_key(live) not in (first, second)


def test_an_empty_store_gives_the_live_versions_own_key(store, tmp_path):
  serving = tmp_path / "serving"
  own = _publish(serving, 1, {"pipeline_name": "digits", "pipeline_run_id": "run-1"})
  assert live_cache.live_model_key(store, "digits", str(serving), "digits") == own
