"""Reading a component's Beam arguments: the runner named, and whether it runs on this machine.

The in-process fast paths (ExampleGen's chunked conversion, StatisticsGen, the Evaluator) step
aside for Beam when a runner that runs elsewhere (Dataflow, Flink, Spark) is named.
"""

from __future__ import annotations

from collections.abc import Sequence

from components import arguments

# Beam runners that run in this machine's process tree.
LOCAL_RUNNERS = ("DirectRunner", "direct", "BundleBasedDirectRunner", "SwitchingDirectRunner")


def distributed_runner(args: Sequence[str]) -> str | None:
  """The runner named in `args` when it runs off this machine, else None."""
  runner = arguments.flag_value(args, "--runner")
  if runner and runner.split(".")[-1] not in LOCAL_RUNNERS:
    return runner
  return None
