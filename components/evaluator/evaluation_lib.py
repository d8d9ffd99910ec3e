"""The Evaluator's metrics in one process: batched predictions, TFMA's formulas, TFMA's files.

Stock TFMA computes a handful of metrics through a Beam pipeline that handles every example as
a Python object: on 40,000 eval rows it spent 13 s where one batched `predict` takes 0.3 s. For
the metrics this pipeline configures (`SUPPORTED_METRICS`) on the overall slice, this module
computes the same numbers with numpy from batched predictions (`model_scoring.outputs_lib`),
following TFMA's definitions:
  - ExampleCount: the examples;
  - SparseCategoricalAccuracy (a Keras metric in TFMA): argmax of the prediction == label;
  - BinaryAccuracy: prediction > 0.5 agrees with the 0/1 label;
  - AUC: TFMA's ROC AUC from a 10,000-bucket calibration histogram rebinned to 10,000
    interpolated thresholds, trapezoids (TFMA's default `interpolation` summation);
  - MeanSquaredError and MeanAbsoluteError: the mean over examples.
Metric keys, diff keys against the baseline, the thresholds' verdict and the output files are
TFMA's own: keys from `metric_specs.to_computations`, the verdict from TFMA's
`metrics_validator.validate_metrics` and `CombineValidations`, the protos from its writer's
`convert_slice_*_to_proto`, so the ModelEvaluation folder reads as stock's
(`tfma.load_metrics`, `tfma.load_validation_result`). Anything else gets stock TFMA (`plan`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from components import beam_args, model_contract
from components.model_scoring import outputs_lib
from core import properties

SUPPORTED_METRICS = (
  "ExampleCount",
  "SparseCategoricalAccuracy",
  "BinaryAccuracy",
  "AUC",
  "MeanSquaredError",
  "MeanAbsoluteError",
)
# The name each metric's keys carry (TFMA's default names; tests/component/test_evaluation.py
# checks them against stock TFMA's output).
KEY_NAMES = {
  "ExampleCount": "example_count",
  "SparseCategoricalAccuracy": "sparse_categorical_accuracy",
  "BinaryAccuracy": "binary_accuracy",
  "AUC": "auc",
  "MeanSquaredError": "mean_squared_error",
  "MeanAbsoluteError": "mean_absolute_error",
}
# TFMA's calibration histogram and AUC constants (metrics/calibration_histogram.py and
# binary_confusion_matrices.py in tensorflow-model-analysis 0.47).
_NUM_BUCKETS = 10_000
_EPSILON = 1e-7


@dataclasses.dataclass(frozen=True)
class Plan:
  """Whether this module computes the evaluation, and why not when it does not."""

  in_process: bool
  reason: str


def plan(eval_config: Any, beam_pipeline_args: Sequence[str], exec_properties: dict) -> Plan:
  """In process only where the result is the one stock TFMA computes, else stock TFMA.

  Args:
    eval_config: the EvalConfig after `tfma.utils.update_eval_config_with_defaults`.
    beam_pipeline_args: the component's Beam arguments.
    exec_properties: the Evaluator's execution properties.
  """
  reason = next(_why_not(eval_config, beam_pipeline_args, exec_properties), None)
  if reason:
    return Plan(False, reason)
  return Plan(True, "in process: batched predictions, TFMA's formulas and files")


def _why_not(eval_config: Any, beam_pipeline_args: Sequence[str], exec_properties: dict):
  """Yields each reason the in-process path would not compute what TFMA computes."""
  runner = beam_args.distributed_runner(beam_pipeline_args)
  if runner:
    yield f"--runner={runner} was named: TFMA runs on Beam"
  for key in ("module_file", "module_path"):
    if exec_properties.get(key):
      yield f"a {key} may define custom extractors or models"
  splits = json.loads(exec_properties.get("example_splits") or "null") or [properties.EVAL_SPLIT]
  if splits != [properties.EVAL_SPLIT]:
    yield f"example_splits {splits}"
  if len(eval_config.slicing_specs) != 1 or eval_config.slicing_specs[0].ByteSize():
    yield "slices other than the overall one"
  if eval_config.cross_slicing_specs or eval_config.options.compute_confidence_intervals.value:
    yield "cross slices or confidence intervals"
  for spec in eval_config.model_specs:
    if (
      spec.prediction_key or spec.label_keys or spec.example_weight_key or spec.example_weight_keys
    ):
      yield f"model spec {spec.name!r} uses prediction or weight keys"
    if not spec.label_key:
      yield f"model spec {spec.name!r} has no label_key"
    if spec.signature_name not in ("", model_contract.SERVING_SIGNATURE):
      yield f"signature {spec.signature_name!r}"
    if set(spec.preprocessing_function_names) - {model_contract.TRANSFORM_SIGNATURE}:
      yield f"preprocessing functions {list(spec.preprocessing_function_names)}"
  for metrics_spec in eval_config.metrics_specs:
    if metrics_spec.HasField("binarize") or metrics_spec.HasField("aggregate"):
      yield "binarized or aggregated metrics"
    if metrics_spec.output_names or metrics_spec.query_key:
      yield "output names or query keys"
    for metric in metrics_spec.metrics:
      if metric.class_name not in SUPPORTED_METRICS or metric.module or metric.config:
        yield f"metric {metric.class_name} (with its settings)"


# ----------------------------------------------------------------------------- metrics


def metric_value(class_name: str, outputs: outputs_lib.ModelOutputs) -> float:
  """One metric, by TFMA's definition, on one model's outputs."""
  p, y = outputs.predictions, outputs.labels
  if class_name == "ExampleCount":
    return float(len(y))
  if class_name == "SparseCategoricalAccuracy":
    # A Keras metric in TFMA: argmax of the scores against the class index, in float32.
    return float(np.float32(np.mean(p.argmax(axis=1) == y)))
  if class_name in ("BinaryAccuracy", "AUC"):
    scores, truth = _binary_pairs(p, y)
    if class_name == "BinaryAccuracy":
      return float(np.mean((scores > 0.5) == (truth > 0.5)))
    return roc_auc(scores, truth)
  if p.shape[1] != 1:
    raise ValueError(f"{class_name} on a {p.shape[1]}-column prediction; TFMA computes it")
  if class_name in ("MeanSquaredError", "MeanAbsoluteError"):
    keep = ~np.isnan(p[:, 0] - y)
    error = p[keep, 0] - y[keep]
    values = error**2 if class_name == "MeanSquaredError" else np.abs(error)
    return float(np.sum(values) / max(int(keep.sum()), 1))
  raise ValueError(f"unsupported metric {class_name}")


def _binary_pairs(predictions: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """(scores, 0/1 labels) as TFMA pairs them for a binary metric.

  One column: the score and the label. k columns (a softmax over classes): TFMA one-hot
  encodes the class index and flattens, so every (class score, is that class) pair counts.
  """
  if predictions.shape[1] == 1:
    return predictions[:, 0], labels
  one_hot = labels[:, None] == np.arange(predictions.shape[1])[None, :]
  return predictions.ravel(), one_hot.astype(np.float64).ravel()


def roc_auc(predictions: np.ndarray, labels: np.ndarray) -> float:
  """TFMA's default AUC: ROC, 10,000 interpolated thresholds over a calibration histogram."""
  from tensorflow_model_analysis.metrics import calibration_histogram

  index = predictions * _NUM_BUCKETS + 1
  index = np.where(index < 0, 0, np.where(index >= _NUM_BUCKETS + 1, _NUM_BUCKETS + 1, index))
  index = index.astype(np.int64)
  present = np.unique(index)
  positions = np.searchsorted(present, index)
  weighted_labels = np.bincount(positions, weights=labels, minlength=len(present))
  weighted_predictions = np.bincount(positions, weights=predictions, minlength=len(present))
  examples = np.bincount(positions, minlength=len(present)).astype(np.float64)
  histogram = [
    calibration_histogram.Bucket(int(b), float(lab), float(pred), float(n))
    for b, lab, pred, n in zip(
      present, weighted_labels, weighted_predictions, examples, strict=True
    )
  ]
  thresholds = [-_EPSILON, *((i + 1) / (_NUM_BUCKETS - 1) for i in range(_NUM_BUCKETS - 2))]
  thresholds.append(1.0 + _EPSILON)
  rebin = [t + _EPSILON if t != 0 else t for t in thresholds]
  buckets = calibration_histogram.rebin(rebin, histogram)
  pos = np.array([b.weighted_labels for b in buckets])
  neg = np.array([b.weighted_examples - b.weighted_labels for b in buckets])
  # tp/fp: the labels at or above each threshold's bucket; fn/tn: below it.
  tp = np.cumsum(pos[::-1])[::-1]
  fp = np.cumsum(neg[::-1])[::-1]
  fn = np.concatenate([[0.0], np.cumsum(pos)[:-1]])
  tn = np.concatenate([[0.0], np.cumsum(neg)[:-1]])
  n = len(thresholds)
  tp, fp, fn, tn = tp[:n], fp[:n], fn[:n], tn[:n]
  last = thresholds[-1] >= 1.0 + _EPSILON
  if last:
    tp[-1], fp[-1], fn[-1], tn[-1] = 0.0, 0.0, tp[0], fp[0]
  with np.errstate(divide="ignore", invalid="ignore"):
    recall = tp / (tp + fn)
    fp_rate = fp / (fp + tn)
  heights = (recall[:-1] + recall[1:]) / 2.0
  return float(np.nansum((fp_rate[:-1] - fp_rate[1:]) * heights))


def compute_metrics(
  eval_config: Any, outputs: dict[str, outputs_lib.ModelOutputs]
) -> dict[Any, float]:
  """Every public MetricKey TFMA would compute for this config, with its value.

  Args:
    eval_config: the updated EvalConfig (model specs named when there is a baseline).
    outputs: model spec name -> that model's outputs.

  Returns:
    MetricKey -> value, the diff keys against the baseline included.
  """
  from tensorflow_model_analysis.metrics import metric_specs, metric_types
  from tensorflow_model_analysis.utils import model_util

  computations = metric_specs.to_computations(eval_config.metrics_specs, eval_config=eval_config)
  keys = {k for c in computations for k in c.keys if not k.name.startswith("_")}
  names = {
    KEY_NAMES[m.class_name]: m.class_name for s in eval_config.metrics_specs for m in s.metrics
  }
  result: dict[metric_types.MetricKey, float] = {}
  for key in keys:
    if key.name not in names or key.is_diff:
      continue
    result[key] = metric_value(names[key.name], outputs[key.model_name])
  baseline = model_util.get_baseline_model_spec(eval_config)
  if baseline is not None:
    for key, value in list(result.items()):
      base = key.make_baseline_key(baseline.name)
      if key.model_name != baseline.name and base in result:
        result[key.make_diff_key()] = value - result[base]
  return result


# ----------------------------------------------------------------------------- output


def write_evaluation(
  eval_config: Any,
  metrics: dict[Any, float],
  output_uri: str,
  model_locations: dict[str, str],
  data_location: str,
  failures: Sequence[tuple[str, float, float]] = (),
) -> Any:
  """Writes TFMA's output files for the overall slice and returns the ValidationResult.

  metrics-00000-of-00001.tfrecord, plots-... and attributions-... (one record each, as TFMA
  writes for a slice with no plots), validations.tfrecord and eval_config.json.

  Args:
    failures: checks of this kit's own that failed, as (metric name, value, upper bound): each
      joins the overall slice's failures, as a value threshold TFMA's would, and the
      validation fails.
  """
  import tensorflow as tf
  import tensorflow_model_analysis as tfma
  from google.protobuf import json_format
  from tensorflow_model_analysis.evaluators import metrics_validator
  from tensorflow_model_analysis.proto import config_pb2
  from tensorflow_model_analysis.writers import metrics_plots_and_validations_writer as writer

  tf.io.gfile.makedirs(output_uri)
  overall = ()
  records = {
    "metrics-00000-of-00001.tfrecord": writer.convert_slice_metrics_to_proto(
      (overall, metrics), add_metrics_callbacks=None
    ),
    "plots-00000-of-00001.tfrecord": writer.convert_slice_plots_to_proto(
      (overall, {}), add_metrics_callbacks=None
    ),
    "attributions-00000-of-00001.tfrecord": writer.convert_slice_attributions_to_proto(
      (overall, {})
    ),
  }
  validation = metrics_validator.validate_metrics((overall, metrics), eval_config)
  combine = writer.CombineValidations(eval_config, rubber_stamp=False)
  result = combine.extract_output(combine.add_input(combine.create_accumulator(), validation))
  for name, value, bound in failures:
    _add_failure(result, name, value, bound)
  records["validations.tfrecord"] = result
  for name, proto in records.items():
    with tf.io.TFRecordWriter(os.path.join(output_uri, name)) as f:
      f.write(proto.SerializeToString())
  run = config_pb2.EvalRun(
    eval_config=eval_config,
    version=tfma.__version__,
    data_location=data_location,
    file_format="<unknown>",
    model_locations=model_locations,
  )
  with tf.io.gfile.GFile(os.path.join(output_uri, "eval_config.json"), "w") as f:
    f.write(json_format.MessageToJson(run))
  return result


def _add_failure(result: Any, name: str, value: float, bound: float) -> None:
  """One failed upper-bound check on the overall slice of a ValidationResult, in place."""
  from tensorflow_model_analysis.proto import config_pb2, metrics_for_slice_pb2

  overall = next(
    (m for m in result.metric_validations_per_slice if not m.slice_key.single_slice_keys), None
  )
  if overall is None:
    overall = result.metric_validations_per_slice.add()
    overall.slice_key.SetInParent()
  failure = overall.failures.add()
  failure.metric_key.CopyFrom(metrics_for_slice_pb2.MetricKey(name=name))
  failure.metric_value.double_value.value = value
  failure.metric_threshold.CopyFrom(
    config_pb2.MetricThreshold(
      value_threshold=config_pb2.GenericValueThreshold(upper_bound={"value": bound})
    )
  )
  result.validation_ok = False


# ----------------------------------------------------------------------------- predictions summary

# A regression's predicted-against-actual sample, and the most classes a confusion matrix is
# kept for: enough to see the shape, small enough for an ML Metadata property (about 10 KB).
MAX_POINTS = 500
MAX_MATRIX_CLASSES = 50
_CLASSIFICATION_METRICS = {
  "SparseCategoricalAccuracy": "multiclass",
  "BinaryAccuracy": "binary",
  "AUC": "binary",
}


def task_of(eval_config: Any) -> str:
  """'multiclass', 'binary' or 'regression', from the metrics the config asks for."""
  names = [m.class_name for s in eval_config.metrics_specs for m in s.metrics]
  return next(
    (_CLASSIFICATION_METRICS[n] for n in names if n in _CLASSIFICATION_METRICS), "regression"
  )


def prediction_summary(outputs: outputs_lib.ModelOutputs, task: str) -> dict[str, Any]:
  """The candidate's predictions against the labels, small enough to keep beside the metrics.

  Returns:
    Classification: {"task", "rows", "matrix"}: matrix[actual class index][predicted index]
      (None over MAX_MATRIX_CLASSES classes).
    Regression: {"task", "rows", "actual", "predicted"}: at most MAX_POINTS evenly spaced rows.
  """
  p, y = outputs.predictions, outputs.labels
  known = ~np.isnan(y)
  p, y = p[known], y[known]
  if task == "regression" or (p.shape[1] == 1 and task != "binary"):
    step = max(1, -(-len(y) // MAX_POINTS))
    return {
      "task": "regression",
      "rows": len(y),
      "actual": [round(float(v), 6) for v in y[::step]],
      "predicted": [round(float(v), 6) for v in p[::step, 0]],
    }
  classes = max(p.shape[1], 2)
  if classes > MAX_MATRIX_CLASSES:
    return {"task": task, "rows": len(y), "matrix": None}
  predicted = (p[:, 0] > 0.5).astype(np.int64) if p.shape[1] == 1 else p.argmax(axis=1)
  actual = y.astype(np.int64)
  inside = (actual >= 0) & (actual < classes)
  matrix = np.zeros((classes, classes), np.int64)
  np.add.at(matrix, (actual[inside], predicted[inside]), 1)
  return {"task": task, "rows": int(inside.sum()), "matrix": matrix.tolist()}
