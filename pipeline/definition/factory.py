"""`create_pipeline`: the one pipeline that both orchestrators run."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.schema_gen.component import SchemaGen
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.transform.component import Transform
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, trainer_pb2
from tfx.types import standard_component_specs

from components import model_contract
from components.data_gate import spec as gate_spec
from components.data_gate import thresholds as gate_thresholds
from components.data_gate.component import DataGate
from components.distributed_trainer import DistributedTrainer
from components.distributed_trainer.tuner import Tuner
from components.evaluator import floor_lib
from components.evaluator.component import BaselineAwareEvaluator
from components.example_gen import CsvExampleGen
from components.live_model import spec as live_model_spec
from components.live_model.component import LiveModel
from components.optimizer import Optimizer
from components.optimizer import spec as optimizer_spec
from components.pusher import Pusher
from components.report import spec as report_spec
from components.report.component import RunReport
from components.statistics_gen import StatisticsGen
from core import defaults, properties, sources, splits, tasks
from pipeline.definition import nodes
from pipeline.definition.config import PipelineConfig

# The Pusher writes the serving folder, so it always runs (and pushes nothing when its
# candidate is already live). LiveModel reads it: both runners cache it by what is live (its
# `live_key`, `live_model_lib.live_model_key`), so a rerun with nothing new reuses LiveModel,
# the Evaluator and the Trainer; built without a key, it is never cached either.
NEVER_CACHED = (nodes.PUSHER,)


def make_eval_config(config: PipelineConfig, preprocessing: bool) -> tfma.EvalConfig:
  """TFMA config for the run's task: the metric with a floor, and no worse than the live model.

  Multiclass: SparseCategoricalAccuracy. Binary: BinaryAccuracy and AUC. Regression: mean
  squared and mean absolute error, lower is better. On the first run there is no baseline and
  TFMA applies the value thresholds alone. ExampleCount must reach `min_eval_examples`.

  Args:
    config: the resolved config (task, label, thresholds).
    preprocessing: evaluate through the model's `transform_features` signature (the label as
      the model sees it).
  """
  if config.task == tasks.REGRESSION:
    value = (
      tfma.GenericValueThreshold(upper_bound={"value": config.max_mse})
      if config.max_mse is not None
      else None
    )
    threshold = tfma.MetricThreshold(
      value_threshold=value,
      change_threshold=tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.LOWER_IS_BETTER,
        relative={"value": config.max_error_increase},
      ),
    )
    metrics = [
      tfma.MetricConfig(class_name="MeanSquaredError", threshold=threshold),
      tfma.MetricConfig(class_name="MeanAbsoluteError"),
    ]
  else:
    threshold = tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.min_accuracy}),
      change_threshold=tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.HIGHER_IS_BETTER,
        absolute={"value": -config.max_accuracy_drop},
      ),
    )
    if config.task == tasks.BINARY:
      metrics = [
        tfma.MetricConfig(class_name="BinaryAccuracy", threshold=threshold),
        tfma.MetricConfig(class_name="AUC"),
      ]
    else:
      metrics = [tfma.MetricConfig(class_name="SparseCategoricalAccuracy", threshold=threshold)]
  count = tfma.MetricThreshold(
    value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.min_eval_examples})
  )
  metrics.append(tfma.MetricConfig(class_name="ExampleCount", threshold=count))
  return tfma.EvalConfig(
    model_specs=[
      tfma.ModelSpec(
        label_key=config.model_label_key,
        signature_name="serving_default",
        preprocessing_function_names=[model_contract.TRANSFORM_SIGNATURE] if preprocessing else [],
      )
    ],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[tfma.MetricsSpec(metrics=metrics)],
  )


def _quantity_eval_config(config: PipelineConfig, preprocessing: bool) -> tfma.EvalConfig | None:
  """The EvalConfig of a count label's quantity reading (`count_readings`), which the Evaluator
  takes instead when the trainer kept that reading; None for other labels."""
  if not config.count_readings:
    return None
  quantity = dataclasses.replace(config, task=tasks.REGRESSION, max_mse=config.quantity_max_mse)
  return make_eval_config(quantity, preprocessing)


def label_through_model(config: PipelineConfig) -> bool:
  """Whether TFMA reads the label through the model's `transform_features` signature.

  The default model (with the bundled module, or around a build_model module's network) gives
  the label as it learns it there (a text label as its class index), and so do modules whose
  label is made by their Transform (--eval-label-key). Other run_fn modules' labels are read
  from the examples as they are.
  """
  return (
    config.module_file is None
    or config.network_module
    or config.model_label_key != config.label_key
  )


def create_pipeline(
  config: PipelineConfig,
  metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
  beam_pipeline_args: Sequence[str] = (),
  live_key: str | None = None,
  report_step: bool = False,
) -> tfx_pipeline.Pipeline:
  """Builds ExampleGen -> validation -> [Transform] -> [Tuner] -> DistributedTrainer ->
  Evaluator (against LiveModel) -> Optimizer -> Pusher.

  Args:
    config: Paths and options, resolved by a runner (task and floors decided); see
      `PipelineConfig`.
    metadata_connection_config: ML Metadata store; None on Kubeflow, where the
      cluster provides it.
    beam_pipeline_args: Options for every Beam-based component (DirectRunner
      flags locally; Dataflow, Flink or Spark flags to scale out).
    live_key: what the serving folder serves now (`live_model_lib.live_model_key`), read by
      a runner before the run; it keys LiveModel's cache and the Pusher records it. None where
      the runner cannot read the folder first (Kubeflow, where a task in the package reads it:
      `kubeflow_lib.add_live_key_task`).
    report_step: end with RunReport, the report page as an HTML artifact (Kubeflow, where no
      runner writes it beside a run summary).

  Returns:
    The pipeline, not yet run or compiled.
  """
  example_gen = _example_gen(config)
  examples = example_gen.outputs["examples"]
  statistics_gen = StatisticsGen(examples=examples).with_id(nodes.STATISTICS_GEN)
  statistics = statistics_gen.outputs["statistics"]
  if config.schema_path:
    schema_gen = ImportSchemaGen(schema_file=config.schema_path)
  else:
    schema_gen = SchemaGen(statistics=statistics, infer_feature_shape=True)
  schema = schema_gen.outputs["schema"]
  example_validator = ExampleValidator(statistics=statistics, schema=schema).with_id(
    nodes.EXAMPLE_VALIDATOR
  )
  transform = None
  if config.transform:
    transform = Transform(
      examples=examples,
      schema=schema,
      module_file=config.transform_module or config.module_file,
    ).with_id(nodes.TRANSFORM)
  # The serving folder says what is live: the Evaluator's baseline, and the warm-start model
  # when it was trained on other data. It replaces TFX's resolvers, which open-source Kubeflow
  # cannot run, and follows rollbacks.
  live = LiveModel(
    serving_dir=config.serving_dir,
    model_name=config.model_name,
    examples=examples,
    live_key=live_key,
  ).with_id(nodes.LIVE_MODEL)
  anomalies = example_validator.outputs["anomalies"]
  gate = _data_gate(config, examples, statistics, schema, live)
  tuner, trainer = _training(config, examples, schema, anomalies, transform, live, gate)
  release = _release(config, examples, statistics, schema, transform, trainer, live, live_key)
  parts = [example_gen, statistics_gen, schema_gen, example_validator, transform, tuner, live]
  parts.append(gate)
  if report_step:
    release = (*release, _report(config, examples, statistics, live, gate, trainer, release))
  return tfx_pipeline.Pipeline(
    pipeline_name=config.pipeline_name,
    pipeline_root=config.pipeline_root,
    components=[n for n in [*parts, trainer, *release] if n is not None],
    enable_cache=config.enable_cache,
    metadata_connection_config=metadata_connection_config,
    beam_pipeline_args=list(beam_pipeline_args),
  )


def _example_gen(config: PipelineConfig) -> CsvExampleGen:
  """The CsvExampleGen over the data root: one input pattern, train/eval by hash buckets."""
  input_config = example_gen_pb2.Input(
    splits=[example_gen_pb2.Input.Split(name="single_split", pattern=config.input_pattern)]
  )
  plan = splits.plan(config.train_hash_buckets, config.eval_hash_buckets, config.split_column)
  output_config = example_gen_pb2.Output(
    split_config=example_gen_pb2.SplitConfig(
      splits=[
        example_gen_pb2.SplitConfig.Split(name=name, hash_buckets=buckets)
        for name, buckets in zip(plan.names, plan.hash_buckets, strict=True)
      ],
      partition_feature_name=plan.partition_column or "",
    )
  )
  return CsvExampleGen(
    input_base=config.data_root,
    input_config=input_config,
    output_config=output_config,
    label_key=config.label_key,
    max_bad_row_fraction=config.max_bad_row_fraction,
    schema_path=config.schema_path,
    delimiter=config.delimiter,
    rolling_spans=config.rolling_spans,
    keep_label_tokens=config.keep_label_tokens,
    lenient_columns=config.exclude_columns,
  ).with_id(nodes.CSV_EXAMPLE_GEN)


def _data_gate(config: PipelineConfig, examples, statistics, schema, live) -> DataGate | None:
  """The gate between nights: tonight's data against the live version's, before training."""
  if not config.data_gate:
    return None
  return DataGate(
    statistics=statistics,
    schema=schema,
    examples=examples,
    reference_statistics=live.outputs["reference_statistics"],
    reference_schema=live.outputs["reference_schema"],
    baseline=live.outputs["baseline"],
    label_key=config.label_key,
    task=config.task,
    serving_dir=config.serving_dir,
    model_name=config.model_name,
    exclude_columns=config.exclude_columns,
    thresholds=gate_thresholds.Thresholds.from_json(config.gate_thresholds),
    accept=config.accept_changes,
  ).with_id(nodes.DATA_GATE)


def _training(config: PipelineConfig, examples, schema, anomalies, transform, live, gate) -> tuple:
  """The optional Tuner and the DistributedTrainer, on the transformed Examples if any; both
  wait for the data gate, and so does Transform (`add_upstream_node`)."""
  if gate is not None and transform is not None:
    transform.add_upstream_node(gate)
  if transform:
    examples = transform.outputs["transformed_examples"]
  transform_graph = transform.outputs["transform_graph"] if transform else None
  custom_config = {
    properties.LABEL_KEY_CONFIG: config.label_key,
    properties.TASK_CONFIG: config.task,
    properties.EXCLUDE_COLUMNS_CONFIG: list(config.exclude_columns),
    properties.HPARAMS_CONFIG: dict(config.hparams),
    properties.TUNE_TRIALS_CONFIG: config.tune_trials,
  }
  if config.profile_steps:
    custom_config[properties.PROFILE_STEPS_CONFIG] = list(config.profile_steps)
  if config.split_column:
    custom_config[properties.SPLIT_COLUMN_CONFIG] = config.split_column
  if config.count_readings:
    custom_config[properties.READINGS_CONFIG] = True
  train_args = trainer_pb2.TrainArgs(num_steps=config.train_steps or 0)
  eval_args = trainer_pb2.EvalArgs(num_steps=config.eval_steps)
  module_kwargs = (
    {"module_file": config.module_file}
    if config.module_file
    else {"tuner_fn": f"{defaults.DEFAULT_MODULE_PATH}.{defaults.TUNER_FN}"}
  )
  tuner = None
  if config.tune:
    tuner = Tuner(
      examples=examples,
      schema=schema,
      transform_graph=transform_graph,
      train_args=train_args,
      eval_args=eval_args,
      custom_config=custom_config,
      **module_kwargs,
    ).with_id(nodes.TUNER)
    if gate is not None:
      tuner.add_upstream_node(gate)
  trainer = DistributedTrainer(
    examples=examples,
    schema=schema,
    anomalies=anomalies,
    module_file=config.module_file,
    transform_graph=transform_graph,
    hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
    train_args=train_args,
    eval_args=eval_args,
    strategy=config.strategy,
    local_workers=config.local_workers,
    local_ps=config.local_ps,
    tfjob=config.tfjob,
    custom_config=custom_config,
    base_model=live.outputs["warm_start"] if config.warm_start else None,
  ).with_id(nodes.TRAINER)
  if gate is not None:
    # An order, not an input: a gate that passes again on the same data leaves the trainer's
    # cache key (its inputs) as it was, so a rerun reuses the model it trained.
    trainer.add_upstream_node(gate)
  return tuner, trainer


def _release(
  config: PipelineConfig, examples, statistics, schema, transform, trainer, live, live_key
):
  """The Evaluator (against what is live), the Optimizer and the Pusher of the trained model."""
  transform_graph = transform.outputs["transform_graph"] if transform else None
  model = trainer.outputs["model"]
  preprocessing = label_through_model(config)
  evaluator = BaselineAwareEvaluator(
    examples=examples,
    model=model,
    baseline_model=live.outputs["baseline"],
    eval_config=make_eval_config(config, preprocessing),
    auto_floor=floor_lib.auto_floor_spec(config.task) if config.auto_floor else None,
    quantity_eval_config=_quantity_eval_config(config, preprocessing),
    schema=schema,
    baseline_schema=live.outputs["reference_schema"],
  ).with_id(nodes.EVALUATOR)
  optimizer = Optimizer(
    model=model,
    examples=examples,
    schema=schema,
    transform_graph=transform_graph,
    task=config.task,
    label_key=config.model_label_key,
    variants=list(config.optimizer_variants),
    max_accuracy_drop=config.variant_max_accuracy_drop,
    tensorrt=config.tensorrt,
  ).with_id(nodes.OPTIMIZER)
  pusher = Pusher(
    model=model,
    model_blessing=evaluator.outputs["blessing"],
    optimized_model=optimizer.outputs["optimized_model"],
    examples=examples,
    transform_graph=transform_graph,
    serving_dir=config.serving_dir,
    model_name=config.model_name,
    keep_versions=config.keep_versions,
    live_key=live_key,
    statistics=statistics,
    schema=schema,
    evaluation=evaluator.outputs["evaluation"],
  ).with_id(nodes.PUSHER)
  return evaluator, optimizer, pusher


def _report(
  config: PipelineConfig, examples, statistics, live, gate, trainer, release
) -> RunReport:
  """The report page of the run, after the Pusher, from the artifacts it shows."""
  evaluator, optimizer, pusher = release
  run_config = {
    k: getattr(config, k)
    for k in (
      "pipeline_name",
      "pipeline_root",
      "data_root",
      "label_key",
      "task",
      "model_name",
      "serving_dir",
    )
  }
  return RunReport(
    run_config=run_config,
    **{
      sources.EXAMPLES: examples,
      sources.STATISTICS: statistics,
      sources.REFERENCE_STATISTICS: live.outputs[live_model_spec.REFERENCE_STATISTICS_KEY],
      sources.GATE: gate.outputs[gate_spec.RESULT_KEY] if gate is not None else None,
      report_spec.MODEL_KEY: trainer.outputs[standard_component_specs.MODEL_KEY],
      sources.MODEL_RUN: trainer.outputs[standard_component_specs.MODEL_RUN_KEY],
      sources.EVALUATION: evaluator.outputs[standard_component_specs.EVALUATION_KEY],
      report_spec.BLESSING_KEY: evaluator.outputs[standard_component_specs.BLESSING_KEY],
      sources.OPTIMIZED_MODEL: optimizer.outputs[optimizer_spec.OPTIMIZED_MODEL_KEY],
      report_spec.OPTIMIZATION_REPORT_KEY: optimizer.outputs[optimizer_spec.REPORT_KEY],
      report_spec.PUSHED_MODEL_KEY: pusher.outputs[standard_component_specs.PUSHED_MODEL_KEY],
    },
  ).with_id(nodes.RUN_REPORT)


def local_ir(pipeline: tfx_pipeline.Pipeline):
  """Compiles a pipeline for LocalDagRunner.run_with_ir, with NEVER_CACHED nodes uncached.

  TFX's compiler applies the pipeline's cache setting to every node; this turns it off for the
  node that writes the serving folder, and for LiveModel when it was built without a
  `live_key`. Module files are packaged first, as LocalDagRunner.run does.
  """
  from components import tf_compat

  ir = tf_compat.pipeline_ir(pipeline)  # Packages module files, then compiles.
  live_key = next(
    (c.exec_properties.get("live_key") for c in pipeline.components if c.id == nodes.LIVE_MODEL),
    None,
  )
  uncached = NEVER_CACHED + (() if live_key else (nodes.LIVE_MODEL,))
  for node in ir.nodes:
    if node.pipeline_node.node_info.id in uncached:
      node.pipeline_node.execution_options.caching_options.enable_cache = False
  return ir
