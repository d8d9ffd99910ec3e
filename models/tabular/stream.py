"""Training batches streamed from the ExampleGen's columnar copy: no per-example parsing.

A training split too large to hold in memory (`inputs.IN_MEMORY_MAX_BYTES`) is read again every
epoch. From its tf.Examples that costs a decompress and a parse per record; from the columnar
copy (components/columnar.py) the rows come as typed columns, so a batch is a slice of arrays.

Shuffling: every pass visits the copy's record batches (of all files) in a seeded random order,
and mixes the rows of SHUFFLE_ROWS at a time, so a sorted file is mixed across its whole length
and not only within a buffer. The held-out slice is left out exactly as `read.held_out_mask`
picks it, and the same seed gives the same batches in every worker and rerun. Each record
batch's fit rows are converted while they are small and written straight into their random
places in the window: gathering and shuffling the window as Arrow columns, then converting it,
cost 3.9 s per 500,000 rows of 65 columns on 2 cores, which training then waited for.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterator, Sequence

import numpy as np

from components import columnar, tf_compat
from components.model_contract import label_target
from core import tasks
from models.tabular import read
from models.tabular.profile import Profile

_LOG = logging.getLogger(__name__)

# Rows mixed at a time: about 10 of the ExampleGen's record batches.
SHUFFLE_ROWS = 1 << 19
PREFETCH = 2


@dataclasses.dataclass(frozen=True)
class _Part:
  """One record batch of one columnar file, and its first row's place in the file."""

  file: int
  batch: int
  start: int
  rows: int


# Rows of each record batch of a copy, by (path, size, modification time): Arrow keeps them in
# each batch's header, which pyarrow reads only with the whole batch, so counting costs a read of
# the file (6 s for 8 million rows of 65 columns). `held_out_rows` counts as it reads, and the
# stream then reuses the counts.
_BATCH_ROWS: dict[tuple, tuple[int, ...]] = {}


def _file_key(path: str) -> tuple:
  import tensorflow as tf

  stat = tf.io.gfile.stat(columnar.file_for(path))
  return (path, stat.length, stat.mtime_nsec)


def _batch_rows(path: str, reader) -> tuple[int, ...]:
  key = _file_key(path)
  if key not in _BATCH_ROWS:
    _BATCH_ROWS[key] = tuple(reader.get_batch(b).num_rows for b in range(reader.num_record_batches))
  return _BATCH_ROWS[key]


class _Source:
  """The open copies of a split's files, their record batches, and which rows are held out."""

  def __init__(self, files: Sequence[str], profile: Profile, every: int):
    self.profile = profile
    self.columns = [s.column for s in profile.columns]
    self.readers = [read.copy_of(path, ()) for path in files]
    file_rows = list(profile.file_rows) if len(profile.file_rows) == len(files) else None
    if file_rows is None:
      file_rows = [sum(_batch_rows(path, r)) for path, r in zip(files, self.readers, strict=True)]
    group = profile.holdout_group if every else None
    self.held = [
      read.held_out_mask(path, n, every, group) for path, n in zip(files, file_rows, strict=True)
    ]
    self.files = list(files)

  def parts(self) -> list[_Part]:
    """Every record batch of every file, in order."""
    parts = []
    for f, (path, reader) in enumerate(zip(self.files, self.readers, strict=True)):
      start = 0
      for b, rows in enumerate(_batch_rows(path, reader)):
        parts.append(_Part(f, b, start, rows))
        start += rows
    return parts

  def held_out(self, part: _Part) -> np.ndarray:
    return self.held[part.file][part.start : part.start + part.rows]

  def batch(self, part: _Part):
    return self.readers[part.file].get_batch(part.batch)

  def raw(self, batch, keep: np.ndarray | None = None) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A record batch's model inputs and raw labels (of the rows where `keep`, when given)."""
    label = self.profile.label.key, self.profile.label_dtype
    return read.batch_inputs(batch, self.columns, keep), read.batch_label(batch, *label, keep)

  def targets(self, labels: np.ndarray) -> np.ndarray:
    """Raw labels as the training targets (`model_contract.label_target`)."""
    import tensorflow as tf

    profile = self.profile
    target = label_target(tf.constant(labels), profile.label, profile.label_dtype).numpy()
    return target if profile.label.task == tasks.MULTICLASS else target[:, None]

  def converted(self, batch) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """A record batch of the copy as model inputs and training targets."""
    features, labels = self.raw(batch)
    return features, self.targets(labels)

  def dataset(self, batches):
    """A tf.data.Dataset of the (features, target) batches the generator `batches` yields."""
    import tensorflow as tf

    features, target = self.converted(self.readers[0].get_batch(0).slice(0, 1))
    signature = ({k: _spec(v) for k, v in features.items()}, _spec(target))
    ds = tf.data.Dataset.from_generator(batches, output_signature=signature)
    return tf_compat.without_autotune(ds.prefetch(PREFETCH))


def has_copies(files: Sequence[str], profile: Profile) -> bool:
  """Whether every file has a columnar copy holding the model's columns as the schema types them."""
  wanted = [(s.column.name, s.column.dtype) for s in profile.columns]
  wanted.append((profile.label.key, profile.label_dtype))
  return bool(files) and all(read.copy_of(path, wanted) is not None for path in files)


def stream_dataset(
  files: Sequence[str],
  profile: Profile,
  batch_size: int,
  *,
  seed: int,
  num_shards: int = 1,
  shard_index: int = 0,
  every: int = 0,
):
  """Endless shuffled (features, target) training batches of the fit rows of `files`' copies.

  Args:
    files: the training split's tf.Example files (each with a columnar copy: `has_copies`).
    profile: the training split's profile (columns, label, rows per file).
    batch_size: this pipeline's batch (per replica under a strategy).
    seed: the shuffle seed, the same in every worker.
    num_shards: input pipelines; each draws the same global batches and keeps its share.
    shard_index: this pipeline's index.
    every: the held-out slice's `holdout_every` (0: no rows held out).

  Returns:
    A tf.data.Dataset of batches of exactly `batch_size` rows.
  """
  source = _Source(files, profile, every)
  global_batch = batch_size * num_shards

  def batches() -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    windows = _windows(source, seed, global_batch)
    while True:
      features, target = next(windows)
      for at in range(0, len(target), global_batch):
        mine = slice(at + shard_index, at + global_batch, num_shards)
        yield {k: v[mine] for k, v in features.items()}, target[mine]
      # Let go of this window before the next one is built: one window in memory at a time.
      del features, target

  return source.dataset(batches)


def ordered_dataset(files: Sequence[str], profile: Profile, batch_size: int):
  """One pass over every row of `files`' copies, in file order, in batches of `batch_size` rows
  (the last may be shorter): what `inputs.make_dataset(training=False)` gives, without parsing."""
  source = _Source(files, profile, 0)

  def batches() -> Iterator[tuple[dict[str, np.ndarray], np.ndarray]]:
    # In file order: no row counts needed, so the files are read once.
    whole = (batch for reader in source.readers for batch in columnar.file_batches(reader))
    for batch in columnar.rebatch(whole, batch_size):
      yield source.converted(batch)

  return source.dataset(batches)


def held_out_rows(files: Sequence[str], profile: Profile, every: int):
  """The held-out slice of `files`' copies (`read.held_out_mask`), in file order, as
  `inputs.load_arrays` holds it, or None when it has no rows. Only those rows are converted."""
  from models.tabular.inputs import Arrays

  source = _Source(files, profile, every)
  kept = []
  for path, reader, held in zip(source.files, source.readers, source.held, strict=True):
    start, counts = 0, []
    for b in range(reader.num_record_batches):  # Counting the batches' rows as it reads them.
      batch = reader.get_batch(b)
      counts.append(batch.num_rows)
      keep = held[start : start + batch.num_rows]
      start += counts[-1]
      if keep.any():
        kept.append(source.raw(batch, keep))
    _BATCH_ROWS[_file_key(path)] = tuple(counts)
  if not kept:
    return None
  features, labels = _joined(kept)
  return Arrays(features, source.targets(labels))


def _spec(array: np.ndarray):
  import tensorflow as tf

  dtype = tf.string if array.dtype == object else tf.as_dtype(array.dtype)
  return tf.TensorSpec([None, *array.shape[1:]], dtype)


def _windows(source: _Source, seed: int, rows_per_batch: int):
  """The fit rows, pass after pass without end, as arrays of a whole number of batches: each
  pass visits the record batches in a new seeded order, and the rows of about SHUFFLE_ROWS at a
  time are written straight into random places of one window. The rows that do not fill a
  last batch open the next window."""
  parts = source.parts()
  fit = [np.flatnonzero(~source.held_out(p)).astype(np.int32) for p in parts]
  carry = None
  epoch = 0
  while True:
    rng = np.random.default_rng([seed, epoch])
    order = [i for i in rng.permutation(len(parts)) if len(fit[i])]
    if not order:
      raise ValueError(f"no training rows outside the held-out slice in {source.files[:3]}")
    chosen, rows = [], 0
    for n, i in enumerate(order):
      chosen.append(i)
      rows += len(fit[i])
      if rows >= SHUFFLE_ROWS or n == len(order) - 1:
        pieces = (source.raw(source.batch(parts[j]), fit[j]) for j in chosen)
        features, labels = _scattered([carry] if carry else [], pieces, rows, rng)
        whole = len(labels) - len(labels) % rows_per_batch
        if whole:
          yield {k: v[:whole] for k, v in features.items()}, source.targets(labels[:whole])
        # Copies: views would keep the whole window alive beside the next one.
        carry = ({k: v[whole:].copy() for k, v in features.items()}, labels[whole:].copy())
        features = labels = None
        chosen, rows = [], 0
    epoch += 1


def _scattered(first: list, pieces, rows: int, rng) -> tuple[dict[str, np.ndarray], np.ndarray]:
  """(inputs, raw labels) pieces written into random places of arrays of all their rows (`rows`
  plus those of `first`); each piece lands in one scatter."""
  out = labels = None
  at = 0
  for features, label in itertools.chain(first, pieces):
    if out is None:
      total = rows + sum(len(f[1]) for f in first)
      places = rng.permutation(total)
      out = {k: np.empty((total, *v.shape[1:]), v.dtype) for k, v in features.items()}
      labels = np.empty(total, label.dtype)
    where = places[at : at + len(label)]
    for k, v in features.items():
      out[k][where] = v
    labels[where] = label
    at += len(label)
  return out, labels


def _joined(pieces) -> tuple[dict[str, np.ndarray], np.ndarray]:
  """(inputs, labels) pieces as one, in order."""
  features = {k: np.concatenate([p[0][k] for p in pieces]) for k in pieces[0][0]}
  return features, np.concatenate([p[1] for p in pieces])
