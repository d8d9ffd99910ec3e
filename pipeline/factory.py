"""`create_pipeline`: the one pipeline that both orchestrators run."""

from __future__ import annotations

from collections.abc import Sequence

import ml_metadata as mlmd
import tensorflow_model_analysis as tfma
from ml_metadata.proto import metadata_store_pb2
from tfx import types
from tfx import v1 as tfx
from tfx.proto import example_gen_pb2

from components import defaults, model_contract, tasks
from components.distributed_trainer import DistributedTrainer, constants
from components.distributed_trainer.tuner import Tuner
from components.example_gen import CsvExampleGen
from components.optimizer import Optimizer
from components.pusher import Pusher
from pipeline.config import PipelineConfig


class LatestBlessedModelFromEarlierDataStrategy(tfx.dsl.experimental.ResolverStrategy):
  """The latest blessed model that was not trained on the current Examples (warm-start base).

  With the stock `LatestBlessedModelStrategy` as the Trainer's base model, a rerun without new
  data would see a new base (the model the previous run just blessed), miss the Trainer's cache
  and retrain on the same data. Skipping models trained on this run's Examples keeps the base
  of such a rerun what it was, so the Trainer is cached; a run with new Examples starts from the
  latest blessed model, as usual. Inputs: `model`, `model_blessing` and `examples` (the
  ExampleGen output of this run).
  """

  def resolve_artifacts(
    self, store: mlmd.MetadataStore, input_dict: dict[str, list[types.Artifact]]
  ) -> dict[str, list[types.Artifact]]:
    """Picks the model; see the class docstring.

    Args:
      store: ML Metadata, for the lineage of each candidate model.
      input_dict: `model`, `model_blessing` and `examples` artifacts.

    Returns:
      `model` and `model_blessing` with one artifact each, or empty lists when no blessed
      model was trained on other data; `examples` unchanged.
    """
    current = {a.id for a in input_dict["examples"]}
    return _latest_blessed(
      input_dict, "examples", lambda model: not current & _trained_on(store, model.id)
    )


class LatestBlessedModelOtherThanCandidateStrategy(tfx.dsl.experimental.ResolverStrategy):
  """The Evaluator's baseline: the latest blessed model that is not the candidate itself.

  With the stock `LatestBlessedModelStrategy`, a rerun whose Trainer is cached gets as baseline
  the very model it evaluates (blessed by the previous run), so the Evaluator and Pusher run
  again to compare a model with itself. Excluding the candidate gives such a rerun the same
  baseline as the first evaluation of that model, so both stay cached. Inputs: `model`,
  `model_blessing` and `candidate` (this run's Trainer output).
  """

  def resolve_artifacts(
    self, store: mlmd.MetadataStore, input_dict: dict[str, list[types.Artifact]]
  ) -> dict[str, list[types.Artifact]]:
    """Picks the baseline; see the class docstring.

    Args:
      store: ML Metadata (unused: the blessings carry the model ids).
      input_dict: `model`, `model_blessing` and `candidate` artifacts.

    Returns:
      `model` and `model_blessing` with at most one artifact each; `candidate` unchanged.
    """
    del store
    candidates = {a.id for a in input_dict["candidate"]}
    return _latest_blessed(input_dict, "candidate", lambda model: model.id not in candidates)


def _latest_blessed(input_dict, passthrough: str, eligible) -> dict[str, list[types.Artifact]]:
  """The newest blessed `model` for which `eligible(model)` holds, with its blessing.

  Args:
    input_dict: Resolver inputs: `model`, `model_blessing` and the `passthrough` key.
    passthrough: Input key returned unchanged.
    eligible: Predicate on a blessed model.

  Returns:
    `model` and `model_blessing` with at most one artifact each, and the passthrough input.
  """
  blessings = {
    b.get_int_custom_property("current_model_id"): b
    for b in input_dict["model_blessing"]
    if b.get_int_custom_property("blessed") == 1
  }
  result = {"model": [], "model_blessing": [], passthrough: list(input_dict[passthrough])}
  for model in sorted(input_dict["model"], key=lambda a: a.id, reverse=True):
    if model.id in blessings and eligible(model):
      result["model"] = [model]
      result["model_blessing"] = [blessings[model.id]]
      break
  return result


def _trained_on(store: mlmd.MetadataStore, model_id: int) -> set[int]:
  """Ids of the input artifacts of the execution that produced a model."""
  producers = {
    e.execution_id
    for e in store.get_events_by_artifact_ids([model_id])
    if e.type in (metadata_store_pb2.Event.OUTPUT, metadata_store_pb2.Event.DECLARED_OUTPUT)
  }
  if not producers:
    return set()
  return {
    e.artifact_id
    for e in store.get_events_by_execution_ids(list(producers))
    if e.type in (metadata_store_pb2.Event.INPUT, metadata_store_pb2.Event.DECLARED_INPUT)
  }


def _resolver(node_id: str, strategy, **channels) -> tfx.dsl.Resolver:
  """A Resolver over all blessed models (plus `channels`) with the given strategy."""
  return tfx.dsl.Resolver(
    strategy_class=strategy,
    model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
    model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
    **channels,
  ).with_id(node_id)


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


def create_pipeline(
  config: PipelineConfig,
  metadata_connection_config: metadata_store_pb2.ConnectionConfig | None = None,
  beam_pipeline_args: Sequence[str] = (),
) -> tfx.dsl.Pipeline:
  """Builds ExampleGen -> validation -> [Transform] -> [Tuner] -> DistributedTrainer ->
  Evaluator -> Optimizer -> Pusher.

  Args:
    config: Paths and options, resolved by a runner (task and floors decided); see
      `PipelineConfig`.
    metadata_connection_config: ML Metadata store; None on Kubeflow, where the
      cluster provides it.
    beam_pipeline_args: Options for every Beam-based component (DirectRunner
      flags locally; Dataflow, Flink or Spark flags to scale out).

  Returns:
    The pipeline, not yet run or compiled.
  """
  input_config = example_gen_pb2.Input(
    splits=[example_gen_pb2.Input.Split(name="single_split", pattern=config.input_pattern)]
  )
  output_config = example_gen_pb2.Output(
    split_config=example_gen_pb2.SplitConfig(
      splits=[
        example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=config.train_hash_buckets),
        example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=config.eval_hash_buckets),
      ]
    )
  )
  example_gen = CsvExampleGen(
    input_base=config.data_root,
    input_config=input_config,
    output_config=output_config,
    label_key=config.label_key,
    max_bad_row_fraction=config.max_bad_row_fraction,
    schema_path=config.schema_path,
    delimiter=config.delimiter,
    rolling_spans=config.rolling_spans,
  )
  examples = example_gen.outputs["examples"]
  statistics_gen = tfx.components.StatisticsGen(examples=examples)
  if config.schema_path:
    schema_gen = tfx.components.ImportSchemaGen(schema_file=config.schema_path)
  else:
    schema_gen = tfx.components.SchemaGen(
      statistics=statistics_gen.outputs["statistics"], infer_feature_shape=True
    )
  schema = schema_gen.outputs["schema"]
  example_validator = tfx.components.ExampleValidator(
    statistics=statistics_gen.outputs["statistics"], schema=schema
  )

  transform = None
  if config.transform:
    transform = tfx.components.Transform(
      examples=examples,
      schema=schema,
      module_file=config.transform_module or config.module_file,
    )
  transform_graph = transform.outputs["transform_graph"] if transform else None

  custom_config = {
    constants.LABEL_KEY_CONFIG: config.label_key,
    constants.TASK_CONFIG: config.task,
    constants.EXCLUDE_COLUMNS_CONFIG: list(config.exclude_columns),
    constants.HPARAMS_CONFIG: dict(config.hparams),
    constants.TUNE_TRIALS_CONFIG: config.tune_trials,
  }
  if config.profile_steps:
    custom_config[constants.PROFILE_STEPS_CONFIG] = list(config.profile_steps)
  train_args = tfx.proto.TrainArgs(num_steps=config.train_steps)
  eval_args = tfx.proto.EvalArgs(num_steps=config.eval_steps)
  module_kwargs = (
    {"module_file": config.module_file}
    if config.module_file
    else {"tuner_fn": f"{defaults.DEFAULT_MODULE_PATH}.{defaults.TUNER_FN}"}
  )
  tuner = None
  if config.tune:
    tuner = Tuner(
      examples=transform.outputs["transformed_examples"] if transform else examples,
      schema=schema,
      transform_graph=transform_graph,
      train_args=train_args,
      eval_args=eval_args,
      custom_config=custom_config,
      **module_kwargs,
    )

  # KubeflowV2DagRunner compiles only TFX's stock resolver strategies, so the lineage-aware
  # ones below are used where a metadata connection is given (local runs). See their docstrings
  # for what they keep cached on a rerun without new data.
  local = metadata_connection_config is not None
  latest_blessed = (
    None
    if local
    else _resolver("latest_blessed_model_resolver", tfx.dsl.experimental.LatestBlessedModelStrategy)
  )
  warm_start_base = None
  if config.warm_start:
    warm_start_base = latest_blessed or _resolver(
      "warm_start_model_resolver",
      LatestBlessedModelFromEarlierDataStrategy,
      examples=examples,
    )

  trainer = DistributedTrainer(
    examples=transform.outputs["transformed_examples"] if transform else examples,
    schema=schema,
    anomalies=example_validator.outputs["anomalies"],
    module_file=config.module_file,
    transform_graph=transform_graph,
    hyperparameters=tuner.outputs["best_hyperparameters"] if tuner else None,
    train_args=train_args,
    eval_args=eval_args,
    strategy=config.strategy,
    local_workers=config.local_workers,
    local_ps=config.local_ps,
    custom_config=custom_config,
    base_model=warm_start_base.outputs["model"] if warm_start_base else None,
  )

  baseline = latest_blessed or _resolver(
    "baseline_model_resolver",
    LatestBlessedModelOtherThanCandidateStrategy,
    candidate=trainer.outputs["model"],
  )
  # The default module's models, and modules whose label is transformed (--eval-label-key),
  # give TFMA the label as the model sees it through their `transform_features` signature.
  preprocessing = config.module_file is None or config.model_label_key != config.label_key
  evaluator = tfx.components.Evaluator(
    examples=examples,
    model=trainer.outputs["model"],
    baseline_model=baseline.outputs["model"],
    eval_config=make_eval_config(config, preprocessing),
  )
  optimizer = Optimizer(
    model=trainer.outputs["model"],
    examples=examples,
    schema=schema,
    transform_graph=transform_graph,
    task=config.task,
    label_key=config.model_label_key,
    variants=list(config.optimizer_variants),
    max_accuracy_drop=config.variant_max_accuracy_drop,
    tensorrt=config.tensorrt,
  )
  pusher = Pusher(
    model=trainer.outputs["model"],
    model_blessing=evaluator.outputs["blessing"],
    optimized_model=optimizer.outputs["optimized_model"],
    examples=examples,
    transform_graph=transform_graph,
    serving_dir=config.serving_dir,
    model_name=config.model_name,
    keep_versions=config.keep_versions,
  )
  nodes = [example_gen, statistics_gen, schema_gen, example_validator, transform, tuner]
  nodes += list({id(r): r for r in (warm_start_base, baseline) if r is not None}.values())
  nodes += [trainer, evaluator, optimizer, pusher]
  return tfx.dsl.Pipeline(
    pipeline_name=config.pipeline_name,
    pipeline_root=config.pipeline_root,
    components=[n for n in nodes if n is not None],
    enable_cache=config.enable_cache,
    metadata_connection_config=metadata_connection_config,
    beam_pipeline_args=list(beam_pipeline_args),
  )
