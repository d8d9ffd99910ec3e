"""Reading a component's Beam arguments: the runner named, and whether it runs on this machine.

The in-process fast paths (ExampleGen's chunked conversion, StatisticsGen, the Evaluator) step
aside for Beam when a runner that runs elsewhere (Dataflow, Flink, Spark) is named.
"""

from __future__ import annotations

from collections.abc import Sequence

# Beam runners that run in this machine's process tree.
LOCAL_RUNNERS = ("DirectRunner", "direct", "BundleBasedDirectRunner", "SwitchingDirectRunner")


def flag_value(args: Sequence[str], name: str) -> str | None:
  """The value of `--name=value` or `--name value` in Beam arguments (the last one wins)."""
  value = None
  args = list(args)
  for i, arg in enumerate(args):
    if arg == f"--{name}" and i + 1 < len(args):
      value = args[i + 1]
    elif arg.startswith(f"--{name}="):
      value = arg.split("=", 1)[1]
  return value


def distributed_runner(args: Sequence[str]) -> str | None:
  """The runner named in `args` when it runs off this machine, else None."""
  runner = flag_value(args, "runner")
  if runner and runner.split(".")[-1] not in LOCAL_RUNNERS:
    return runner
  return None
