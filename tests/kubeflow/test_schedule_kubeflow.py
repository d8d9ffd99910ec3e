"""The KFP target: the real kfp 2.5 Client against a fake KFP REST API (HTTP layer intercepted)."""

import itertools
import json
import pathlib
import types
import urllib.parse

import kfp
import kfp_server_api
import pytest
from kfp_server_api import rest
from tfx.dsl.components.common import importer
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner
from tfx.types import standard_artifacts

from components.pusher import Pusher
from pipeline.cli import schedule
from pipeline.cli.scheduling import kfp_client, kfp_health

SENTINEL = "sentinel-token-3f9a1c7e"
HOST = "http://kfp.test:8888"


class _Response:
  """The urllib3 response shape kfp_server_api's RESTResponse wraps."""

  def __init__(self, status: int, payload: object):
    self.status = status
    self.reason = {200: "OK", 401: "Unauthorized", 404: "Not Found"}.get(status, "Error")
    self.data = json.dumps(payload).encode()

  def getheaders(self):
    return {"Content-Type": "application/json"}

  def getheader(self, name, default=None):
    return self.getheaders().get(name, default)


class FakeKfpServer:
  """Just enough of KFP's v2beta1 REST API for experiments and recurring runs."""

  def __init__(self):
    self.experiments: dict[str, dict] = {}
    self.recurring_runs: dict[str, dict] = {}
    self.requests: list[dict] = []
    self.fail_with: int | None = None
    self._ids = itertools.count(1)

  def handle(self, method, url, query_params=None, headers=None, body=None, **_):
    parsed = urllib.parse.urlsplit(url)
    query = dict(query_params or []) | dict(urllib.parse.parse_qsl(parsed.query))
    # The body goes over the wire as JSON; fail here if it would not.
    wire_body = json.loads(json.dumps(body)) if body is not None else None
    self.requests.append(
      {
        "method": method,
        "host": f"{parsed.scheme}://{parsed.netloc}",
        "path": parsed.path,
        "query": query,
        "headers": dict(headers or {}),
        "body": wire_body,
      }
    )
    if self.fail_with and not parsed.path.endswith("/healthz"):
      raise kfp_server_api.ApiException(
        http_resp=rest.RESTResponse(_Response(self.fail_with, {"message": "denied"}))
      )
    status, payload = self._route(method, parsed.path, query, wire_body)
    response = rest.RESTResponse(_Response(status, payload))
    if status >= 300:
      raise kfp_server_api.ApiException(http_resp=response)
    return response

  def _route(self, method, path, query, body):
    parts = path.removeprefix("/apis/v2beta1/").split("/")
    if parts == ["healthz"] and method == "GET":
      return 200, {"multi_user": False}
    if parts[0] == "experiments":
      return self._experiments(method, query, body)
    if parts[0] == "recurringruns":
      return self._recurring_runs(method, parts[1:], query, body)
    raise AssertionError(f"unexpected KFP call {method} {path}")

  def _experiments(self, method, query, body):
    if method == "POST":
      exp_id = f"exp-{next(self._ids)}"
      self.experiments[exp_id] = {**body, "experiment_id": exp_id}
      return 200, self.experiments[exp_id]
    wanted = None
    if query.get("filter"):
      [predicate] = json.loads(query["filter"])["predicates"]
      wanted = predicate.get("string_value", predicate.get("stringValue"))
    found = [e for e in self.experiments.values() if wanted in (None, e["display_name"])]
    return 200, {"experiments": found, "total_size": len(found)}

  def _recurring_runs(self, method, rest_of_path, query, body):
    if not rest_of_path and method == "GET":
      found = [
        r for r in self.recurring_runs.values() if r["experiment_id"] == query.get("experiment_id")
      ]
      return 200, {"recurringRuns": found, "total_size": len(found)}
    if not rest_of_path and method == "POST":
      run_id = f"rr-{next(self._ids)}"
      self.recurring_runs[run_id] = {**body, "recurring_run_id": run_id}
      return 200, self.recurring_runs[run_id]
    run_id, _, action = rest_of_path[0].partition(":")
    if run_id not in self.recurring_runs:
      return 404, {"message": f"recurring run {run_id} not found"}
    if method == "DELETE" and not action:
      del self.recurring_runs[run_id]
    elif method == "POST" and action in ("enable", "disable"):
      self.recurring_runs[run_id]["mode"] = "ENABLE" if action == "enable" else "DISABLE"
    else:
      raise AssertionError(f"unexpected KFP call {method} recurringruns/{rest_of_path[0]}")
    return 200, {}

  def runs_named(self, name):
    return [r for r in self.recurring_runs.values() if r["display_name"] == name]


def _healthy(url, headers, timeout_s):
  """schedule.py's own health check (plain urllib, before kfp.Client), answered as KFP would."""
  return kfp_health.HttpAnswer(200, "application/json", b'{"multi_user": false}', url)


@pytest.fixture
def fake_kfp(monkeypatch, tmp_path):
  server = FakeKfpServer()
  monkeypatch.setattr(
    rest.RESTClientObject,
    "request",
    lambda self, method, url, *a, **kw: server.handle(method, url, *a, **kw),
  )
  monkeypatch.setattr(kfp_health, "_http_get", _healthy)
  # kfp.Client reads ~/.config/kfp/context.json; keep the real home out of the test.
  monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
  for name in ("KFP_HOST", "KFP_TOKEN", "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT"):
    monkeypatch.delenv(name, raising=False)
  return server


@pytest.fixture(scope="module")
def tfx_package(tmp_path_factory) -> pathlib.Path:
  """A real KubeflowV2DagRunner package (PipelineJob JSON) of a small TFX pipeline."""
  out = tmp_path_factory.mktemp("compiled")
  model = importer.Importer(
    source_uri="gs://bucket/model", artifact_type=standard_artifacts.Model
  ).with_id("model_importer")
  blessing = importer.Importer(
    source_uri="gs://bucket/blessing", artifact_type=standard_artifacts.ModelBlessing
  ).with_id("blessing_importer")
  pusher = Pusher(
    model=model.outputs["result"],
    model_blessing=blessing.outputs["result"],
    serving_dir="/mnt/serving",
    model_name="digits",
  )
  kubeflow_v2_dag_runner.KubeflowV2DagRunner(
    config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(default_image="kit:test"),
    output_dir=str(out),
    output_filename="digits.json",
  ).run(
    tfx_pipeline.Pipeline(
      pipeline_name="digits-nightly-pipeline",
      pipeline_root="gs://bucket/root",
      components=[model, blessing, pusher],
    )
  )
  return out / "digits.json"


def _schedule(tmp_path, package, *extra):
  return schedule.main(
    [
      "kubeflow",
      "--cron",
      "0 2 * * *",
      "--host",
      HOST,
      "--experiment",
      "nightly",
      "--job-name",
      "digits-nightly",
      "--package",
      str(package),
      "--build-dir",
      str(tmp_path / "build"),
      *extra,
    ]
  )


def test_recurring_run_request_carries_kfp_cron_concurrency_catchup_and_package(
  tmp_path, fake_kfp, tfx_package, monkeypatch, capsys
):
  monkeypatch.setenv("KFP_TOKEN", SENTINEL)
  assert _schedule(tmp_path, tfx_package) == 0

  [experiment] = fake_kfp.experiments.values()
  assert experiment["display_name"] == "nightly"
  [run] = fake_kfp.runs_named("digits-nightly")
  [create] = [
    r
    for r in fake_kfp.requests
    if r["method"] == "POST" and r["path"] == "/apis/v2beta1/recurringruns"
  ]
  body = create["body"]
  assert create["host"] == HOST
  assert body["trigger"] == {"cron_schedule": {"cron": "0 0 2 * * *"}}
  assert body["max_concurrency"] == 1
  assert body["no_catchup"] is True
  assert body["experiment_id"] == experiment["experiment_id"]
  assert body["display_name"] == "digits-nightly"
  compiled = json.loads(tfx_package.read_text())
  # The package kubeflow_package.kfp_package writes: the spec, with the root as its default root.
  assert body["pipeline_spec"] == {
    **compiled["pipelineSpec"],
    "defaultPipelineRoot": "gs://bucket/root",
  }
  assert body["runtime_config"]["pipeline_root"] == "gs://bucket/root"
  # Created disabled, enabled once older runs of the same name were gone.
  assert body["mode"] == "DISABLE"
  assert run["mode"] == "ENABLE"
  # The token is used, as a bearer header on every call.
  assert {r["headers"].get("authorization") for r in fake_kfp.requests} == {f"Bearer {SENTINEL}"}
  out = capsys.readouterr().out
  assert "cron '0 0 2 * * *', max_concurrency=1, no catch-up" in out


def test_scheduling_twice_replaces_instead_of_duplicating(tmp_path, fake_kfp, tfx_package):
  # An unrelated job in the same experiment and a same-named one elsewhere must survive.
  fake_kfp.experiments["exp-other"] = {"experiment_id": "exp-other", "display_name": "other"}
  fake_kfp.recurring_runs["rr-other-exp"] = {
    "recurring_run_id": "rr-other-exp",
    "display_name": "digits-nightly",
    "experiment_id": "exp-other",
  }
  assert _schedule(tmp_path, tfx_package) == 0
  [exp_id] = [k for k, e in fake_kfp.experiments.items() if e["display_name"] == "nightly"]
  fake_kfp.recurring_runs["rr-unrelated"] = {
    "recurring_run_id": "rr-unrelated",
    "display_name": "weekly-report",
    "experiment_id": exp_id,
  }
  [first] = [r for r in fake_kfp.runs_named("digits-nightly") if r["experiment_id"] == exp_id]

  assert _schedule(tmp_path, tfx_package, "--seconds-field") != 0  # bad flag combo: no change
  assert _schedule(tmp_path, tfx_package) == 0

  ours = [r for r in fake_kfp.runs_named("digits-nightly") if r["experiment_id"] == exp_id]
  assert len(ours) == 1
  assert ours[0]["recurring_run_id"] != first["recurring_run_id"]
  assert ours[0]["mode"] == "ENABLE"
  assert "rr-unrelated" in fake_kfp.recurring_runs and "rr-other-exp" in fake_kfp.recurring_runs
  assert [e["display_name"] for e in fake_kfp.experiments.values()].count("nightly") == 1
  deletes = [r["path"] for r in fake_kfp.requests if r["method"] == "DELETE"]
  assert deletes == [f"/apis/v2beta1/recurringruns/{first['recurring_run_id']}"]


def test_token_never_appears_in_output_or_written_files(
  tmp_path, fake_kfp, tfx_package, monkeypatch, capfd
):
  token_file = tmp_path / "secrets" / "token"
  token_file.parent.mkdir()
  token_file.write_text(SENTINEL + "\n")
  monkeypatch.setenv("KFP_TOKEN", SENTINEL + "-env")
  assert _schedule(tmp_path, tfx_package, "--token-file", str(token_file)) == 0
  # The file flag wins over the environment.
  assert {r["headers"].get("authorization") for r in fake_kfp.requests} == {f"Bearer {SENTINEL}"}
  fake_kfp.fail_with = 401
  assert _schedule(tmp_path, tfx_package) == 1
  out, err = capfd.readouterr()
  assert "KFP API returned 401 Unauthorized (check --token-file / $KFP_TOKEN): denied" in err
  assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
  assert SENTINEL not in out and SENTINEL not in err
  written = [p for p in tmp_path.rglob("*") if p.is_file() and p != token_file]
  assert any(p.name.endswith(".kfp.yaml") for p in written)
  for path in written:
    assert SENTINEL.encode() not in path.read_bytes(), path
  for request in fake_kfp.requests:
    assert SENTINEL not in json.dumps(request["body"] or {})


def test_host_lost_after_the_health_check_is_one_line(tmp_path, tfx_package, monkeypatch, capsys):
  monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
  monkeypatch.setattr(kfp_health, "_http_get", _healthy)
  monkeypatch.setenv("KFP_TOKEN", SENTINEL)

  def refuse(self, method, url, *args, **kwargs):
    import urllib3

    raise urllib3.exceptions.MaxRetryError(None, url, "connection refused")

  monkeypatch.setattr(rest.RESTClientObject, "request", refuse)
  monkeypatch.setattr(
    kfp.Client, "get_kfp_healthz", lambda self, **kw: types.SimpleNamespace(multi_user=False)
  )
  assert _schedule(tmp_path, tfx_package) == 1
  err = capsys.readouterr().err
  assert (
    err.strip()
    == "schedule.py: error: cannot reach KFP (MaxRetryError); check --host or $KFP_HOST."
  )


def test_converted_package_is_what_the_kfp_client_reads(tmp_path, tfx_package):
  from kfp.client import client as kfp_client_module

  package, runtime = kfp_client.kfp_package_from_tfx(str(tfx_package), str(tmp_path))
  assert package.endswith(".kfp.yaml")
  assert runtime == {"pipeline_root": "gs://bucket/root"}
  doc = kfp_client_module._extract_pipeline_yaml(package)
  assert doc.pipeline_spec.pipeline_info.name == "digits-nightly-pipeline"
  assert "Pusher" in doc.pipeline_spec.root.dag.tasks
  # The unconverted TFX file is rejected by the kfp client: that is why we convert.
  with pytest.raises(ValueError, match="should end with one of"):
    kfp_client_module._extract_pipeline_yaml(str(tfx_package))


def test_compile_uses_run_kubeflow_and_its_flags(tmp_path, fake_kfp, capsys):
  build = tmp_path / "build"
  status = schedule.main(
    [
      "kubeflow", "--cron", "@daily", "--experiment", "nightly", "--job-name", "digits-nightly",
      "--compile", "--build-dir", str(build), "--dry-run",
      # run_kubeflow.py's own options, passed through:
      "--pipeline-root", "gs://bucket/nightly-root", "--train-steps", "20",
      # The data is read inside the cluster, so the task cannot be read from it here.
      "--task", "multiclass", "--volume", "serving-pvc:/mnt/serving",
    ]
  )  # fmt: skip
  assert status == 0, capsys.readouterr().err
  assert (build / "digits-nightly.json").is_file()

  package, runtime = kfp_client.kfp_package_from_tfx(str(build / "digits-nightly.json"), str(build))
  assert runtime["pipeline_root"] == "gs://bucket/nightly-root"
  assert package == str(build / "digits-nightly.kfp.yaml")
  # The uploaded package is run_kubeflow's: the platform spec with the volume survives, and the
  # spec carries the pipeline root for a `--package X.kfp.yaml` upload that names none.
  spec_doc, platform_doc = (
    json.loads(d) for d in pathlib.Path(package).read_text().split("\n---\n")
  )
  assert spec_doc["defaultPipelineRoot"] == "gs://bucket/nightly-root"
  assert "serving-pvc" in json.dumps(platform_doc)
  from kfp.client import client as kfp_client_module

  assert kfp_client_module._extract_pipeline_yaml(package).pipeline_spec.default_pipeline_root
  # Scheduling that package directly sends the same pipeline root.
  assert kfp_client.kfp_package_from_tfx(package, str(build)) == (
    package,
    {"pipeline_root": "gs://bucket/nightly-root"},
  )
  assert fake_kfp.requests == []  # --dry-run contacts no server.
  with pytest.raises(SystemExit) as bad:
    schedule.main(
      ["kubeflow", "--cron", "@daily", "--experiment", "e", "--job-name", "j", "--package",
       str(build / "digits-nightly.json"), "--train-steps", "20"]
    )  # fmt: skip
  assert bad.value.code == 2
  assert "unrecognized arguments: --train-steps 20" in capsys.readouterr().err
