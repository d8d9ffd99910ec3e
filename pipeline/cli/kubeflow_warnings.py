"""What run_kubeflow.py warns of: settings that compile but would not run as meant in the
cluster (a placeholder left in, a path in a step's container that nothing mounts)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence

from components import storage
from pipeline.definition import kubeflow_lib
from pipeline.definition.config import DEFAULT_IMAGE, PipelineConfig

# Where the Dockerfile puts the repository inside the image.
IMAGE_REPO_ROOT = "/pipeline"
PLACEHOLDER_PIPELINE_ROOT = "gs://YOUR_BUCKET/tfx-pipeline-kit/root"


def _under(path: str, mounts: Sequence[str]) -> bool:
  return any(os.path.commonpath([path, m]) == m for m in mounts if path.startswith("/"))


def compile_warnings(
  args: argparse.Namespace, config: PipelineConfig, volumes: Sequence[tuple[str, str]]
) -> list[str]:
  """Settings that compile but would not run as meant on a cluster, one line each."""
  out = []
  if args.image == DEFAULT_IMAGE:
    out.append(
      f"--image is still the placeholder {DEFAULT_IMAGE}; build and push the Dockerfile's "
      "image and pass --image REGISTRY/tfx-pipeline-kit:TAG."
    )
  if config.pipeline_root == PLACEHOLDER_PIPELINE_ROOT:
    out.append(
      f"--pipeline-root is still the placeholder {PLACEHOLDER_PIPELINE_ROOT}; pass a gs:// or "
      "s3:// location the cluster can write."
    )
  elif args.target == kubeflow_lib.KFP and not config.pipeline_root.startswith(("gs://", "s3://")):
    out.append(
      f"--pipeline-root {config.pipeline_root} is neither gs:// nor s3://: KFP's launcher "
      "provisions artifacts only on object stores, and TFX cannot write KFP's minio:// URIs."
    )
  mounts = [path for _, path in volumes]
  if (
    args.target == kubeflow_lib.KFP
    and not storage.is_remote(config.serving_dir)
    and not _under(config.serving_dir, mounts)
  ):
    out.append(
      f"--serving-dir {config.serving_dir} is on no --volume: pushes would stay inside the "
      "Pusher's pod; mount a claim there (--volume PVC:/mnt/serving) or pass gs:// or s3://."
    )
  if args.target == kubeflow_lib.VERTEX and not storage.is_remote(config.serving_dir):
    out.append(
      f"--serving-dir {config.serving_dir} is a path in the step's container, and Vertex AI "
      "mounts no volumes there; pass --serving-dir gs://BUCKET/serving."
    )
  read = [("--data-root", config.data_root), ("--schema", config.schema_path)]
  for flag, path in read:
    in_image = bool(path) and path.startswith(IMAGE_REPO_ROOT + "/")
    if path and not storage.is_remote(path) and not in_image and not _under(path, mounts):
      where = "on no --volume" if args.target == kubeflow_lib.KFP else "in no Vertex AI volume"
      out.append(
        f"{flag} {path} is read in the steps' containers, where it is {where}; put it on gs:// "
        "or s3://, or (kfp) on a claim you mount with --volume."
      )
  return out
