"""The pipeline compiled for open-source Kubeflow Pipelines 2.x and for Vertex AI, and the image."""

import json
import pathlib
import re

import pytest
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from components.report import spec as report_spec
from core import properties
from pipeline.cli import kubeflow as run_kubeflow
from pipeline.definition import kubeflow_lib, kubeflow_night, nodes
from pipeline.definition.config import DEFAULT_IMAGE
from tests.support import kfp_launcher
from tests.support.cli_runs import REPO_ROOT, project_env, run_python

SENTINEL = "sentinel-secret-7f3a9c"
IMAGE = "registry.example/kit:test"
TRANSFORM_MODULE = REPO_ROOT / "tests" / "data" / "penguin_transform_module.py"


def _secret_env():
  return project_env(
    KFP_TOKEN=SENTINEL,
    KF_PIPELINES_SA_TOKEN_PATH=f"/tmp/{SENTINEL}",
    AWS_SECRET_ACCESS_KEY=SENTINEL,
  )


@pytest.fixture(scope="module")
def kfp_compiled(tmp_path_factory):
  """Open-source KFP: a Transform module (packaged under a local root), a serving volume."""
  tmp = tmp_path_factory.mktemp("kfp")
  out = tmp / "pipeline.json"
  proc = kfp_launcher.compile_package(
    out,
    "--image",
    IMAGE,
    "--task",
    "multiclass",
    "--pipeline-root",
    tmp / "root",
    "--module-file",
    TRANSFORM_MODULE,
    "--transform-module",
    TRANSFORM_MODULE,
    "--volume",
    "serving-pvc:/mnt/serving",
    "--step-env",
    "S3_USE_HTTPS=0",
    "--secret-env",
    "minio-creds:secretkey:AWS_SECRET_ACCESS_KEY",
    warm=True,
    env=_secret_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return out, proc


@pytest.fixture(scope="module")
def vertex_compiled(tmp_path_factory):
  """Vertex AI: the default image (a placeholder), a Tuner and an imported schema."""
  out = tmp_path_factory.mktemp("vertex") / "pipeline.json"
  proc = kfp_launcher.compile_package(
    out,
    "--target",
    "vertex",
    "--task",
    "multiclass",
    "--pipeline-root",
    "gs://bucket/root",
    "--serving-dir",
    "gs://bucket/serving",
    "--tune",
    "--schema",
    "/pipeline/data/schema.pbtxt",
    warm=True,
    env=_secret_env(),
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  return out, proc


def _spec(compiled):
  return json.loads(compiled[0].read_text())["pipelineSpec"]


def test_kfp_package_is_schema_2_1_with_container_tasks_only(kfp_compiled):
  doc = json.loads(kfp_compiled[0].read_text())
  assert set(doc) >= {"displayName", "pipelineSpec", "runtimeConfig"}
  spec = json_format.ParseDict(
    doc["pipelineSpec"], pipeline_spec_pb2.PipelineSpec(), ignore_unknown_fields=True
  )
  # The open-source API server accepts 2.1.0 only.
  assert spec.schema_version == "2.1.0"
  # Every step runs in the exit handler's sub-DAG; NightEnd runs after it, however it ended.
  assert set(spec.root.dag.tasks) == {kubeflow_night.NIGHT_DAG, kubeflow_night.NIGHT_END}
  tasks = spec.components[kubeflow_night.NIGHT_DAG].dag.tasks
  assert {
    "CsvExampleGen_span",
    "CsvExampleGen",
    "StatisticsGen",
    "SchemaGen",
    "ExampleValidator",
    "Transform",
    "LiveModel_key",
    "LiveModel",
    "DataGate",
    "DistributedTrainer",
    "Evaluator",
    "Optimizer",
    "Pusher",
    "RunReport",
  } == set(tasks)
  for name in tasks:
    assert kfp_launcher.container_of(doc["pipelineSpec"], name)["image"] == IMAGE
  deps = {name: set(t.dependent_tasks) for name, t in tasks.items()}
  assert deps["CsvExampleGen"] == {"CsvExampleGen_span"}
  assert deps["StatisticsGen"] == {"CsvExampleGen"}
  assert {"SchemaGen", "Transform", "ExampleValidator"} <= deps["DistributedTrainer"]
  assert {"DistributedTrainer", "LiveModel"} <= deps["Evaluator"]
  assert deps["LiveModel"] == {"CsvExampleGen", "LiveModel_key"}
  # The data gate runs before anything trains: Transform and the Tuner wait for it too.
  assert {"LiveModel", "StatisticsGen", "SchemaGen"} <= deps["DataGate"]
  assert "DataGate" in deps["DistributedTrainer"] and "DataGate" in deps["Transform"]
  assert {"Evaluator", "Optimizer", "DistributedTrainer"} <= deps["Pusher"]
  order = kfp_launcher.topological_order(doc["pipelineSpec"])
  assert order[0] == "CsvExampleGen_span" and order[-1] == kubeflow_night.NIGHT_END


def test_kfp_caching_night_steps_and_key_tasks_never_cached(kfp_compiled):
  tasks = kubeflow_lib.tasks(_spec(kfp_compiled))
  caching = {name: t["cachingOptions"]["enableCache"] for name, t in tasks.items()}
  # The steps that record the night (DataGate, Pusher, RunReport), the key tasks and NightEnd.
  never = (*kubeflow_night.NIGHT_STEPS, "CsvExampleGen_span", "LiveModel_key")
  for name in (*never, kubeflow_night.NIGHT_END):
    assert caching.pop(name) is False, name
  assert all(caching.values()), caching
  # LiveModel's cache key holds what the serving folder serves.
  live_key = tasks["LiveModel"]["inputs"]["parameters"][properties.LIVE_KEY_KEY]
  assert live_key["taskOutputParameter"]["producerTask"] == "LiveModel_key"
  # The ExampleGen's cache key holds the resolved span, not TFX's span driver hook.
  span_key = tasks["CsvExampleGen"]["inputs"]["parameters"][kubeflow_lib.SPAN_KEY]
  assert span_key["taskOutputParameter"]["producerTask"] == "CsvExampleGen_span"
  executors = _spec(kfp_compiled)["deploymentSpec"]["executors"]
  assert "lifecycle" not in executors["CsvExampleGen_executor"]["container"]


def test_every_step_runs_our_entrypoint_on_an_importable_executor(kfp_compiled, vertex_compiled):
  from tfx.orchestration.kubeflow.v2 import compiler_utils
  from tfx.utils import import_utils

  for compiled in (kfp_compiled, vertex_compiled):
    text = compiled[0].read_text()
    assert kubeflow_lib.STOCK_ENTRYPOINT not in text
    spec = json.loads(text)["pipelineSpec"]
    paths = kfp_launcher.executor_class_paths(spec)
    for name in kubeflow_lib.tasks(spec):
      command = kubeflow_lib.executor(spec, name)["container"]["command"]
      assert command[:3] == ["python", "-m", kubeflow_lib.ENTRYPOINT_MODULE]
      key_task = name.endswith((kubeflow_lib.SPAN_RESOLVER_SUFFIX, kubeflow_lib.LIVE_KEY_SUFFIX))
      assert name in paths or key_task or name == kubeflow_night.NIGHT_END
    for path in paths.values():
      assert "__main__" not in path
      import_utils.import_class_by_path(path)
    for title in _artifact_titles(spec):
      import_utils.import_class_by_path(compiler_utils.TITLE_TO_CLASS_PATH.get(title, title))
  paths = kfp_launcher.executor_class_paths(_spec(kfp_compiled))
  assert paths["CsvExampleGen"] == "components.example_gen.executor.Executor"
  assert paths["LiveModel"] == "components.live_model.executor.Executor"
  assert paths["Pusher"] == "components.pusher.executor.Executor"
  assert kfp_launcher.executor_class_paths(_spec(vertex_compiled))["Tuner"] == (
    "components.distributed_trainer.tuner.TunerExecutor"
  )


def _artifact_titles(spec) -> set[str]:
  titles = set()
  for comp in spec["components"].values():
    for side in ("inputDefinitions", "outputDefinitions"):
      for artifact in (comp.get(side, {}).get("artifacts") or {}).values():
        schema = artifact["artifactType"].get("instanceSchema", "")
        titles.update(re.findall(r"^title: (\S+)$", schema, re.M))
        if artifact["artifactType"] == kubeflow_lib.KFP_HTML_TYPE:
          titles.add(kubeflow_lib.HTML_REPORT_TITLE)  # The entrypoint types the page back.
  return titles


def test_dockerfile_imports_every_class_the_packages_name(kfp_compiled, vertex_compiled):
  text = (REPO_ROOT / "Dockerfile").read_text()
  block = re.search(r'^ARG CLASS_PATHS="(.*?)"$', text, re.M | re.S).group(1)
  listed = set(block.replace("\\", " ").split())
  named = set()
  for compiled in (kfp_compiled, vertex_compiled):
    spec = _spec(compiled)
    named |= set(kfp_launcher.executor_class_paths(spec).values())
    named |= {t for t in _artifact_titles(spec) if not t.startswith("tfx.")}
  assert listed == named
  assert "RUN python -m pipeline.definition.kfp_entrypoint check-imports $CLASS_PATHS" in text
  assert "pip install --no-cache-dir --no-deps -r requirements.lock" in text


def _constant(task, name: str) -> str | None:
  parameter = task.get("inputs", {}).get("parameters", {}).get(name, {})
  return parameter.get("runtimeValue", {}).get("constant")


def test_dockerfile_imports_every_trainer_function_loaded_by_module_path(
  kfp_compiled, vertex_compiled
):
  from core import defaults

  text = (REPO_ROOT / "Dockerfile").read_text()
  block = re.search(r'^ARG MODULE_FNS="(.*?)"$', text, re.M | re.S).group(1)
  listed = set(block.replace("\\", " ").split())
  # The run_fn of build_model modules is loaded by the trainer itself, not named by a package.
  named = {defaults.BUILD_MODEL_RUN_FN}
  for compiled in (kfp_compiled, vertex_compiled):
    for task in kubeflow_lib.tasks(_spec(compiled)).values():
      module = _constant(task, "module_path")
      if module and "@" not in module:  # A packaged user module (name@wheel) is not the image's.
        named.add(f"{module}.{defaults.RUN_FN}")
      named |= {_constant(task, key) for key in ("run_fn", "tuner_fn")} - {None}
  assert f"{defaults.DEFAULT_MODULE_PATH}.{defaults.TUNER_FN}" in named
  assert listed == named
  assert "RUN python -m pipeline.definition.kfp_entrypoint check-imports $MODULE_FNS" in text


def test_vertex_package_keeps_tfx_span_driver_and_no_resolver_task(vertex_compiled):
  out, proc = vertex_compiled
  spec = _spec(vertex_compiled)
  tasks = kubeflow_lib.tasks(spec)
  assert spec["schemaVersion"] == "2.1.0"
  assert not any(n.endswith(kubeflow_lib.SPAN_RESOLVER_SUFFIX) for n in tasks)
  assert "preCacheCheck" in kubeflow_lib.executor(spec, "CsvExampleGen")["container"]["lifecycle"]
  assert tasks["LiveModel"]["cachingOptions"] == {"enableCache": True}
  assert tasks["Pusher"]["cachingOptions"] == {"enableCache": False}
  assert {"Tuner", "ImportSchemaGen", "LiveModel_key"} <= set(tasks)
  assert not (out.parent / "pipeline.kfp.yaml").exists()
  # The bundled data with --schema: the steps read the image's copy, not this checkout's path.
  assert str(REPO_ROOT) not in out.read_text()
  # The default image is a placeholder: one warning line, and the compile still succeeds.
  (line,) = kfp_launcher.warnings(proc.stderr)
  assert DEFAULT_IMAGE in line


def test_kfp_upload_package_mounts_the_serving_volume(kfp_compiled):
  from kfp.client import client as kfp_client

  out, _ = kfp_compiled
  package = out.parent / "pipeline.kfp.yaml"
  assert run_kubeflow.kfp_package_path(str(out)) == str(package)
  # Read the way kfp 2.5's client reads a package it uploads.
  parsed = kfp_client._extract_pipeline_yaml(str(package))
  assert parsed.pipeline_spec.schema_version == "2.1.0"
  assert set(parsed.pipeline_spec.root.dag.tasks) == set(
    _spec(kfp_compiled)["root"]["dag"]["tasks"]
  )
  executors = parsed.platform_spec.platforms["kubernetes"].deployment_spec.executors
  for label in ("LiveModel_key_executor", "LiveModel_executor", "Pusher_executor"):
    mount = executors[label]["pvcMount"][0]
    assert (mount["constant"], mount["mountPath"]) == ("serving-pvc", "/mnt/serving")
    (from_secret,) = executors[label]["secretAsEnv"]
    assert from_secret["secretName"] == "minio-creds"
  # Plain variables are in every container; credentials only by secret name and key.
  for name in kubeflow_lib.tasks(_spec(kfp_compiled)):
    env = kubeflow_lib.executor(_spec(kfp_compiled), name)["container"]["env"]
    assert env == [{"name": "S3_USE_HTTPS", "value": "0"}]


def test_both_packages_close_each_night_in_an_exit_handler(kfp_compiled, vertex_compiled):
  from kfp.client import client as kfp_client

  for compiled, target in (
    (kfp_compiled, kubeflow_lib.KFP),
    (vertex_compiled, kubeflow_lib.VERTEX),
  ):
    spec = _spec(compiled)
    root = spec["root"]["dag"]["tasks"]
    assert set(root) == {kubeflow_night.NIGHT_DAG, kubeflow_night.NIGHT_END}
    end = root[kubeflow_night.NIGHT_END]
    assert end["dependentTasks"] == [kubeflow_night.NIGHT_DAG]
    assert end["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    # Open-source KFP up to 2.5 refuses a package whose exit task takes a final status.
    assert ("status" in end["inputs"]["parameters"]) == (target == kubeflow_lib.VERTEX)
    assert end["inputs"]["parameters"]["night_id"] == {
      "runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}
    }
    container = kubeflow_lib.executor(spec, kubeflow_night.NIGHT_END)["container"]
    assert container["image"] == kubeflow_lib.executor(spec, "Pusher")["container"]["image"]
    # The run's id is a parameter of the steps that record the night and of NightEnd, in no
    # step's arguments; those steps are never cached.
    steps = kubeflow_lib.tasks(spec)
    recording = {"DataGate", "Pusher", "RunReport"}
    assert recording <= set(steps)
    for name, path in kfp_launcher.executor_class_paths(spec).items():
      args = kubeflow_lib.executor(spec, name)["container"]["args"]
      assert not any("night_id" in a or "pipeline_job_uuid" in a for a in args), (name, path)
      night = steps[name].get("inputs", {}).get("parameters", {}).get("night_id")
      if name in recording:
        assert night == {"runtimeValue": {"constant": "{{$.pipeline_job_uuid}}"}}, name
        assert steps[name]["cachingOptions"] == {"enableCache": False}, name
      else:
        assert night is None, name
    # On KFP the span resolver, the night's first task, notes tonight's spans in its record.
    resolvers = [n for n in steps if n.endswith(kubeflow_lib.SPAN_RESOLVER_SUFFIX)]
    assert len(resolvers) == (target == kubeflow_lib.KFP)
    for name in resolvers:
      given = {
        k: v["runtimeValue"]["constant"]
        for k, v in steps[name]["inputs"]["parameters"].items()
        if "runtimeValue" in v
      }
      pusher = steps["Pusher"]["inputs"]["parameters"]
      noted = {k: given[k] for k in ("night_id", "serving_dir", "model_name", "stale_after_s")}
      assert noted == {
        "night_id": "{{$.pipeline_job_uuid}}",
        "serving_dir": pusher["serving_dir"]["runtimeValue"]["constant"],
        "model_name": pusher["model_name"]["runtimeValue"]["constant"],
        "stale_after_s": "0",
      }, given
    assert json.dumps(steps).count("{{$.pipeline_job_uuid}}") == (
      len(recording) + 1 + len(resolvers)
    )
  # On KFP every step, NightEnd too, gets the volume and the secrets; no pod label carries the
  # run's id.
  package = kfp_compiled[0].parent / "pipeline.kfp.yaml"
  parsed = kfp_client._extract_pipeline_yaml(str(package))
  executors = parsed.platform_spec.platforms["kubernetes"].deployment_spec.executors
  assert set(executors) == {
    kubeflow_lib.component(_spec(kfp_compiled), name)["executorLabel"]
    for name in kubeflow_lib.tasks(_spec(kfp_compiled))
  }
  for config in executors.values():
    assert "fieldPathAsEnv" not in config
  end_config = executors[kubeflow_night.NIGHT_END + "_executor"]
  assert end_config["pvcMount"][0]["mountPath"] == "/mnt/serving"
  assert end_config["secretAsEnv"][0]["secretName"] == "minio-creds"


def test_no_secret_reaches_the_packages_or_the_output(kfp_compiled, vertex_compiled):
  for out, proc in (kfp_compiled, vertex_compiled):
    for path in out.parent.glob("pipeline.*"):
      assert SENTINEL not in path.read_text()
    assert SENTINEL not in proc.stdout + proc.stderr


@pytest.mark.parametrize(
  "flags, message",
  [
    (["--module-file", "missing_module.py"], "module file"),
    (["--transform-module", "missing_transform.py"], "does not exist"),
    (["--target", "vertex", "--pipeline-root", "s3://bucket/root"], "--pipeline-root gs://"),
    (["--eval-label-key", "species_xf"], "--eval-label-key"),
    (["--pipeline-root", "gs://"], "--pipeline-root gs:// names no bucket; pass gs://BUCKET/PATH."),
    (["--serving-dir", "s3://"], "--serving-dir s3:// names no bucket; pass s3://BUCKET/PATH."),
    (["--image", ""], "--image '' is not a container image reference"),
    (["--image", "not an image"], "--image 'not an image' is not a container image reference"),
    (
      ["--target", "vertex", "--pipeline-root", "gs://b/r", "--volume", "pvc:/mnt/serving"],
      "--volume and --secret-env apply to --target kfp only",
    ),
    (["--local-workers", "1000"], "would start 1000 processes on this machine"),
    (["--hparams", "hidden_units=abc"], "hyper-parameter hidden_units='abc' is not an integer;"),
  ],
)
def test_user_mistakes_are_one_error_line_and_exit_2(tmp_path, flags, message):
  """Mistakes found after the flags parsed: one `error:` line, nothing written."""
  proc = kfp_launcher.compile_package(
    tmp_path / "p.json", "--task", "multiclass", *flags, env=project_env(), timeout=120
  )
  assert proc.returncode == 2, proc.stderr
  (line,) = proc.stderr.strip().splitlines()
  assert line.startswith("error: ") and message in line
  assert not (tmp_path / "p.json").exists()


def test_a_credential_as_plain_step_env_is_refused_without_echoing_it(tmp_path):
  proc = kfp_launcher.compile_package(
    tmp_path / "p.json",
    "--step-env",
    f"AWS_SECRET_ACCESS_KEY={SENTINEL}",
    env=project_env(),
    timeout=120,
  )
  assert proc.returncode == 2
  assert "--secret-env" in proc.stderr.strip().splitlines()[-1]
  assert SENTINEL not in proc.stdout + proc.stderr
  assert not (tmp_path / "p.json").exists()


def test_output_naming_a_folder_or_a_missing_folder_is_one_error_line(tmp_path):
  for output, message in (
    (tmp_path, "is a folder; pass a file name"),
    (tmp_path / "nowhere" / "p.json", "does not exist; create it first."),
  ):
    proc = kfp_launcher.compile_package(output, env=project_env(), timeout=120)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: ") and message in line
  assert list(tmp_path.iterdir()) == []


def test_the_bundled_data_compiles_without_task(tmp_path):
  """The image holds this checkout's data/: it is read here to tell the task and the floor."""
  out = tmp_path / "p.json"
  proc = kfp_launcher.compile_package(
    out, "--image", IMAGE, "--pipeline-root", "gs://bucket/root", env=project_env()
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  text = out.read_text()
  assert '"/pipeline/data/digits"' in text and '"multiclass"' in text


def test_both_packages_end_with_the_report_page_as_an_html_artifact(kfp_compiled, vertex_compiled):
  from kfp.client import client as kfp_client

  for compiled in (kfp_compiled, vertex_compiled):
    spec = _spec(compiled)
    steps = kubeflow_lib.tasks(spec)
    report = steps[nodes.RUN_REPORT]
    # After the Pusher, and fed by it: the page shows what was pushed.
    assert nodes.PUSHER in report["dependentTasks"]
    assert report["inputs"]["artifacts"][report_spec.PUSHED_MODEL_KEY] == {
      "taskOutputArtifact": {"outputArtifactKey": "pushed_model", "producerTask": nodes.PUSHER}
    }
    outputs = kubeflow_lib.component(spec, nodes.RUN_REPORT)["outputDefinitions"]["artifacts"]
    assert outputs == {report_spec.PAGE_KEY: {"artifactType": kubeflow_lib.KFP_HTML_TYPE}}
    # The only HTML output, and no other output lost its TFX type.
    html = [
      (name, key)
      for name, comp in spec["components"].items()
      for key, d in ((comp.get("outputDefinitions") or {}).get("artifacts") or {}).items()
      if "schemaTitle" in d["artifactType"]
    ]
    assert html == [(report["componentRef"]["name"], report_spec.PAGE_KEY)]
  # KFP's own client reads the upload package, types included.
  package = kfp_compiled[0].parent / "pipeline.kfp.yaml"
  parsed = kfp_client._extract_pipeline_yaml(str(package))
  comp_name = kubeflow_lib.tasks(_spec(kfp_compiled))[nodes.RUN_REPORT]["componentRef"]["name"]
  page = parsed.pipeline_spec.components[comp_name].output_definitions.artifacts["page"]
  assert page.artifact_type.schema_title == "system.HTML"


def test_a_pipeline_root_the_compiler_cannot_write_is_one_error_line(tmp_path):
  # With a module file, TFX's compiler writes the module's wheel under the pipeline root. Seen
  # with gs:// and no network: FailedPreconditionError "Could not resolve host". The store's
  # answer is stood in for here, so the test needs no network and no DNS.
  import tfx.examples

  module = pathlib.Path(tfx.examples.__file__).parent / "penguin" / "penguin_utils_keras.py"
  out = tmp_path / "p.json"
  argv = [
    "--output", str(out), "--image", IMAGE, "--module-file", str(module),
    "--label-key", "species", "--eval-label-key", "species_xf", "--task", "multiclass",
    "--data-root", "gs://b/penguins", "--pipeline-root", "gs://b/root",
    "--serving-dir", "gs://b/serving",
  ]  # fmt: skip
  proc = run_python(f"""
    import sys
    import tensorflow as tf
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

    def unreachable(self, pipeline, **kwargs):
      raise tf.errors.FailedPreconditionError(
        None, None, "Error executing an HTTP request: libcurl code 6 meaning 'Couldn't resolve "
        "host name'\\n\\t when reading metadata of gs://b/root"
      )

    kubeflow_v2_dag_runner.KubeflowV2DagRunner.run = unreachable
    from pipeline.cli import kubeflow
    sys.exit(kubeflow.main({argv!r}))
  """)
  assert proc.returncode == 2, proc.stderr[-3000:]
  line = proc.stderr.strip().splitlines()[-1]
  assert line.startswith("error: --pipeline-root gs://b/root: the compiler writes"), line
  assert "Couldn't resolve host name" in line and "Traceback" not in proc.stderr
  assert not out.exists()
