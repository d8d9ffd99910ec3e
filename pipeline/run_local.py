"""Runs the pipeline on LocalDagRunner with SQLite ML Metadata; defaults use the bundled digits."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import dataclasses
import json
import pathlib
import sys
import time

from pipeline import cli
from pipeline.config import DEFAULT_OUTPUT_DIR


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
    description="Train, validate, optimize and push a model with LocalDagRunner. "
    "With no options it runs on the bundled digits data."
  )
  parser.add_argument(
    "--output-dir",
    type=pathlib.Path,
    default=DEFAULT_OUTPUT_DIR,
    help="pipeline root, metadata.sqlite, serving/ and run_summary.json go here "
    "(default: %(default)s)",
  )
  cli.add_pipeline_args(parser)
  parser.add_argument(
    "--direct-workers",
    type=int,
    default=0,
    help="Beam DirectRunner worker processes for Beam components (0: in-process, the default)",
  )
  parser.add_argument("--quiet", action="store_true", help="only print the summary")
  return parser.parse_args(argv)


def main(argv=None) -> int:
  args = parse_args(argv)
  out = args.output_dir.resolve()
  try:
    config = cli.config_from_args(args, output_dir=out)
  except ValueError as e:
    return cli.fail(str(e))
  out.mkdir(parents=True, exist_ok=True)

  from filelock import FileLock, Timeout

  lock = FileLock(str(out / ".run.lock"))
  try:
    lock.acquire(timeout=0)
  except Timeout:
    return cli.fail(
      f"another run_local.py is already using {out}; wait for it to finish or pass another "
      "--output-dir."
    )
  try:
    return _run(args, config, out)
  finally:
    lock.release()


def _run(args, config, out: pathlib.Path) -> int:
  cli.quiet_logs(args.quiet)
  from ml_metadata import metadata_store
  from tfx import v1 as tfx

  from pipeline import summary as summary_lib
  from pipeline.factory import create_pipeline

  metadata_path = out / "metadata.sqlite"
  connection = tfx.orchestration.metadata.sqlite_metadata_connection_config(str(metadata_path))
  beam_args = []
  if args.direct_workers:
    beam_args = [
      "--direct_running_mode=multi_processing",
      f"--direct_num_workers={args.direct_workers}",
    ]
  pipeline = create_pipeline(config, connection, beam_args)

  started_ms = int(time.time() * 1000) - 1
  started = time.monotonic()
  error = None
  try:
    tfx.orchestration.LocalDagRunner().run(pipeline)
  except Exception as e:
    error = cli.user_error_message(e, out)
    if error is None:
      _write_summary(
        out,
        summary_lib,
        connection,
        metadata_store,
        config,
        started_ms,
        started,
        "internal error, see traceback",
      )
      raise
  summary = _write_summary(
    out, summary_lib, connection, metadata_store, config, started_ms, started, error
  )
  cli.print_summary(summary, out)
  if error:
    print(f"error: {error}", file=sys.stderr)
  return 0 if summary["status"] == "succeeded" else 1


def _write_summary(
  out, summary_lib, connection, metadata_store, config, started_ms, started, error
):
  store = metadata_store.MetadataStore(connection)
  summary = summary_lib.build_summary(store, config.pipeline_name, started_ms, error)
  summary["seconds"] = round(time.monotonic() - started, 2)
  summary["config"] = dataclasses.asdict(config)
  tmp = out / "run_summary.json.tmp"
  try:
    tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    tmp.replace(out / "run_summary.json")
  except OSError as e:
    if not cli.is_disk_full(e):
      raise
    # The run's error line already says the disk is full; leave no half-written summary.
    tmp.unlink(missing_ok=True)
  return summary


if __name__ == "__main__":
  sys.exit(main())
