"""Executor of the atomic versioned Pusher: stock TFX's pusher steps plus versions and variants.

It subclasses TFX's own `tfx.components.pusher.executor.Executor`, so blessing checks, the
model path and the pushed/not-pushed marks are stock. What it adds: numeric versions published
atomically with a sha256 manifest, the Optimizer's blessed variants (each with its
signature.json) and the Transform graph they need, and retention; the serving folder itself is
`components.serving`'s.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import tempfile
from typing import Any

from tfx import types
from tfx.components.pusher import executor as stock_pusher
from tfx.types import artifact_utils

from components import model_contract, storage, tf_compat
from components.artifact_files import evaluation_metrics, variant_index
from components.nights import nights_lib
from components.pusher import spec as s
from components.serving import history, layout, live, manifest, paths, publish
from core import properties

_LOG = logging.getLogger(__name__)


class Executor(stock_pusher.Executor):
  """Pushes a blessed model and its blessed variants as one new TF Serving version."""

  def NotBlessedReason(self, input_dict: dict[str, list[types.Artifact]]) -> str:
    """Explains, in one sentence, why `CheckBlessing` said no."""
    blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
    if not blessing.has_custom_property(properties.BLESSED_PROPERTY):
      return (
        "model not blessed by Evaluator: the blessing has no 'blessed' property, which means "
        "the Evaluator ran without thresholds; add value or change thresholds to its EvalConfig"
      )
    blessed = blessing.get_int_custom_property(properties.BLESSED_PROPERTY)
    evaluation = input_dict.get(s.EVALUATION_KEY)
    validation = (
      evaluation_metrics.read_validation(artifact_utils.get_single_uri(evaluation))
      if evaluation and not blessed
      else None
    )
    if validation and validation["failures"]:
      # The Evaluator's verdict in words: the metric, its change or value, and the threshold.
      return "model not blessed by Evaluator: " + "; ".join(validation["failures"])
    details = [f"blessed={blessed}"]
    for key in ("blessing_message", "current_model_id", "baseline_model_id"):
      if blessing.has_custom_property(key):
        details.append(f"{key}={blessing.get_custom_property(key)}")
    return "model not blessed by Evaluator: " + "; ".join(details)

  def GetVariants(
    self, input_dict: dict[str, list[types.Artifact]]
  ) -> tuple[dict[str, Any], list[variant_index.BlessedVariant]]:
    """The Optimizer's index and its blessed variants; ({}, []) without an Optimizer."""
    optimized = input_dict.get(s.OPTIMIZED_MODEL_KEY)
    if not optimized:
      return {}, []
    return variant_index.read_index(artifact_utils.get_single_uri(optimized))

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Pushes the model if blessed; marks the PushedModel artifact either way.

    Args:
      input_dict: model, model_blessing, and optionally optimized_model, examples and
        transform_graph.
      output_dict: pushed_model.
      exec_properties: serving_dir, model_name, keep_versions, and optionally live_key.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    pushed_model = artifact_utils.get_single_instance(output_dict[s.PUSHED_MODEL_KEY])
    serving_dir = exec_properties[properties.SERVING_DIR_KEY]
    model_name = exec_properties[properties.MODEL_NAME_KEY]
    try:
      self._push(input_dict, exec_properties, pushed_model)
      nights_lib.record_step(
        serving_dir,
        model_name,
        nights_lib.PUSHER_STEP,
        _night_facts(input_dict, pushed_model, serving_dir, model_name),
        nights_lib.night_id(exec_properties),
      )
    except Exception as e:
      refused = _write_refused(e)
      if serving_dir not in refused:  # Not the serving folder's (an input's, or no refusal).
        raise
      folder = paths.model_dir(serving_dir, model_name)
      raise paths.PusherError(
        f"the model folder {folder} cannot be written ({refused}); the Pusher publishes each "
        "version there: run the pipeline as a user who can write that folder, or remount it "
        "read-write."
      ) from e

  def _push(
    self,
    input_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    pushed_model: types.Artifact,
  ) -> None:
    """Pushes, or marks why not (stock TFX's steps, then a version of our own)."""
    if not self.CheckBlessing(input_dict):
      self._not_pushed(pushed_model, self.NotBlessedReason(input_dict))
      return
    same = self._same_as_live(input_dict, exec_properties)
    if same:
      self._not_pushed(pushed_model, same)
      return
    index, blessed = self.GetVariants(input_dict)
    model_path = self.GetModelPath(input_dict)
    transform = input_dict.get(s.TRANSFORM_GRAPH_KEY)
    needs_transform = [
      v.name for v in blessed if not v.signature.get("preprocessing_included", True)
    ]
    with tempfile.TemporaryDirectory(prefix="pusher-") as local_dir:
      trees = {}
      if transform and needs_transform:
        trees[layout.TRANSFORM_GRAPH_SUBDIR] = storage.localize(
          artifact_utils.get_single_uri(transform), os.path.join(local_dir, "transform_graph")
        )
      training_data = _training_data_tree(
        input_dict, os.path.join(local_dir, layout.TRAINING_DATA_DIR)
      )
      if training_data:
        trees[layout.TRAINING_DATA_DIR] = training_data
      result = publish.push_version(
        serving_dir=exec_properties[properties.SERVING_DIR_KEY],
        model_name=exec_properties[properties.MODEL_NAME_KEY],
        saved_model_dir=storage.localize(model_path, os.path.join(local_dir, "model")),
        variants={
          v.name: storage.localize(v.folder, os.path.join(local_dir, "variants", v.name))
          for v in blessed
        },
        variant_metrics={v.name: {**v.metrics, "signature": v.signature} for v in blessed},
        extra_trees=trees,
        manifest_extra=self._manifest_extra(
          input_dict,
          index,
          needs_transform if layout.TRANSFORM_GRAPH_SUBDIR in trees else [],
          exec_properties.get(properties.LIVE_KEY_KEY),
        ),
        keep_versions=int(exec_properties[s.KEEP_VERSIONS_KEY]),
        source={"saved_model": model_path, "variants": {v.name: v.folder for v in blessed}},
        evaluated_while_live=_evaluated_while_live(input_dict),
      )
    if result.manifest is not None:
      manifest.write_copy(pushed_model.uri, result.manifest)
    pushed_model.set_string_custom_property(
      properties.CONTENT_SHA256_PROPERTY, result.content_sha256
    )
    if result.live_version is not None:
      pushed_model.set_int_custom_property(properties.LIVE_VERSION_PROPERTY, result.live_version)
    if not result.pushed:
      self._not_pushed(pushed_model, result.reason)
      return
    _LOG.info("Pushed version %d to %s", result.version, result.path)
    self._MarkPushed(
      pushed_model, pushed_destination=result.path, pushed_version=str(result.version)
    )

  def _same_as_live(
    self, input_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]
  ) -> str:
    """Why the live version already is this model's training (same data, module, settings), or
    a rollback moved away from it; raises for a training of older spans than the live one's."""
    model = artifact_utils.get_single_instance(input_dict[s.MODEL_KEY])
    fingerprint = _prop(model, properties.TRAINING_FINGERPRINT_PROPERTY)
    serving_dir = exec_properties[properties.SERVING_DIR_KEY]
    model_name = exec_properties[properties.MODEL_NAME_KEY]
    current = live.live_version(serving_dir, model_name)
    if current is None:
      return ""
    if fingerprint and current.training_fingerprint == fingerprint:
      return (
        f"nothing new to push: live version {current.version} was trained on the same data "
        "with the same module and settings"
      )
    left = history.rolled_back_fingerprints(serving_dir, model_name).get(fingerprint)
    if fingerprint and left is not None:
      return (
        f"a rollback moved away from this training (version {left}); new data or a changed "
        "module or setting will push again"
      )
    _refuse_older_spans(_data_spans(input_dict.get(s.EXAMPLES_KEY) or []), current)
    return ""

  def _not_pushed(self, pushed_model: types.Artifact, reason: str) -> None:
    _LOG.info("Not pushing: %s", reason)
    self._MarkNotPushed(pushed_model)
    pushed_model.set_string_custom_property(properties.PUSHED_REASON_PROPERTY, reason)

  def _manifest_extra(
    self,
    input_dict: dict[str, list[types.Artifact]],
    index: dict[str, Any],
    transform_needed_by: list[str],
    live_key: str | None,
  ) -> dict[str, Any]:
    model = artifact_utils.get_single_instance(input_dict[s.MODEL_KEY])
    blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
    examples = input_dict.get(s.EXAMPLES_KEY) or []
    context = tf_compat.executor_context(self)
    pipeline_node = context.pipeline_node if context else None
    extra: dict[str, Any] = {
      manifest.DATA_SPANS_FIELD: _data_spans(examples),
      manifest.EXAMPLES_FIELD: [a.uri for a in examples],
      manifest.DATA_FINGERPRINTS_FIELD: json.loads(
        _prop(model, properties.DATA_FINGERPRINTS_PROPERTY) or "[]"
      ),
      manifest.MODEL_FIELD: {
        "uri": model.uri,
        "task": _prop(model, properties.TASK_PROPERTY),
        "label_classes": json.loads(_prop(model, properties.LABEL_CLASSES_PROPERTY) or "null"),
        manifest.TRAINING_FINGERPRINT_FIELD: _prop(model, properties.TRAINING_FINGERPRINT_PROPERTY),
      },
      manifest.BLESSING_FIELD: {
        key: blessing.get_custom_property(key)
        for key in (properties.BLESSED_PROPERTY, "current_model_id", "baseline_model_id")
        if blessing.has_custom_property(key)
      },
      manifest.LINEAGE_FIELD: {
        "pipeline_run_id": context.pipeline_run_id if context else None,
        "pipeline_name": context.pipeline_info.id if context and context.pipeline_info else None,
        "node_id": pipeline_node.node_info.id if pipeline_node else None,
        # ML Metadata ids: the model, its blessing and the Examples it was trained on.
        "artifact_ids": {
          "model": model.id,
          "model_blessing": blessing.id,
          "examples": [a.id for a in examples],
        },
      },
      manifest.OPTIMIZER_FIELD: {"task": index.get("task"), "baseline": index.get("baseline")}
      if index
      else None,
    }
    if live_key:
      extra[manifest.LIVE_KEY_FIELD] = live_key
    extra[manifest.TRAINING_DATA_FIELD] = _training_data_facts(examples)
    evaluation = input_dict.get(s.EVALUATION_KEY)
    if evaluation:
      extra[manifest.EVALUATION_FIELD] = evaluation_metrics.read_overall_metrics(
        artifact_utils.get_single_uri(evaluation)
      )
    if transform_needed_by:
      extra[manifest.TRANSFORM_GRAPH_FIELD] = {
        "path": layout.TRANSFORM_GRAPH_SUBDIR,
        "needed_by": transform_needed_by,
      }
    return extra


def _prop(artifact: types.Artifact, key: str):
  return artifact.get_custom_property(key) if artifact.has_custom_property(key) else None


def _write_refused(error: BaseException) -> str:
  """Why the file system refused a write ('' for any other error): a read-only folder or one
  whose permissions keep this user out, as TensorFlow's file system or Python's raise it."""
  import tensorflow as tf

  if isinstance(error, tf.errors.PermissionDeniedError):
    return " ".join(str(error.message).split()) or "permission denied"
  if isinstance(error, OSError) and error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
    return f"{error.strerror} at {error.filename}" if error.filename else str(error.strerror)
  return ""


def _evaluated_while_live(input_dict: dict[str, list[types.Artifact]]) -> int | None:
  """The version the Evaluator's LiveModel saw live (0: none), or None where not recorded."""
  blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
  if not blessing.has_custom_property(properties.EVALUATED_WHILE_LIVE_PROPERTY):
    return None
  return int(blessing.get_int_custom_property(properties.EVALUATED_WHILE_LIVE_PROPERTY))


def _night_facts(
  input_dict: dict[str, list[types.Artifact]],
  pushed_model: types.Artifact,
  serving_dir: str,
  model_name: str,
) -> dict[str, Any]:
  """What the night's record takes from the Pusher: the evaluation, the blessing, the push,
  and the version live once it is done (pushed or not)."""
  blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
  evaluation = input_dict.get(s.EVALUATION_KEY)
  examples = input_dict.get(s.EXAMPLES_KEY) or []
  version = _prop(pushed_model, properties.PUSHED_VERSION_PROPERTY)
  pushed = bool(_prop(pushed_model, properties.PUSHED_PROPERTY))
  live_after = _live_after(pushed_model, serving_dir, model_name)
  metrics = (
    evaluation_metrics.read_overall_metrics(artifact_utils.get_single_uri(evaluation))
    if evaluation
    else None
  )
  while_live = _evaluated_while_live(input_dict)
  if metrics and not pushed and while_live is not None and (while_live or None) != live_after:
    # A cached evaluation against a version no longer live (a night with nothing new after a
    # push): its comparison is not with what is live now.
    metrics = {**metrics, "baseline": {}, "diff_vs_baseline": {}}
  return {
    "pushed": pushed,
    "version": int(version) if version else None,
    "reason": _prop(pushed_model, properties.PUSHED_REASON_PROPERTY) or "",
    "live_version": live_after,
    "blessed": (
      bool(_prop(blessing, properties.BLESSED_PROPERTY))
      if blessing.has_custom_property(properties.BLESSED_PROPERTY)
      else None
    ),
    "metrics": metrics,
    "spans": _data_spans(examples),
    "rows": _training_data_facts(examples)[manifest.TRAINING_ROWS_FIELD],
  }


def _live_after(pushed_model: types.Artifact, serving_dir: str, model_name: str) -> int | None:
  """The version live after the Pusher ran: the one it published or kept, else the serving
  folder's (a model not blessed, or the same training as the live one, publishes nothing)."""
  published = _prop(pushed_model, properties.LIVE_VERSION_PROPERTY)
  if published is not None:
    return int(published)
  current = live.live_version(serving_dir, model_name)
  return current.version if current is not None else None


def _training_data_tree(input_dict: dict[str, list[types.Artifact]], local_dir: str) -> str:
  """A local folder holding the training schema and statistics as a version ships them, or ''
  when the Pusher was not given both."""
  statistics, schema = input_dict.get(s.STATISTICS_KEY), input_dict.get(s.SCHEMA_KEY)
  if not statistics or not schema:
    return ""
  from tfx.utils import io_utils

  schema_file = model_contract.schema_file(artifact_utils.get_single_uri(schema))
  os.makedirs(local_dir, exist_ok=True)
  io_utils.copy_file(schema_file, os.path.join(local_dir, layout.TRAINING_SCHEMA_FILE))
  io_utils.copy_dir(
    artifact_utils.get_single_uri(statistics),
    os.path.join(local_dir, layout.TRAINING_STATISTICS_DIR),
  )
  return local_dir


def _training_data_facts(examples: list[types.Artifact]) -> dict[str, Any]:
  """The manifest's `training_data`: rows per split, the label's counts and each span's
  digest, from the Examples."""
  rows: dict[str, int] = {}
  digests: dict[str, Any] = {}
  facts: dict[str, Any] = {
    manifest.TRAINING_ROWS_FIELD: rows,
    manifest.TRAINING_LABEL_STATS_FIELD: None,
    manifest.TRAINING_SPAN_DIGESTS_FIELD: digests,
  }
  for example in examples:
    if example.has_custom_property(properties.EXAMPLES_SPAN_DIGESTS):
      digests.update(
        json.loads(example.get_string_custom_property(properties.EXAMPLES_SPAN_DIGESTS))
      )
    for key, value in example.mlmd_artifact.custom_properties.items():
      if key.startswith(properties.EXAMPLES_ROWS_PREFIX) and value.HasField("int_value"):
        split = key[len(properties.EXAMPLES_ROWS_PREFIX) :]
        rows[split] = rows.get(split, 0) + int(value.int_value)
    if len(examples) == 1 and example.has_custom_property(properties.EXAMPLES_LABEL_STATS):
      facts[manifest.TRAINING_LABEL_STATS_FIELD] = json.loads(
        example.get_string_custom_property(properties.EXAMPLES_LABEL_STATS)
      )
  return facts


def _refuse_older_spans(spans: list[int] | None, current: live.LiveVersion) -> None:
  """Raises where the newest span trained on is older than the live version's newest.

  That happens when the newest span's files went missing (a folder deleted or not delivered):
  the ExampleGen finds the one before, and pushing its model would serve older data, a
  rollback nobody asked for.
  """
  live_spans = manifest.data_spans(current.manifest)
  if spans and live_spans and max(spans) < max(live_spans):
    raise paths.PusherError(
      f"the newest span this run found is {max(spans)}, older than span {max(live_spans)} that "
      f"live version {current.version} was trained on, so it is not pushed: the files of span "
      f"{max(live_spans)} are missing from the data; restore them, or, to serve older data on "
      "purpose, roll back with pipeline/rollback.py."
    )


def _data_spans(examples: list[types.Artifact]) -> list[int] | None:
  """The spans the model was trained on, from the Examples artifacts."""
  spans: set[int] = set()
  for example in examples:
    if example.has_custom_property(properties.EXAMPLES_SPANS):
      raw = example.get_custom_property(properties.EXAMPLES_SPANS)
      spans.update(int(x) for x in (json.loads(raw) if isinstance(raw, str) else raw) or [])
    elif example.has_property("span"):
      spans.add(int(example.span))
  return sorted(spans) or None
