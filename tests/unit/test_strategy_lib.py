"""The DistributedTrainer's strategies built on TensorFlow: one-device, mirrored and the TPU path.
The rules that choose one are in tests/fast/test_strategy_rules.py."""

import pytest

from components.distributed_trainer import strategy_lib as sl
from core.defaults import MIRRORED


def test_detect_tpu_reads_tpu_name(monkeypatch):
  for var in ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR"):
    monkeypatch.delenv(var, raising=False)
  assert sl.detect_tpu() is False  # this machine has no TPU
  monkeypatch.setenv("TPU_NAME", "grpc://10.0.0.2:8470")
  assert sl.detect_tpu() is True


def test_build_strategy_one_device_and_mirrored_on_cpu(monkeypatch):
  monkeypatch.delenv("TF_CONFIG", raising=False)
  built = sl.build_strategy("auto", tpu_available=False)
  assert type(built.strategy).__name__ == "OneDeviceStrategy"
  assert built.num_replicas_in_sync == 1
  assert built.is_chief and built.cluster_coordinator is None
  mirrored = sl.build_strategy("mirrored")
  assert type(mirrored.strategy).__name__ == "MirroredStrategy"
  assert mirrored.choice.name == MIRRORED


def test_build_strategy_tpu_without_tpu_raises_before_touching_tf(monkeypatch):
  for var in ("TPU_NAME", "TPU_WORKER_HOSTNAMES", "COLAB_TPU_ADDR"):
    monkeypatch.delenv(var, raising=False)
  with pytest.raises(sl.StrategyUnavailableError, match="needs a reachable TPU"):
    sl.build_strategy("tpu")


def test_tpu_builder_follows_the_resolver_connect_initialize_sequence(monkeypatch):
  """The TPU path is real code: with TPU_NAME set it goes through TPUClusterResolver.

  There is no TPU here, so the resolver's connection attempt is what fails; the error must
  come from TensorFlow's TPU machinery (not from a missing branch in our code).
  """
  monkeypatch.setenv("TPU_NAME", "grpc://127.0.0.1:1")
  calls = []
  import tensorflow as tf

  real_resolver = tf.distribute.cluster_resolver.TPUClusterResolver

  def resolver(*args, **kwargs):
    calls.append(("resolver", kwargs.get("tpu", args[0] if args else None)))
    return real_resolver(*args, **kwargs)

  monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
  monkeypatch.setattr(
    tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r.master()))
  )

  def initialize(r):
    calls.append(("initialize", r.master()))
    raise RuntimeError("no TPU system at 127.0.0.1:1")

  monkeypatch.setattr(tf.tpu.experimental, "initialize_tpu_system", initialize)
  with pytest.raises(RuntimeError, match="no TPU system"):
    sl.build_strategy("tpu")
  assert calls == [
    ("resolver", "grpc://127.0.0.1:1"),
    ("connect", "grpc://127.0.0.1:1"),
    ("initialize", "grpc://127.0.0.1:1"),
  ]
