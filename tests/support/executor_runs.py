"""The pipeline's executors called in this process, one node at a time, for component tests.

`Run(flags, out)` builds the pipeline `run_local.py --output-dir OUT FLAGS` would run: the same
checks and PipelineConfig (`pipeline.cli.local.check_args`) and the same components with the
same execution properties (`factory.create_pipeline`). `Run.execute(*node_ids)` then calls the
`Executor.Do` of each named node, in pipeline order, with its inputs taken from the artifacts
the nodes executed before wrote under OUT/pipeline_root/<node>/<output>/<id>, as TFX lays them
out. A node left out is an absent input of the nodes after it: the optional ones go without
(LiveModel's baseline, as on a first night), and a required one is an error. No orchestrator,
no ML Metadata, no cache, no subprocess: what a test of one component's handling of a module or
a table needs, without a whole run's fixed costs.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import pathlib
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf import message

from pipeline.definition import nodes

# The nodes a first night's training reads from: the Examples, their statistics and schema, and
# the anomalies the trainer checks. LiveModel and the DataGate are left out: on a first night
# nothing is live and the gate has nothing to compare.
DATA = (nodes.CSV_EXAMPLE_GEN, nodes.STATISTICS_GEN, nodes.SCHEMA_GEN, nodes.EXAMPLE_VALIDATOR)
# Training and what follows it: the Evaluator's blessing, the Optimizer's variants, the push.
RELEASE = (nodes.TRAINER, nodes.EVALUATOR, nodes.OPTIMIZER, nodes.PUSHER)
# Execution properties for the stock Transform when a test checks what comes after it: its
# own statistics of the data before and after (read by no later node) were about a quarter of
# its time.
NO_TRANSFORM_STATISTICS = {nodes.TRANSFORM: {"disable_statistics": 1}}
_IDS = itertools.count(1)


def _keras_tuner_on_tf_keras() -> None:
  """keras_tuner on tf_keras, as run_local.py and the warm server import it before TFX.

  In a test process another module may have imported TFX, and with it keras_tuner on Keras 3,
  first: then a tuner_fn's tf.keras models fail keras_tuner's checks. keras_tuner is then
  imported again (TFX's Tuner reads only its trial statuses, plain strings, at run time).
  """
  from components import tf_compat

  if tf_compat.keras_tuner_on_tf_keras():
    return
  for name in [n for n in sys.modules if n == "keras_tuner" or n.startswith("keras_tuner.")]:
    del sys.modules[name]
  assert tf_compat.keras_tuner_on_tf_keras(), "keras_tuner could not be put on tf_keras"


def _property(value: Any) -> Any:
  """An execution property as the compiler hands it to an executor (protos as JSON text)."""
  from tfx.utils import proto_utils

  return proto_utils.proto_to_json(value) if isinstance(value, message.Message) else value


@dataclasses.dataclass
class Run:
  """One pipeline's nodes, executed on demand.

  Attributes:
    flags: run_local.py's flags, without --output-dir.
    out: the --output-dir (pipeline_root/ and serving/ go under it).
    outputs: node id -> output key -> the artifacts its execution wrote.
    ran: the nodes this run executed, in order.
  """

  flags: Sequence[str]
  out: pathlib.Path
  outputs: dict[str, dict[str, list]] = dataclasses.field(default_factory=dict)
  ran: list[str] = dataclasses.field(default_factory=list)

  def __post_init__(self):
    _keras_tuner_on_tf_keras()
    from pipeline.cli import local
    from pipeline.definition import factory

    self.out = pathlib.Path(self.out)
    args = local.parse_args(["--output-dir", str(self.out), *map(str, self.flags)])
    self.config = local.check_args(args)
    self.pipeline = factory.create_pipeline(self.config)
    self._components = {c.id: c for c in self.pipeline.components}

  def node(self, node_id: str):
    """The pipeline's component `node_id` (KeyError when the flags leave it out)."""
    return self._components[node_id]

  def execute(self, *node_ids: str, properties: dict[str, dict[str, Any]] | None = None):
    """Runs each node's executor, in pipeline order.

    Args:
      *node_ids: the nodes to run; each must be in the pipeline.
      properties: node id -> execution properties that replace the pipeline's (for a stock
        component a test does not test, the settings that make it cheaper).

    Returns:
      This run, its `outputs` now holding the nodes' artifacts.
    """
    for node_id in node_ids:
      self.node(node_id)  # KeyError for a node the pipeline does not have.
    for component in self.pipeline.components:
      if component.id in node_ids:
        self._execute(component, (properties or {}).get(component.id, {}))
    return self

  def artifact(self, node_id: str, key: str):
    """The one artifact `node_id` wrote under `key`."""
    [artifact] = self.outputs[node_id][key]
    return artifact

  def summary(self) -> dict[str, Any]:
    """What run_summary.json would say of these artifacts, as the local runner builds it
    (`facts.summary_of`): the trainer's strategy, task and plan, the Evaluator's metrics and
    blessing, the Optimizer's variants, the push, the config, and where the artifacts the
    report page reads are (`artifacts`, by role); each executed node's state is "ran"."""
    from tfx.types import standard_component_specs as sc

    from components.optimizer import spec as optimizer_spec
    from components.report import facts
    from core import sources
    from pipeline.cli import summary as summary_lib

    def output(node_id: str, key: str):
      artifacts = self.outputs.get(node_id, {}).get(key)
      return artifacts[0] if artifacts else None

    def getter(node_id: str, key: str):
      artifact = output(node_id, key)
      return None if artifact is None else facts.tfx_getter(artifact)

    def uri(node_id: str, key: str):
      artifact = output(node_id, key)
      return None if artifact is None else artifact.uri

    summary = facts.summary_of(
      status="succeeded",
      error=None,
      components=[{"name": name, "state": "ran"} for name in self.ran],
      model=getter(nodes.TRAINER, sc.MODEL_KEY),
      blessing=getter(nodes.EVALUATOR, sc.BLESSING_KEY),
      evaluation_uri=uri(nodes.EVALUATOR, sc.EVALUATION_KEY),
      report_uri=uri(nodes.OPTIMIZER, optimizer_spec.REPORT_KEY),
      pushed=getter(nodes.PUSHER, sc.PUSHED_MODEL_KEY),
    )
    summary["config"] = dataclasses.asdict(self.config)
    # The roles the local summary points at, from the same table (role -> node, output key).
    summary[sources.ARTIFACTS] = {
      role: sources.pointer(
        artifact.uri, artifact.mlmd_artifact.custom_properties, facts.tfx_getter(artifact)
      )
      for role, (node_id, key) in summary_lib._POINTED_AT.items()
      if (artifact := output(node_id, key)) is not None
    }
    # As run_local.py writes it to run_summary.json (tuples become lists).
    return json.loads(json.dumps(summary, default=str))

  def _inputs(self, component) -> dict[str, list]:
    inputs = {}
    for key, channel in component.inputs.items():
      produced = self.outputs.get(channel.producer_component_id, {}).get(channel.output_key)
      if produced is not None:
        inputs[key] = produced
      elif not component.spec.INPUTS[key].optional:
        raise ValueError(f"{component.id} needs {key} from {channel.producer_component_id}")
    return inputs

  def _execute(self, component, overrides: dict[str, Any]) -> None:
    from tfx.dsl.components.base import base_beam_executor, base_executor

    execution = next(_IDS)
    root = pathlib.Path(self.config.pipeline_root) / component.id
    outputs = {}
    for key, channel in component.outputs.items():
      artifact = channel.type()
      artifact.uri = str(root / key / str(execution))
      artifact.id = next(_IDS)
      os.makedirs(artifact.uri, exist_ok=True)
      outputs[key] = [artifact]
    properties = {k: _property(v) for k, v in component.exec_properties.items() if v is not None}
    properties.update(overrides)
    executor_class = component.executor_spec.executor_class
    common = {"tmp_dir": str(root / ".temp" / str(execution)), "unique_id": str(execution)}
    if issubclass(executor_class, base_beam_executor.BaseBeamExecutor):
      context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=list(self.pipeline.beam_pipeline_args), **common
      )
    else:
      context = base_executor.BaseExecutor.Context(**common)
    executor_class(context=context).Do(self._inputs(component), outputs, properties)
    self.outputs[component.id] = outputs
    self.ran.append(component.id)


def executed(
  flags: Iterable[str], out: pathlib.Path, node_ids: Sequence[str], upstream: Run | None = None
) -> Run:
  """A Run of `flags` under `out` with `node_ids` executed, after `upstream`'s outputs.

  Args:
    flags: run_local.py's flags.
    out: the output folder.
    node_ids: the nodes to run now.
    upstream: a run whose artifacts (the same data's Examples, statistics and schema, say)
      stand in for the nodes this one does not run.
  """
  run = Run(list(flags), out)
  if upstream is not None:
    run.outputs.update(upstream.outputs)
  return run.execute(*node_ids)
