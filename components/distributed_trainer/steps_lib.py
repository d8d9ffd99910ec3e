"""Step counts a trainer module receives, and profiled steps mapped onto Keras' step calls.

The stock Trainer hands `TrainArgs.num_steps` and `EvalArgs.num_steps` to a module as
`fn_args.train_steps` and `fn_args.eval_steps`, and TFX's examples always set both, so module
code passes them straight to `fit(steps_per_epoch=..., validation_steps=...)` on repeated
datasets. An unset count (0) would reach such a module as None and `fit` would never end an
infinite dataset, so the DistributedTrainer and the Tuner turn an unset eval count into one
pass over the eval split at the global batch size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from components import records
from core import defaults, properties


def count_examples(artifacts: Sequence[Any], split: str) -> int:
  """Examples in `split` of the given Examples artifacts.

  Reads the row count the kit's ExampleGen records on the artifact; for other Examples (a
  Transform's output, another ExampleGen) it counts the records of the split's files.

  Args:
    artifacts: Examples artifacts.
    split: split name, e.g. properties.EVAL_SPLIT.

  Returns:
    The number of examples (0 when the split has no files).
  """
  total = 0
  for artifact in artifacts:
    key = properties.examples_rows(split)
    if artifact.has_custom_property(key):
      total += int(artifact.get_int_custom_property(key))
      continue
    total += _count_records(artifact, split)
  return total


def _count_records(artifact: Any, split: str) -> int:
  import tensorflow as tf
  from tfx.types import artifact_utils

  folder = artifact_utils.get_split_uri([artifact], split)
  return records.count_records(sorted(tf.io.gfile.glob(f"{folder}/*")))


def default_eval_steps(num_examples: int, batch_size: int = defaults.GLOBAL_BATCH_SIZE) -> int:
  """Eval steps for one pass over `num_examples` at `batch_size`, at least 1."""
  return max(1, math.ceil(num_examples / batch_size))


def eval_split(exec_properties: dict[str, Any]) -> str:
  """The eval split the trainer reads (EvalArgs.splits, default properties.EVAL_SPLIT)."""
  from tfx.proto import trainer_pb2
  from tfx.types import standard_component_specs
  from tfx.utils import proto_utils

  raw = exec_properties.get(standard_component_specs.EVAL_ARGS_KEY)
  if not raw:
    return properties.EVAL_SPLIT
  eval_args = proto_utils.json_to_proto(raw, trainer_pb2.EvalArgs())
  return eval_args.splits[0] if eval_args.splits else properties.EVAL_SPLIT


def with_eval_steps(
  exec_properties: dict[str, Any], examples: Sequence[Any], batch_size: int
) -> tuple[dict[str, Any], int | None]:
  """`exec_properties` whose EvalArgs.num_steps is positive.

  Args:
    exec_properties: stock Trainer or Tuner properties.
    examples: the Examples artifacts the module reads.
    batch_size: examples per eval step for the default count.

  Returns:
    (properties, steps): the properties with a positive count (unchanged when the user set
    one) and the count filled in, or None when nothing was filled in.
  """
  from tfx.proto import trainer_pb2
  from tfx.types import standard_component_specs
  from tfx.utils import proto_utils

  key = standard_component_specs.EVAL_ARGS_KEY
  eval_args = trainer_pb2.EvalArgs()
  if exec_properties.get(key):
    proto_utils.json_to_proto(exec_properties[key], eval_args)
  if eval_args.num_steps > 0:
    return exec_properties, None
  steps = default_eval_steps(count_examples(examples, eval_split(exec_properties)), batch_size)
  eval_args.num_steps = steps
  return {**exec_properties, key: proto_utils.proto_to_json(eval_args)}, steps


def with_train_steps(exec_properties: dict[str, Any], steps: int) -> dict[str, Any]:
  """`exec_properties` whose TrainArgs.num_steps is `steps` when it was unset (0)."""
  from tfx.proto import trainer_pb2
  from tfx.types import standard_component_specs
  from tfx.utils import proto_utils

  key = standard_component_specs.TRAIN_ARGS_KEY
  train_args = trainer_pb2.TrainArgs()
  if exec_properties.get(key):
    proto_utils.json_to_proto(exec_properties[key], train_args)
  if train_args.num_steps > 0:
    return exec_properties
  train_args.num_steps = steps
  return {**exec_properties, key: proto_utils.proto_to_json(train_args)}


def profile_not_reached(
  profile_steps: Sequence[int] | None, last_step: int, epochs_run: int, epochs: int
) -> str | None:
  """Why no profile was written when training stopped before the range began, else None.

  The up-front check (`trainer_api.check_profile_steps`) holds the range to the plan's last
  step; early stopping can end training long before that, and then the profiler never starts.

  Args:
    profile_steps: (first, last) training steps asked for, or None.
    last_step: the last training step of the run (epochs run x steps per epoch).
    epochs_run: the epochs the run ended after.
    epochs: the epochs the plan allowed.

  Returns:
    One sentence naming the range, the step training stopped at and a range that fits.
  """
  if not profile_steps or last_step >= int(profile_steps[0]):
    return None
  first, last = (int(s) for s in profile_steps)
  how = "early stopping ended training" if epochs_run < epochs else "training ended"
  return (
    f"--profile-steps {first},{last} was never reached: {how} at step {last_step} (epoch "
    f"{epochs_run} of {epochs}); pass a range between 1 and {last_step} to profile this run."
  )


def profile_calls(
  profile_steps: Sequence[int], steps_per_epoch: int, steps_per_execution: int
) -> tuple[int, int]:
  """The Keras batch-hook calls that cover training steps `profile_steps`.

  Keras calls its batch hooks once per execution of up to `steps_per_execution` steps (the
  last one of an epoch may be shorter), and the TensorBoard callback's `profile_batch` counts
  those calls from 1 over the whole fit. So the profile covers whole executions around the
  range.

  Args:
    profile_steps: (first, last) training steps, 1-based and inclusive.
    steps_per_epoch: steps per epoch of the fit.
    steps_per_execution: steps per compiled call.

  Returns:
    (first, last) calls, 1-based and inclusive.
  """
  per = max(1, int(steps_per_execution))
  epoch_steps = max(1, int(steps_per_epoch))
  calls_per_epoch = math.ceil(epoch_steps / per)

  def call_of(step: int) -> int:
    epoch, within = divmod(int(step) - 1, epoch_steps)
    return epoch * calls_per_epoch + within // per + 1

  first, last = profile_steps
  return call_of(first), call_of(last)
