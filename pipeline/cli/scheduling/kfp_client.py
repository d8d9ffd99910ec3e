"""The Kubeflow target: the package to upload, the KFP host and credentials, the health check,
and the recurring run's create-or-replace."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from pipeline.cli.scheduling.cron import (
  CronSpec,
  ScheduleError,
  one_line,
  reject_control_chars,
  validate_job_name,
)
from pipeline.definition import kubeflow_package

# ----------------------------------------------------------------------------- KFP


def kfp_package_from_tfx(compiled_path: str, out_dir: str) -> tuple[str, dict[str, Any]]:
  """Turns a compiled pipeline into a package the kfp 2.5 client can submit.

  TFX's KubeflowV2DagRunner writes a PipelineJob JSON (``displayName``, ``pipelineSpec``,
  ``runtimeConfig``), while ``kfp.Client.create_recurring_run`` only reads ``.yaml``,
  ``.zip`` or ``.tar.gz`` packages holding a bare PipelineSpec. run_kubeflow.py writes that
  package beside the JSON (``<name>.kfp.yaml``, with its platform spec); it is used when it is
  there, else ``kubeflow_package.kfp_package`` writes one to ``<out_dir>/<name>.kfp.yaml``
  (without a platform spec, which the JSON cannot hold). Either way the run-time settings
  come from the JSON.

  Args:
    compiled_path: A TFX-compiled ``.json`` or a KFP ``.yaml``/``.zip``/``.tar.gz`` package.
    out_dir: Where to write the converted package.

  Returns:
    (package path, runtime settings with optional ``pipeline_root`` and ``params``).

  Raises:
    ScheduleError: If the file is missing or not a pipeline, or its pipeline root or parameter
      values hold control characters (checked before anything is written).
  """
  reject_control_chars(compiled_path, "the pipeline package path")
  reject_control_chars(out_dir, "--build-dir")
  if os.path.isdir(compiled_path):
    raise ScheduleError(f"--package {compiled_path} is a folder; {_PACKAGE_HINT}.")
  if not os.path.isfile(compiled_path):
    raise ScheduleError(
      f"--package {compiled_path} does not exist; compile it first with pipeline/run_kubeflow.py "
      f"--output {compiled_path}, or pass --compile instead of --package."
    )
  if compiled_path.endswith((".yaml", ".yml")):
    return compiled_path, _yaml_package_settings(compiled_path)
  if compiled_path.endswith((".zip", ".tar.gz", ".tgz")):
    return compiled_path, {}
  if not compiled_path.endswith(".json"):
    raise ScheduleError(
      f"Pipeline package {compiled_path!r} should end in .json (TFX) or .yaml/.zip/.tar.gz."
    )
  try:
    with open(compiled_path, encoding="utf-8") as f:
      doc = json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise ScheduleError(
      f"--package {compiled_path} is not valid JSON ({one_line(str(e))}); {_PACKAGE_HINT}."
    ) from e
  spec = doc.get("pipelineSpec", doc) if isinstance(doc, dict) else None
  if not isinstance(spec, dict) or "root" not in spec or "pipelineInfo" not in spec:
    raise ScheduleError(
      f"--package {compiled_path} holds no pipeline spec (no pipelineInfo/root); {_PACKAGE_HINT}."
    )
  runtime = doc.get("runtimeConfig", {}) if isinstance(doc, dict) else {}
  settings: dict[str, Any] = {}
  if runtime.get("gcsOutputDirectory"):
    settings["pipeline_root"] = runtime["gcsOutputDirectory"]
  params = runtime.get("parameterValues") or runtime.get("parameters")
  if params:
    settings["params"] = params
  reject_control_chars(settings.get("pipeline_root"), f"the pipeline root in {compiled_path}")
  for name, value in (settings.get("params") or {}).items():
    reject_control_chars(name, f"a parameter name in {compiled_path}")
    reject_control_chars(value, f"parameter {name!r} in {compiled_path}")
  stem = compiled_path[: -len(".json")]
  if os.path.isfile(f"{stem}.kfp.yaml"):
    # run_kubeflow.py's package written beside the JSON: it also holds the platform spec
    # (volumes, secrets) that the bare PipelineSpec below would drop.
    return f"{stem}.kfp.yaml", settings
  os.makedirs(out_dir, exist_ok=True)
  out = os.path.join(out_dir, f"{os.path.basename(stem)}.kfp.yaml")
  with open(out, "w", encoding="utf-8") as f:
    f.write(kubeflow_package.kfp_package({**doc, "pipelineSpec": spec}))
  return out, settings


# What --package and --token-file take, for messages.
_PACKAGE_HINT = (
  "pass the .json file pipeline/run_kubeflow.py --output wrote (or a KFP .yaml package), or "
  "--compile instead of --package"
)
_TOKEN_HINT = (
  "pass a file holding only the KFP bearer token (e.g. the token file of a service account "
  "that may use KFP)"
)


def _yaml_package_settings(path: str) -> dict[str, Any]:
  """The pipeline root a KFP package names (`defaultPipelineRoot`), as run-time settings."""
  import yaml  # PyYAML, a kfp dependency.

  try:
    with open(path, encoding="utf-8") as f:
      spec = next(iter(yaml.safe_load_all(f)), None)
  except (yaml.YAMLError, UnicodeDecodeError) as e:
    raise ScheduleError(
      f"--package {path} is not valid YAML ({one_line(str(e))}); {_PACKAGE_HINT}."
    ) from e
  root = spec.get("defaultPipelineRoot") if isinstance(spec, dict) else None
  if not root:
    return {}
  reject_control_chars(root, f"the pipeline root in {path}")
  return {"pipeline_root": root}


@dataclasses.dataclass(frozen=True)
class Credentials:
  """How to authenticate to KFP; `describe` never includes the secret itself."""

  existing_token: str | None = None
  token_path: str | None = None
  source: str = "kfp default (in-cluster service account or kube config)"

  def describe(self) -> str:
    """Returns where the credentials came from, without the secret."""
    return self.source


def resolve_host(flag_host: str | None, environ: Mapping[str, str]) -> str | None:
  """Picks the KFP host: ``--host``, else ``$KFP_HOST``, else kfp's own defaults.

  Args:
    flag_host: The --host flag.
    environ: The environment.

  Returns:
    The host, or None to let kfp.Client use ``$KF_PIPELINES_ENDPOINT``, in-cluster DNS or
    the kube config.

  Raises:
    ScheduleError: If the host holds a control character or names a scheme other than http(s).
  """
  host = flag_host or environ.get("KFP_HOST") or None
  _check_host(host, "--host" if flag_host else "$KFP_HOST")
  return host


def _check_host(host: str | None, what: str) -> None:
  """No control characters, and no scheme but http(s): kfp would put https:// before it."""
  reject_control_chars(host, what)
  scheme = urllib.parse.urlsplit(host).scheme if host and "://" in host else ""
  if scheme and scheme.lower() not in ("http", "https"):
    raise ScheduleError(
      f"{what} {host} is a {scheme}:// address, and the KFP API is served over HTTP; pass "
      "http://HOST:PORT or https://HOST."
    )


def host_source(flag_host: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
  """Says which KFP endpoint the client will talk to and where that came from.

  Args:
    flag_host: The --host flag.
    environ: The environment.

  Returns:
    (URL or None, its source for messages: ``--host``, ``$KFP_HOST`` or
    ``$KF_PIPELINES_ENDPOINT``). None when kfp finds the endpoint itself (in-cluster DNS or
    the kube config), which cannot be checked ahead.

  Raises:
    ScheduleError: If the value holds a control character or a scheme other than http(s).
  """
  for value, what in (
    (flag_host, "--host"),
    (environ.get("KFP_HOST"), "$KFP_HOST"),
    (environ.get("KF_PIPELINES_ENDPOINT"), "$KF_PIPELINES_ENDPOINT"),
  ):
    if value:
      _check_host(value, what)
      return value, what
  return None, "the kube config"


def resolve_credentials(token_file: str | None, environ: Mapping[str, str]) -> Credentials:
  """Picks KFP credentials: ``--token-file``, ``$KFP_TOKEN``, ``$KF_PIPELINES_SA_TOKEN_PATH``.

  The token itself is never accepted as a flag (it would show up in ``ps`` and shell
  history).

  Args:
    token_file: The --token-file flag.
    environ: The environment.

  Returns:
    A `Credentials`.

  Raises:
    ScheduleError: If a named token file cannot be read.
  """
  if token_file:
    try:
      with open(token_file, encoding="utf-8") as f:
        token = f.read().strip()
    except FileNotFoundError as e:
      raise ScheduleError(
        f"--token-file {token_file} does not exist; {_TOKEN_HINT}, or leave --token-file out to "
        "use $KFP_TOKEN or kfp's own credentials."
      ) from e
    except (OSError, UnicodeDecodeError) as e:
      reason = e.strerror if isinstance(e, OSError) else "not text"
      raise ScheduleError(
        f"cannot read --token-file {token_file} ({reason}); {_TOKEN_HINT}."
      ) from e
    if not token:
      raise ScheduleError(f"--token-file {token_file} is empty; {_TOKEN_HINT}.")
    reject_control_chars(token, f"the token in --token-file {token_file}")
    return Credentials(existing_token=token, source=f"token file {token_file}")
  if environ.get("KFP_TOKEN"):
    reject_control_chars(environ["KFP_TOKEN"].strip(), "$KFP_TOKEN")
    return Credentials(existing_token=environ["KFP_TOKEN"].strip(), source="$KFP_TOKEN")
  if environ.get("KF_PIPELINES_SA_TOKEN_PATH"):
    path = environ["KF_PIPELINES_SA_TOKEN_PATH"]
    return Credentials(token_path=path, source=f"service-account token file {path}")
  return Credentials()


def redact_host(host: str | None) -> str:
  """Drops any user:password from a host URL before it is printed.

  Args:
    host: The host URL.

  Returns:
    The URL without credentials, or a note that kfp's default is used.
  """
  if not host:
    return "(kfp default: $KF_PIPELINES_ENDPOINT, in-cluster or kube config)"
  return re.sub(r"//[^/@]*@", "//", host)


def upsert_recurring_run(
  client: Any,
  *,
  experiment: str,
  job_name: str,
  cron: CronSpec,
  package_path: str,
  namespace: str | None = None,
  pipeline_root: str | None = None,
  params: Mapping[str, Any] | None = None,
  log: Callable[[str], None] = print,
) -> Any:
  """Creates or replaces the recurring run `job_name` in `experiment` (get-or-created).

  KFP has no update call for recurring runs. To avoid both duplicates and a window without
  a schedule, the new run is created *disabled*, then every older run of the same name in the
  experiment is deleted, then the new one is enabled. If anything fails half-way, the old
  schedule (or a disabled new one) is left and rerunning this command converges.

  Args:
    client: A ``kfp.Client``.
    experiment: Experiment name; created if missing.
    job_name: Recurring run display name; the identity used for replacing.
    cron: The schedule (its KFP six-field form is submitted).
    package_path: A package `kfp.Client.create_recurring_run` accepts.
    namespace: Kubernetes namespace for multi-user KFP.
    pipeline_root: Pipeline root for the runs.
    params: Pipeline parameter values.
    log: Where progress lines go.

  Returns:
    The created ``V2beta1RecurringRun``.

  Raises:
    ScheduleError: If any value holds a control character (checked before any request).
  """
  validate_job_name(job_name)
  for value, what in (
    (experiment, "--experiment"),
    (cron.source, "--cron"),
    (cron.kfp, "--cron"),
    (package_path, "the pipeline package path"),
    (namespace, "--namespace"),
    (pipeline_root, "the pipeline root"),
    (params, "pipeline parameter"),
  ):
    reject_control_chars(value, what)
  description = f"Nightly pipeline run ({cron.source}); managed by pipeline/schedule.py."
  exp = client.create_experiment(name=experiment, namespace=namespace)
  old = [
    run
    for run in _list_all_recurring_runs(client, exp.experiment_id)
    if run.display_name == job_name
  ]
  created = client.create_recurring_run(
    experiment_id=exp.experiment_id,
    job_name=job_name,
    description=description,
    cron_expression=cron.kfp,
    max_concurrency=1,
    no_catchup=True,
    pipeline_package_path=package_path,
    params=dict(params or {}),
    pipeline_root=pipeline_root,
    enabled=False,
  )
  for run in old:
    client.delete_recurring_run(run.recurring_run_id)
    log(f"Deleted the previous recurring run {run.recurring_run_id} named {job_name!r}.")
  client.enable_recurring_run(created.recurring_run_id)
  return created


def _list_all_recurring_runs(client: Any, experiment_id: str) -> list[Any]:
  # Filtering by name client-side: server-side filter keys for recurring runs differ between
  # KFP versions, and an experiment holds few of them.
  runs, token = [], ""
  while True:
    page = client.list_recurring_runs(page_token=token, page_size=100, experiment_id=experiment_id)
    runs.extend(page.recurring_runs or [])
    token = page.next_page_token or ""
    if not token:
      return runs
