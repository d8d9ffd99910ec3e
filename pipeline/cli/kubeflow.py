"""Compiles the pipeline for Kubeflow: open-source Kubeflow Pipelines 2.x or Vertex AI Pipelines."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import warnings

# Library deprecation notices (google-api-core on Python 3.10, ...) say nothing about the compile.
warnings.filterwarnings("ignore", category=FutureWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)

import argparse  # noqa: E402 (after the warning filters, which must come first)
import dataclasses  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402

from components import storage  # noqa: E402
from components.distributed_trainer import tfjob_manifest  # noqa: E402
from core import defaults, errors  # noqa: E402
from core.errors import UserInputError  # noqa: E402
from pipeline.cli import checks, flags, progress, reporting, resolve  # noqa: E402
from pipeline.cli.kubeflow_warnings import (  # noqa: E402
  IMAGE_REPO_ROOT,
  PLACEHOLDER_PIPELINE_ROOT,
  compile_warnings,
)
from pipeline.definition import kubeflow_lib, kubeflow_package  # noqa: E402
from pipeline.definition.config import DEFAULT_IMAGE, REPO_ROOT, PipelineConfig  # noqa: E402

DEFAULT_SERVING_DIR = "/mnt/serving"


def kfp_package_path(output_file: str) -> str:
  """The open-source KFP package written beside `output_file`: `X.json` -> `X.kfp.yaml`."""
  stem = output_file[: -len(".json")] if output_file.endswith(".json") else output_file
  return stem + ".kfp.yaml"


def compile_pipeline(
  output_file: str,
  config: PipelineConfig,
  image: str = DEFAULT_IMAGE,
  beam_pipeline_args: Sequence[str] = (),
  target: str = kubeflow_lib.KFP,
  volumes: Sequence[tuple[str, str]] = (),
  step_env: Sequence[tuple[str, str]] = (),
  secret_env: Sequence[tuple[str, str, str]] = (),
) -> str:
  """Writes the package for `config` and returns its path.

  Args:
    output_file: The PipelineJob .json to write (Vertex AI submits it as is; schedule.py and
      kfp's client take the PipelineSpec inside).
    config: Pipeline configuration; paths must be valid inside the image or
      on shared storage (gs://, s3://, a mounted volume).
    image: Container image every step runs in (see the Dockerfile).
    beam_pipeline_args: Beam options for data components, e.g. Dataflow flags.
    target: `kfp` (open-source Kubeflow Pipelines 2.x) or `vertex` (see kubeflow_lib).
    volumes: (PVC name, mount path) pairs mounted into every step (kfp only).
    step_env: (name, value) environment variables of every step (no credentials).
    secret_env: (secret, key, variable) environment variables of every step read from
      Kubernetes secrets (kfp only).

  Returns:
    output_file. With target `kfp` the bare PipelineSpec, plus a platform spec with `volumes`
    and `secret_env`, is also written to `kfp_package_path(output_file)` for upload.

  Raises:
    UserInputError: when an object-store pipeline root cannot be written from here (the
      compiler puts module files' wheels there).
  """
  import tensorflow as tf
  from absl import logging as absl_logging
  from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner as kfp_v2

  from pipeline.definition.factory import NEVER_CACHED, create_pipeline

  absl_logging.set_verbosity(absl_logging.WARNING)
  pipeline = create_pipeline(
    config,
    metadata_connection_config=None,
    beam_pipeline_args=beam_pipeline_args,
    report_step=True,
  )
  runner = kfp_v2.KubeflowV2DagRunner(
    config=kfp_v2.KubeflowV2DagRunnerConfig(default_image=image, use_pipeline_spec_2_1=True),
    output_dir=os.path.dirname(os.path.abspath(output_file)),
    output_filename=os.path.basename(output_file),
  )
  try:
    runner.run(pipeline, write_out=True)
  except tf.errors.OpError as e:
    if not storage.is_remote(config.pipeline_root):
      raise
    reason = errors.first_line(e)
    raise UserInputError(
      f"--pipeline-root {config.pipeline_root}: the compiler writes the module file's wheel "
      f"there and could not ({reason}); compile where that store is reachable with its "
      "credentials."
    ) from None
  with open(output_file, encoding="utf-8") as f:
    doc = json.load(f)
  kubeflow_package.postprocess(doc, target, NEVER_CACHED, config)
  kubeflow_lib.add_env(doc["pipelineSpec"], step_env)
  with open(output_file, "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2, sort_keys=True)
    f.write("\n")
  if target == kubeflow_lib.KFP:
    with open(kfp_package_path(output_file), "w", encoding="utf-8") as f:
      f.write(kubeflow_package.kfp_package(doc, volumes, secret_env))
  return output_file


def compile_from_args(output_file: str, args: argparse.Namespace, config: PipelineConfig) -> str:
  """`compile_pipeline` with every option `add_kubeflow_args` added (for schedule.py too)."""
  return compile_pipeline(
    output_file,
    config,
    image=args.image,
    beam_pipeline_args=args.beam_arg,
    target=args.target,
    volumes=args.volume,
    step_env=args.step_env,
    secret_env=args.secret_env,
  )


def _flag_type(parse):
  def convert(text: str):
    try:
      return parse(text)
    except ValueError as e:
      raise argparse.ArgumentTypeError(str(e)) from None

  return convert


def add_kubeflow_args(parser: argparse.ArgumentParser) -> None:
  """Adds the options that only exist for compiled pipelines."""
  parser.add_argument(
    "--target",
    choices=kubeflow_lib.TARGETS,
    default=kubeflow_lib.KFP,
    help="kfp: open-source Kubeflow Pipelines 2.x (a span resolver step keys the ExampleGen's "
    "cache, volumes can be mounted); vertex: Vertex AI Pipelines (TFX's span driver runs "
    "there) (default: %(default)s)",
  )
  parser.add_argument(
    "--image",
    default=DEFAULT_IMAGE,
    help="container image built from the Dockerfile (default: %(default)s)",
  )
  parser.add_argument(
    "--pipeline-root",
    default=PLACEHOLDER_PIPELINE_ROOT,
    help="artifact storage the cluster can write: gs:// or s3:// (default: %(default)s)",
  )
  parser.add_argument(
    "--serving-dir",
    default=DEFAULT_SERVING_DIR,
    help="where the Pusher writes versions: gs:// or s3://, or a path inside the step "
    "containers on a mounted volume (--volume) (default: %(default)s)",
  )
  parser.add_argument(
    "--volume",
    type=_flag_type(kubeflow_lib.parse_volume),
    action="append",
    default=[],
    metavar="PVC:/PATH",
    help="kfp: mount this PersistentVolumeClaim at PATH in every step, repeatable, e.g. "
    "--volume serving-pvc:/mnt/serving (ReadWriteMany when steps run at once)",
  )
  parser.add_argument(
    "--step-env",
    type=_flag_type(kubeflow_lib.parse_env),
    action="append",
    default=[],
    metavar="NAME=VALUE",
    help="environment variable of every step, repeatable, e.g. for an s3:// pipeline root on "
    "KFP's MinIO: --step-env S3_ENDPOINT=http://minio-service.kubeflow:9000 --step-env "
    "S3_USE_HTTPS=0 (credentials are refused here: use --secret-env)",
  )
  parser.add_argument(
    "--secret-env",
    type=_flag_type(kubeflow_lib.parse_secret_env),
    action="append",
    default=[],
    metavar="SECRET:KEY:VAR",
    help="kfp: set VAR in every step from key KEY of Kubernetes secret SECRET, repeatable, e.g. "
    "mlpipeline-minio-artifact:accesskey:AWS_ACCESS_KEY_ID",
  )
  _add_tfjob_args(parser)


def _add_tfjob_args(parser: argparse.ArgumentParser) -> None:
  """The flags that make the trainer's step a TFJob across machines."""
  g = parser.add_argument_group(
    "training across machines (kfp: a Kubeflow Training Operator TFJob, kubeflow.org/v1)"
  )
  g.add_argument(
    "--workers",
    type=int,
    default=0,
    metavar="N",
    help="the DistributedTrainer step runs a TFJob of N Worker replicas and waits for it",
  )
  g.add_argument(
    "--ps",
    type=int,
    default=0,
    metavar="M",
    help="M PS replicas in the TFJob, and a Chief replica that coordinates (parameter_server)",
  )
  g.add_argument(
    "--worker-resources",
    type=_flag_type(tfjob_manifest.parse_resources),
    default={},
    metavar="NAME=QTY,...",
    help="requests (= limits) of the chief and each worker, e.g. "
    "cpu=4,memory=16Gi,nvidia.com/gpu=1",
  )
  g.add_argument(
    "--ps-resources",
    type=_flag_type(tfjob_manifest.parse_resources),
    default={},
    metavar="NAME=QTY,...",
    help="requests (= limits) of each PS replica, e.g. cpu=2,memory=8Gi",
  )
  g.add_argument(
    "--tfjob-namespace",
    default="",
    help="namespace of the TFJob (default: the trainer step's own)",
  )
  g.add_argument(
    "--tfjob-service-account",
    default="",
    help="service account of the replicas (default: the namespace's default)",
  )
  parser.add_argument(
    "--beam-arg",
    action="append",
    default=[],
    help="Beam option for data components, repeatable, e.g. --beam-arg=--runner=DataflowRunner",
  )


def kubeflow_config(args: argparse.Namespace) -> PipelineConfig:
  """A PipelineConfig whose data and serving paths are read inside the cluster.

  A data root of the user's is not read here (it is read in the cluster), so `--task` must
  be given with it; the bundled data, which the image copies from this checkout, is read here.
  A --module-file and --transform-module must exist on this machine: TFX packages them into a
  wheel under the pipeline root at compile time, so they are checked, and their functions
  decide Transform and Tuner, as for run_local.py. Without a module file the bundled module is
  imported from the installed package inside the image.

  Raises:
    checks.CheckError: with a one-line message naming the fix.
  """
  bundled = PipelineConfig().data_root
  # The image holds this checkout's data/ (see the Dockerfile), there under IMAGE_REPO_ROOT.
  image_data = f"{IMAGE_REPO_ROOT}/{pathlib.Path(bundled).relative_to(REPO_ROOT).as_posix()}"
  if str(args.data_root) == bundled and not args.schema:
    # The bundled data is read here, where it is the same file, to tell the task and the floor
    # without --task.
    args.data_root = bundled
    config = resolve.config_from_args(
      args,
      args.pipeline_root,
      args.serving_dir,
      local_paths=True,
      local_modules=True,
      local_notify=False,
    )
    config = dataclasses.replace(config, data_root=image_data)
  else:
    config = resolve.config_from_args(
      args,
      args.pipeline_root,
      args.serving_dir,
      local_paths=False,
      local_modules=True,
      local_notify=False,
    )
    if config.data_root == bundled:
      # With --schema too, the steps read the image's copy (the package held this checkout's
      # path, which no container has).
      config = dataclasses.replace(config, data_root=image_data)
  return dataclasses.replace(
    config,
    pipeline_name=kfp_pipeline_name(config.pipeline_name),
    tfjob=tfjob_setting(args, config),
  )


_K8S_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
# The pipeline names TFX's Kubeflow V2 compiler takes (pipeline_builder._check_name).
_KFP_PIPELINE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,127}")


def kfp_pipeline_name(name: str) -> str:
  """The model's name as a pipeline name Kubeflow takes: lowercase letters, digits and hyphens,
  at most 128 ('penguins_processed' -> 'penguins-processed'; the serving folder keeps the
  model's name). A model name starts with a letter or digit (`checks`), so some is left."""
  if _KFP_PIPELINE_NAME.fullmatch(name):
    return name
  return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:128].rstrip("-")


def tfjob_setting(args: argparse.Namespace, config: PipelineConfig) -> str:
  """The DistributedTrainer's TFJob settings from --workers and friends ('' without --workers).

  Every replica gets what a pipeline step gets: the image, --step-env, --secret-env (as
  secret references) and --volume.

  Raises:
    checks.CheckError: for flags a TFJob cannot honour, naming what to pass instead.
  """
  given = {
    "--workers": args.workers,
    "--ps": args.ps,
    "--worker-resources": args.worker_resources,
    "--ps-resources": args.ps_resources,
    "--tfjob-namespace": args.tfjob_namespace,
    "--tfjob-service-account": args.tfjob_service_account,
  }
  given = [flag for flag, value in given.items() if value]
  if not given:
    return ""
  if args.target == kubeflow_lib.VERTEX:
    raise checks.CheckError(
      f"{given[0]} runs a Kubeflow Training Operator TFJob, which Vertex AI does not have; on "
      "Vertex train on one machine with --strategy mirrored and GPUs, or compile --target kfp "
      "for open-source Kubeflow with the training operator installed."
    )
  if not args.workers:
    raise checks.CheckError(f"{given[0]} configures the TFJob of --workers N; pass --workers too.")
  checks.check_at_least("--workers", args.workers, 1)
  checks.check_at_least("--ps", args.ps, 0)
  if config.local_workers or config.local_ps:
    raise checks.CheckError(
      "--local-workers and --local-ps start processes inside the trainer's step; with --workers "
      "the replicas are TFJob pods, so leave them out."
    )
  if args.ps_resources and not args.ps:
    raise checks.CheckError("--ps-resources sizes the PS replicas of --ps M; pass --ps too.")
  if args.ps and config.strategy not in (defaults.PARAMETER_SERVER, defaults.AUTO):
    raise checks.CheckError(
      f"--ps {args.ps} trains with ParameterServerStrategy, not {config.strategy}; pass "
      "--strategy parameter_server or auto."
    )
  if not args.ps and config.strategy not in (defaults.MULTI_WORKER_MIRRORED, defaults.AUTO):
    raise checks.CheckError(
      f"--workers {args.workers} trains with MultiWorkerMirroredStrategy, not "
      f"{config.strategy}; pass --strategy multi_worker_mirrored or auto (or --ps M for "
      "parameter_server)."
    )
  if args.workers == 1 and not args.ps and config.strategy == defaults.MULTI_WORKER_MIRRORED:
    raise checks.CheckError(
      "a TFJob of one replica gets no TF_CONFIG from the training operator, so "
      "multi_worker_mirrored cannot start; pass --workers 2 or more, or --strategy auto."
    )
  if args.tfjob_namespace and not re.fullmatch(_K8S_NAME, args.tfjob_namespace):
    raise checks.CheckError(
      f"--tfjob-namespace {args.tfjob_namespace!r} is not a Kubernetes namespace name "
      "(lower-case letters, digits and '-')."
    )
  account = args.tfjob_service_account
  if account and not re.fullmatch(rf"{_K8S_NAME}(\.{_K8S_NAME})*", account):
    raise checks.CheckError(
      f"--tfjob-service-account {account!r} is not a Kubernetes service account name."
    )
  return tfjob_manifest.TFJobSettings(
    workers=args.workers,
    ps=args.ps,
    image=args.image,
    namespace=args.tfjob_namespace,
    service_account=account,
    worker_resources=dict(args.worker_resources),
    ps_resources=dict(args.ps_resources),
    env=tuple(args.step_env),
    secret_env=tuple(args.secret_env),
    volumes=tuple(args.volume),
  ).to_json()


def check_target(target: str, config: PipelineConfig) -> None:
  """Refuses settings the target cannot run.

  Raises:
    checks.CheckError: Vertex AI with a pipeline root outside Cloud Storage.
  """
  if target == kubeflow_lib.VERTEX and not config.pipeline_root.startswith("gs://"):
    raise checks.CheckError(
      f"--target vertex writes artifacts to Cloud Storage, not {config.pipeline_root}; pass "
      "--pipeline-root gs://BUCKET/PATH."
    )


def check_output_name(output: str) -> None:
  """Refuses a *.yaml or *.yml --output (a CheckError): TFX's compiler writes YAML there, and a
  PipelineJob is not the package KFP uploads, which run_kubeflow.py writes beside the JSON."""
  stem, extension = os.path.splitext(output)
  if extension.lower() in (".yaml", ".yml"):
    raise checks.CheckError(
      f"--output {output}: run_kubeflow.py writes the PipelineJob as JSON; pass a name ending "
      f"in .json, e.g. {stem}.json (with --target kfp, the package to upload is written beside "
      f"it as {stem}.kfp.yaml)."
    )


def check_kubeflow_args(args: argparse.Namespace) -> None:
  """The checks of run_kubeflow.py's own flags that need no config (run before it is built).

  Raises:
    checks.CheckError: with a one-line message naming the fix.
  """
  checks.check_image("--image", args.image)
  checks.check_beam_args("--beam-arg", args.beam_arg)
  if args.target == kubeflow_lib.VERTEX and (args.volume or args.secret_env):
    raise checks.CheckError(
      "--volume and --secret-env apply to --target kfp only (Vertex AI mounts no claims and "
      "reads no Kubernetes secrets); leave them out, and pass gs:// paths and a service "
      "account that can read them."
    )


def main(argv=None) -> int:
  parser = flags.ArgumentParser(description=__doc__)
  parser.add_argument(
    "--output",
    required=True,
    type=pathlib.Path,
    help="PipelineJob file to write, e.g. digits_pipeline.json (with --target kfp, the "
    "package to upload is written beside it: digits_pipeline.kfp.yaml)",
  )
  add_kubeflow_args(parser)
  flags.add_pipeline_args(parser)
  args = parser.parse_args(argv)
  try:
    checks.check_output_file("--output", str(args.output))
    check_output_name(str(args.output))
    check_kubeflow_args(args)
    config = kubeflow_config(args)
    check_target(args.target, config)
  except UserInputError as e:
    return reporting.fail(str(e))
  for line in compile_warnings(args, config, args.volume):
    print(f"warning: {line}", file=sys.stderr)
  progress.configure_logging(verbose=False)
  logging.getLogger().setLevel(logging.WARNING)
  try:
    path = compile_from_args(str(args.output), args, config)
  except UserInputError as e:
    return reporting.fail(str(e))
  extra = f"; upload {kfp_package_path(path)}" if args.target == kubeflow_lib.KFP else ""
  print(f"wrote {path} for {args.target} (image {args.image}){extra}")
  return 0
