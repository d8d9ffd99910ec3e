"""TFDV's statistics generators, run over a split's record batches in one process.

The stock StatisticsGen runs TFDV's generators as Beam combiners over batches of about 1,000
rows. On the DirectRunner that costs Beam's per-bundle work many times over what the generators
themselves cost. Here the same generators (`stats_impl.get_generators(options, in_memory=True)`,
TFDV's own in-memory set) take larger batches, read with TFXIO's own decoder, and their
accumulators are merged as Beam would merge them. Memory stays flat in rows: one batch and the
accumulators (sketches of fixed size) are held at a time.

The result differs from the Beam path's only where TFDV's sketches estimate: quantiles and
histograms within the KLL sketch's error, and top values and unique counts of string features
with more distinct values than the Misra-Gries and KMV sketches hold (TFDV's in-memory path
counts those with sketches, its Beam path exactly).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from components import beam_args

# Rows per record batch. Larger batches amortise the generators' per-batch Python work; too
# large a decoded batch falls out of the CPU caches and the pass slows down again
# (docs/performance.md, "Where the time goes").
BATCH_ROWS = 8192
# Threads that decode tf.Examples into Arrow at once. Decoding is most of the pass, and
# tfx_bsl's decoder leaves the GIL for much of it, so a second thread helps on two cores.
DECODE_THREADS = max(1, min(4, os.cpu_count() or 1))


@dataclasses.dataclass(frozen=True)
class InProcessPlan:
  """Whether the statistics are computed in process, and why not when they are not."""

  in_process: bool
  reason: str


def plan(
  beam_pipeline_args: Sequence[str], stats_options: Any, sharded_output: bool
) -> InProcessPlan:
  """Decides between the in-process pass and the stock Beam pipeline.

  Args:
    beam_pipeline_args: the component's Beam arguments.
    stats_options: the tfdv.StatsOptions the stock executor would use.
    sharded_output: whether sharded statistics output was requested.

  Returns:
    The plan; the in-process pass only where it computes what the stock path would.
  """
  runner = beam_args.distributed_runner(beam_pipeline_args)
  if runner:
    return InProcessPlan(False, f"--runner={runner} was named: Beam computes the statistics")
  if sharded_output:
    return InProcessPlan(False, "sharded statistics output was requested")
  unsupported = {
    "sample_rate": stats_options.sample_rate not in (None, 1.0),
    "slicing": bool(
      stats_options.experimental_slice_functions
      or stats_options.experimental_slice_sqls
      or stats_options.slicing_config
    ),
    "experimental_filter_read_paths": bool(stats_options.experimental_filter_read_paths),
    "label_feature (lift statistics)": bool(stats_options.label_feature),
    "feature partitions": stats_options.experimental_num_feature_partitions > 1,
  }
  named = [k for k, v in unsupported.items() if v]
  if named:
    return InProcessPlan(False, f"stats options use {', '.join(named)}: Beam computes them")
  try:
    _generators(stats_options)
  except TypeError as e:  # A custom generator that only runs on Beam.
    return InProcessPlan(False, f"a statistics generator needs Beam ({e})")
  return InProcessPlan(True, "in process: TFDV's generators over record batches")


def _generators(stats_options: Any) -> list:
  from tensorflow_data_validation.statistics import stats_impl

  return stats_impl.get_generators(stats_options, in_memory=True)


def statistics(record_batches: Iterable[Any], stats_options: Any):
  """TFDV statistics of a stream of Arrow record batches, as a DatasetFeatureStatisticsList.

  Args:
    record_batches: the split's rows, decoded as TFXIO decodes tf.Examples.
    stats_options: tfdv.StatsOptions (see `plan` for what it may use).

  Returns:
    The DatasetFeatureStatisticsList the stock StatisticsGen writes for the split: one dataset,
    the whole split, no slice name.
  """
  from tensorflow_data_validation.statistics import stats_impl

  generators = _generators(stats_options)
  accumulators = [g.create_accumulator() for g in generators]
  for raw in record_batches:
    batch = _allowed(raw, stats_options.feature_allowlist)
    accumulators = [g.add_input(a, batch) for g, a in zip(generators, accumulators, strict=True)]
  return stats_impl.extract_statistics_output(accumulators, generators)


def _allowed(batch: Any, allowlist: Sequence[Any] | None) -> Any:
  """The batch's columns named in `allowlist` (all of them without one), as TFDV filters."""
  if not allowlist:
    return batch
  import pyarrow as pa

  names = [str(f) for f in allowlist]
  kept = [n for n in names if n in batch.schema.names]
  return pa.RecordBatch.from_arrays([batch.column(n) for n in kept], kept)


def example_record_batches(
  file_patterns: Sequence[str], threads: int = DECODE_THREADS
) -> Iterator[Any]:
  """The record batches TFExampleRecord.RecordBatches yields, decoded on `threads` threads.

  The same batches in the same order as the TFXIO of a tf.Example split without a schema:
  BATCH_ROWS records each, in file order, read by tfx_bsl's own record dataset and decoded by
  its ExamplesToRecordBatchDecoder. At most `threads` + 1 batches are held at a time.
  """
  from tfx_bsl.coders import example_coder
  from tfx_bsl.tfxio import dataset_util

  dataset = dataset_util.make_tf_record_dataset(
    list(file_patterns),
    BATCH_ROWS,
    drop_final_batch=False,
    num_epochs=1,
    shuffle=False,
    shuffle_buffer_size=1,
    shuffle_seed=None,
  )
  local = threading.local()

  def decode(examples):
    if not hasattr(local, "decoder"):
      local.decoder = example_coder.ExamplesToRecordBatchDecoder()
    return local.decoder.DecodeBatch(examples)

  with concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="decode") as pool:
    pending: collections.deque = collections.deque()
    for examples in dataset.as_numpy_iterator():
      pending.append(pool.submit(decode, examples))
      if len(pending) > threads:
        yield pending.popleft().result()
    while pending:
      yield pending.popleft().result()


def split_statistics(tfxio: Any, stats_options: Any):
  """`statistics` over every row of a TFXIO source, in BATCH_ROWS batches, in file order."""
  from tfx_bsl.tfxio import dataset_options

  options = dataset_options.RecordBatchesOptions(
    batch_size=BATCH_ROWS, drop_final_batch=False, num_epochs=1, shuffle=False
  )
  return statistics(tfxio.RecordBatches(options), stats_options)
