"""The end of a night on Kubeflow: the run's id in every TFX step, and the exit handler.

TFX has no exit handler. `add_exit_handler` moves every step into a sub-DAG and adds `NightEnd`
after it, which runs even when a step failed and closes the night
(`components.nights.nights_lib`); `add_night_id` gives every TFX step the run's id, under which
the steps record what they found (see `add_night_id` for how it reaches them).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from components.arguments import flag_value
from core import properties
from pipeline.definition import kubeflow_lib, nodes

# The night: the run's id in every TFX step, the sub-DAG of the steps and the exit task after it.
NIGHT_ID_FLAG = "--night_id"
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
# KFP labels every pod of a run with the run's id (pipeline/runid), which the downward API turns
# into an environment variable; its launcher leaves the placeholder above in arguments as it is.
RUN_ID_FIELD_PATH = "metadata.labels['pipeline/runid']"
NIGHT_DAG = "Night"
NIGHT_END = "NightEnd"
NIGHT_END_COMMAND = "night-end"
STATUS_PARAMETER = "status"
NIGHT_ID_PARAMETER = "night_id"
NOTIFY_PARAMETER = "notify"
EVERY_NIGHT_PARAMETER = "every_night"
EXIT_TRIGGER = {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
# Targets whose backend passes the exit task a TASK_FINAL_STATUS input. Open-source KFP 2.0 to
# 2.5 refuse to create a run of a package with one ("failed to add implicit deps: task final
# status not supported yet", backend/src/v2/compiler/argocompiler/dag.go; kubeflow/pipelines
# #11826, supported from 2.14.0 with an empty error), so on KFP NightEnd tells the outcome from
# what the steps recorded.
FINAL_STATUS_TARGETS = (kubeflow_lib.VERTEX,)


def _runs_tfx_executor(container: Mapping[str, Any]) -> bool:
  return container.get("command", [])[-1:] == [kubeflow_lib.ENTRYPOINT_MODULE] and bool(
    flag_value(container.get("args") or [], kubeflow_lib.CLASS_PATH_FLAG)
  )


def add_night_id(spec: Mapping[str, Any]) -> int:
  """Appends `--night_id {{$.pipeline_job_uuid}}` to every container that runs a TFX executor
  through our entrypoint, which takes it out before TFX parses its flags and sets
  `nights_lib.NIGHT_ID_ENV`, under which the steps record the night's facts.

  It goes into the arguments, not a parameter: KFP's cache key holds the command and arguments
  before their placeholders are replaced, but parameter values after, so a parameter would give
  every run its own key and nothing would come from the cache. Vertex AI replaces the
  placeholder in arguments. Open-source KFP's launcher replaces only `{{$}}` and input and
  output placeholders there, so it arrives as written and the entrypoint ignores it; on KFP the
  variable comes from the pod's `pipeline/runid` label instead (`platform_spec`), which is no
  part of the cache key either.

  Returns:
    How many containers got the flag (one that has it already is left alone).
  """
  count = 0
  for ex in spec["deploymentSpec"]["executors"].values():
    container = ex.get("container")
    if not container or not _runs_tfx_executor(container):
      continue
    if flag_value(container["args"], NIGHT_ID_FLAG) is None:
      container["args"] = [*container["args"], NIGHT_ID_FLAG, RUN_ID_PLACEHOLDER]
      count += 1
  return count


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
    NIGHT_ID_PARAMETER: RUN_ID_PLACEHOLDER,
    NOTIFY_PARAMETER: json.dumps(list(notify)),
    EVERY_NIGHT_PARAMETER: "true" if every_night else "false",
  }
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


def needs_night_env(spec: Mapping[str, Any]) -> bool:
  """Whether the steps of a KFP package need the run's id as an environment variable."""
  return has_exit_handler(spec) or any(
    flag_value((ex.get("container") or {}).get("args") or [], NIGHT_ID_FLAG)
    for ex in spec["deploymentSpec"]["executors"].values()
  )
