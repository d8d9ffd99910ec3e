"""The Kubeflow package: every post-processing step for a target, and what KFP uploads.

`postprocess` applies the steps of `kubeflow_lib` (and, with a Pusher, the night's:
`kubeflow_night`) to the PipelineJob JSON TFX compiles; `kfp_package` writes what open-source
KFP uploads, the bare PipelineSpec and, when needed, the Kubernetes platform spec
(`platform_spec`) after it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from core import properties
from pipeline.definition import kubeflow_lib, kubeflow_night, nodes

if TYPE_CHECKING:
  from pipeline.definition.config import PipelineConfig


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
  executors = {
    kubeflow_lib.component(spec, name)["executorLabel"]: copy.deepcopy(config)
    for name in kubeflow_lib.tasks(spec)
  }
  return {"platforms": {"kubernetes": {"deploymentSpec": {"executors": executors}}}}


def _pusher_constant(spec: Mapping[str, Any], key: str) -> str:
  value = kubeflow_lib.tasks(spec)[nodes.PUSHER]["inputs"]["parameters"][key]["runtimeValue"][
    "constant"
  ]
  return value if isinstance(value, str) else value["stringValue"]


def postprocess(
  doc: dict[str, Any],
  target: str,
  never_cached: Iterable[str],
  config: PipelineConfig | None = None,
) -> dict[str, Any]:
  """Applies every post-processing step for `target` to a compiled package, in place.

  A package with a Pusher also gets the night: the run's id as the `night_id` parameter of the
  steps that record it, and the exit handler that closes the night (`add_night_id`,
  `add_exit_handler`).

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
  if target not in kubeflow_lib.TARGETS:
    raise ValueError(f"unknown target {target!r}; choose from {', '.join(kubeflow_lib.TARGETS)}")
  spec = doc["pipelineSpec"]
  kubeflow_lib.check_container_tasks(spec)
  kubeflow_lib.disable_cache(spec, never_cached)
  resolvers = kubeflow_lib.add_span_resolvers(spec) if target == kubeflow_lib.KFP else []
  kubeflow_lib.add_live_key_task(spec, config.settings_fingerprint() if config else "")
  kubeflow_lib.use_entrypoint(spec)
  kubeflow_lib.declare_html_outputs(spec)
  if nodes.PUSHER in kubeflow_lib.tasks(spec):
    if config:
      serving_dir, model_name = config.serving_dir, config.model_name
    else:
      serving_dir = _pusher_constant(spec, properties.SERVING_DIR_KEY)
      model_name = _pusher_constant(spec, properties.MODEL_NAME_KEY)
    kubeflow_night.add_night_id(spec)
    kubeflow_night.add_span_notes(
      spec, resolvers, serving_dir, model_name, config.stale_after_s if config else 0.0
    )
    kubeflow_night.add_exit_handler(
      spec,
      serving_dir=serving_dir,
      model_name=model_name,
      notify=config.notify if config else (),
      every_night=config.notify_every_night if config else False,
      final_status=target in kubeflow_night.FINAL_STATUS_TARGETS,
      heartbeat=config.heartbeat if config else "",
    )
  return doc


def kfp_package(
  doc: Mapping[str, Any],
  volumes: Sequence[tuple[str, str]] = (),
  secret_env: Sequence[tuple[str, str, str]] = (),
) -> str:
  """The package open-source KFP uploads: the bare PipelineSpec, then a platform spec if any
  (volumes, secrets).

  Both documents are JSON, which is YAML; they are separated by `---` as KFP expects. The
  PipelineJob's pipeline root becomes the spec's `defaultPipelineRoot`, which KFP uses for a
  run that names no root, so the package alone is enough to submit.
  """
  spec = dict(doc["pipelineSpec"])
  root = doc.get("runtimeConfig", {}).get("gcsOutputDirectory")
  if root:
    spec["defaultPipelineRoot"] = root
  parts = [json.dumps(spec, indent=1, sort_keys=True)]
  if volumes or secret_env:
    platform = platform_spec(spec, volumes, secret_env)
    parts.append(json.dumps(platform, indent=1, sort_keys=True))
  return "\n---\n".join(parts) + "\n"
