"""A local stand-in for open-source Kubeflow Pipelines 2.x that runs a compiled package's tasks.

`LocalKfp.run` walks the package's DAGs and, for each task, does what KFP's driver and launcher
do (backend/src/v2/driver/driver.go, component/launcher_v2.go, metadata/client.go,
cacheutils/cache.go, compiler/argocompiler/dag.go; 2.5.0 unless said otherwise), with local
folders for the object store:

- runs each DAG's tasks in dependency order; a DAG task (its component is a `dag`, as
  `dsl.ExitHandler` and `kubeflow_night.add_exit_handler` write) runs its own tasks the same
  way, with the DAG task's inputs as their component inputs. Once a task fails, no other task
  of its DAG starts (Argo's fail-fast DAGs), and the DAG fails; a task whose trigger policy is
  `ALL_UPSTREAM_TASKS_COMPLETED` (an exit task) runs once its upstream tasks ended, failed or
  not;
- builds the executor input with kfp's own `kfp.local.executor_input_utils.
  construct_executor_input` from the task's component spec and parameter values (constants,
  upstream output parameters, component inputs), then adds the upstream artifacts the way
  KFP's driver reads them back from ML Metadata: named by their id, every property as
  `metadata`, and typed `{instanceSchema: ""}` (KFP's MLMD client does not read the schema
  back). Output artifacts get no name, as KFP provisions them. A parameter constant that is
  exactly `{{$.pipeline_job_uuid}}` (or `_name`, `_resource_name`, `{{$.pipeline_task_name}}`)
  becomes the run's id (one per `run`) or name, as the driver does; a `taskFinalStatus` input
  becomes the struct KFP 2.14 and later pass (`state` COMPLETE, CACHED or FAILED: the ML
  Metadata state of the producer's execution, `pipelineJobResourceName`, `pipelineTaskName`, and an
  empty `error`, which KFP does not fill in). KFP 2.0 to 2.5 refuse to create a run of a
  package with such an input at all; the launcher does not check that;
- computes KFP's cache key (input artifact ids, parameter values, output specs, image, command
  and arguments before placeholder substitution) and, for a task whose `cachingOptions` enables
  the cache, reuses the outputs of an earlier successful execution with the same key, in this
  or an earlier `run` of the same `LocalKfp`;
- otherwise substitutes the placeholders KFP's launcher substitutes (`{{$}}`, input and output
  placeholders) with kfp's `placeholder_utils`, leaving `{{$.pipeline_...}}` ones in the
  command and arguments as they are, as KFP's launcher does (kfp's local runner would put a
  random id there); gives the container the environment variables of the platform spec's
  `fieldPathAsEnv` that name the pod's `pipeline/runid` label (the run's id); runs the
  container's command and arguments as a subprocess (`python` replaced by `sys.executable`,
  the repository root as working folder), and reads the executor output file: output artifact
  URIs and metadata are merged as the launcher does, and stored the way its MLMD client stores
  them (numbers as doubles, booleans as ints, lists and structs wrapped; `display_name` and
  `store_session_info` added); output parameters come from the executor output or their files.

With `warm=True`, a `python -m` command runs as a child forked from one process that imported
TensorFlow, Beam and TFX once (`warm_python`), not as a fresh process: for tests of many steps
that do not check a step's start-up.

What it does not emulate: pods, images, Argo, object-store uploads and downloads (artifacts
are local folders under `pipeline_root`), the rest of the platform spec (volumes, secrets),
retries, parallelism, conditions and loops.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from google.protobuf import json_format
from kfp.local import executor_input_utils, placeholder_utils
from kfp.pipeline_spec import pipeline_spec_pb2

from components.arguments import flag_value
from pipeline.definition import kubeflow_lib
from tests.support import cli_runs, warm_python

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
RAN = "ran"
CACHED = "cached"
FAILED = "failed"
EXIT_STRATEGY = "ALL_UPSTREAM_TASKS_COMPLETED"
# The ML Metadata execution states KFP puts in a final status.
COMPLETE_STATE = "COMPLETE"
CACHED_STATE = "CACHED"
FAILED_STATE = "FAILED"
# Placeholders KFP's driver resolves in parameter constants and its launcher leaves in arguments.
JOB_ID = "{{$.pipeline_job_uuid}}"
JOB_NAME = "{{$.pipeline_job_name}}"
JOB_RESOURCE_NAME = "{{$.pipeline_job_resource_name}}"
TASK_NAME = "{{$.pipeline_task_name}}"
_RUN_PLACEHOLDER_PREFIX = "{{$.pipeline_"
_KEPT = "@@kfp-launcher-kept@@"
# The pod label KFP's API server gives every pod of a run: its id.
RUN_ID_FIELD_PATH = "metadata.labels['pipeline/runid']"


class LauncherError(RuntimeError):
  """The package cannot be run the way KFP runs it, or a task failed."""


@dataclasses.dataclass
class Artifact:
  """An artifact as KFP's ML Metadata holds it: id, URI, schema and typed custom properties.

  Attributes:
    id: the MLMD id, which is the artifact's name in downstream executor inputs.
    uri: where the artifact's files are.
    schema: the instance schema of the producing output (its type).
    properties: custom properties as (MLMD value kind, value): `string_value`,
      `double_value`, `int_value` or `struct_value`.
  """

  id: int
  uri: str
  schema: str
  properties: dict[str, tuple[str, Any]]

  def value(self, key: str) -> Any:
    """A property's plain value (None when absent)."""
    return self.properties.get(key, (None, None))[1]


@dataclasses.dataclass
class TaskResult:
  """One task of one run.

  Attributes:
    name: task name.
    state: RAN, CACHED or FAILED.
    seconds: wall time of the subprocess (0 when cached).
    cache_key: KFP's fingerprint of the task's inputs.
    artifacts: output artifacts by output key (none when it failed).
    parameters: output parameter values by key.
    executor_input: the executor input (dict) the task got.
    log: the subprocess's combined output (None when cached).
    error: for a failed task, its exit code and the tail of its output.
    warm: whether it ran as a child of the warm process rather than as a fresh one.
  """

  name: str
  state: str
  seconds: float
  cache_key: str
  artifacts: dict[str, Artifact]
  parameters: dict[str, Any]
  executor_input: dict[str, Any]
  log: pathlib.Path | None
  error: str = ""
  warm: bool = False


def pipeline_spec(package: Mapping[str, Any]) -> dict[str, Any]:
  """The PipelineSpec of a TFX PipelineJob JSON (`pipelineSpec`) or of a bare spec."""
  return package.get("pipelineSpec", package)


def load_package(path: str | os.PathLike) -> dict[str, Any]:
  """Reads a compiled package: TFX's PipelineJob JSON, or the first document of a KFP YAML."""
  text = pathlib.Path(path).read_text(encoding="utf-8")
  return json.loads(text.split("\n---\n")[0])


def load_platform_spec(path: str | os.PathLike) -> dict[str, Any]:
  """The platform spec of a KFP package (its second document), or {} when it has none."""
  parts = pathlib.Path(path).read_text(encoding="utf-8").split("\n---\n")
  return json.loads(parts[1]) if len(parts) > 1 and parts[1].strip() else {}


def _component(spec: Mapping[str, Any], task: Mapping[str, Any]) -> dict[str, Any]:
  return spec["components"][task["componentRef"]["name"]]


def _is_dag(spec: Mapping[str, Any], task: Mapping[str, Any]) -> bool:
  return "dag" in _component(spec, task)


def _is_exit_task(task: Mapping[str, Any]) -> bool:
  return (task.get("triggerPolicy") or {}).get("strategy") == EXIT_STRATEGY


def dag_of(spec: Mapping[str, Any], name: str) -> dict[str, Any]:
  """The tasks of the DAG that holds the task `name` (the root's, or a DAG component's).

  Raises:
    LauncherError: when no DAG holds it.
  """
  candidates = [spec["root"]["dag"]["tasks"]]
  candidates += [c["dag"]["tasks"] for c in spec["components"].values() if "dag" in c]
  for tasks in candidates:
    if name in tasks:
      return tasks
  raise LauncherError(f"no DAG of the package holds a task {name}")


def producers(task: Mapping[str, Any]) -> set[str]:
  """The tasks a task depends on: `dependentTasks` and the producers of its inputs."""
  out = set(task.get("dependentTasks") or [])
  inputs = task.get("inputs") or {}
  for spec in (inputs.get("parameters") or {}).values():
    out.update(
      v["producerTask"] for k, v in spec.items() if k in ("taskOutputParameter", "taskFinalStatus")
    )
  for spec in (inputs.get("artifacts") or {}).values():
    out.update(v["producerTask"] for k, v in spec.items() if k == "taskOutputArtifact")
  return out


def _dag_order(tasks: Mapping[str, Any]) -> list[str]:
  """One DAG's task names so that every task comes after its producers (ties by name).

  Raises:
    LauncherError: for a dependency on a task outside the DAG, or a cycle.
  """
  deps = {name: producers(task) for name, task in tasks.items()}
  for name, ds in deps.items():
    missing = ds - set(tasks)
    if missing:
      raise LauncherError(f"task {name} depends on missing tasks {sorted(missing)}")
  order: list[str] = []
  while len(order) < len(tasks):
    ready = sorted(n for n in tasks if n not in order and deps[n] <= set(order))
    if not ready:
      raise LauncherError(f"dependency cycle among {sorted(set(tasks) - set(order))}")
    order.extend(ready)
  return order


def topological_order(spec: Mapping[str, Any]) -> list[str]:
  """Every step (non-DAG task) of the package, in an order the launcher runs them: each DAG's
  tasks in dependency order (ties by name), a DAG task's own tasks in its place.

  Raises:
    LauncherError: for a dependency on a missing task or a cycle.
  """

  def walk(tasks: Mapping[str, Any]) -> list[str]:
    out = []
    for name in _dag_order(tasks):
      task = tasks[name]
      out.extend(walk(_component(spec, task)["dag"]["tasks"]) if _is_dag(spec, task) else [name])
    return out

  return walk(spec["root"]["dag"]["tasks"])


def container_of(spec: Mapping[str, Any], task_name: str) -> dict[str, Any]:
  """The container a task runs.

  Raises:
    LauncherError: when the task is not a container task (KFP runs no resolver nodes).
  """
  task = dag_of(spec, task_name)[task_name]
  label = _component(spec, task).get("executorLabel")
  ex = spec["deploymentSpec"]["executors"].get(label) or {}
  if "container" not in ex:
    raise LauncherError(f"task {task_name} is not a container task ({label}: {sorted(ex)})")
  return ex["container"]


def _to_mlmd(value: Any) -> tuple[str, Any]:
  """StructValueToMLMDValue of KFP's metadata client."""
  if isinstance(value, bool):
    return "int_value", int(value)
  if isinstance(value, str):
    return "string_value", value
  if isinstance(value, int | float):
    return "double_value", float(value)
  if isinstance(value, list):
    return "struct_value", {"list": value}
  if isinstance(value, dict):
    return "struct_value", {"struct": value}
  raise LauncherError(f"unknown/unsupported value type {type(value).__name__} in metadata")


def _from_mlmd(kind: str, value: Any) -> Any:
  """toRuntimeArtifact of KFP's metadata client: every kind becomes a JSON value."""
  return float(value) if kind in ("int_value", "double_value") else value


def _schema(artifact_type: Mapping[str, Any]) -> str:
  if artifact_type.get("instanceSchema"):
    return artifact_type["instanceSchema"]
  return f"title: {artifact_type.get('schemaTitle', '')}"


def cache_key(executor_input: Mapping[str, Any], container: Mapping[str, Any]) -> str:
  """KFP's execution fingerprint (cacheutils.GenerateCacheKey) of a task's executor input."""
  inputs = executor_input.get("inputs") or {}
  outputs = executor_input.get("outputs") or {}
  key = {
    "inputArtifactNames": {
      k: {"artifactNames": [a.get("name", "") for a in v.get("artifacts", [])]}
      for k, v in (inputs.get("artifacts") or {}).items()
    },
    "inputParameterValues": inputs.get("parameterValues") or {},
    "outputArtifactsSpec": {
      k: {kk: vv for kk, vv in v["artifacts"][0].items() if kk != "uri"}
      for k, v in (outputs.get("artifacts") or {}).items()
      if v.get("artifacts")
    },
    "outputParametersSpec": sorted(outputs.get("parameters") or {}),
    "containerSpec": {
      "image": container.get("image"),
      "cmdArgs": [*container.get("command", []), *container.get("args", [])],
    },
  }
  return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


def _text_to_value(text: str, parameter_type: str) -> Any:
  """TextToPbValue of KFP's metadata client, for an output parameter file."""
  if parameter_type == "STRING":
    return text
  if parameter_type in ("NUMBER_INTEGER", "NUMBER_DOUBLE"):
    return float(text)
  return json.loads(text)


@dataclasses.dataclass
class _Run:
  """One `LocalKfp.run`: the package, the run's names and id, and what ran so far."""

  spec: Mapping[str, Any]
  pipeline_name: str
  run_id: str
  job_id: str
  platform: Mapping[str, Any]
  needed: set[str] | None
  results: dict[str, TaskResult] = dataclasses.field(default_factory=dict)
  dag_states: dict[str, str] = dataclasses.field(default_factory=dict)

  def placeholder(self, value: str, task_name: str) -> str:
    """A parameter constant as KFP's driver resolves it: only a whole-value placeholder."""
    names = {
      JOB_ID: self.job_id,
      JOB_NAME: self.run_id,
      JOB_RESOURCE_NAME: self.run_id,
      TASK_NAME: task_name,
    }
    return names.get(value, value)

  def final_status(self, producer: str) -> dict[str, Any]:
    """The TASK_FINAL_STATUS value KFP (2.14 on) passes for `producer`."""
    if producer in self.dag_states:
      state = self.dag_states[producer]
    else:
      ran = self.results[producer].state
      state = {FAILED: FAILED_STATE, CACHED: CACHED_STATE}.get(ran, COMPLETE_STATE)
    return {
      "state": state,
      "pipelineJobResourceName": self.run_id,
      "pipelineTaskName": producer,
      "error": {},
    }


class LocalKfp:
  """Runs compiled packages task by task, keeping KFP's cache and artifact store across runs.

  Args:
    pipeline_root: folder that stands for the run's pipeline root (artifacts, executor outputs).
    env: environment of the task subprocesses (default: this process's).
    timeout: seconds one task may take.
    artifact_root: where output artifacts go instead, e.g. an s3:// prefix, as KFP's launcher
      provisions them under an object-store pipeline root; executor outputs and logs stay
      local, as they do in KFP's pods (/tmp/kfp_outputs).
    warm: run `python -m` commands as children forked from one process that imported
      TensorFlow, Beam and TFX once (`warm_python`), instead of fresh processes; for tests
      that run many steps and do not check a step's start-up. `close` ends that process.
    fresh: names of tasks that run as fresh processes even when `warm` is set: the steps
      whose start-up a test checks.
  """

  def __init__(
    self,
    pipeline_root: str | os.PathLike,
    env=None,
    timeout: int = 900,
    artifact_root: str | None = None,
    warm: bool = False,
    fresh: Collection[str] = (),
  ):
    self.pipeline_root = pathlib.Path(pipeline_root)
    self.artifact_root = artifact_root.rstrip("/") if artifact_root else None
    self.env = dict(env or os.environ)
    self.env["PYTHONPATH"] = os.pathsep.join(
      p for p in (str(REPO_ROOT), self.env.get("PYTHONPATH")) if p
    )
    self.timeout = timeout
    self._artifacts: dict[int, Artifact] = {}
    self._cache: dict[tuple[str, str], tuple[dict[str, Artifact], dict[str, Any]]] = {}
    self._warm = (
      warm_python.WarmPython(self.env, self.pipeline_root / "warm_python.log") if warm else None
    )
    self._fresh = frozenset(fresh)

  def close(self) -> None:
    """Ends the warm process, if any (it also ends when this object is collected)."""
    if self._warm is not None:
      self._warm.close()

  def __enter__(self) -> LocalKfp:
    return self

  def __exit__(self, *exc) -> None:
    self.close()

  def run(
    self,
    package: Mapping[str, Any],
    run_id: str,
    until: str | None = None,
    *,
    platform: Mapping[str, Any] | None = None,
    check: bool = True,
  ) -> dict[str, TaskResult]:
    """Runs the tasks of `package` once, as KFP runs them (see the module docstring).

    Args:
      package: a compiled package (see `load_package`).
      run_id: names this run's folder under the pipeline root, and the run
        (`pipelineJobResourceName`); the run's id (`{{$.pipeline_job_uuid}}`) is a new uuid.
      until: run only this task and the tasks it depends on (no exit task unless it is one).
      platform: the package's platform spec (`load_platform_spec`), for `fieldPathAsEnv`.
      check: raise LauncherError when a task failed, after the exit tasks ran.

    Returns:
      The result of every step that ran or came from the cache, by task name (DAG tasks and
      tasks that never started are left out).

    Raises:
      LauncherError: when a task is not a container task, or (with `check`) a task failed,
        with its output's tail.
    """
    spec = pipeline_spec(package)
    executors = (
      (((platform or {}).get("platforms") or {}).get("kubernetes") or {}).get("deploymentSpec")
      or {}
    ).get("executors") or {}
    run = _Run(
      spec=spec,
      pipeline_name=spec["pipelineInfo"]["name"],
      run_id=run_id,
      job_id=str(uuid.uuid4()),
      platform=executors,
      needed=upstream_closure(spec, until) if until is not None else None,
    )
    runtime = (package.get("runtimeConfig") or {}).get("parameterValues") or {}
    self._run_dag(run, spec["root"]["dag"]["tasks"], runtime)
    failed = [r for r in run.results.values() if r.state == FAILED]
    if check and failed:
      raise LauncherError(f"task {failed[0].name} {failed[0].error}")
    return run.results

  def _run_dag(self, run: _Run, tasks: Mapping[str, Any], inputs: Mapping[str, Any]) -> bool:
    """Runs one DAG's tasks; returns whether none failed."""
    ended: dict[str, bool] = {}
    failed = False
    for name in _dag_order(tasks):
      task = tasks[name]
      if run.needed is not None and name not in run.needed:
        continue
      upstream = producers(task)
      if _is_exit_task(task):
        if not upstream <= set(ended):
          continue
      elif failed or not all(ended.get(u) for u in upstream):
        continue
      if _is_dag(run.spec, task):
        sub_inputs = self._arguments(run, name, task, inputs)
        ok = self._run_dag(run, _component(run.spec, task)["dag"]["tasks"], sub_inputs)
        run.dag_states[name] = COMPLETE_STATE if ok else FAILED_STATE
      else:
        result = self._run_task(run, name, task, inputs)
        run.results[name] = result
        ok = result.state != FAILED
      ended[name] = ok
      failed = failed or not ok
    return not failed

  def _arguments(self, run: _Run, name: str, task, inputs) -> dict[str, Any]:
    out = {}
    for key, spec in ((task.get("inputs") or {}).get("parameters") or {}).items():
      if "runtimeValue" in spec:
        value = spec["runtimeValue"]["constant"]
        out[key] = run.placeholder(value, name) if isinstance(value, str) else value
      elif "taskOutputParameter" in spec:
        ref = spec["taskOutputParameter"]
        out[key] = run.results[ref["producerTask"]].parameters[ref["outputParameterKey"]]
      elif "componentInputParameter" in spec:
        out[key] = inputs[spec["componentInputParameter"]]
      elif "taskFinalStatus" in spec:
        producer = spec["taskFinalStatus"]["producerTask"]
        out[key] = run.final_status(producer)
      else:
        raise LauncherError(f"parameter {key}: {sorted(spec)} is not supported here")
    return out

  def _executor_input(self, run: _Run, name, task, component, task_root, inputs) -> dict:
    comp = pipeline_spec_pb2.ComponentSpec()
    json_format.ParseDict(component, comp, ignore_unknown_fields=True)
    no_artifacts = copy.deepcopy(comp)
    no_artifacts.input_definitions.ClearField("artifacts")
    executor_input = executor_input_utils.construct_executor_input(
      no_artifacts, self._arguments(run, name, task, inputs), str(task_root)
    )
    for key, artifact_list in executor_input.outputs.artifacts.items():
      for artifact in artifact_list.artifacts:
        artifact.name = ""  # KFP's driver provisions outputs without a name.
        if self.artifact_root:
          relative = task_root.relative_to(self.pipeline_root)
          artifact.uri = f"{self.artifact_root}/{relative.as_posix()}/{key}"
    for key, ref in ((task.get("inputs") or {}).get("artifacts") or {}).items():
      if "taskOutputArtifact" not in ref:
        raise LauncherError(f"input artifact {key}: {sorted(ref)} is not supported here")
      out = ref["taskOutputArtifact"]
      upstream = run.results[out["producerTask"]].artifacts[out["outputArtifactKey"]]
      runtime_artifact = executor_input.inputs.artifacts[key].artifacts.add()
      json_format.ParseDict(
        {
          "name": str(upstream.id),
          "uri": upstream.uri,
          "type": {"instanceSchema": ""},
          "metadata": {k: _from_mlmd(*v) for k, v in upstream.properties.items()},
        },
        runtime_artifact,
      )
    return executor_input_utils.executor_input_to_dict(executor_input, comp)

  def _environment(self, run: _Run, component) -> dict[str, str]:
    env = dict(self.env)
    config = run.platform.get(component.get("executorLabel")) or {}
    for item in config.get("fieldPathAsEnv") or []:
      if item.get("fieldPath") != RUN_ID_FIELD_PATH:
        raise LauncherError(f"fieldPathAsEnv {item.get('fieldPath')!r} is not emulated here")
      env[item["name"]] = run.job_id
    return env

  def _run_task(self, run: _Run, name: str, task, inputs) -> TaskResult:
    component = _component(run.spec, task)
    container = container_of(run.spec, name)
    task_root = self.pipeline_root / run.pipeline_name / run.run_id / name
    executor_input = self._executor_input(run, name, task, component, task_root, inputs)
    key = cache_key(executor_input, container)
    caching = bool((task.get("cachingOptions") or {}).get("enableCache"))
    if caching and (run.pipeline_name, key) in self._cache:
      artifacts, parameters = self._cache[(run.pipeline_name, key)]
      return TaskResult(name, CACHED, 0.0, key, artifacts, parameters, executor_input, None)

    kept = [
      a.replace(_RUN_PLACEHOLDER_PREFIX, _KEPT)
      for a in [*container.get("command", []), *container.get("args", [])]
    ]
    command = placeholder_utils.replace_placeholders(
      kept,
      executor_input,
      pipeline_resource_name=run.run_id,
      task_resource_name=name,
      pipeline_root=str(self.pipeline_root),
    )
    command = [a.replace(_KEPT, _RUN_PLACEHOLDER_PREFIX) for a in command]
    if command and command[0] in ("python", "python3"):
      command[0] = sys.executable
    task_root.mkdir(parents=True, exist_ok=True)
    log = task_root.parent / f"{name}.log"
    start = time.monotonic()
    env = self._environment(run, component)
    module = command[2] if command[1:2] == ["-m"] and len(command) > 2 else None
    warm = bool(
      self._warm is not None
      and self._warm.can_run(env)
      and name not in self._fresh
      and module
      and command[0] == sys.executable
    )
    if warm:
      log.write_text("", encoding="utf-8")
      returncode = self._warm.run(
        {"module": module},
        command[3:],
        env=env,
        cwd=REPO_ROOT,
        stdout=log,
        stderr=log,
        timeout=self.timeout,
      )
      if returncode is None:
        raise LauncherError(f"task {name} ran past {self.timeout} s; see {log}")
    else:
      with open(log, "w", encoding="utf-8") as out:
        try:
          returncode = subprocess.run(
            command,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO_ROOT,
            timeout=self.timeout,
            check=False,
          ).returncode
        except subprocess.TimeoutExpired:
          raise LauncherError(f"task {name} ran past {self.timeout} s; see {log}") from None
    seconds = time.monotonic() - start
    if returncode != 0:
      tail = log.read_text(encoding="utf-8", errors="replace")[-4000:]
      error = f"exited with {returncode}:\n{tail}"
      return TaskResult(name, FAILED, seconds, key, {}, {}, executor_input, log, error, warm)
    artifacts, parameters = self._collect(executor_input, component)
    if caching:
      self._cache[(run.pipeline_name, key)] = (artifacts, parameters)
    return TaskResult(name, RAN, seconds, key, artifacts, parameters, executor_input, log, "", warm)

  def _collect(self, executor_input, component) -> tuple[dict[str, Artifact], dict[str, Any]]:
    """Reads the executor output as KFP's launcher does and records the output artifacts."""
    outputs = executor_input["outputs"]
    output_file = pathlib.Path(outputs["outputFile"])
    written = json.loads(output_file.read_text()) if output_file.exists() else {}
    artifacts = {}
    for key, artifact_list in (outputs.get("artifacts") or {}).items():
      provisioned = artifact_list["artifacts"][0]
      uri, metadata = provisioned["uri"], dict(provisioned.get("metadata") or {})
      produced = ((written.get("artifacts") or {}).get(key) or {}).get("artifacts") or []
      if produced:
        uri = produced[0].get("uri") or uri
        metadata.update(produced[0].get("metadata") or {})
      properties = {k: _to_mlmd(v) for k, v in metadata.items()}
      properties.setdefault("display_name", ("string_value", key))
      properties.setdefault("store_session_info", ("string_value", "{}"))
      artifact_id = len(self._artifacts) + 1
      artifact = Artifact(artifact_id, uri, _schema(provisioned.get("type") or {}), properties)
      self._artifacts[artifact_id] = artifact
      artifacts[key] = artifact
    parameters = dict(written.get("parameterValues") or {})
    declared = (component.get("outputDefinitions") or {}).get("parameters") or {}
    for key, parameter in (outputs.get("parameters") or {}).items():
      if key not in parameters:
        path = pathlib.Path(parameter["outputFile"])
        if not path.exists():
          raise LauncherError(f"output parameter {key} was not written ({path})")
        parameters[key] = _text_to_value(path.read_text(), declared[key]["parameterType"])
    return artifacts, parameters


def compile_package(
  output: str | os.PathLike,
  *flags: str,
  env: Mapping[str, str] | None = None,
  timeout=300,
  warm: bool = False,
) -> subprocess.CompletedProcess:
  """Runs pipeline/run_kubeflow.py --output OUTPUT FLAGS... and returns the finished process.

  With `warm`, it runs in a child of the test worker's warm process (`cli_runs.run_script`),
  for tests of what the package holds rather than of the compiler's start-up.
  """
  run_env = dict(env or os.environ)
  run_env.setdefault("TF_USE_LEGACY_KERAS", "1")
  run_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  args = ["--output", str(output), *(str(f) for f in flags)]
  if warm:
    return cli_runs.run_script("run_kubeflow.py", *args, timeout=timeout, env=run_env, warm=True)
  return subprocess.run(
    [sys.executable, str(REPO_ROOT / "pipeline" / "run_kubeflow.py"), *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    env=run_env,
    cwd=REPO_ROOT,
    check=False,
  )


def executor_class_paths(spec: Mapping[str, Any]) -> dict[str, str]:
  """The TFX executor class each task runs, by task name (tasks without one are left out)."""
  out = {}
  for name in kubeflow_lib.tasks(spec):
    container = kubeflow_lib.executor(spec, name).get("container") or {}
    path = flag_value(container.get("args") or [], kubeflow_lib.CLASS_PATH_FLAG)
    if path:
      out[name] = path
  return out


def states(results: Mapping[str, TaskResult]) -> dict[str, str]:
  """Task name -> RAN or CACHED."""
  return {name: r.state for name, r in results.items()}


def warnings(stderr: str) -> list[str]:
  """The `warning:` lines of a compile's stderr."""
  return [line for line in stderr.splitlines() if line.startswith("warning:")]


def upstream_closure(spec: Mapping[str, Any], name: str) -> set[str]:
  """`name` and every task it depends on, directly or not, in its DAG and, for a task in a
  sub-DAG, the DAG tasks that hold it and what they depend on."""
  parent = {}  # task name -> the DAG task whose DAG holds it
  for dag in [spec["root"]["dag"]["tasks"]] + [
    c["dag"]["tasks"] for c in spec["components"].values() if "dag" in c
  ]:
    for task_name, task in dag.items():
      if _is_dag(spec, task):
        parent.update(dict.fromkeys(_component(spec, task)["dag"]["tasks"], task_name))
  out: set[str] = set()
  todo = [name]
  while todo:
    current = todo.pop()
    if current not in out:
      out.add(current)
      todo.extend(producers(dag_of(spec, current)[current]))
      if current in parent:
        todo.append(parent[current])
  return out
