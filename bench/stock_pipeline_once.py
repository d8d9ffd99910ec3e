"""One run of a stock TFX pipeline on digits-shaped data (64 `pixel_*` int columns, `label`).

By default the three components CsvExampleGen, Trainer and Pusher. With `--full`, the stock
full pipeline a TFX user would run: CsvExampleGen, StatisticsGen, SchemaGen, ExampleValidator,
Trainer, a LatestBlessedModelStrategy Resolver, the Evaluator (TFMA, accuracy threshold) and a
Pusher that pushes only blessed models.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import argparse
import glob
import json
import time


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--data", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--train-steps", type=int, required=True)
  parser.add_argument("--eval-steps", type=int, default=0, help="0: the whole eval split")
  parser.add_argument("--full", action="store_true", help="the stock full pipeline (see above)")
  parser.add_argument(
    "--tf-compat",
    action="store_true",
    help="apply this project's TensorFlow patches (components/tf_compat.py) first",
  )
  args = parser.parse_args()
  if args.tf_compat:
    from components import tf_compat

    tf_compat.apply()

  import absl.logging
  from tfx import v1 as tfx

  absl.logging.set_verbosity(absl.logging.ERROR)
  here = os.path.dirname(os.path.abspath(__file__))
  # The same 4:1 train/eval split as this project's pipeline.
  split = tfx.proto.Output(
    split_config=tfx.proto.SplitConfig(
      splits=[
        tfx.proto.SplitConfig.Split(name="train", hash_buckets=4),
        tfx.proto.SplitConfig.Split(name="eval", hash_buckets=1),
      ]
    )
  )
  example_gen = tfx.components.CsvExampleGen(input_base=args.data, output_config=split)
  trainer = tfx.components.Trainer(
    # Alone in its folder: stock TFX packages the module file's whole folder into a wheel.
    module_file=os.path.join(here, "stock_module", "stock_digits_module.py"),
    examples=example_gen.outputs["examples"],
    train_args=tfx.proto.TrainArgs(num_steps=args.train_steps),
    eval_args=tfx.proto.EvalArgs(num_steps=args.eval_steps or None),
  )
  destination = tfx.proto.PushDestination(
    filesystem=tfx.proto.PushDestination.Filesystem(
      base_directory=os.path.join(args.out, "serving")
    )
  )
  if args.full:
    components = [example_gen, *_full_pipeline(tfx, example_gen, trainer, destination)]
  else:
    pusher = tfx.components.Pusher(model=trainer.outputs["model"], push_destination=destination)
    components = [example_gen, trainer, pusher]
  root = os.path.join(args.out, "root")
  pipeline = tfx.dsl.Pipeline(
    pipeline_name="stock_digits",
    pipeline_root=root,
    components=components,
    enable_cache=True,
    metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
      os.path.join(args.out, "metadata.sqlite")
    ),
  )
  start = time.monotonic()
  tfx.orchestration.LocalDagRunner().run(pipeline)
  seconds = time.monotonic() - start
  accuracy = None
  found = sorted(glob.glob(os.path.join(root, "Trainer", "model_run", "*", "eval_accuracy.txt")))
  if found:
    with open(found[-1]) as f:
      accuracy = float(f.read())
  print(json.dumps({"pipeline_s": seconds, "eval_accuracy": accuracy}))


def _full_pipeline(tfx, example_gen, trainer, destination) -> list:
  """StatisticsGen .. Pusher around the Trainer, wired as TFX's penguin template wires them."""
  import tensorflow_model_analysis as tfma

  statistics_gen = tfx.components.StatisticsGen(examples=example_gen.outputs["examples"])
  schema_gen = tfx.components.SchemaGen(statistics=statistics_gen.outputs["statistics"])
  validator = tfx.components.ExampleValidator(
    statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
  )
  resolver = tfx.dsl.Resolver(
    strategy_class=tfx.dsl.experimental.LatestBlessedModelStrategy,
    model=tfx.dsl.Channel(type=tfx.types.standard_artifacts.Model),
    model_blessing=tfx.dsl.Channel(type=tfx.types.standard_artifacts.ModelBlessing),
  ).with_id("latest_blessed_model_resolver")
  accuracy = tfma.MetricConfig(
    class_name="SparseCategoricalAccuracy",
    threshold=tfma.MetricThreshold(
      value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 0.1}),
      change_threshold=tfma.GenericChangeThreshold(
        direction=tfma.MetricDirection.HIGHER_IS_BETTER, absolute={"value": -0.01}
      ),
    ),
  )
  eval_config = tfma.EvalConfig(
    model_specs=[tfma.ModelSpec(label_key="label", signature_name="serving_default")],
    slicing_specs=[tfma.SlicingSpec()],
    metrics_specs=[
      tfma.MetricsSpec(metrics=[tfma.MetricConfig(class_name="ExampleCount"), accuracy])
    ],
  )
  evaluator = tfx.components.Evaluator(
    examples=example_gen.outputs["examples"],
    model=trainer.outputs["model"],
    baseline_model=resolver.outputs["model"],
    eval_config=eval_config,
  )
  pusher = tfx.components.Pusher(
    model=trainer.outputs["model"],
    model_blessing=evaluator.outputs["blessing"],
    push_destination=destination,
  )
  return [statistics_gen, schema_gen, validator, trainer, resolver, evaluator, pusher]


if __name__ == "__main__":
  main()
