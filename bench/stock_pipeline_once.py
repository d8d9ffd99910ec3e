"""One run of the stock three-component TFX pipeline (CsvExampleGen, Trainer, Pusher) on digits."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import argparse
import json
import time


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--data", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--train-steps", type=int, required=True)
  parser.add_argument("--eval-steps", type=int, required=True)
  args = parser.parse_args()

  import absl.logging
  from tfx import v1 as tfx

  absl.logging.set_verbosity(absl.logging.ERROR)
  here = os.path.dirname(os.path.abspath(__file__))
  example_gen = tfx.components.CsvExampleGen(input_base=args.data)
  trainer = tfx.components.Trainer(
    module_file=os.path.join(here, "stock_digits_module.py"),
    examples=example_gen.outputs["examples"],
    train_args=tfx.proto.TrainArgs(num_steps=args.train_steps),
    eval_args=tfx.proto.EvalArgs(num_steps=args.eval_steps),
  )
  pusher = tfx.components.Pusher(
    model=trainer.outputs["model"],
    push_destination=tfx.proto.PushDestination(
      filesystem=tfx.proto.PushDestination.Filesystem(
        base_directory=os.path.join(args.out, "serving")
      )
    ),
  )
  components = [example_gen, trainer, pusher]
  pipeline = tfx.dsl.Pipeline(
    pipeline_name="stock_digits",
    pipeline_root=os.path.join(args.out, "root"),
    components=components,
    enable_cache=True,
    metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
      os.path.join(args.out, "metadata.sqlite")
    ),
  )
  start = time.monotonic()
  tfx.orchestration.LocalDagRunner().run(pipeline)
  print(json.dumps({"pipeline_s": time.monotonic() - start}))


if __name__ == "__main__":
  main()
