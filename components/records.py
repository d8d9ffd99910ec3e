"""Counting the records of TFRecord files, gzipped or not, at the speed of reading them."""

from __future__ import annotations

from collections.abc import Sequence

# Records counted per step: a reduce over single records runs a Python function per record;
# over batches it costs about the read alone. Larger batches only raise the peak memory.
_COUNT_BATCH = 8192


def count_records(files: Sequence[str]) -> int:
  """The number of records in `files` (gzipped when their names end in .gz)."""
  import tensorflow as tf

  files = list(files)
  if not files:
    return 0
  compression = "GZIP" if files[0].endswith(".gz") else ""
  batches = tf.data.TFRecordDataset(files, compression_type=compression).batch(_COUNT_BATCH)
  total = batches.reduce(tf.constant(0, tf.int64), lambda n, b: n + tf.shape(b, tf.int64)[0])
  return int(total.numpy())
