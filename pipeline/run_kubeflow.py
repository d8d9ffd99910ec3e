"""Compiles the pipeline into a Kubeflow Pipelines v2 package with KubeflowV2DagRunner."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import logging
import pathlib
import sys

from pipeline import cli, progress
from pipeline.config import DEFAULT_IMAGE, PipelineConfig

# Where the Dockerfile puts the repository inside the image.
IMAGE_REPO_ROOT = "/pipeline"


def compile_pipeline(
  output_file: str, config: PipelineConfig, image: str = DEFAULT_IMAGE, beam_pipeline_args=()
) -> str:
  """Writes the KFP v2 package for `config` and returns its path.

  Args:
    output_file: The .json package to write.
    config: Pipeline configuration; paths must be valid inside the image or
      on shared storage (gs://, s3://, a mounted volume).
    image: Container image every step runs in (see the Dockerfile).
    beam_pipeline_args: Beam options for data components, e.g. Dataflow flags.

  Returns:
    output_file.
  """
  from tfx import v1 as tfx

  from pipeline.factory import create_pipeline

  pipeline = create_pipeline(
    config, metadata_connection_config=None, beam_pipeline_args=beam_pipeline_args
  )
  runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
    config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(
      default_image=image, use_pipeline_spec_2_1=True
    ),
    output_dir=os.path.dirname(os.path.abspath(output_file)),
    output_filename=os.path.basename(output_file),
  )
  runner.run(pipeline, write_out=True)
  return output_file


def add_kubeflow_args(parser: argparse.ArgumentParser) -> None:
  """Adds the options that only exist for compiled pipelines."""
  parser.add_argument(
    "--image",
    default=DEFAULT_IMAGE,
    help="container image built from the Dockerfile (default: %(default)s)",
  )
  parser.add_argument(
    "--pipeline-root",
    default="gs://YOUR_BUCKET/tfx-pipeline-kit/root",
    help="artifact storage the cluster can write (default: %(default)s)",
  )
  parser.add_argument(
    "--serving-dir",
    default="/mnt/serving",
    help="POSIX path inside the step container where the Pusher writes versions, "
    "normally a mounted volume (default: %(default)s)",
  )
  parser.add_argument(
    "--beam-arg",
    action="append",
    default=[],
    help="Beam option for data components, repeatable, e.g. --beam-arg=--runner=DataflowRunner",
  )


def kubeflow_config(args: argparse.Namespace) -> PipelineConfig:
  """A PipelineConfig whose default data path is the copy inside the image.

  A --module-file must exist on this machine: TFX packages it into a wheel
  under the pipeline root at compile time. Without one, the bundled module is
  imported from the installed package inside the image.
  """
  defaults = PipelineConfig()
  if str(args.data_root) == defaults.data_root:
    args.data_root = f"{IMAGE_REPO_ROOT}/data/digits"
  return cli.config_from_args(args, args.pipeline_root, args.serving_dir, local_paths=False)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument(
    "--output",
    required=True,
    type=pathlib.Path,
    help="package file to write, e.g. digits_pipeline.json",
  )
  add_kubeflow_args(parser)
  cli.add_pipeline_args(parser)
  args = parser.parse_args(argv)
  try:
    config = kubeflow_config(args)
  except cli.UserInputError as e:
    return cli.fail(str(e))
  progress.configure_logging(verbose=False)
  logging.getLogger().setLevel(logging.WARNING)
  path = compile_pipeline(
    str(args.output), config, image=args.image, beam_pipeline_args=args.beam_arg
  )
  print(f"wrote {path} (image {args.image})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
