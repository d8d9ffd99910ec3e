"""The default model's input: tf.Example batches, and training rows held in memory."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from components import model_contract, records, tf_compat
from components.distributed_trainer import trainer_api
from components.model_contract import NUMERIC, label_target
from core import tasks
from models.tabular import read
from models.tabular.profile import Profile


def _parser(profile: Profile):
  import tensorflow as tf

  columns = [s.column for s in profile.columns]

  def parse(serialized):
    target = label_target(
      model_contract.parse_label(serialized, profile.label.key, profile.label_dtype),
      profile.label,
      profile.label_dtype,
    )
    if profile.label.task != tasks.MULTICLASS:
      target = tf.expand_dims(target, 1)
    return model_contract.parse_columns(serialized, columns), target

  return parse


# Fixed sizes of the input pipelines' map and prefetch: they run without tf.data's autotuning
# (tf_compat.without_autotune), whose thread made Keras take up to 17 s to end a 16 s fit. On
# 2 cores the gathers of the in-memory input ran 13,000-14,000 batches of 1,024 rows in 12 s
# with these sizes, 9,400-10,000 autotuned.
MAP_CALLS = max(2, os.cpu_count() or 1)
PREFETCH = 2


def make_dataset(
  files: Sequence[str],
  profile: Profile,
  batch_size: int,
  *,
  training: bool,
  seed: int = trainer_api.DEFAULT_SHUFFLE_SEED,
  num_shards: int = 1,
  shard_index: int = 0,
  holdout: str = trainer_api.ALL_RECORDS,
  every: int = trainer_api.HOLDOUT_EVERY,
  group: tuple[str, str] | None = None,
):
  """(features, target) batches from gzipped tf.Example files; see trainer_api.record_dataset."""

  ds = trainer_api.record_dataset(
    files,
    batch_size,
    training=training,
    seed=seed,
    num_shards=num_shards,
    shard_index=shard_index,
    holdout=holdout,
    every=every,
    group=group,
  )
  ds = ds.map(_parser(profile), num_parallel_calls=MAP_CALLS).prefetch(PREFETCH)
  return tf_compat.without_autotune(ds)


# Training data the default model holds in memory, parsed once, at most (estimated bytes);
# past it every epoch re-reads and re-parses the files.
IN_MEMORY_MAX_BYTES = 512 << 20
# Bytes a text cell takes in memory (a Python bytes object in a numpy object array).
_TEXT_CELL_BYTES = 64


def memory_estimate(profile: Profile) -> int:
  """Bytes the training split takes parsed: 4 per number, about 64 per text cell, the label."""
  numeric = sum(1 for s in profile.columns if s.column.kind == NUMERIC)
  text = len(profile.columns) - numeric
  return profile.rows * (4 * numeric + _TEXT_CELL_BYTES * text + 8)


@dataclasses.dataclass
class Arrays:
  """Parsed rows: model inputs by name, and targets."""

  features: dict[str, np.ndarray]
  target: np.ndarray

  def __len__(self) -> int:
    return len(self.target)


def load_arrays(files: Sequence[str], profile: Profile, every: int) -> tuple[Arrays, Arrays]:
  """Parses the training files once into (fit rows, held-out rows).

  The held-out rows are every `every`-th record of each file, or the rows of the groups held out
  where the profile has a `holdout_group`, as `record_dataset` holds them out when it streams;
  `every` 0 holds nothing out. The arrays are allocated once at their final size (the profile
  counted each file's rows) and filled batch by batch, so loading costs the data's size once,
  not two or three times over.

  Raises:
    ValueError: when the files hold no rows.
  """
  import tensorflow as tf

  counts = list(profile.file_rows) if len(profile.file_rows) == len(files) else None
  if counts is None:  # A profile of other files: count these.
    counts = [records.count_records([path]) for path in files]
  group = profile.holdout_group if every else None
  masks = [read.held_out_mask(path, n, every, group) for path, n in zip(files, counts, strict=True)]
  held_rows = sum(int(mask.sum()) for mask in masks)
  fit_rows = sum(counts) - held_rows
  if not fit_rows:
    raise ValueError(f"no rows in the training files {list(files)[:3]}")
  columns = [s.column for s in profile.columns]
  fit = held = None
  at = {"fit": 0, "held": 0}
  for path, expected, file_mask in zip(files, counts, masks, strict=True):
    start = 0
    batches = read.file_batches(path, columns, profile.label.key, profile.label_dtype)
    for features, label in batches:
      target = label_target(tf.constant(label), profile.label, profile.label_dtype).numpy()
      if profile.label.task != tasks.MULTICLASS:
        target = target[:, None]
      if fit is None:
        fit, held = (_allocate(features, target, n) for n in (fit_rows, held_rows))
      mask = file_mask[start : start + len(target)]
      for part, rows in ((fit, ~mask), (held, mask)):
        key = "fit" if part is fit else "held"
        n = int(rows.sum())
        for name, values in features.items():
          part.features[name][at[key] : at[key] + n] = values[rows]
        part.target[at[key] : at[key] + n] = target[rows]
        at[key] += n
      start += len(target)
    if start != expected:
      raise RuntimeError(f"{path} has {start} records, the profile counted {expected}")
  return fit, held


def _allocate(features: dict[str, np.ndarray], target: np.ndarray, rows: int) -> Arrays:
  """Empty arrays of `rows` rows, shaped and typed as a parsed batch."""
  return Arrays(
    {k: np.empty((rows, *v.shape[1:]), dtype=v.dtype) for k, v in features.items()},
    np.empty((rows, *target.shape[1:]), dtype=target.dtype),
  )


def arrays_dataset(
  arrays: Arrays,
  batch_size: int,
  *,
  training: bool,
  seed: int = trainer_api.DEFAULT_SHUFFLE_SEED,
  num_shards: int = 1,
  shard_index: int = 0,
):
  """(features, target) batches from parsed rows: shuffled and repeated for training.

  Batches gather rows by index from the numpy arrays themselves (`tf.numpy_function`), so an
  epoch costs a shuffle of row numbers and one gather per batch, nothing per record, and the
  rows are held once: a TensorFlow constant of them would be a second (measured: a 256 MB array
  grew the process by 500 MB as a tf.constant).
  """
  import tensorflow as tf

  names = list(arrays.features)
  columns = [arrays.features[k] for k in names] + [arrays.target]
  dtypes = [tf.string if c.dtype == object else tf.as_dtype(c.dtype) for c in columns]

  def gather(index):
    return [c[index] for c in columns]

  def take(index):
    values = tf.numpy_function(gather, [index], dtypes, stateful=False)
    for value, column in zip(values, columns, strict=True):
      value.set_shape([None, *column.shape[1:]])
    return dict(zip(names, values[:-1], strict=True)), values[-1]

  index = tf.data.Dataset.range(len(arrays))
  if training:
    if num_shards > 1:
      index = index.shard(num_shards, shard_index)
    index = index.repeat().shuffle(min(len(arrays), 200_000), seed=seed)
  index = index.batch(batch_size, drop_remainder=training)
  batches = index.map(take, num_parallel_calls=MAP_CALLS).prefetch(PREFETCH)
  return tf_compat.without_autotune(batches)


def in_memory(dataset, batch_size: int):
  """The (features, target) batches of a finite dataset, parsed once and held in memory.

  Early stopping scores the held-out rows after every epoch; re-reading and re-parsing their
  files each time costs more than the epoch itself on small data.
  """
  import tensorflow as tf

  batches = list(dataset.as_numpy_iterator())
  if not batches:
    return None
  features = {k: np.concatenate([b[0][k] for b in batches]) for k in batches[0][0]}
  target = np.concatenate([b[1] for b in batches])
  return tf.data.Dataset.from_tensor_slices((features, target)).batch(batch_size).cache()


def held_out_in_memory(train_files, profile: Profile, batch_size: int):
  """The held-out slice of the training files, read once and kept as parsed batches."""
  held = make_dataset(
    train_files,
    profile,
    batch_size,
    training=False,
    holdout=trainer_api.HOLDOUT_RECORDS,
    every=profile.holdout_every,
    group=profile.holdout_group,
  )
  return in_memory(held, batch_size)
