"""The warm start from a base model (the live version): loaded, its width kept, weights copied."""

from __future__ import annotations

import logging
import re
from typing import Any

from components import model_contract
from models.tabular.hparams import hidden_units_for
from models.tabular.model import hidden_layer_name, is_plain_member, member_suffix

_LOG = logging.getLogger(__name__)


def load_base(base_model_dir: str):
  """The Keras model of a base SavedModel (the live version) to warm-start from."""
  import tensorflow as tf

  base = tf.keras.models.load_model(base_model_dir, compile=False)
  _LOG.info("Warm start from %s", base_model_dir)
  return base


def hidden_width(model) -> int | None:
  """The width of a default model's hidden layers (its first member's in an ensemble); None for
  a network without them (a build_model module's)."""
  layer = _base_layer(hidden_layer_name(0), {layer.name: layer for layer in model.layers})
  units = getattr(layer, "units", None)
  return int(units) if units else None


def warm_start(model, base) -> tuple[list[str], str]:
  """Copies the weights of same-named, same-shaped layers from a base model (`load_base`).

  Layers whose shapes changed (a new vocabulary, a new class, another width) keep their fresh
  weights. A table that crossed ENSEMBLE_MAX_ROWS between the base's training and this one
  changes between one network and an ensemble (`build_model`): the members built like one
  network then start from the base's network (the simpler ones fresh), and one network from the
  base ensemble's first member.

  Returns:
    The names of the layers that were copied, and a sentence for the run summary saying how
    many of the model's weighted layers that is (and, where hidden layers changed width, that
    they did).
  """
  base_layers = {layer.name: layer for layer in base.layers}
  weighted = [layer for layer in model.layers if layer.weights]
  copied, reshaped, new = [], [], []
  for layer in weighted:
    source = _base_layer(layer.name, base_layers)
    if source is None:
      new.append(layer.name)
      continue
    weights = source.get_weights()
    if [w.shape for w in weights] == [tuple(w.shape) for w in layer.weights]:
      layer.set_weights(weights)
      copied.append(layer.name)
    else:
      reshaped.append(layer.name)
  _LOG.info("Warm start: copied %s; shapes changed: %s; new: %s", copied, reshaped, new)
  note = f"{len(copied)} of {len(weighted)} layers with weights copied from the base model"
  fresh = [f"{len(reshaped)} changed shape ({_some(reshaped)})"] if reshaped else []
  fresh += [f"{len(new)} are new ({_some(new)})"] if new else []
  if fresh:
    note += "; " + " and ".join(fresh) + ", and start fresh"
  if reshaped:
    note += " (new values in a text column, new classes or another width)"
  was, now = hidden_width(base), hidden_width(model)
  if was and now and was != now:
    note += f"; its hidden layers were {was} units wide and are {now} now (--hparams hidden_units)"
  return copied, note


def _some(names: list[str], shown: int = 3) -> str:
  more = f" and {len(names) - shown} more" if len(names) > shown else ""
  return ", ".join(names[:shown]) + more


def _base_layer(name: str, base_layers: dict):
  """The base model's layer for this model's layer `name`: the same name, else the same layer
  of the base's single network (for the members built like it, `member_hparams`'s even ones) or
  of its first member (for a single network)."""
  if name in base_layers:
    return base_layers[name]
  member = re.search(f"{model_contract.MEMBER_SUFFIX_PATTERN}$", name)
  if member is None:
    return base_layers.get(name + member_suffix(0))
  if is_plain_member(int(member.group(1))):
    return base_layers.get(name[: member.start()])
  return None


def keep_width(hparams: dict[str, Any], rows: int, base) -> tuple[dict[str, Any], str]:
  """`hparams` with the base model's hidden width where the rows would size it otherwise.

  A warm start keeps the live network's width, so that its hidden layers carry over as the
  table grows (or shrinks) past a size; a width set in hparams wins.

  Args:
    hparams: the run's checked hyper-parameters.
    rows: training rows (they size the width: `hidden_units_for`).
    base: the base Keras model (`load_base`).

  Returns:
    The hyper-parameters, and the clause the warm-start note adds ("" when nothing was kept).
  """
  width, sized = hidden_width(base), hidden_units_for(rows)
  if hparams["hidden_units"] is not None or not width or width == sized:
    return hparams, ""
  return {**hparams, "hidden_units": width}, (
    f"; kept the base model's width of {width} units, where {rows:,} training rows "
    f"would size it {sized} (--hparams hidden_units={sized} resizes it)"
  )
