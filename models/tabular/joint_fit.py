"""An ensemble's networks trained in one pass over the data, each as its own fit would train it.

A small table's ensemble (`model.build_model`: networks and a linear model) was fitted one
member after another, one Keras `fit` each, and every fit paid the per-epoch costs again: the
callbacks, the held-out evaluation, TensorBoard, the backups and its own traces. On the digits
those costs were most of the training time. Here one `fit` trains them all:

- every step hands each member still training its own batch, read with the member's own
  shuffle seed as its own fit read them, and runs the member's own Keras `train_step`: its
  loss, its optimizer and learning rate, its metrics;
- each member is stopped by its own early-stopping callbacks (`trainer_api.stopping_callbacks`),
  which see only its held-out losses and act on its own weights and learning rate; at its stop
  it takes back the weights of its best epoch, and later steps skip it (`tf.cond`), so the pass
  computes what the separate fits computed.

So each member ends with the weights, epochs and learning-rate cuts its own fit would have
given it. The pass runs on one device (the DistributedTrainer's choice for such tables, and the
stock Trainer's default strategy), in full precision and without a warm-up; elsewhere the
members are fitted one by one as before (`applies`).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

from components.distributed_trainer import trainer_api
from core import defaults

# Strategies the one pass runs under (trainer_api.DEFAULT: no DistributedTrainer built one).
_ONE_DEVICE = (defaults.ONE_DEVICE, trainer_api.DEFAULT)


def applies(built, members: int, mixed_precision: str, warmup_steps: int) -> bool:
  """Whether an ensemble of `members` networks trains in one pass under `built`."""
  return (
    members > 1
    and built.choice.name in _ONE_DEVICE
    and built.num_replicas_in_sync == 1
    and not mixed_precision
    and not warmup_steps
  )


def fit(
  networks: Sequence[Any],
  built,
  dataset_fn: Callable[..., Any],
  seeds: Sequence[int],
  config: trainer_api.FitConfig,
) -> tuple[list[dict[str, Any]], dict[str, Any], Any]:
  """Fits compiled `networks` (`model.ensemble_members`) together, each on its own batches.

  Args:
    networks: the members, each compiled with its own optimizer, loss and metric.
    built: the strategy of this process (one device).
    dataset_fn: (input_context, seed=) -> a member's per-replica training batches.
    seeds: each member's shuffle seed.
    config: the plan, as for one member (`patience` and `smooth_epochs` apply to each).

  Returns:
    (each member's epochs_run and best_epoch, the fit's TrainResult fields for the ensemble,
    the first member's history: `.epoch` and `.history` as Keras' History has them).
  """
  import tensorflow as tf

  with built.strategy.scope():
    joint = _joint(networks, config.steps_per_execution)
    for network in networks:
      network.optimizer.build(network.trainable_variables)
  stops = bool(config.validation is not None and config.patience)
  _build_metrics(networks, dataset_fn(tf.distribute.InputContext(), seed=seeds[0]))
  members = [
    _member_class()(
      i,
      network,
      trainer_api.stopping_callbacks(config.patience, config.smooth_epochs) if stops else [],
      config.smooth_epochs if stops else 0,
    )
    for i, network in enumerate(networks)
  ]

  def joint_dataset_fn(input_context):
    return tf.data.Dataset.zip(tuple(dataset_fn(input_context, seed=s) for s in seeds))

  joint_config = dataclasses.replace(
    config,
    patience=0,
    stopping=members,
    validation=config.validation if stops else None,
    # A backup holds every member, and costs about as much as one backup of each: one every
    # BACKUP_STEPS steps of the pass per member keeps its share of the time near one fit's.
    backup_steps=config.backup_steps * len(networks),
  )
  fields = trainer_api.fit(joint, built, joint_dataset_fn, joint_config)
  runs = [member.record for member in members]
  combined = {
    **fields,
    **runs[0],
    "steps_run": sum(len(m.epochs) for m in members) * config.steps_per_epoch,
  }
  first = types.SimpleNamespace(epoch=list(members[0].epochs), history=members[0].history)
  return runs, combined, first


def _joint(networks: Sequence[Any], steps_per_execution: int):
  """The model whose steps train every member still running, compiled for Keras' `fit`."""
  import tensorflow as tf

  model = _joint_class()(
    inputs=networks[0].inputs, outputs=[n.outputs[0] for n in networks], name="joint_fit"
  )
  # Kept out of Keras' tracking: the networks' layers are the joint model's already.
  object.__setattr__(model, "_members", tuple(networks))
  # Tracked, so that a backup restores each member's optimizer, whether it still trains, and
  # for one that stopped, its epochs run and the epoch it kept (0: none).
  model.member_optimizers = [n.optimizer for n in networks]
  model.member_running = [tf.Variable(True, trainable=False) for _ in networks]
  model.member_ended = [tf.Variable([0, 0], dtype=tf.int64, trainable=False) for _ in networks]
  # Each member applies its own optimizer; Keras' `fit` wants one compiled, which builds no
  # slots and is never applied.
  model.compile(optimizer=tf.keras.optimizers.SGD(), steps_per_execution=steps_per_execution)
  return model


@functools.cache
def _joint_class():
  import tensorflow as tf

  def _skip():
    return tf.constant(False)

  class JointFit(tf.keras.Model):
    """Keras' steps of each running member, in one traced step."""

    @property
    def metrics(self):
      return [m for network in self._members for m in network.metrics]

    # Every member's metrics, `<name>_<member>`: read and reset in one traced call each, as
    # Keras does once per epoch (eagerly, a few operations per metric variable).
    def get_metrics_result(self):
      if tf.inside_function():
        return self._results()
      return self._traced("results", self._results)()

    def reset_metrics(self):
      self._traced("reset", self._reset)()

    def _results(self):
      results = {}
      for i, network in enumerate(self._members):
        for name, value in network.get_metrics_result().items():
          results[f"{name}_{i}"] = value
      return results

    def _reset(self):
      for metric in self.metrics:
        metric.reset_state()

    def _traced(self, name: str, fn):
      traced = self.__dict__.setdefault("_joint_traced", {})
      if name not in traced:
        traced[name] = tf.function(fn)
      return traced[name]

    def train_step(self, data):
      for network, running, batch in zip(self._members, self.member_running, data, strict=True):
        tf.cond(running, functools.partial(_ran, network.train_step, batch), _skip)
      return self.get_metrics_result()

    def test_step(self, data):
      for network, running in zip(self._members, self.member_running, strict=True):
        tf.cond(running, functools.partial(_ran, network.test_step, data), _skip)
      return self.get_metrics_result()

  def _ran(step, batch):
    step(batch)
    return tf.constant(True)

  return JointFit


def _build_metrics(networks: Sequence[Any], batches) -> None:
  """Builds each member's compiled loss and metrics on one training batch, as Keras builds them
  on their first call, so that no metric is made inside a member's `tf.cond`."""
  features, target = next(iter(batches.take(1)))
  for network in networks:
    predicted = network(features, training=False)
    network.compiled_loss.build(predicted)
    network.compiled_metrics.build(predicted, target)


def _own_logs(logs: dict[str, Any] | None, index: int, running: bool) -> dict[str, Any]:
  """Member `index`'s values in an epoch's logs (`loss_<i>` as `loss`). A member that has
  stopped is no longer updated, so its values read 0: they are taken out of `logs`, and the
  callbacks after its own (TensorBoard) do not write them."""
  suffix = f"_{index}"
  keys = [key for key in (logs or {}) if key.endswith(suffix)]
  if not running:
    for key in keys:
      del logs[key]
    return {}
  return {key[: -len(suffix)]: logs[key] for key in keys}


@functools.cache
def _member_class():
  import tensorflow as tf

  class MemberStopping(tf.keras.callbacks.Callback):
    """Runs one member's early-stopping callbacks on its own logs (`loss_<i>` -> `loss`), with
    the member's network as their model (its weights, its optimizer's learning rate). At its
    stop it restores the weights they kept, records its epochs and stops the member's steps;
    the fit ends when every member has stopped.

    Attributes:
      epochs: the epochs it ran in this fit (0-based), and `history` their logs.
      record: once training ends, {"epochs_run", "best_epoch"} as one member's fit gives them.
    """

    def __init__(self, index: int, network, callbacks: list[Any], window: int):
      super().__init__()
      self.index = index
      self.network = network
      self.callbacks = callbacks
      self.window = window  # 0: no early stopping
      self.epochs: list[int] = []
      self.history: dict[str, list[float]] = {}
      self.record: dict[str, Any] = {}
      self._running = True
      self._last: dict[str, float] = {}
      self._initial_epoch: int | None = None

    def on_train_begin(self, logs=None):
      self.network.stop_training = False
      for callback in self.callbacks:
        callback.set_model(self.network)
        callback.on_train_begin()

    def _read_backup(self):
      """A member that had stopped by the backup restored keeps its record and its weights
      (read once the fit began: the backup's `on_train_begin` restores after this one's)."""
      self._running = bool(self.model.member_running[self.index].numpy())
      epochs_run, best = (int(v) for v in self.model.member_ended[self.index].numpy())
      self.record = {} if self._running else {"epochs_run": epochs_run, "best_epoch": best or None}

    def on_epoch_begin(self, epoch, logs=None):
      if self._initial_epoch is None:
        self._initial_epoch = epoch
        self._read_backup()
      if self._running:
        for callback in self.callbacks:
          callback.on_epoch_begin(epoch)

    def on_epoch_end(self, epoch, logs=None):
      mine = _own_logs(logs, self.index, self._running)
      if not self._running:
        return
      for callback in self.callbacks:
        callback.on_epoch_end(epoch, mine)
      self.epochs.append(epoch)
      for name, value in mine.items():
        self.history.setdefault(name, []).append(value)
      self._last = mine
      if self.network.stop_training:
        self._stop()
        self.model.stop_training |= not any(bool(r.numpy()) for r in self.model.member_running)

    def on_train_end(self, logs=None):
      if self._initial_epoch is None:  # Restored after its last epoch: no epoch ran.
        self._read_backup()
      if self._running:
        self._stop()

    def _stop(self):
      for callback in self.callbacks:
        callback.on_train_end(self._last)
      args = (self.epochs, self.history, self.window, self.callbacks)
      best = trainer_api.kept_epoch(*args) if self.window and self.epochs else None
      epochs_run = self.epochs[-1] + 1 if self.epochs else self._initial_epoch or 0
      self.record = {"epochs_run": epochs_run, "best_epoch": best}
      self.model.member_ended[self.index].assign([epochs_run, best or 0])
      self.model.member_running[self.index].assign(False)
      self._running = False

  return MemberStopping
