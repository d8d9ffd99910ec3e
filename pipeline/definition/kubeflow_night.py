"""The night on Kubeflow: the run's id as a parameter of the steps that record it, and the exit
handler.

TFX has no exit handler. `add_exit_handler` moves every step into a sub-DAG and adds `NightEnd`
after it, which runs even when a step failed and closes the night
(`components.nights.nights_lib`); `add_night_id` gives the steps that record the night (the
DataGate, the Pusher and the RunReport) the run's id as their `night_id` parameter, under which
they record what they found.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from core import properties
from pipeline.definition import kubeflow_lib, nodes

# The night: the run's id as a parameter, the sub-DAG of the steps and the exit task after it.
# Vertex AI fills the placeholder in a parameter's constant, and so does open-source KFP's
# driver from backend 2.4 on (kubeflow/pipelines#11599); each run gets its own value.
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
# The TFX steps that record the night's facts (or name the night), by node id.
NIGHT_STEPS = (nodes.DATA_GATE, nodes.PUSHER, nodes.RUN_REPORT)
NIGHT_DAG = "Night"
NIGHT_END = "NightEnd"
NIGHT_END_COMMAND = "night-end"
STATUS_PARAMETER = "status"
NOTIFY_PARAMETER = "notify"
# The span resolver's --stale-after, in seconds ("0": off).
STALE_AFTER_PARAMETER = "stale_after_s"
# Only in packages compiled with --heartbeat: the target pinged at every night's end.
HEARTBEAT_PARAMETER = "heartbeat"
EVERY_NIGHT_PARAMETER = "every_night"
EXIT_TRIGGER = {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
# Targets whose backend passes the exit task a TASK_FINAL_STATUS input. Open-source KFP 2.0 to
# 2.5 refuse to create a run of a package with one ("failed to add implicit deps: task final
# status not supported yet", backend/src/v2/compiler/argocompiler/dag.go; kubeflow/pipelines
# #11826, supported from 2.14.0 with an empty error), so on KFP NightEnd tells the outcome from
# what the steps recorded.
FINAL_STATUS_TARGETS = (kubeflow_lib.VERTEX,)


def add_night_id(spec: Mapping[str, Any]) -> list[str]:
  """Gives the steps that record the night (`NIGHT_STEPS`) the run's id as their `night_id`
  parameter (`properties.NIGHT_ID_KEY`, optional in their specs), and never caches them.

  The value reaches the step through the pipeline, as any parameter does: the orchestrator
  fills in the placeholder, the step's executor reads it from its execution properties
  (`nights_lib.night_id`). Neither pod labels nor arguments carry it. A parameter is part of
  KFP's cache key after its value is filled in, so these steps could not come from the cache
  anyway (a cached step would record nothing for tonight); the cache is turned off for them to
  say so. The other steps keep their cache keys.

  Returns:
    The steps that got the parameter, in run order.
  """
  steps = [name for name in NIGHT_STEPS if name in kubeflow_lib.tasks(spec)]
  for name in steps:
    kubeflow_lib.add_constants(
      spec, name, {properties.NIGHT_ID_KEY: RUN_ID_PLACEHOLDER}, optional=True
    )
  kubeflow_lib.disable_cache(spec, steps)
  return steps


def add_span_notes(
  spec: Mapping[str, Any],
  resolvers: Sequence[str],
  serving_dir: str,
  model_name: str,
  stale_after_s: float,
) -> None:
  """Gives each span resolver task (`resolvers`, from `kubeflow_lib.add_span_resolvers`:
  uncached, first of the night) what it needs to note tonight's spans in the night's record, as
  run_local.py does before its run (`components.nights.span_notes`): the run's id, the serving
  folder, the model name and --stale-after in seconds ("0": off). The ExampleGen's cache key is
  the resolver's output alone, so these parameters leave it as it was."""
  for name in resolvers:
    kubeflow_lib.add_constants(
      spec, name, {properties.NIGHT_ID_KEY: RUN_ID_PLACEHOLDER}, optional=True
    )
    kubeflow_lib.add_constants(
      spec,
      name,
      {
        properties.SERVING_DIR_KEY: serving_dir,
        properties.MODEL_NAME_KEY: model_name,
        STALE_AFTER_PARAMETER: f"{stale_after_s:g}",
      },
    )


def has_exit_handler(spec: Mapping[str, Any]) -> bool:
  """Whether `add_exit_handler` has run on the spec."""
  return NIGHT_END in spec["root"]["dag"]["tasks"]


def add_exit_handler(
  spec: dict[str, Any],
  *,
  serving_dir: str,
  model_name: str,
  notify: Sequence[str],
  every_night: bool,
  final_status: bool = True,
  heartbeat: str = "",
) -> str:
  """Moves every task into a sub-DAG and adds the exit task that closes the night after it.

  The shape is the one kfp's own compiler writes for `dsl.ExitHandler`: the root DAG holds the
  DAG task `Night`, whose component is a DAG with the original tasks unchanged, and the exit
  task `NightEnd`, which depends on it with the trigger policy `ALL_UPSTREAM_TASKS_COMPLETED`,
  so it runs when the sub-DAG ends, also when a step in it failed. `NightEnd` is never cached
  and runs `python -m pipeline.definition.kfp_entrypoint night-end --executor_input {{$}}` in
  the Pusher's image, with the string parameters `serving_dir`, `model_name`, `night_id` (the
  run's id), `notify` (a JSON list of notify_lib targets) and `every_night` ("true"/"false"),
  and, with `final_status`, `status`: the sub-DAG's final status (`taskFinalStatus`).

  Args:
    spec: the pipelineSpec, changed in place.
    serving_dir, model_name: the serving folder whose nights log gets the record.
    notify: notify_lib targets for failed and stopped nights.
    every_night: notify pushed and not-pushed nights too.
    final_status: give NightEnd the `status` input (see `FINAL_STATUS_TARGETS`).
    heartbeat: a notify_lib target NightEnd pings at every night's end (the string parameter
      `heartbeat`, only when given).

  Returns:
    The exit task's name.

  Raises:
    PackageError: when the spec has an exit handler already, or no Pusher, or a root DAG
      with outputs.
  """
  root = spec["root"]
  if {NIGHT_DAG, NIGHT_END} & (set(kubeflow_lib.all_tasks(spec)) | set(spec["components"])):
    raise kubeflow_lib.PackageError(f"the package has an exit handler ({NIGHT_END}) already")
  if nodes.PUSHER not in kubeflow_lib.tasks(spec):
    raise kubeflow_lib.PackageError(
      f"the package has no {nodes.PUSHER}, whose image {NIGHT_END} runs in"
    )
  if set(root["dag"]) - {"tasks"}:
    raise kubeflow_lib.PackageError(
      f"the root DAG has {sorted(set(root['dag']) - {'tasks'})}; not supported"
    )
  image = kubeflow_lib.executor(spec, nodes.PUSHER)["container"]["image"]
  night_task = _move_into_night_dag(spec)
  constants = {
    properties.SERVING_DIR_KEY: serving_dir,
    properties.MODEL_NAME_KEY: model_name,
    properties.NIGHT_ID_KEY: RUN_ID_PLACEHOLDER,
    NOTIFY_PARAMETER: json.dumps(list(notify)),
    EVERY_NIGHT_PARAMETER: "true" if every_night else "false",
  }
  if heartbeat:
    constants[HEARTBEAT_PARAMETER] = heartbeat
  values = _add_night_end(spec, image, constants, final_status)
  root["dag"]["tasks"] = {
    NIGHT_DAG: night_task,
    NIGHT_END: {
      "taskInfo": {"name": NIGHT_END},
      "componentRef": {"name": NIGHT_END},
      "dependentTasks": [NIGHT_DAG],
      "triggerPolicy": dict(EXIT_TRIGGER),
      "inputs": {"parameters": values},
      "cachingOptions": {"enableCache": False},
    },
  }
  return NIGHT_END


def _move_into_night_dag(spec: dict[str, Any]) -> dict[str, Any]:
  """Makes the root DAG's tasks the DAG component `Night`; returns the DAG task that runs it.

  The tasks inside read the pipeline's inputs by the same names from their new parent.
  """
  root = spec["root"]
  night_dag: dict[str, Any] = {"dag": {"tasks": root["dag"]["tasks"]}}
  night_inputs: dict[str, Any] = {}
  declared = root.get("inputDefinitions") or {}
  if declared:
    night_dag["inputDefinitions"] = copy.deepcopy(declared)
    for kind, ref in (
      ("parameters", "componentInputParameter"),
      ("artifacts", "componentInputArtifact"),
    ):
      if declared.get(kind):
        night_inputs[kind] = {name: {ref: name} for name in declared[kind]}
  spec["components"][NIGHT_DAG] = night_dag
  night_task: dict[str, Any] = {
    "taskInfo": {"name": NIGHT_DAG},
    "componentRef": {"name": NIGHT_DAG},
  }
  if night_inputs:
    night_task["inputs"] = night_inputs
  return night_task


def _add_night_end(
  spec: dict[str, Any], image: str, constants: Mapping[str, str], final_status: bool
) -> dict[str, Any]:
  """Adds NightEnd's component and executor; returns the parameter values of its task."""
  definitions = {key: {"parameterType": "STRING"} for key in constants}
  values: dict[str, Any] = {key: {"runtimeValue": {"constant": v}} for key, v in constants.items()}
  if final_status:
    definitions[STATUS_PARAMETER] = {"parameterType": "TASK_FINAL_STATUS", "isOptional": True}
    values[STATUS_PARAMETER] = {"taskFinalStatus": {"producerTask": NIGHT_DAG}}
  spec["components"][NIGHT_END] = {
    "executorLabel": NIGHT_END + "_executor",
    "inputDefinitions": {"parameters": definitions},
  }
  spec["deploymentSpec"]["executors"][NIGHT_END + "_executor"] = {
    "container": {
      "image": image,
      "command": ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE, NIGHT_END_COMMAND],
      "args": ["--executor_input", "{{$}}"],
    }
  }
  return values
