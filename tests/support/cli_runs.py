"""Helpers for tests that run the real command-line entry points in subprocesses."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap

from tests.support import warm_python

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def project_env(**extra: str) -> dict[str, str]:
  env = dict(os.environ)
  env.update({"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"})
  env.update(extra)
  return env


def run_script(script: str, *args: str, timeout: int = 600, env=None, cwd=None, warm=False):
  """Runs pipeline/<script> with the test interpreter and returns the CompletedProcess.

  With `warm`, the script runs in a child forked from a warm server of this test process, which
  imported TensorFlow, Beam and TFX once (see warm_python; about 13 s less per run here): for
  tests of many runs that check neither a run's start-up nor signals sent to it.
  """
  command = [sys.executable, str(REPO_ROOT / "pipeline" / script), *map(str, args)]
  env = env or project_env()
  if not warm:
    return subprocess.run(
      command,
      capture_output=True,
      text=True,
      timeout=timeout,
      env=env,
      cwd=cwd or REPO_ROOT,
      check=False,
    )
  server = warm_python.shared(warm_python.WarmPython, env)
  with tempfile.TemporaryDirectory(prefix="run-script-") as tmp:
    stdout, stderr = pathlib.Path(tmp, "stdout"), pathlib.Path(tmp, "stderr")
    stdout.touch()
    stderr.touch()
    code = server.run(
      {"script": command[1]},
      command[2:],
      env=env,
      cwd=cwd or REPO_ROOT,
      stdout=stdout,
      stderr=stderr,
      timeout=timeout,
    )
    if code is None:
      raise subprocess.TimeoutExpired(command, timeout)
    return subprocess.CompletedProcess(command, code, stdout.read_text(), stderr.read_text())


def run_python(code: str, timeout: int = 300, env=None) -> subprocess.CompletedProcess:
  """Runs `code` (dedented) in a fresh interpreter from the repository root, with `env`
  (default: project_env()); never raises on its exit status."""
  return subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)],
    capture_output=True,
    text=True,
    env=env or project_env(),
    cwd=REPO_ROOT,
    timeout=timeout,
    check=False,
  )


def load_summary(output_dir) -> dict:
  return json.loads((pathlib.Path(output_dir) / "run_summary.json").read_text())


def states(summary: dict) -> dict[str, str]:
  return {c["name"]: c["state"] for c in summary["components"]}


@contextlib.contextmanager
def moto_s3(bucket: str):
  """moto's S3-compatible server on a free loopback port, with `bucket` created.

  Yields (boto3 client, environment for subprocesses): tensorflow-io reads S3_ENDPOINT and
  friends, boto3 (Beam) the AWS_* variables. moto keeps its buckets in the test process's
  memory, shared by every server it starts there, so each server starts from an empty store:
  another module's objects would otherwise show up in this one's bucket.
  """
  import urllib.request

  import pytest

  moto_server = pytest.importorskip("moto.server")
  boto3 = pytest.importorskip("boto3")
  server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
  server.start()
  try:
    endpoint = f"http://127.0.0.1:{server._server.server_address[1]}"
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=30).close()
    credentials = {"aws_access_key_id": "test", "aws_secret_access_key": "test"}
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", **credentials)
    client.create_bucket(Bucket=bucket)
    env = project_env(
      S3_ENDPOINT=endpoint,
      S3_USE_HTTPS="0",
      S3_VERIFY_SSL="0",
      AWS_ENDPOINT_URL_S3=endpoint,
      AWS_ACCESS_KEY_ID="test",
      AWS_SECRET_ACCESS_KEY="test",
      AWS_REGION="us-east-1",
      AWS_DEFAULT_REGION="us-east-1",
    )
    yield client, env
  finally:
    server.stop()
