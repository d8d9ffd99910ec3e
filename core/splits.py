"""The splits of the kit's Examples: the train/eval plan the ExampleGen is given, and the folders
TFX keeps each split of an artifact in.

The plan is built once here, for the pipeline (`pipeline/definition/factory.py` turns it into
the ExampleGen's output config) and for the command line's checks, which estimate before the run
the rows each split will get (`pipeline/cli/data_checks.py`).
"""

from __future__ import annotations

import dataclasses

from core import properties

# TFX writes each split of an artifact (Examples, ExampleStatistics) in a folder `Split-<name>`.
SPLIT_FOLDER_PREFIX = "Split-"


@dataclasses.dataclass(frozen=True)
class Plan:
  """How the ExampleGen splits the rows of its one input.

  Attributes:
    names: the splits, in order.
    hash_buckets: each split's buckets; a row lands in a split with the share of its buckets.
    partition_column: the column whose value decides a row's split (a grouped split: rows with
      the same value land in the same split); None splits by each row's place in its file.
  """

  names: tuple[str, ...]
  hash_buckets: tuple[int, ...]
  partition_column: str | None = None

  def share(self, name: str) -> float:
    """The share of the rows split `name` gets (before whole groups make it uneven)."""
    return self.hash_buckets[self.names.index(name)] / sum(self.hash_buckets)


def plan(train_buckets: int, eval_buckets: int, partition_column: str | None = None) -> Plan:
  """The train and eval splits by hash buckets, grouped by `partition_column` when given.

  Args:
    train_buckets: the train split's hash buckets.
    eval_buckets: the eval split's hash buckets.
    partition_column: --split-column, or None (or "").
  """
  return Plan(
    (properties.TRAIN_SPLIT, properties.EVAL_SPLIT),
    (train_buckets, eval_buckets),
    partition_column or None,
  )


def split_of_folder(folder: str) -> str | None:
  """The split a `Split-<name>` folder of an artifact holds, or None for any other entry.

  Args:
    folder: an entry of the artifact's folder, as a listing gives it (a trailing '/' allowed).
  """
  name = folder.rstrip("/")
  return name[len(SPLIT_FOLDER_PREFIX) :] if name.startswith(SPLIT_FOLDER_PREFIX) else None
