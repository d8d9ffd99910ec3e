"""`schedule.py kubeflow` against hosts that are not KFP: one line, quickly, no tracebacks."""

import contextlib
import http.server
import json
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time
import urllib.error

import kfp
import pytest

from pipeline.cli import schedule
from pipeline.cli.scheduling import cron, kfp_health

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
HEALTHZ = "/apis/v2beta1/healthz"
KFP_HEALTHZ = {"commit_sha": "abc", "tag_name": "2.0.5", "multi_user": False}


class _Handler(http.server.BaseHTTPRequestHandler):
  """Answers GET/POST from the server's `routes`: path -> (status, content type, body)."""

  def _answer(self):
    self.server.seen.append((self.command, self.path, self.headers.get("Authorization")))
    route = self.server.routes.get(self.path.split("?")[0]) or self.server.routes.get("*")
    if callable(route):
      route = route()
    status, content_type, body = route
    self.send_response(status)
    if status in (301, 302, 307, 308):
      self.send_header("Location", content_type)
      content_type, body = "text/plain", b""
    self.send_header("Content-Type", content_type)
    self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body)

  do_GET = do_POST = _answer

  def log_message(self, *args):
    pass


@contextlib.contextmanager
def _server(routes):
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
  server.routes, server.seen = routes, []
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}", server
  finally:
    server.shutdown()
    server.server_close()


def _closed_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


HTML_404 = (404, "text/html; charset=utf-8", b"<html><body>Not Found</body></html>")
HTML_200 = (200, "text/html", b"<!doctype html><title>Welcome to nginx!</title>")
JSON_200 = (200, "application/json", json.dumps(KFP_HEALTHZ).encode())


@pytest.fixture
def package(tmp_path, monkeypatch):
  """A minimal KFP package, and an environment where kfp finds no other endpoint or home."""
  for name in ("KFP_HOST", "KFP_TOKEN", "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT"):
    monkeypatch.delenv(name, raising=False)
  monkeypatch.setattr(kfp.Client, "_LOCAL_KFP_CONTEXT", str(tmp_path / "kfp-context.json"))
  path = tmp_path / "p.yaml"
  path.write_text("{}")
  return path


def _schedule(package, host, tmp_path):
  argv = [
    "kubeflow", "--cron", "0 2 * * *", "--experiment", "e", "--job-name", "j",
    "--package", str(package), "--build-dir", str(tmp_path / "build"), "--host", host,
  ]  # fmt: skip
  started = time.monotonic()
  status = schedule.main(argv)
  return status, time.monotonic() - started


@pytest.mark.parametrize(
  ("routes", "answer"),
  [
    ({"*": HTML_404}, "answered HTTP 404 (text/html) to the KFP health check " + HEALTHZ),
    ({"*": HTML_200}, "answered HTTP 200 (text/html, not JSON) to the KFP health check " + HEALTHZ),
    (
      {"*": (503, "text/plain", b"upstream connect error")},
      "answered HTTP 503 (text/plain) to the KFP health check " + HEALTHZ,
    ),
  ],
)
def test_a_server_that_is_not_kfp_gets_one_line(package, tmp_path, capfd, routes, answer):
  with _server(routes) as (url, server):
    status, seconds = _schedule(package, url, tmp_path)
  out, err = capfd.readouterr()
  hint = (
    "is the KFP API server behind --host up?"
    if "503" in answer
    else "is --host the Kubeflow Pipelines API endpoint?"
  )
  assert status == 1
  assert err == f"schedule.py: error: {url} {answer}; {hint}\n"
  assert "Traceback" not in out and "healthz info attempt" not in out
  assert seconds < 5
  assert [path for _, path, _ in server.seen] in ([HEALTHZ], [HEALTHZ, "/apis/v1beta1/healthz"])


def test_a_closed_port_gets_one_line(package, tmp_path, capfd):
  url = f"http://127.0.0.1:{_closed_port()}"
  status, seconds = _schedule(package, url, tmp_path)
  assert status == 1
  assert capfd.readouterr().err == (
    f"schedule.py: error: cannot connect to {url}: connection refused; check --host and that "
    "the KFP API server (or your kubectl port-forward) is running.\n"
  )
  assert seconds < 5


def test_kfp_1x_is_named(package, tmp_path, capfd):
  routes = {"/apis/v1beta1/healthz": JSON_200, "*": (404, "text/plain", b"404 page not found")}
  with _server(routes) as (url, _):
    assert _schedule(package, url, tmp_path)[0] == 1
  assert capfd.readouterr().err == (
    f"schedule.py: error: {url} answers KFP's v1 health check (/apis/v1beta1/healthz) but not v2 "
    f"({HEALTHZ}): it runs Kubeflow Pipelines 1.x, and this tool's kfp 2.5 client needs KFP "
    "2.0 or later.\n"
  )


def test_the_token_goes_to_the_health_check_but_not_to_a_redirect(
  package, tmp_path, capfd, monkeypatch
):
  monkeypatch.setenv("KFP_TOKEN", "sentinel-token-8c1d")
  with _server({HEALTHZ: (302, "/login?state=secret", b""), "*": HTML_200}) as (url, server):
    assert _schedule(package, url, tmp_path)[0] == 1
  err = capfd.readouterr().err
  assert err == (
    f"schedule.py: error: {url} answered HTTP 200 (text/html, not JSON) to the KFP health check "
    f"{HEALTHZ} after a redirect to {url}/login; is --host the Kubeflow Pipelines API "
    "endpoint?\n"
  )
  assert server.seen[:2] == [
    ("GET", HEALTHZ, "Bearer sentinel-token-8c1d"),
    ("GET", "/login?state=secret", None),
  ]
  assert "sentinel" not in err


def test_kfp_health_passes_then_api_errors_are_one_line_without_client_retries(
  package, tmp_path, capfd
):
  # The health check passes; the next /healthz (kfp.Client's own) fails: kfp 2.5 would retry it
  # 5 times, 5 s apart, logging a traceback each time.
  answers = iter([JSON_200])
  routes = {
    HEALTHZ: lambda: next(answers, (503, "text/plain", b"no healthy upstream")),
    "*": HTML_404,
  }
  with _server(routes) as (url, server):
    status, seconds = _schedule(package, url, tmp_path)
  out, err = capfd.readouterr()
  assert status == 1
  assert err == "schedule.py: error: KFP API returned 503 Service Unavailable\n"
  assert "Traceback" not in out + err
  assert seconds < 5
  assert [path for _, path, _ in server.seen] == [HEALTHZ, HEALTHZ]


def test_a_kfp_whose_api_answers_html_is_one_line(package, tmp_path, capfd):
  with _server({HEALTHZ: JSON_200, "*": HTML_404}) as (url, _):
    status, seconds = _schedule(package, url, tmp_path)
  assert status == 1
  assert capfd.readouterr().err == "schedule.py: error: KFP API returned 404 Not Found\n"
  assert seconds < 5


def test_a_silent_server_times_out_quickly():
  with socket.socket() as listener:
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)  # Connections complete in the backlog; nothing ever answers.
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    started = time.monotonic()
    with pytest.raises(cron.ScheduleError) as info:
      kfp_health.check_kfp_health(url, timeout_s=0.5)
  assert time.monotonic() - started < 3
  assert str(info.value) == (
    f"{url} did not answer the KFP health check within 0.5 s; check --host, firewalls and "
    "port-forwards."
  )


@pytest.mark.parametrize(
  ("error", "message"),
  [
    (
      urllib.error.URLError(socket.gaierror(-2, "Name or service not known")),
      "cannot resolve the host name of https://kfp.example; check $KFP_HOST.",
    ),
    (
      ConnectionResetError(104, "Connection reset by peer"),
      "https://kfp.example did not answer the KFP health check with HTTP (ConnectionResetError); "
      "is $KFP_HOST the Kubeflow Pipelines API endpoint?",
    ),
  ],
)
def test_other_network_failures_are_named(error, message):
  def fail(url, headers, timeout_s):
    raise error

  with pytest.raises(cron.ScheduleError) as info:
    kfp_health.check_kfp_health("kfp.example/", what="$KFP_HOST", http_get=fail)
  assert str(info.value) == message


def test_auth_answers_are_left_to_the_kfp_client():
  for status in (401, 403):
    answer = kfp_health.HttpAnswer(status, "text/plain", b"denied", "https://k/x")
    kfp_health.check_kfp_health("https://k", http_get=lambda u, h, t, a=answer: a)


def test_cli_process_prints_one_line_and_exits_fast(tmp_path, package):
  env = dict(
    os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=str(REPO_ROOT), HOME=str(tmp_path / "home")
  )
  for name in ("KFP_HOST", "KFP_TOKEN", "KF_PIPELINES_SA_TOKEN_PATH", "KF_PIPELINES_ENDPOINT"):
    env.pop(name, None)
  with _server({"*": HTML_404}) as (url, _):
    started = time.monotonic()
    result = subprocess.run(
      [
        sys.executable, "pipeline/schedule.py", "kubeflow", "--cron", "0 2 * * *",
        "--experiment", "e", "--job-name", "j", "--package", str(package),
        "--build-dir", str(tmp_path / "build"), "--host", url,
      ],
      cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
  assert result.returncode == 1
  assert result.stderr == (
    f"schedule.py: error: {url} answered HTTP 404 (text/html) to the KFP health check "
    f"{HEALTHZ}; is --host the Kubeflow Pipelines API endpoint?\n"
  )
  assert "Traceback" not in result.stdout
  assert seconds < 30  # Process start-up included; kfp's own retries alone took 25 s.
  assert not (tmp_path / "home").exists()  # kfp.Client never ran, so wrote no context file


@pytest.mark.parametrize("env", [None, "KFP_HOST", "KF_PIPELINES_ENDPOINT"])
def test_a_host_that_is_not_http_is_one_line_naming_where_it_came_from(
  package, tmp_path, capfd, monkeypatch, env
):
  if env:
    monkeypatch.setenv(env, "ftp://kfp.example")
  argv = [
    "kubeflow", "--cron", "0 2 * * *", "--experiment", "e", "--job-name", "j",
    "--package", str(package), "--build-dir", str(tmp_path / "build"),
  ]  # fmt: skip
  if not env:
    argv += ["--host", "ftp://kfp.example"]
  assert schedule.main(argv) == 1
  err = capfd.readouterr().err.strip().splitlines()
  what = f"${env}" if env else "--host"
  assert err == [
    f"schedule.py: error: {what} ftp://kfp.example is a ftp:// address, and the KFP API is "
    "served over HTTP; pass http://HOST:PORT or https://HOST."
  ]
