"""One ExampleGen run on LocalDagRunner (ours or stock), for bench/example_gen.py to time."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import argparse
import json
import resource
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

  def cpu() -> float:
    # This process and its waited-for children (Beam worker processes, if any).
    own, kids = (
      resource.getrusage(resource.RUSAGE_SELF),
      resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

  start, cpu_start = time.monotonic(), cpu()
  tfx.orchestration.LocalDagRunner().run(pipeline)
  seconds, cpu_seconds = time.monotonic() - start, cpu() - cpu_start
  total = 0
  for root, _, files in os.walk(os.path.join(args.out, "root")):
    total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".gz"))
  print(json.dumps({"pipeline_s": seconds, "cpu_s": cpu_seconds, "output_mb": total / 2**20}))


if __name__ == "__main__":
  main()
