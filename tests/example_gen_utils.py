"""Helpers for ExampleGen tests: run an executor on a folder and read its output back."""

from __future__ import annotations

import glob
import os

import tensorflow as tf
from tfx.components.example_gen import utils
from tfx.proto import example_gen_pb2
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.utils import proto_utils


def exec_properties(input_base, pattern="*", buckets=(2, 1), **extra):
  input_config = example_gen_pb2.Input(
    splits=[example_gen_pb2.Input.Split(name="single_split", pattern=pattern)]
  )
  output_config = example_gen_pb2.Output(
    split_config=example_gen_pb2.SplitConfig(
      splits=[
        example_gen_pb2.SplitConfig.Split(name=n, hash_buckets=b)
        for n, b in zip(("train", "eval"), buckets, strict=True)
      ]
    )
  )
  props = {
    specs.INPUT_BASE_KEY: str(input_base),
    specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(input_config),
    specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(output_config),
    specs.OUTPUT_DATA_FORMAT_KEY: example_gen_pb2.FORMAT_TF_EXAMPLE,
    specs.OUTPUT_FILE_FORMAT_KEY: example_gen_pb2.FORMAT_TFRECORDS_GZIP,
    utils.SPAN_PROPERTY_NAME: 0,
  }
  props.update(extra)
  return props


def run_executor(executor_cls, props, out_dir):
  examples = standard_artifacts.Examples()
  examples.uri = str(out_dir)
  executor_cls().Do({}, {specs.EXAMPLES_KEY: [examples]}, props)
  return examples


def read_examples(uri, split=None):
  """Returns the examples under uri (one split or all) as a list of feature dicts."""
  pattern = os.path.join(str(uri), f"Split-{split}" if split else "Split-*", "*.gz")
  rows = []
  for path in sorted(glob.glob(pattern)):
    for record in tf.data.TFRecordDataset(path, compression_type="GZIP"):
      ex = tf.train.Example.FromString(record.numpy())
      row = {}
      for k, f in ex.features.feature.items():
        kind = f.WhichOneof("kind")
        row[k] = tuple(getattr(f, kind).value) if kind else ()
      rows.append(row)
  return rows
