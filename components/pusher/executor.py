"""Executor of the atomic versioned Pusher: blessed model + blessed variants -> TF Serving tree."""

import json
import os
import tempfile
from typing import Any

from absl import logging
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import io_utils, path_utils

from components.pusher import pusher_lib
from components.pusher import spec as s

# Files the Optimizer may write under its uri with per-variant metrics.
_VARIANT_REPORT_FILES = ("report.json", "variants.json")


class Executor(base_executor.BaseExecutor):
  """Pushes a blessed model and its blessed variants as one new TF Serving version.

  Split into small overridable steps like stock TFX's pusher executor: `CheckBlessing`,
  `GetModelPath`, `GetVariants`, `_MarkPushed` and `_MarkNotPushed`.
  """

  def CheckBlessing(self, input_dict: dict[str, list[types.Artifact]]) -> bool:
    """Returns True if the Evaluator blessed the model (custom property ``blessed`` == 1).

    Args:
      input_dict: The executor's input dict.

    Returns:
      Whether the model may be pushed.
    """
    blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
    return blessing.get_int_custom_property(s.BLESSED_PROPERTY) == 1

  def NotBlessedReason(self, input_dict: dict[str, list[types.Artifact]]) -> str:
    """Explains, in one sentence, why `CheckBlessing` said no.

    Args:
      input_dict: The executor's input dict.

    Returns:
      The reason, including what the blessing artifact says about the comparison.
    """
    blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
    if not blessing.has_custom_property(s.BLESSED_PROPERTY):
      return (
        "model not blessed by Evaluator: the blessing has no 'blessed' property, which means "
        "the Evaluator ran without thresholds; add value or change thresholds to its EvalConfig"
      )
    details = [f"blessed={blessing.get_int_custom_property(s.BLESSED_PROPERTY)}"]
    if fileio.exists(os.path.join(blessing.uri, "NOT_BLESSED")):
      details.append(f"NOT_BLESSED marker in {blessing.uri}")
    for key in ("blessing_message", "current_model_id", "baseline_model_id", "baseline_model"):
      if blessing.has_custom_property(key):
        details.append(f"{key}={blessing.get_custom_property(key)}")
    return "model not blessed by Evaluator: " + "; ".join(details)

  def GetModelPath(self, input_dict: dict[str, list[types.Artifact]]) -> str:
    """Returns the SavedModel folder to serve (``<model.uri>/Format-Serving``).

    Args:
      input_dict: The executor's input dict.

    Returns:
      The SavedModel folder.
    """
    model = artifact_utils.get_single_instance(input_dict[s.MODEL_KEY])
    return path_utils.serving_model_path(model.uri, path_utils.is_old_model_artifact(model))

  def GetVariants(
    self, input_dict: dict[str, list[types.Artifact]]
  ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """Returns the Optimizer variants that passed their own gate, with their metrics.

    Args:
      input_dict: The executor's input dict.

    Returns:
      (variant name -> source path, variant name -> metrics). Empty without an Optimizer.

    Raises:
      RuntimeError: If a variant named in ``blessed_variants`` has no folder.
    """
    optimized = input_dict.get(s.OPTIMIZED_MODEL_KEY)
    if not optimized:
      return {}, {}
    artifact = artifact_utils.get_single_instance(optimized)
    names = _blessed_variant_names(artifact)
    report = _variant_report(artifact.uri)
    property_metrics = _variant_property_metrics(artifact, names)
    paths, metrics = {}, {}
    for name in names:
      path = os.path.join(artifact.uri, name)
      if not fileio.exists(path):
        raise RuntimeError(
          f"OptimizedModel {artifact.uri} lists blessed variant {name!r} but has no such folder"
        )
      paths[name] = path
      metrics[name] = {**report.get(name, {}), **property_metrics.get(name, {})}
    return paths, metrics

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    """Pushes the model if blessed; marks the PushedModel artifact either way.

    Args:
      input_dict: ``model``, ``model_blessing``, optional ``optimized_model`` and ``examples``.
      output_dict: ``pushed_model``.
      exec_properties: ``serving_dir``, ``model_name``, ``keep_versions``.
    """
    self._log_startup(input_dict, output_dict, exec_properties)
    pushed_model = artifact_utils.get_single_instance(output_dict[s.PUSHED_MODEL_KEY])
    if not self.CheckBlessing(input_dict):
      reason = self.NotBlessedReason(input_dict)
      logging.info("Not pushing: %s", reason)
      self._MarkNotPushed(pushed_model, reason)
      return
    variants, variant_metrics = self.GetVariants(input_dict)
    model_path = self.GetModelPath(input_dict)
    with tempfile.TemporaryDirectory(prefix="pusher-") as local_dir:
      result = pusher_lib.push_version(
        serving_dir=exec_properties[s.SERVING_DIR_KEY],
        model_name=exec_properties[s.MODEL_NAME_KEY],
        saved_model_dir=_localize(model_path, os.path.join(local_dir, "model")),
        variants={
          name: _localize(path, os.path.join(local_dir, "variants", name))
          for name, path in variants.items()
        },
        variant_metrics=variant_metrics,
        manifest_extra=self._manifest_extra(input_dict, output_dict),
        keep_versions=int(exec_properties[s.KEEP_VERSIONS_KEY]),
        source={"saved_model": model_path, "variants": variants},
      )
    if result.manifest is not None:
      fileio.makedirs(pushed_model.uri)
      with fileio.open(os.path.join(pushed_model.uri, pusher_lib.MANIFEST_FILE), "w") as f:
        f.write(json.dumps(result.manifest, indent=2, sort_keys=True))
    pushed_model.set_string_custom_property(s.CONTENT_SHA256_PROPERTY, result.content_sha256)
    if result.live_version is not None:
      pushed_model.set_int_custom_property(s.LIVE_VERSION_PROPERTY, result.live_version)
    if not result.pushed:
      logging.info("Not pushing: %s", result.reason)
      self._MarkNotPushed(pushed_model, result.reason)
      return
    logging.info("Pushed version %d to %s", result.version, result.path)
    self._MarkPushed(pushed_model, result.path, str(result.version))

  def _manifest_extra(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
  ) -> dict[str, Any]:
    model = artifact_utils.get_single_instance(input_dict[s.MODEL_KEY])
    blessing = artifact_utils.get_single_instance(input_dict[s.MODEL_BLESSING_KEY])
    examples = input_dict.get(s.EXAMPLES_KEY) or []
    optimized = input_dict.get(s.OPTIMIZED_MODEL_KEY) or []
    pushed_model = artifact_utils.get_single_instance(output_dict[s.PUSHED_MODEL_KEY])
    context = self._context
    # BaseExecutor.Context has no public execution id; the local (portable) launcher passes
    # the MLMD execution id as unique_id, Kubeflow V2 passes its own task id.
    unique_id = getattr(context, "_unique_id", None) if context else None
    execution_id = int(unique_id) if unique_id and str(unique_id).isdigit() else None
    pipeline_info = context.pipeline_info if context else None
    pipeline_node = context.pipeline_node if context else None
    return {
      "data_spans": _data_spans(model, examples),
      "blessing": {
        key: blessing.get_custom_property(key)
        for key in ("blessed", "current_model_id", "baseline_model_id", "blessing_message")
        if blessing.has_custom_property(key)
      },
      "lineage": {
        "execution_id": execution_id,
        "executor_unique_id": None if unique_id is None else str(unique_id),
        "pipeline_run_id": context.pipeline_run_id if context else None,
        "pipeline_name": pipeline_info.id if pipeline_info else None,
        "node_id": pipeline_node.node_info.id if pipeline_node else None,
        "artifacts": {
          s.MODEL_KEY: [_artifact_ref(model)],
          s.MODEL_BLESSING_KEY: [_artifact_ref(blessing)],
          s.OPTIMIZED_MODEL_KEY: [_artifact_ref(a) for a in optimized],
          s.EXAMPLES_KEY: [_artifact_ref(a) for a in examples],
          s.PUSHED_MODEL_KEY: [_artifact_ref(pushed_model)],
        },
      },
    }

  def _MarkPushed(self, pushed_model: types.Artifact, destination: str, version: str) -> None:
    pushed_model.set_int_custom_property(s.PUSHED_PROPERTY, 1)
    pushed_model.set_string_custom_property(s.PUSHED_DESTINATION_PROPERTY, destination)
    pushed_model.set_string_custom_property(s.PUSHED_VERSION_PROPERTY, version)

  def _MarkNotPushed(self, pushed_model: types.Artifact, reason: str) -> None:
    pushed_model.set_int_custom_property(s.PUSHED_PROPERTY, 0)
    pushed_model.set_string_custom_property(s.PUSHED_REASON_PROPERTY, reason)


def _localize(path: str, local_copy: str) -> str:
  """Returns `path` if it is local, else copies it (gs://, s3://, ...) to `local_copy`."""
  # pusher_lib works with plain POSIX calls (rename, flock, fsync); remote artifact stores
  # such as a gs:// pipeline root on Kubeflow are read through TFX's fileio first.
  if "://" not in path:
    return path
  if fileio.isdir(path):
    io_utils.copy_dir(path, local_copy)
    return local_copy
  os.makedirs(local_copy, exist_ok=True)
  target = os.path.join(local_copy, os.path.basename(path.rstrip("/")))
  io_utils.copy_file(path, target)
  return target


def _artifact_ref(artifact: types.Artifact) -> dict[str, Any]:
  # id is 0 for an artifact not (yet) registered in MLMD, e.g. outputs during Do.
  return {"id": artifact.id or None, "type": artifact.type_name, "uri": artifact.uri}


def _blessed_variant_names(artifact: types.Artifact) -> list[str]:
  if not artifact.has_custom_property(s.BLESSED_VARIANTS_PROPERTY):
    logging.info("OptimizedModel %s has no %s property", artifact.uri, s.BLESSED_VARIANTS_PROPERTY)
    return []
  raw = artifact.get_custom_property(s.BLESSED_VARIANTS_PROPERTY)
  names = json.loads(raw) if isinstance(raw, str) else raw
  if names is None:
    return []
  if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
    raise RuntimeError(f"{s.BLESSED_VARIANTS_PROPERTY} must be a JSON list of names, got {raw!r}")
  return names


def _variant_property_metrics(
  artifact: types.Artifact, blessed: list[str]
) -> dict[str, dict[str, Any]]:
  """Reads ``<variant>_<metric>`` custom properties, as the Optimizer writes them."""
  # Variant names can prefix each other (tflite, tflite_int8): attribute each property to the
  # longest known name. Names are known from the blessed list and from <name>_status.
  names = set(blessed)
  keys = list(artifact.mlmd_artifact.custom_properties)
  names.update(k[: -len("_status")] for k in keys if k.endswith("_status") and k != "_status")
  metrics: dict[str, dict[str, Any]] = {}
  for key in keys:
    owners = [n for n in names if key.startswith(n + "_")]
    if not owners:
      continue
    owner = max(owners, key=len)
    value = artifact.get_custom_property(key)
    if isinstance(value, int | float | str):
      metrics.setdefault(owner, {})[key[len(owner) + 1 :]] = value
  return metrics


def _variant_report(uri: str) -> dict[str, dict[str, Any]]:
  for name in _VARIANT_REPORT_FILES:
    path = os.path.join(uri, name)
    if not fileio.exists(path):
      continue
    with fileio.open(path, "r") as f:
      report = json.load(f)
    variants = report.get("variants", report) if isinstance(report, dict) else report
    if isinstance(variants, list):
      variants = {v["name"]: v for v in variants if isinstance(v, dict) and "name" in v}
    if isinstance(variants, dict):
      return {k: v for k, v in variants.items() if isinstance(v, dict)}
  return {}


def _data_spans(model: types.Artifact, examples: list[types.Artifact]) -> list[int] | None:
  if model.has_custom_property(s.DATA_SPANS_PROPERTY):
    raw = model.get_custom_property(s.DATA_SPANS_PROPERTY)
    spans = json.loads(raw) if isinstance(raw, str) else raw
    if isinstance(spans, int):
      return [spans]
    return [int(x) for x in spans] if spans is not None else None
  spans = []
  for example in examples:
    if example.has_property("span"):
      spans.append(int(example.span))
    elif example.has_custom_property("span"):
      spans.append(int(example.get_custom_property("span")))
  return sorted(set(spans)) if spans else None
