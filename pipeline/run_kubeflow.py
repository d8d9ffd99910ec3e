"""Compiles the pipeline for Kubeflow Pipelines 2.x (open source) or Vertex AI Pipelines.

Usage:
  python pipeline/run_kubeflow.py --output digits_pipeline.json            # the bundled data
  python pipeline/run_kubeflow.py --output p.json --image REGISTRY/tfx-pipeline-kit:TAG \\
      --pipeline-root gs://BUCKET/root --serving-dir gs://BUCKET/serving \\
      --data-root gs://BUCKET/data --task binary                            # your data
  python pipeline/run_kubeflow.py --help                                   # every flag

For open-source KFP it writes the PipelineJob JSON and, beside it, `<name>.kfp.yaml`: the
package to upload, holding the platform spec (volumes, secrets) that KFP's launcher reads.
With `--workers N` the trainer's step runs a Kubeflow TFJob of N workers. The same pipeline as
run_local.py, from `pipeline.definition.factory.create_pipeline`; flags and checks are in
pipeline/cli/kubeflow.py. See docs/kubeflow.md.
"""

import sys

from pipeline.cli import kubeflow

if __name__ == "__main__":
  sys.exit(kubeflow.main())
