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
  spec (a second YAML document), which TFX does not write: `kubeflow_package.platform_spec`,
  from the volumes and variables parsed here (`parse_volume`, `parse_secret_env`).
- **The end of a night.** TFX has no exit handler: `kubeflow_night`.

This module reads the parsed spec (`tasks`, `executor`, ...) and holds the steps;
`kubeflow_package.postprocess` applies them for a target.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core import properties
from pipeline.definition import nodes

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
PIPELINE_NAME_PARAMETER = "pipeline_name"
# The live key task: its subcommand, name suffix and output, which LiveModel and Pusher get.
LIVE_KEY_COMMAND = "live-key"
LIVE_KEY_SUFFIX = "_key"
# The live key task's parameter: the compiled run's settings (`live_model_lib.live_model_key`).
SETTINGS_PARAMETER = "settings"
# The type KFP 2.x (and Vertex) render as a page in the run's UI, and the kit's type of a page
# (`components.artifacts.HtmlReport`), whose title TFX's compiler writes in its schema.
KFP_HTML_TYPE = {"schemaTitle": "system.HTML", "schemaVersion": "0.0.1"}
HTML_REPORT_TITLE = "components.HtmlReport"
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


def all_tasks(spec: Mapping[str, Any]) -> dict[str, Any]:
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
  return {name: task for name, task in all_tasks(spec).items() if not _is_dag(spec, task)}


def _dag_holding(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The tasks of the DAG that holds `task_name`."""
  for dag in dags(spec):
    if task_name in dag:
      return dag
  raise PackageError(f"task {task_name!r} is not in the compiled package")


def component(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The component spec a task runs."""
  return spec["components"][all_tasks(spec)[task_name]["componentRef"]["name"]]


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


def declare_html_outputs(spec: Mapping[str, Any]) -> list[str]:
  """Declares every report page output (`HtmlReport`) as KFP's `system.HTML`, in place.

  TFX's compiler types a custom artifact as a generic `Artifact` schema titled with its type
  name, which the KFP UI shows as a bare link; typed `system.HTML`, the UI draws the file at
  the artifact's uri as the run's visualization. `kfp_entrypoint` gives the step its own type
  back before TFX reads its outputs.

  Returns:
    "<component>.<output>" for each output declared.
  """
  declared = []
  for name, comp in spec.get("components", {}).items():
    outputs = (comp.get("outputDefinitions") or {}).get("artifacts") or {}
    for key, definition in outputs.items():
      schema = (definition.get("artifactType") or {}).get("instanceSchema") or ""
      if re.search(rf"^title: {re.escape(HTML_REPORT_TITLE)}$", schema, re.MULTILINE):
        definition["artifactType"] = dict(KFP_HTML_TYPE)
        declared.append(f"{name}.{key}")
  return declared


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
  if name in all_tasks(spec) or name in spec["components"]:
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
  add_constants(spec, name, constants or {})
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


def add_constants(
  spec: Mapping[str, Any], name: str, values: Mapping[str, str], optional: bool = False
) -> None:
  """String parameters with constant values, on task `name` and in its component's inputs
  (`optional`: declared so, for an executor whose spec may lack them)."""
  definitions = component(spec, name).setdefault("inputDefinitions", {})
  inputs = tasks(spec)[name].setdefault("inputs", {})
  for key, value in values.items():
    definition: dict[str, Any] = {"parameterType": "STRING"}
    if optional:
      definition["isOptional"] = True
    definitions.setdefault("parameters", {})[key] = definition
    inputs.setdefault("parameters", {})[key] = {"runtimeValue": {"constant": value}}


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


def add_live_key_task(spec: dict[str, Any], settings: str = "") -> str | None:
  """Adds the task that reads what the serving folder serves, for LiveModel's cache key.

  LiveModel's output depends on the serving folder, which KFP's cache cannot see. The task
  (`LiveModel_key`, uncached, `python -m pipeline.definition.kfp_entrypoint live-key`) computes
  `live_model_lib.live_model_key` from the LiveModel's serving_dir and model_name and the
  pipeline's name, and feeds it as `live_key` to LiveModel, which is then cached by it, and to
  the Pusher, which records it in the manifest, exactly as LocalDagRunner does. `settings` (the
  config's `settings_fingerprint`, from the compile) is its `settings` parameter.

  Returns:
    The task's name, or None when the package has no LiveModel.
  """
  if nodes.LIVE_MODEL not in tasks(spec):
    return None
  name = nodes.LIVE_MODEL + LIVE_KEY_SUFFIX
  _add_key_task(
    spec,
    name,
    LIVE_KEY_COMMAND,
    nodes.LIVE_MODEL,
    (properties.SERVING_DIR_KEY, properties.MODEL_NAME_KEY),
    properties.LIVE_KEY_KEY,
    [t for t in serving_tasks(spec) if t in _dag_holding(spec, nodes.LIVE_MODEL)],
    constants={
      PIPELINE_NAME_PARAMETER: spec["pipelineInfo"]["name"],
      **({SETTINGS_PARAMETER: settings} if settings else {}),
    },
  )
  return name


def serving_tasks(spec: Mapping[str, Any]) -> list[str]:
  """Tasks that read or write the serving folder (a `serving_dir` parameter): LiveModel, its key
  task, the Pusher and NightEnd."""
  return [
    name
    for name in tasks(spec)
    if properties.SERVING_DIR_KEY
    in component(spec, name).get("inputDefinitions", {}).get("parameters", {})
  ]


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
