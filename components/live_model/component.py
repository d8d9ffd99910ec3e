"""LiveModel component: the version the serving folder serves now, as Model artifacts."""

from __future__ import annotations

from tfx import types
from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import standard_artifacts

from components.live_model import executor
from components.live_model.spec import LiveModelSpec


class LiveModel(base_component.BaseComponent):
  """Reads the live version under `<serving_dir>/<model_name>` and outputs it as Models.

  Outputs:
    baseline: the live version's SavedModel (`Format-Serving`), the Evaluator's baseline;
      `available` is 0 when nothing is live yet.
    warm_start: the same model when it was trained on other data than `examples`, for the
      Trainer's base_model; `available` is 0 otherwise.
    reference_schema, reference_statistics: the schema and statistics of the data the live
      version was trained on (its `training_data/` folder), for the data gate and the
      Evaluator; `available` is 0 when nothing is live or the version has none.

  Its output depends on the serving folder, not on its inputs. Runners read the folder before
  it runs and pass `live_key` (`live_model_lib.live_model_key`), which puts what is live into
  the cache key; built without one, it is never served from a cache (`pipeline.definition.factory`).
  """

  SPEC_CLASS = LiveModelSpec
  EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

  def __init__(
    self,
    *,
    serving_dir: str,
    model_name: str,
    examples: types.BaseChannel | None = None,
    live_key: str | None = None,
  ):
    """Wires LiveModel.

    Args:
      serving_dir: the Pusher's serving folder (local path or object-store URI).
      model_name: the Pusher's model name.
      examples: this run's Examples, to tell whether the live model was trained on them.
      live_key: what is live when the pipeline runs (`live_model_lib.live_model_key`), for
        runners that cache LiveModel by it.
    """
    super().__init__(
      spec=LiveModelSpec(
        serving_dir=serving_dir,
        model_name=model_name,
        examples=examples,
        live_key=live_key,
        baseline=types.Channel(type=standard_artifacts.Model),
        warm_start=types.Channel(type=standard_artifacts.Model),
        reference_schema=types.Channel(type=standard_artifacts.Schema),
        reference_statistics=types.Channel(type=standard_artifacts.ExampleStatistics),
      )
    )
