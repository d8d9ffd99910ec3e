"""The chief's end of a run: the eval split scored and the SavedModel published in one rename."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from components.distributed_trainer import trainer_api
from core import tasks
from models.tabular import readings, stream
from models.tabular.inputs import make_dataset
from models.tabular.model import Body, build_model, evaluate, export_saved_model
from models.tabular.plan import RunSettings, TrainingPlan
from models.tabular.profile import Profile

_LOG = logging.getLogger(__name__)


def publish(export: Callable[[str], None], serving_model_dir: str) -> None:
  """Writes an export into a staging folder beside `serving_model_dir`, then renames it."""
  import tensorflow as tf

  staging = f"{serving_model_dir.rstrip('/')}.staging-{uuid.uuid4().hex}"
  try:
    export(staging)
    if tf.io.gfile.exists(serving_model_dir):
      tf.io.gfile.rmtree(serving_model_dir)
    tf.io.gfile.rename(staging, serving_model_dir)
  finally:
    if tf.io.gfile.exists(staging):
      tf.io.gfile.rmtree(staging)


def evaluate_and_publish(
  model,
  settings: RunSettings,
  profile: Profile,
  plan: TrainingPlan,
  body: Body | None,
  eval_files: list[str],
  result: trainer_api.TrainResult,
  kept: tasks.Readings | None = None,
) -> None:
  """The chief's last steps: scores the eval split into `result` and publishes the SavedModel.

  For a count trained both ways, `kept` says which reading the model serves (readings.py).
  """
  # A fresh model outside the strategy scope: evaluation and export need no collectives
  # with the other workers and carry no distribution state.
  started = time.perf_counter()
  share = plan.linear["share"] if plan.linear is not None else None
  plain = build_model(profile, settings.hparams, body, plan.ensemble, linear_share=share)
  plain.set_weights(model.get_weights())
  if kept is not None:
    plain = readings.kept_model(plain, profile, kept)
    profile = readings.kept_profile(profile, kept)
  if not settings.eval_steps and stream.has_copies(eval_files, profile):
    eval_ds = stream.ordered_dataset(eval_files, profile, plan.batch_size)
  else:
    eval_ds = make_dataset(eval_files, profile, plan.batch_size, training=False)
  if settings.eval_steps:
    eval_ds = eval_ds.take(settings.eval_steps)
  metrics = evaluate(plain, eval_ds, profile.label.task)
  result.eval_metrics = metrics
  result.eval_accuracy = metrics.get("accuracy")
  evaluated = time.perf_counter()
  _LOG.info("Tabular model eval in %.1f s: %s", evaluated - started, metrics)
  publish(lambda d: export_saved_model(plain, profile, d), settings.serving_model_dir)
  _LOG.info("Tabular model exported in %.1f s.", time.perf_counter() - evaluated)
