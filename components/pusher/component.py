"""The atomic versioned Pusher component: blessed model and variants -> TF Serving folder."""

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts

from components.pusher import executor
from components.pusher import spec as s
from components.serving import paths


class Pusher(base_component.BaseComponent):
  """Pushes a blessed model (plus blessed Optimizer variants) as a new TF Serving version.

  Versions are numeric folders under ``<serving_dir>/<model_name>/``, published atomically
  (staging folder + rename) under an exclusive lock, each with a ``manifest.json``; the newest
  ``keep_versions`` are kept. See ``components.serving`` for the layout.

  Example:
    pusher = Pusher(model=trainer.outputs["model"],
                    model_blessing=evaluator.outputs["blessing"],
                    optimized_model=optimizer.outputs["optimized_model"],
                    serving_dir="/srv/models", model_name="digits", keep_versions=5)
  """

  SPEC_CLASS = s.PusherSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    model: types.BaseChannel,
    model_blessing: types.BaseChannel,
    *,
    serving_dir: str,
    model_name: str,
    keep_versions: int = 5,
    optimized_model: types.BaseChannel | None = None,
    examples: types.BaseChannel | None = None,
    transform_graph: types.BaseChannel | None = None,
    live_key: str | None = None,
    statistics: types.BaseChannel | None = None,
    schema: types.BaseChannel | None = None,
    evaluation: types.BaseChannel | None = None,
  ):
    """Wires the Pusher.

    Args:
      model: `Model` channel from the Trainer (``Format-Serving`` is served).
      model_blessing: `ModelBlessing` channel from the Evaluator; unblessed models are not
        pushed.
      serving_dir: Absolute local (or mounted) path, or object-store URI (gs://, s3://),
        that TF Serving watches.
      model_name: TF Serving model name; versions go to ``<serving_dir>/<model_name>/<N>``.
      keep_versions: Newest versions to keep (>= 1; the live version is never deleted).
      optimized_model: Optional `OptimizedModel` channel; its blessed variants are shipped.
      examples: Optional `Examples` channel; its spans are recorded in the manifest.
      transform_graph: Optional `TransformGraph` channel; shipped with the version when a
        blessed variant takes transformed features.
      live_key: the key this run's LiveModel is cached by, recorded in the manifest so that
        the next run reuses it (`live_model_lib.live_model_key`).
      statistics: Optional `ExampleStatistics` of the training data, and
      schema: its `Schema`: both shipped in the version's `training_data/` folder, the next
        night's reference for the data gate and the Evaluator.
      evaluation: Optional `ModelEvaluation`; its metrics are recorded in the manifest.

    Raises:
      PusherError: If serving_dir, model_name or keep_versions is unusable.
    """
    serving_dir = paths.validate_serving_dir(serving_dir)
    paths.validate_model_name(model_name)
    if isinstance(keep_versions, bool) or not isinstance(keep_versions, int) or keep_versions < 1:
      raise paths.PusherError(
        f"keep_versions must be an integer >= 1 (got {keep_versions!r}); pass e.g. 5."
      )
    component_spec = s.PusherSpec(
      model=model,
      model_blessing=model_blessing,
      optimized_model=optimized_model,
      examples=examples,
      transform_graph=transform_graph,
      statistics=statistics,
      schema=schema,
      evaluation=evaluation,
      serving_dir=serving_dir,
      model_name=model_name,
      keep_versions=keep_versions,
      live_key=live_key,
      pushed_model=types.Channel(type=standard_artifacts.PushedModel),
    )
    super().__init__(spec=component_spec)
