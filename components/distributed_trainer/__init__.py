"""DistributedTrainer component: TFX Trainer with tf.distribute strategies and local clusters."""

from typing import Any

__all__ = ["DistributedTrainer", "DistributedTrainerSpec"]


def __getattr__(name: str) -> Any:
  # Imported on first use so that `python -m ...launch` and ps/worker server processes
  # start without loading TFX.
  if name == "DistributedTrainer":
    from components.distributed_trainer.component import DistributedTrainer

    return DistributedTrainer
  if name == "DistributedTrainerSpec":
    from components.distributed_trainer.spec import DistributedTrainerSpec

    return DistributedTrainerSpec
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
