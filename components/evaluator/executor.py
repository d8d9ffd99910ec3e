"""The Evaluator's executor: TFX's stock Evaluator, told to compare against no baseline when
nothing is live yet, and to take its automatic floor from the eval split."""

from __future__ import annotations

import json
import logging
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import types
from tfx.components.evaluator import executor as stock_evaluator
from tfx.dsl.io import fileio
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import io_utils, path_utils, proto_utils

from components import memory, model_contract, tf_compat
from components.evaluator import evaluation_lib, floor_lib
from components.evaluator.spec import AUTO_FLOOR_KEY, BASELINE_SCHEMA_KEY, QUANTITY_EVAL_CONFIG_KEY
from components.model_scoring import conform_lib, outputs_lib
from core import errors, floors, properties, tasks


class Executor(stock_evaluator.Executor):
  """Drops a baseline that LiveModel marked unavailable, sets the automatic floor from the eval
  split, then runs the stock Evaluator.

  On the first run nothing is live: the Evaluator then applies the value thresholds alone, as
  stock TFX does when its baseline channel is empty.
  """

  def Do(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
  ) -> None:
    # Only a count label read both ways asks which reading the candidate kept.
    quantity = exec_properties.get(QUANTITY_EVAL_CONFIG_KEY)
    tonight = _candidate_task(input_dict) if quantity else ""
    exec_properties = _reading_followed(tonight, exec_properties)
    key = standard_component_specs.BASELINE_MODEL_KEY
    while_live = properties.evaluated_while_live(input_dict.get(key))
    baselines = [a for a in input_dict.get(key) or [] if properties.live_available(a)]
    reading = _other_reading(tonight, baselines, exec_properties)
    if reading:
      baselines = []
    input_dict = {**input_dict, key: baselines}
    if not baselines:
      input_dict.pop(key)
    # The schemas say whether the live version reads tonight's examples as they are; the stock
    # executor is not given them (it would decode the examples by the schema).
    conform = _baseline_conformer(
      input_dict.pop(standard_component_specs.SCHEMA_KEY, None),
      input_dict.pop(BASELINE_SCHEMA_KEY, None),
      baselines,
    )
    _check_label(input_dict, exec_properties)
    floor = _eval_split_floor(input_dict, exec_properties)
    if floor is not None and _count_as_classes(tonight, exec_properties):
      floor = floors.count_classes_floor()
    if floor is not None:
      task = json.loads(exec_properties[AUTO_FLOOR_KEY])["task"]
      config_key = standard_component_specs.EVAL_CONFIG_KEY
      exec_properties = {
        **exec_properties,
        config_key: floor_lib.with_floor(exec_properties[config_key], task, floor.value),
      }
      logging.info("Evaluator floor: %s", floor.reason)
    skipped = self._evaluate(input_dict, output_dict, exec_properties, conform) or reading
    blessing = artifact_utils.get_single_instance(
      output_dict[standard_component_specs.BLESSING_KEY]
    )
    if skipped:
      blessing.set_string_custom_property(properties.BASELINE_SKIPPED_PROPERTY, skipped)
    if while_live is not None:
      blessing.set_int_custom_property(properties.EVALUATED_WHILE_LIVE_PROPERTY, while_live)
    if floor is not None:
      blessing.set_float_custom_property(properties.FLOOR_PROPERTY, floor.value)
      blessing.set_string_custom_property(properties.FLOOR_REASON_PROPERTY, floor.reason)

  def _evaluate(self, input_dict, output_dict, exec_properties, conform) -> str:
    """Evaluates in process, else with the stock executor; returns why the baseline was left
    out, or ''."""
    key = standard_component_specs.BASELINE_MODEL_KEY
    without_baseline = {k: v for k, v in input_dict.items() if k != key}
    try:
      if self._in_process(input_dict, output_dict, exec_properties, conform):
        return ""
    except _BaselineUnreadable as e:
      skipped = (
        f"the live version cannot read tonight's examples ({e}; it was pushed without the schema "
        "it was trained on), so it was not scored: the blessing rests on the value thresholds"
      )
      logging.warning("Evaluator: %s.", skipped)
      if not self._in_process(without_baseline, output_dict, exec_properties):
        super().Do(without_baseline, output_dict, exec_properties)
      return skipped
    if conform is None:
      super().Do(input_dict, output_dict, exec_properties)
      return ""
    # TFMA feeds both models the same examples; the live version cannot parse tonight's.
    skipped = (
      f"columns {sorted(conform.columns)} changed type since the live version was trained and "
      "TFMA's Beam pipeline feeds both models the same examples, so the live version was not "
      "scored: the blessing rests on the value thresholds alone"
    )
    logging.warning("Evaluator: %s.", skipped)
    super().Do(without_baseline, output_dict, exec_properties)
    return skipped

  def _in_process(
    self,
    input_dict: dict[str, list[types.Artifact]],
    output_dict: dict[str, list[types.Artifact]],
    exec_properties: dict[str, Any],
    conform=None,
  ) -> bool:
    """Evaluates in process where evaluation_lib computes what TFMA would; False otherwise.

    `conform` gives the baseline's batches the column types it was trained on.

    Writes what the stock executor writes: TFMA's files in the evaluation folder, and the
    blessing (BLESSED or NOT_BLESSED, and its properties) when thresholds are configured.
    """
    raw = exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY)
    if not raw:
      return False
    has_baseline = bool(input_dict.get(standard_component_specs.BASELINE_MODEL_KEY))
    eval_config = proto_utils.json_to_proto(raw, tfma.EvalConfig())
    eval_config = tfma.utils.update_eval_config_with_defaults(
      eval_config, has_baseline=has_baseline, rubber_stamp=True
    )
    tfma.utils.verify_eval_config(eval_config)
    decision = evaluation_lib.plan(eval_config, tf_compat.beam_pipeline_args(self), exec_properties)
    if not decision.in_process:
      logging.info("Evaluator on TFMA's Beam pipeline: %s.", decision.reason)
      return False
    self._log_startup(input_dict, output_dict, exec_properties)
    read = _read_models(eval_config, input_dict, conform)
    if read is None:
      return False
    models, outputs = read
    try:
      metrics = evaluation_lib.compute_metrics(eval_config, outputs)
    except ValueError as e:  # A prediction shape these formulas do not cover.
      logging.info("Evaluator on TFMA's Beam pipeline: %s.", e)
      return False
    memory.release()
    output_uri = artifact_utils.get_single_uri(output_dict[standard_component_specs.EVALUATION_KEY])
    check = _quantity_check(input_dict, exec_properties, eval_config, outputs)
    failures = []
    if check is not None:
      logging.info("Evaluator: %s.", check.reason)
      artifact_utils.get_single_instance(
        output_dict[standard_component_specs.BLESSING_KEY]
      ).set_string_custom_property(properties.QUANTITY_CHECK_PROPERTY, check.reason)
      if not check.passed:
        failures.append((floors.EXPECTED_VALUE_RMSE, check.rmse, check.bound))
    candidate = outputs[_candidate(eval_config)]
    unanswered = floor_lib.non_finite_answers(candidate.predictions, candidate.labels)
    if unanswered:
      logging.warning(
        "Evaluator: the model answered NaN or infinity for %d eval rows; not blessed.", unanswered
      )
      failures.append((floors.NON_FINITE_ANSWERS, float(unanswered), 0.0))
    result = evaluation_lib.write_evaluation(
      eval_config, metrics, output_uri, models, "<user provided PCollection>", failures
    )
    _keep_predictions(output_dict, eval_config, outputs)
    logging.info(
      "Evaluation in process: %d rows, %s.",
      len(next(iter(outputs.values())).labels),
      decision.reason,
    )
    thresholds = tfma.metrics.metric_thresholds_from_metrics_specs(
      eval_config.metrics_specs, eval_config=eval_config
    )
    if thresholds:
      _write_blessing(input_dict, output_dict, exec_properties, result.validation_ok)
    return True


def _read_models(eval_config, input_dict, conform):
  """Each model's outputs on the eval split, or None where this path cannot read one (TFMA can).

  Returns:
    (spec name -> SavedModel path, spec name -> outputs_lib.ModelOutputs), or None.

  Raises:
    _BaselineUnreadable: when the live version cannot read tonight's examples.
  """
  files = _eval_files(input_dict)
  models = {}
  outputs = {}
  for spec in eval_config.model_specs:
    key = (
      standard_component_specs.BASELINE_MODEL_KEY
      if spec.is_baseline
      else standard_component_specs.MODEL_KEY
    )
    artifact = artifact_utils.get_single_instance(input_dict[key])
    path = path_utils.serving_model_path(artifact.uri, path_utils.is_old_model_artifact(artifact))
    models[spec.name] = path
    try:
      outputs[spec.name] = outputs_lib.model_outputs(
        path, spec, files, conform if spec.is_baseline else None
      )
    except Exception as e:  # A model this path cannot read (a module's own signatures): TFMA can.
      if spec.is_baseline and _type_mismatch(e):
        raise _BaselineUnreadable(errors.first_line(e)[:200]) from e
      logging.warning(
        "Evaluator on TFMA's Beam pipeline: the model was not read here.", exc_info=True
      )
      return None
  return models, outputs


def _eval_files(input_dict) -> list[str]:
  files = []
  for uri in artifact_utils.get_split_uris(
    input_dict[standard_component_specs.EXAMPLES_KEY], properties.EVAL_SPLIT
  ):
    files += sorted(fileio.glob(io_utils.all_files_pattern(uri)))
  return files


def _check_label(input_dict, exec_properties) -> None:
  """Stops with the user's fix where the candidate's label cannot be scored (a text label that
  its Transform passes on under another name), before TFMA fails on it deep in Beam."""
  raw = exec_properties.get(standard_component_specs.EVAL_CONFIG_KEY)
  models = input_dict.get(standard_component_specs.MODEL_KEY) or []
  if not raw or len(models) != 1:
    return
  eval_config = proto_utils.json_to_proto(raw, tfma.EvalConfig())
  path = path_utils.serving_model_path(models[0].uri, path_utils.is_old_model_artifact(models[0]))
  for spec in eval_config.model_specs:
    if not spec.is_baseline:
      outputs_lib.check_label(path, spec, _eval_files(input_dict))


def _model_task(artifact) -> str:
  """A Model's task: its property (the trainer's), else its contract's, else ''."""
  if artifact.has_custom_property(properties.TASK_PROPERTY):
    return artifact.get_string_custom_property(properties.TASK_PROPERTY)
  for folder in (model_contract.serving_dir(artifact.uri), artifact.uri):
    try:
      contract = model_contract.read_contract(folder)
    except Exception:
      contract = None
    if contract is not None:
      return contract.task
  return ""


def _candidate_task(input_dict) -> str:
  """The candidate Model's task (`_model_task`), or '' without one candidate."""
  models = input_dict.get(standard_component_specs.MODEL_KEY) or []
  return _model_task(models[0]) if len(models) == 1 else ""


def _reading_followed(tonight: str, exec_properties) -> dict[str, Any]:
  """The properties for the reading the trainer kept: for a count label read both ways whose
  candidate is a quantity (`tonight`, its Model's task, is regression), the quantity's
  EvalConfig and a regression's automatic floor."""
  quantity = exec_properties.get(QUANTITY_EVAL_CONFIG_KEY)
  if not quantity or tonight != tasks.REGRESSION:
    return exec_properties
  logging.info("Evaluator: the trainer kept the count label's quantity reading.")
  out = {**exec_properties, standard_component_specs.EVAL_CONFIG_KEY: quantity}
  if exec_properties.get(AUTO_FLOOR_KEY):
    out[AUTO_FLOOR_KEY] = floor_lib.auto_floor_spec(tasks.REGRESSION)
  return out


def _count_as_classes(tonight: str, exec_properties) -> bool:
  """Whether the candidate (of task `tonight`) is a count read both ways that kept its
  classes."""
  return bool(exec_properties.get(QUANTITY_EVAL_CONFIG_KEY)) and tonight == tasks.MULTICLASS


def _other_reading(tonight: str, baselines, exec_properties) -> str:
  """Why the live version is not compared, when it reads a count label the other way than the
  candidate (of task `tonight`): their metrics do not compare. '' otherwise."""
  if not exec_properties.get(QUANTITY_EVAL_CONFIG_KEY) or len(baselines) != 1 or not tonight:
    return ""
  live = _model_task(baselines[0])
  if not live or tonight == live:
    return ""
  skipped = (
    f"the live version reads the count label as {live} and tonight's model as {tonight}, "
    "whose metrics do not compare, so the live version was not scored: the blessing rests on "
    "the value thresholds"
  )
  logging.warning("Evaluator: %s.", skipped)
  return skipped


def _candidate(eval_config) -> str:
  """The candidate model's spec name (the one spec that is not the baseline)."""
  return next(s.name for s in eval_config.model_specs if not s.is_baseline)


def _quantity_check(input_dict, exec_properties, eval_config, outputs):
  """Under the automatic floor, a multiclass model of number classes against the train mean
  (`floor_lib.quantity_check`), or None where it does not apply."""
  raw = exec_properties.get(AUTO_FLOOR_KEY)
  if not raw or json.loads(raw)["task"] != tasks.MULTICLASS:
    return None
  model = input_dict[standard_component_specs.MODEL_KEY][0]
  examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
  if not model.has_custom_property(properties.LABEL_CLASSES_PROPERTY) or len(examples) != 1:
    return None
  if not examples[0].has_custom_property(properties.EXAMPLES_LABEL_STATS):
    return None
  classes = floor_lib.number_classes(
    json.loads(model.get_string_custom_property(properties.LABEL_CLASSES_PROPERTY))
  )
  if classes is None:
    return None
  stats = json.loads(examples[0].get_string_custom_property(properties.EXAMPLES_LABEL_STATS))
  candidate = outputs[_candidate(eval_config)]
  spec = next(s for s in eval_config.model_specs if s.name == _candidate(eval_config))
  truth = outputs_lib.raw_labels(_eval_files(input_dict), spec.label_key)
  return floor_lib.quantity_check(candidate.predictions, truth, classes, stats)


def _keep_predictions(output_dict, eval_config, outputs) -> None:
  """Records how the candidate's predictions fall on the ModelEvaluation, for the report page."""
  candidate = _candidate(eval_config)
  summary = evaluation_lib.prediction_summary(
    outputs[candidate], evaluation_lib.task_of(eval_config)
  )
  evaluation = artifact_utils.get_single_instance(
    output_dict[standard_component_specs.EVALUATION_KEY]
  )
  evaluation.set_string_custom_property(properties.PREDICTIONS_PROPERTY, json.dumps(summary))


def _write_blessing(input_dict, output_dict, exec_properties, blessed: bool) -> None:
  """The blessing as the stock executor writes it: file, URIs and ids, the verdict."""
  import os

  from tfx.components.evaluator import constants

  blessing = artifact_utils.get_single_instance(output_dict[standard_component_specs.BLESSING_KEY])
  model = input_dict[standard_component_specs.MODEL_KEY][0]
  blessing.set_string_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_URI_KEY, model.uri)
  blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_CURRENT_MODEL_ID_KEY, model.id)
  if input_dict.get(standard_component_specs.BASELINE_MODEL_KEY):
    baseline = input_dict[standard_component_specs.BASELINE_MODEL_KEY][0]
    blessing.set_string_custom_property(
      constants.ARTIFACT_PROPERTY_BASELINE_MODEL_URI_KEY, baseline.uri
    )
    blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BASELINE_MODEL_ID_KEY, baseline.id)
  if "current_component_id" in exec_properties:
    blessing.set_string_custom_property("component_id", exec_properties["current_component_id"])
  name = constants.BLESSED_FILE_NAME if blessed else constants.NOT_BLESSED_FILE_NAME
  io_utils.write_string_file(os.path.join(blessing.uri, name), "")
  value = constants.BLESSED_VALUE if blessed else constants.NOT_BLESSED_VALUE
  blessing.set_int_custom_property(constants.ARTIFACT_PROPERTY_BLESSED_KEY, value)
  logging.info("Blessing result %s written to %s.", blessed, blessing.uri)


class _BaselineUnreadable(Exception):
  """The live version's serving signature rejects tonight's examples: a column changed type,
  and the version carries no schema to convert them by (pushed before the data gate)."""


def _type_mismatch(error: BaseException) -> bool:
  import tensorflow as tf

  return isinstance(error, tf.errors.InvalidArgumentError) and "type" in str(error).lower()


def _schema_types(artifacts) -> dict[str, str] | None:
  artifacts = [a for a in artifacts or [] if properties.live_available(a)]
  if len(artifacts) != 1:
    return None
  uri = artifacts[0].uri
  return model_contract.schema_types(model_contract.read_schema(model_contract.schema_file(uri)))


def _baseline_conformer(schema, baseline_schema, baselines):
  """What gives the baseline's batches its own column types; None when they need nothing."""
  if not baselines:
    return None
  tonight, trained = _schema_types(schema), _schema_types(baseline_schema)
  if tonight is None or trained is None:
    return None
  return conform_lib.conformer(tonight, trained)


def _eval_split_floor(input_dict, exec_properties) -> floors.Floor | None:
  raw = exec_properties.get(AUTO_FLOOR_KEY)
  if not raw:
    return None
  examples = input_dict.get(standard_component_specs.EXAMPLES_KEY) or []
  if len(examples) != 1 or not examples[0].has_custom_property(properties.EXAMPLES_LABEL_STATS):
    # Examples from another ExampleGen: the floor decided before the run stays.
    return None
  stats = json.loads(examples[0].get_string_custom_property(properties.EXAMPLES_LABEL_STATS))
  return floors.from_label_stats(stats, json.loads(raw)["task"])
