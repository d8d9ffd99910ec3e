"""The linear member's share of an ensemble's output, chosen on the held-out slice.

On tables whose label is close to a sum of its columns' effects (ISLR's Carseats), a linear
model beats any of the networks, and the networks' average keeps much of their excess error.
The ensemble therefore also trains a linear model on the same inputs (`model.linear_hparams`),
and the held-out slice of the training split, which early stopping already scores, chooses how
much of the output it gets: the share with the lowest held-out loss, 0 unless a share does
strictly better.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np

from core import tasks
from models.tabular.hparams import LINEAR_SHARES

# Probabilities are clipped to [_EPS, 1 - _EPS] in the log loss, as Keras does.
_EPS = 1e-7


def held_out_outputs(members: Sequence, batches) -> tuple[list[np.ndarray], np.ndarray]:
  """Each member's outputs on the held-out batches, and the targets.

  Args:
    members: Keras models on the same inputs (`model.ensemble_members`).
    batches: (features, target) batches, read once.

  Returns:
    ([one float64 array per member], the targets as an array).
  """
  outputs: list[list[np.ndarray]] = [[] for _ in members]
  targets = []
  for features, target in batches:
    targets.append(np.asarray(target))
    for kept, member in zip(outputs, members, strict=True):
      kept.append(np.asarray(member(features, training=False), dtype=np.float64))
  return [np.concatenate(o) for o in outputs], np.concatenate(targets)


def task_loss(task: str, predicted: np.ndarray, target: np.ndarray) -> float:
  """The loss the task trains with, on the task's outputs: the mean squared error (values in
  the label's units), or the log loss of the probabilities."""
  if task == tasks.REGRESSION:
    return float(np.mean(np.square(predicted[:, 0] - target.reshape(-1))))
  if task == tasks.BINARY:
    p = np.clip(predicted[:, 0], _EPS, 1 - _EPS)
    y = target.reshape(-1)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
  p = np.clip(predicted, _EPS, 1.0)
  classes = target.reshape(-1).astype(np.int64)
  return float(-np.mean(np.log(p[np.arange(len(classes)), classes])))


def combined(
  network_outputs: Sequence[np.ndarray], linear_output: np.ndarray | None, share: float
) -> np.ndarray:
  """The ensemble's output from its members' outputs: the networks' mean, with the linear
  member's `share` of it (as `layers.WeightedMean` computes it)."""
  networks = np.mean(np.stack(network_outputs), axis=0)
  if linear_output is None:
    return networks
  return (1 - share) * networks + share * linear_output


def choose_linear_share(
  task: str,
  network_outputs: Sequence[np.ndarray],
  linear_output: np.ndarray,
  target: np.ndarray,
  shares: Sequence[float] = LINEAR_SHARES,
  loss: Callable[[np.ndarray, np.ndarray], float] | None = None,
) -> tuple[float, dict[float, float]]:
  """The linear member's share with the lowest held-out loss.

  Args:
    task: the label's task.
    network_outputs: each network's outputs on the held-out rows (their mean is the rest).
    linear_output: the linear member's outputs on the same rows.
    target: the held-out rows' targets.
    shares: the shares tried; the first is kept unless another does strictly better.
    loss: (outputs, target) -> held-out loss; None: `task_loss` of `task`.

  Returns:
    (the share, {share: held-out loss} for each share tried).
  """
  if loss is None:
    loss = functools.partial(task_loss, task)
  losses = {float(a): loss(combined(network_outputs, linear_output, a), target) for a in shares}
  best = float(shares[0])
  for share, loss in losses.items():
    # Better by more than rounding: equal outputs mixed differ in the last bits.
    if loss < losses[best] * (1 - 1e-9) - 1e-12:
      best = share
  return best, losses
