"""One ExampleGen run on LocalDagRunner (ours or stock), for bench/example_gen.py to time."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import argparse
import json
import time


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument("--impl", choices=("ours", "stock"), required=True)
  parser.add_argument("--data", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--beam-arg", action="append", default=[])
  args = parser.parse_args()

  import absl.logging
  from tfx import v1 as tfx

  from components.example_gen import CsvExampleGen

  absl.logging.set_verbosity(absl.logging.ERROR)
  if args.impl == "ours":
    gen = CsvExampleGen(input_base=args.data, label_key="label")
  else:
    gen = tfx.components.CsvExampleGen(input_base=args.data)
  pipeline = tfx.dsl.Pipeline(
    pipeline_name=f"bench_{args.impl}",
    pipeline_root=os.path.join(args.out, "root"),
    components=[gen],
    enable_cache=False,
    metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(
      os.path.join(args.out, "metadata.sqlite")
    ),
    beam_pipeline_args=args.beam_arg,
  )
  start = time.monotonic()
  tfx.orchestration.LocalDagRunner().run(pipeline)
  seconds = time.monotonic() - start
  total = 0
  for root, _, files in os.walk(os.path.join(args.out, "root")):
    total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".gz"))
  print(json.dumps({"pipeline_s": seconds, "output_mb": total / 2**20}))


if __name__ == "__main__":
  main()
