"""Post-processing of the compiled Kubeflow package: what KubeflowV2DagRunner cannot express.

TFX 1.16's compiler writes a PipelineJob JSON (`displayName`, `pipelineSpec`, `runtimeConfig`)
whose `pipelineSpec` runs on Vertex AI Pipelines. Open-source Kubeflow Pipelines 2.x runs the
same spec with four differences this module papers over, and both lack the last item below;
each is a small function on the parsed JSON (plain dicts; nothing here imports TFX):

- **Caching per task.** TFX applies the pipeline's cache setting to every task;
  `disable_cache` turns it off for the task that writes the serving folder
  (`pipeline.definition.factory.NEVER_CACHED`). LiveModel reads that folder, which no cache can see:
  `add_live_key_task` (both targets) puts a small uncached task in front of it that reads what
  is live and feeds it to LiveModel as a parameter, so LiveModel is cached by what is live.
- **The container entrypoint.** `use_entrypoint` makes every step run
  `python -m pipeline.definition.kfp_entrypoint` instead of TFX's own entrypoint, which it wraps:
  it points keras_tuner at tf_keras before TFX is imported, and gives upstream artifacts back
  their types (open-source KFP hands them over with an empty `instanceSchema`, tensorflow/tfx#7768).
- **Spans.** Vertex runs TFX's span driver (`lifecycle.preCacheCheck`) before each
  FileBasedExampleGen and keys its cache on the span it finds; open-source KFP ignores that hook.
  `add_span_resolvers` replaces the hook with a small uncached task that resolves span, version
  and input fingerprint and feeds them to the ExampleGen as a parameter, so KFP's cache key of
  the ExampleGen changes exactly when its data does.
- **Volumes and credentials.** KFP mounts a PersistentVolumeClaim into a step, or sets an
  environment variable from a Kubernetes secret, only through the package's Kubernetes platform
  spec (a second YAML document), which TFX does not write: `platform_spec`.
- **The end of a night.** TFX has no exit handler. `add_exit_handler` moves every step into a
  sub-DAG and adds `NightEnd` after it, which runs even when a step failed and closes the night
  (`components.nights.nights_lib`); `add_night_id` gives every TFX step the run's id, under
  which the steps record what they found (see `add_night_id` for how it reaches them).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from components import properties
from components.nights import nights_lib
from pipeline.definition import nodes

if TYPE_CHECKING:
  from pipeline.definition.config import PipelineConfig

KFP = "kfp"
VERTEX = "vertex"
TARGETS = (KFP, VERTEX)

STOCK_ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"
ENTRYPOINT_MODULE = "pipeline.definition.kfp_entrypoint"
RESOLVE_SPAN = "resolve-span"
# The span resolver's output parameter, and the ExampleGen input parameter it feeds.
SPAN_KEY = "span_key"
SPAN_RESOLVER_SUFFIX = "_span"
# The ExampleGen parameters that decide which files it reads; the resolver gets the same.
SPAN_INPUTS = ("input_base", "input_config", "range_config", "rolling_spans")
CLASS_PATH_FLAG = "--executor_class_path"
INPUTS_SPEC_FLAG = "--json_serialized_inputs_spec_args"
SERVING_DIR_PARAMETER = properties.SERVING_DIR_KEY
MODEL_NAME_PARAMETER = properties.MODEL_NAME_KEY
PIPELINE_NAME_PARAMETER = "pipeline_name"
# The live key task: its subcommand, name suffix and output, which LiveModel and Pusher get.
LIVE_MODEL_TASK = nodes.LIVE_MODEL
LIVE_KEY_COMMAND = "live-key"
LIVE_KEY_SUFFIX = "_key"
LIVE_KEY = properties.LIVE_KEY_KEY
# The night: the run's id in every TFX step, the sub-DAG of the steps and the exit task after it.
NIGHT_ID_FLAG = "--night_id"
RUN_ID_PLACEHOLDER = "{{$.pipeline_job_uuid}}"
# KFP labels every pod of a run with the run's id (pipeline/runid), which the downward API turns
# into an environment variable; its launcher leaves the placeholder above in arguments as it is.
RUN_ID_FIELD_PATH = "metadata.labels['pipeline/runid']"
PUSHER_TASK = nodes.PUSHER
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
FINAL_STATUS_TARGETS = (VERTEX,)
# Names of environment variables that hold credentials: never written into a package.
SECRET_WORDS = ("SECRET", "TOKEN", "PASSWORD", "PASSWD", "ACCESS_KEY", "CREDENTIAL", "API_KEY")


class PackageError(ValueError):
  """The compiled package lacks something the post-processing relies on (a bug of ours)."""


def dags(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
  """The tasks of every DAG of a `pipelineSpec`: the root's first, then each DAG component's."""
  out = [spec["root"]["dag"]["tasks"]]
  for name in sorted(spec.get("components") or {}):
    dag = spec["components"][name].get("dag")
    if dag is not None:
      out.append(dag.get("tasks") or {})
  return out


def _is_dag(spec: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
  return "dag" in spec["components"][task["componentRef"]["name"]]


def _all_tasks(spec: Mapping[str, Any]) -> dict[str, Any]:
  """Every task of every DAG, DAG tasks included, by name.

  Raises:
    PackageError: when two DAGs hold a task of the same name.
  """
  out: dict[str, Any] = {}
  for dag in dags(spec):
    for name, task in dag.items():
      if name in out:
        raise PackageError(f"two DAGs of the package hold a task named {name!r}")
      out[name] = task
  return out


def tasks(spec: Mapping[str, Any]) -> dict[str, Any]:
  """The steps of a `pipelineSpec` by task name: every task that runs an executor, in the root
  DAG or in a sub-DAG (the exit handler's, `add_exit_handler`); DAG tasks themselves are left
  out. The values are the tasks themselves, so changing one changes the spec."""
  return {name: task for name, task in _all_tasks(spec).items() if not _is_dag(spec, task)}


def _dag_holding(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The tasks of the DAG that holds `task_name`."""
  for dag in dags(spec):
    if task_name in dag:
      return dag
  raise PackageError(f"task {task_name!r} is not in the compiled package")


def component(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The component spec a task runs."""
  return spec["components"][_all_tasks(spec)[task_name]["componentRef"]["name"]]


def executor(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The deployment-spec executor of a task (`{"container": ...}` for a container task).

  Raises:
    PackageError: when the task's component names no executor in the deployment spec.
  """
  label = component(spec, task_name).get("executorLabel")
  executors = spec["deploymentSpec"]["executors"]
  if label not in executors:
    raise PackageError(f"task {task_name!r} has no executor in the deployment spec ({label!r})")
  return executors[label]


def check_container_tasks(spec: Mapping[str, Any]) -> None:
  """Open-source KFP runs only container (and importer) steps: no resolver nodes.

  DAG tasks (the exit handler's sub-DAG) are not steps and are not checked.

  Raises:
    PackageError: naming the first task that is not a container task.
  """
  for name in tasks(spec):
    if "container" not in executor(spec, name):
      raise PackageError(
        f"task {name!r} is not a container task; open-source Kubeflow Pipelines cannot run it "
        "(resolver nodes are not implemented there)"
      )


def flag_value(args: Sequence[str], flag: str) -> str | None:
  """The value of `flag` in a container's arguments (`--flag VALUE` or `--flag=VALUE`), or None."""
  for i, arg in enumerate(args):
    if arg == flag and i + 1 < len(args):
      return args[i + 1]
    if arg.startswith(flag + "="):
      return arg[len(flag) + 1 :]
  return None


def executor_class_paths(spec: Mapping[str, Any]) -> dict[str, str]:
  """The TFX executor class each task runs, by task name (tasks without one are left out)."""
  out = {}
  for name in tasks(spec):
    container = executor(spec, name).get("container") or {}
    path = flag_value(container.get("args") or [], CLASS_PATH_FLAG)
    if path:
      out[name] = path
  return out


def disable_cache(spec: Mapping[str, Any], task_names: Iterable[str]) -> None:
  """Sets `cachingOptions.enableCache: false` on the named tasks.

  KFP (and Vertex) then run them every time, and never record a cache entry for them.

  Raises:
    PackageError: when a named task is not in the package.
  """
  dag = tasks(spec)
  for name in task_names:
    if name not in dag:
      raise PackageError(f"task {name!r} is not in the compiled package ({sorted(dag)})")
    dag[name]["cachingOptions"] = {"enableCache": False}


def use_entrypoint(spec: Mapping[str, Any]) -> int:
  """Makes every step that runs TFX's container entrypoint run ours (`ENTRYPOINT_MODULE`).

  Returns:
    How many executors were rewritten.
  """
  count = 0
  for ex in spec["deploymentSpec"]["executors"].values():
    container = ex.get("container")
    if container and container.get("command", [])[-1:] == [STOCK_ENTRYPOINT]:
      container["command"] = [*container["command"][:-1], ENTRYPOINT_MODULE]
      count += 1
  return count


def _add_to_inputs_spec_arg(args: list[str], name: str, parameter_type: str) -> None:
  """Declares one more parameter in the `--json_serialized_inputs_spec_args` JSON of `args`."""
  for i, arg in enumerate(args[:-1]):
    if arg == INPUTS_SPEC_FLAG:
      inputs_spec = json.loads(args[i + 1])
      inputs_spec.setdefault("parameters", {})[name] = {"parameterType": parameter_type}
      args[i + 1] = json.dumps(inputs_spec, indent=2, sort_keys=True)


def span_driver_tasks(spec: Mapping[str, Any]) -> list[str]:
  """Tasks TFX gave its span driver (`lifecycle.preCacheCheck`): the FileBasedExampleGens."""
  return [
    name
    for name in tasks(spec)
    if ((executor(spec, name).get("container") or {}).get("lifecycle") or {}).get("preCacheCheck")
  ]


def _add_key_task(
  spec: dict[str, Any],
  name: str,
  command: str,
  source: str,
  copied: Sequence[str],
  output: str,
  consumers: Sequence[str],
  constants: Mapping[str, str] | None = None,
) -> None:
  """Adds an uncached task that outputs one string parameter, an input of `consumers`.

  The task runs `python -m pipeline.definition.kfp_entrypoint <command> --executor_input {{$}}`
  in the image of `source`, with the parameters of `source` named in `copied` (those it has) plus
  string `constants`. Its output becomes the input parameter `output` of each consumer
  (`taskOutputParameter`), so KFP's cache key of a consumer changes exactly when the value does.

  Args:
    spec: the pipelineSpec, changed in place.
    name: the new task's name.
    command: the entrypoint's subcommand.
    source: the task whose parameters (values and definitions) and image the new task takes.
    copied: names of the parameters of `source` to take.
    output: the output parameter's name.
    consumers: tasks that get the output as an input parameter.
    constants: more string parameters, by name.

  Raises:
    PackageError: when a task of that name is already in the package, or a consumer is in
      another DAG than `source`.
  """
  if name in _all_tasks(spec) or name in spec["components"]:
    raise PackageError(f"a task named {name!r} is already in the package")
  dag = _dag_holding(spec, source)
  outside = [c for c in consumers if c not in dag]
  if outside:
    raise PackageError(f"tasks {outside} are not in the DAG of {source!r}")
  task_params = dag[source].get("inputs", {}).get("parameters", {})
  comp_params = component(spec, source).get("inputDefinitions", {}).get("parameters", {})
  names = [p for p in copied if p in task_params]
  values = {p: copy.deepcopy(task_params[p]) for p in names}
  definitions = {p: copy.deepcopy(comp_params[p]) for p in names}
  for key, value in (constants or {}).items():
    values[key] = {"runtimeValue": {"constant": value}}
    definitions[key] = {"parameterType": "STRING"}
  spec["components"][name] = {
    "executorLabel": name + "_executor",
    "inputDefinitions": {"parameters": definitions},
    "outputDefinitions": {"parameters": {output: {"parameterType": "STRING"}}},
  }
  spec["deploymentSpec"]["executors"][name + "_executor"] = {
    "container": {
      "image": executor(spec, source)["container"]["image"],
      "command": ["python", "-m", ENTRYPOINT_MODULE, command],
      "args": ["--executor_input", "{{$}}"],
    }
  }
  dag[name] = {
    "taskInfo": {"name": name},
    "componentRef": {"name": name},
    "inputs": {"parameters": values},
    "cachingOptions": {"enableCache": False},
  }
  for consumer in consumers:
    task = dag[consumer]
    task.setdefault("inputs", {}).setdefault("parameters", {})[output] = {
      "taskOutputParameter": {"producerTask": name, "outputParameterKey": output}
    }
    task["dependentTasks"] = sorted({*task.get("dependentTasks", []), name})
    comp = component(spec, consumer)
    comp.setdefault("inputDefinitions", {}).setdefault("parameters", {})[output] = {
      "parameterType": "STRING"
    }
    _add_to_inputs_spec_arg(executor(spec, consumer)["container"]["args"], output, "STRING")


def add_span_resolvers(spec: dict[str, Any]) -> list[str]:
  """Replaces TFX's span driver hook of each FileBasedExampleGen by an uncached resolver task.

  Open-source KFP ignores `lifecycle.preCacheCheck`, so its cache key of an ExampleGen task holds
  only the unresolved `{SPAN}` pattern: a nightly run would be served yesterday's Examples. The
  resolver task (`<task>_span`, `python -m pipeline.definition.kfp_entrypoint resolve-span`) gets
  the ExampleGen's input parameters, resolves span, version and the input fingerprint the way the
  ExampleGen will, and outputs them as the string parameter `span_key`, which becomes an input
  parameter of the ExampleGen (`taskOutputParameter`). The ExampleGen still resolves its input
  itself when it runs and ignores the value; it is there for the cache key.

  Returns:
    The resolver task names.
  """
  resolvers = []
  for name in span_driver_tasks(spec):
    executor(spec, name)["container"].pop("lifecycle", None)
    resolver = name + SPAN_RESOLVER_SUFFIX
    _add_key_task(spec, resolver, RESOLVE_SPAN, name, SPAN_INPUTS, SPAN_KEY, [name])
    resolvers.append(resolver)
  return resolvers


def add_live_key_task(spec: dict[str, Any]) -> str | None:
  """Adds the task that reads what the serving folder serves, for LiveModel's cache key.

  LiveModel's output depends on the serving folder, which KFP's cache cannot see. The task
  (`LiveModel_key`, uncached, `python -m pipeline.definition.kfp_entrypoint live-key`) computes
  `live_model_lib.live_model_key` from the LiveModel's serving_dir and model_name and the
  pipeline's name, and feeds it as `live_key` to LiveModel, which is then cached by it, and to
  the Pusher, which records it in the manifest, exactly as LocalDagRunner does.

  Returns:
    The task's name, or None when the package has no LiveModel.
  """
  if LIVE_MODEL_TASK not in tasks(spec):
    return None
  name = LIVE_MODEL_TASK + LIVE_KEY_SUFFIX
  _add_key_task(
    spec,
    name,
    LIVE_KEY_COMMAND,
    LIVE_MODEL_TASK,
    (SERVING_DIR_PARAMETER, MODEL_NAME_PARAMETER),
    LIVE_KEY,
    [t for t in serving_tasks(spec) if t in _dag_holding(spec, LIVE_MODEL_TASK)],
    constants={PIPELINE_NAME_PARAMETER: spec["pipelineInfo"]["name"]},
  )
  return name


def serving_tasks(spec: Mapping[str, Any]) -> list[str]:
  """Tasks that read or write the serving folder (a `serving_dir` parameter): LiveModel, its key
  task, the Pusher and NightEnd."""
  return [
    name
    for name in tasks(spec)
    if SERVING_DIR_PARAMETER
    in component(spec, name).get("inputDefinitions", {}).get("parameters", {})
  ]


def _runs_tfx_executor(container: Mapping[str, Any]) -> bool:
  return container.get("command", [])[-1:] == [ENTRYPOINT_MODULE] and bool(
    flag_value(container.get("args") or [], CLASS_PATH_FLAG)
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
  if {NIGHT_DAG, NIGHT_END} & (set(_all_tasks(spec)) | set(spec["components"])):
    raise PackageError(f"the package has an exit handler ({NIGHT_END}) already")
  if PUSHER_TASK not in tasks(spec):
    raise PackageError(f"the package has no {PUSHER_TASK}, whose image {NIGHT_END} runs in")
  if set(root["dag"]) - {"tasks"}:
    raise PackageError(f"the root DAG has {sorted(set(root['dag']) - {'tasks'})}; not supported")
  image = executor(spec, PUSHER_TASK)["container"]["image"]
  night_dag: dict[str, Any] = {"dag": {"tasks": root["dag"]["tasks"]}}
  night_inputs: dict[str, Any] = {}
  declared = root.get("inputDefinitions") or {}
  if declared:
    # The tasks inside read the pipeline's inputs by the same names from their new parent.
    night_dag["inputDefinitions"] = copy.deepcopy(declared)
    for kind, ref in (
      ("parameters", "componentInputParameter"),
      ("artifacts", "componentInputArtifact"),
    ):
      if declared.get(kind):
        night_inputs[kind] = {name: {ref: name} for name in declared[kind]}
  spec["components"][NIGHT_DAG] = night_dag
  constants = {
    properties.SERVING_DIR_KEY: serving_dir,
    properties.MODEL_NAME_KEY: model_name,
    NIGHT_ID_PARAMETER: RUN_ID_PLACEHOLDER,
    NOTIFY_PARAMETER: json.dumps(list(notify)),
    EVERY_NIGHT_PARAMETER: "true" if every_night else "false",
  }
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
      "command": ["python", "-m", ENTRYPOINT_MODULE, NIGHT_END_COMMAND],
      "args": ["--executor_input", "{{$}}"],
    }
  }
  night_task: dict[str, Any] = {
    "taskInfo": {"name": NIGHT_DAG},
    "componentRef": {"name": NIGHT_DAG},
  }
  if night_inputs:
    night_task["inputs"] = night_inputs
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


def parse_env(text: str) -> tuple[str, str]:
  """Parses `NAME=VALUE` for a plain environment variable of every step.

  Raises:
    ValueError: for another form, or a name that looks like a credential (those stay in a
      Kubernetes secret: `parse_secret_env`).
  """
  name, sep, value = text.partition("=")
  if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
    raise ValueError(f"{text!r} is not NAME=VALUE (e.g. S3_ENDPOINT=http://minio-service:9000)")
  if any(word in name.upper() for word in SECRET_WORDS):
    raise ValueError(
      f"{name} looks like a credential, and the package is not the place for it; pass "
      "--secret-env SECRET_NAME:KEY:ENV_VAR so it is read from a Kubernetes secret."
    )
  return name, value


def parse_secret_env(text: str) -> tuple[str, str, str]:
  """Parses `SECRET_NAME:KEY:ENV_VAR`: a Kubernetes secret's key as an environment variable.

  Raises:
    ValueError: naming the expected form.
  """
  parts = text.split(":")
  if len(parts) != 3 or not all(parts):
    raise ValueError(
      f"{text!r} is not SECRET_NAME:KEY:ENV_VAR "
      "(e.g. mlpipeline-minio-artifact:accesskey:AWS_ACCESS_KEY_ID)"
    )
  return parts[0], parts[1], parts[2]


def add_env(spec: Mapping[str, Any], env: Sequence[tuple[str, str]]) -> None:
  """Sets plain environment variables on every step's container (both targets read them)."""
  for ex in spec["deploymentSpec"]["executors"].values():
    container = ex.get("container")
    if container is not None and env:
      container["env"] = [*container.get("env", []), *({"name": n, "value": v} for n, v in env)]


def parse_volume(text: str) -> tuple[str, str]:
  """Parses `PVC_NAME:/mount/path`.

  Raises:
    ValueError: naming the expected form.
  """
  name, sep, path = text.partition(":")
  if not sep or not name or not path.startswith("/"):
    raise ValueError(f"{text!r} is not PVC_NAME:/mount/path (e.g. serving-pvc:/mnt/serving)")
  return name, path


def platform_spec(
  spec: Mapping[str, Any],
  volumes: Sequence[tuple[str, str]] = (),
  secret_env: Sequence[tuple[str, str, str]] = (),
) -> dict[str, Any]:
  """KFP's Kubernetes platform spec: volumes and secret environment variables for every step.

  Each step's config is kfp-kubernetes' own `KubernetesExecutorConfig` message (`pvcMount`
  and `secretAsEnv` with constant names, which the KFP backend reads from 2.0 on), built with
  its protos and written as KFP's compiler writes it. kfp-kubernetes' `mount_pvc` and
  `use_secret_as_env` take a kfp DSL task, which a TFX-compiled spec has none of, so the
  message is built here. Every step gets every volume (data, serving folder and module files
  may live on them) and every secret variable (object-store credentials, notify URLs for
  NightEnd's `--notify env:NAME`).

  A package with a night (`add_night_id`, `add_exit_handler`) also gives every step the run's
  id as `nights_lib.NIGHT_ID_ENV`, from the pod label KFP sets on every pod of a run
  (`fieldPathAsEnv`, read by the KFP backend from 2.1 on; kfp-kubernetes 1.0.0's protos
  predate it, so it is added to the JSON as KFP's compiler would write it).

  Args:
    spec: the pipelineSpec.
    volumes: (PVC name, mount path) pairs.
    secret_env: (secret name, key, environment variable) triples.
  """
  from google.protobuf import json_format
  from kfp.kubernetes import kubernetes_executor_config_pb2 as k8s

  message = k8s.KubernetesExecutorConfig(
    pvc_mount=[k8s.PvcMount(constant=pvc, mount_path=path) for pvc, path in volumes],
    secret_as_env=[
      k8s.SecretAsEnv(
        secret_name=secret,
        key_to_env=[k8s.SecretAsEnv.SecretKeyToEnvMap(secret_key=key, env_var=var)],
      )
      for secret, key, var in secret_env
    ],
  )
  config = json_format.MessageToDict(message)
  if needs_night_env(spec):
    config["fieldPathAsEnv"] = [{"name": nights_lib.NIGHT_ID_ENV, "fieldPath": RUN_ID_FIELD_PATH}]
  executors = {
    component(spec, name)["executorLabel"]: copy.deepcopy(config) for name in tasks(spec)
  }
  return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def needs_night_env(spec: Mapping[str, Any]) -> bool:
  """Whether the steps of a KFP package need the run's id as an environment variable."""
  return has_exit_handler(spec) or any(
    flag_value((ex.get("container") or {}).get("args") or [], NIGHT_ID_FLAG)
    for ex in spec["deploymentSpec"]["executors"].values()
  )


def _pusher_constant(spec: Mapping[str, Any], key: str) -> str:
  value = tasks(spec)[PUSHER_TASK]["inputs"]["parameters"][key]["runtimeValue"]["constant"]
  return value if isinstance(value, str) else value["stringValue"]


def postprocess(
  doc: dict[str, Any],
  target: str,
  never_cached: Iterable[str],
  config: PipelineConfig | None = None,
) -> dict[str, Any]:
  """Applies every post-processing step for `target` to a compiled package, in place.

  A package with a Pusher also gets the night: the run's id in every TFX step and the exit
  handler that closes the night (`add_night_id`, `add_exit_handler`).

  Args:
    doc: the PipelineJob JSON written by KubeflowV2DagRunner.
    target: `kfp` (open-source Kubeflow Pipelines 2.x) or `vertex` (Vertex AI Pipelines).
    never_cached: tasks that must never be served from a cache.
    config: the pipeline's config, for the exit handler's serving folder, model name and
      notify targets (None: the Pusher's serving folder and model name, no notices).

  Returns:
    doc.

  Raises:
    ValueError: for an unknown target.
    PackageError: when the package is not what the steps expect.
  """
  if target not in TARGETS:
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
  spec = doc["pipelineSpec"]
  check_container_tasks(spec)
  disable_cache(spec, never_cached)
  if target == KFP:
    add_span_resolvers(spec)
  add_live_key_task(spec)
  use_entrypoint(spec)
  if PUSHER_TASK in tasks(spec):
    add_night_id(spec)
    add_exit_handler(
      spec,
      serving_dir=config.serving_dir if config else _pusher_constant(spec, SERVING_DIR_PARAMETER),
      model_name=config.model_name if config else _pusher_constant(spec, MODEL_NAME_PARAMETER),
      notify=config.notify if config else (),
      every_night=config.notify_every_night if config else False,
      final_status=target in FINAL_STATUS_TARGETS,
    )
  return doc


def kfp_package(
  doc: Mapping[str, Any],
  volumes: Sequence[tuple[str, str]] = (),
  secret_env: Sequence[tuple[str, str, str]] = (),
) -> str:
  """The package open-source KFP uploads: the bare PipelineSpec, then a platform spec if any
  (volumes, secrets, or the night's id for a package with a night).

  Both documents are JSON, which is YAML; they are separated by `---` as KFP expects. The
  PipelineJob's pipeline root becomes the spec's `defaultPipelineRoot`, which KFP uses for a
  run that names no root, so the package alone is enough to submit.
  """
  spec = dict(doc["pipelineSpec"])
  root = doc.get("runtimeConfig", {}).get("gcsOutputDirectory")
  if root:
    spec["defaultPipelineRoot"] = root
  parts = [json.dumps(spec, indent=1, sort_keys=True)]
  if volumes or secret_env or needs_night_env(spec):
    platform = platform_spec(spec, volumes, secret_env)
    parts.append(json.dumps(platform, indent=1, sort_keys=True))
  return "\n---\n".join(parts) + "\n"
