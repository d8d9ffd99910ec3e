"""The key LocalDagRunner caches LiveModel by: what the serving folder serves, read before the run.

LiveModel's output depends on the serving folder, not on its inputs, so TFX's cache cannot see
when it changes. The runner reads the folder first and passes a key (`live_key`, an execution
property) that changes exactly when the live version does: a rerun with nothing new then
reuses LiveModel, and with it the Evaluator and a warm-started Trainer.

One refinement keeps the first rerun after a push cached too: when the live version was pushed
by a run of this pipeline (its manifest's lineage names the run, and it is not a rollback), the
key is the one that run's LiveModel had. That run evaluated and trained this very model against
what was live before it; the Pusher, which always runs, then finds the candidate already live
and pushes nothing. New data changes LiveModel's input and makes it run regardless.
"""

from __future__ import annotations

from ml_metadata import errors, metadata_store

from components.live_model import live_model_lib

LIVE_MODEL_NODE = "LiveModel"
LIVE_KEY_PROPERTY = "live_key"


def live_model_key(
  store: metadata_store.MetadataStore, pipeline_name: str, serving_dir: str, model_name: str
) -> str:
  """The `live_key` for this run's LiveModel (see the module docstring)."""
  live = live_model_lib.live_version(serving_dir, model_name)
  key = live_model_lib.live_key(live)
  if live is None or "rollback" in live.manifest:
    return key
  lineage = live.manifest.get("lineage") or {}
  run_id = lineage.get("pipeline_run_id")
  if lineage.get("pipeline_name") != pipeline_name or not run_id:
    return key
  previous = _recorded_key(store, pipeline_name, run_id)
  return previous if previous is not None else key


def _recorded_key(
  store: metadata_store.MetadataStore, pipeline_name: str, run_id: str
) -> str | None:
  """The live_key LiveModel had in pipeline run `run_id`, if this store holds that run."""
  try:
    run = store.get_context_by_type_and_name("pipeline_run", run_id)
    node = store.get_context_by_type_and_name("node", f"{pipeline_name}.{LIVE_MODEL_NODE}")
  except errors.NotFoundError:  # context types not registered yet: an empty store
    return None
  if run is None or node is None:
    return None
  in_node = {e.id for e in store.get_executions_by_context(node.id)}
  for execution in store.get_executions_by_context(run.id):
    if execution.id in in_node and LIVE_KEY_PROPERTY in execution.custom_properties:
      return execution.custom_properties[LIVE_KEY_PROPERTY].string_value
  return None
