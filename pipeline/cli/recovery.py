"""Cleans up after runs that were killed: executions left RUNNING and their half-written outputs.

A LocalDagRunner run that dies (kill -9, a power cut) leaves its current execution RUNNING in
ML Metadata forever and its output folders (`<pipeline_root>/<node>/<output>/<execution id>`)
half written. The next run, holding the output folder's lock (so no other run is alive), marks
those executions FAILED and removes their folders. Training progress is not lost: the
DistributedTrainer keeps its BackupAndRestore checkpoint outside the execution's folders (see
distributed_trainer.executor), so a rerun with the same inputs resumes from it.
"""

from __future__ import annotations

import logging
import os
import shutil

from ml_metadata import metadata_store
from ml_metadata.proto import metadata_store_pb2

_LOG = logging.getLogger(__name__)
_SYSTEM_DIR = ".system"
_EXECUTOR_DIR = "executor_execution"


def fail_abandoned_executions(
  store: metadata_store.MetadataStore, pipeline_name: str, pipeline_root: str | None = None
) -> str:
  """Marks executions of `pipeline_name` left RUNNING as FAILED and removes their outputs.

  Only call it while holding the run lock: then no live run owns a RUNNING execution.

  Args:
    store: the pipeline's ML Metadata store.
    pipeline_name: the pipeline whose node contexts are searched.
    pipeline_root: where node folders live; when given, the abandoned executions' output and
      executor folders are removed.

  Returns:
    One sentence saying what was cleaned up, or '' when nothing was.
  """
  cleaned: list[str] = []
  removed: list[str] = []
  for context in store.get_contexts_by_type("node"):
    if not context.name.startswith(pipeline_name + "."):
      continue
    node = context.name[len(pipeline_name) + 1 :]
    for execution in store.get_executions_by_context(context.id):
      if execution.last_known_state != metadata_store_pb2.Execution.RUNNING:
        continue
      execution.last_known_state = metadata_store_pb2.Execution.FAILED
      execution.custom_properties[
        "__abandoned__"
      ].string_value = "left RUNNING by a run that died; marked FAILED by the next run"
      store.put_executions([execution])
      cleaned.append(f"{node} (execution {execution.id})")
      if pipeline_root:
        removed.extend(_remove_outputs(os.path.join(pipeline_root, node), execution.id))
  if not cleaned:
    return ""
  _LOG.warning("Marked abandoned executions FAILED: %s; removed %s", cleaned, removed)
  text = f"marked {', '.join(cleaned)} failed in ML Metadata"
  if removed:
    text += f" and removed {len(removed)} half-written folder(s)"
  return text


def _remove_outputs(node_dir: str, execution_id: int) -> list[str]:
  """Removes `<node_dir>/<output key>/<id>` and the executor's scratch folder of one run."""
  removed = []
  if not os.path.isdir(node_dir):
    return removed
  candidates = [os.path.join(node_dir, _SYSTEM_DIR, _EXECUTOR_DIR, str(execution_id))]
  for key in os.listdir(node_dir):
    if key != _SYSTEM_DIR:
      candidates.append(os.path.join(node_dir, key, str(execution_id)))
  for path in candidates:
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
      removed.append(path)
  return removed
