"""The KFP health check: one GET of `<host>/apis/v2beta1/healthz`, with a short timeout.

kfp.Client checks health too, but retries five times, five seconds apart, logging a traceback
each time, and then reports only a timeout. This asks once and turns whatever answered (a
refused connection, a proxy's HTML page, KFP 1.x, a login redirect) into one sentence naming
the fix; a server that answers like KFP 2.x is then left to kfp.Client.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import re
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping

from pipeline.cli.scheduling.cron import ScheduleError, one_line
from pipeline.cli.scheduling.kfp_client import redact_host

# Where kfp 2.5's client checks health (v2beta1) and where KFP 1.x answers (v1beta1).
HEALTHZ_V2 = "/apis/v2beta1/healthz"
HEALTHZ_V1 = "/apis/v1beta1/healthz"
_BODY_LIMIT = 65536


@dataclasses.dataclass(frozen=True)
class HttpAnswer:
  """What a server answered to one GET.

  Attributes:
    status: The HTTP status code.
    content_type: The Content-Type header without parameters, or "" when there was none.
    body: Up to 64 KiB of the body.
    url: The URL that answered (differs from the one asked for after a redirect).
  """

  status: int
  content_type: str
  body: bytes
  url: str


def kfp_host_url(host: str) -> str:
  """Normalises a KFP host the way ``kfp.Client`` does: https:// if no scheme, no final slash.

  Args:
    host: The host as given.

  Returns:
    The base URL the client will use.
  """
  if not host.startswith("http"):
    host = "https://" + host
  return host.rstrip("/")


def check_kfp_health(
  host: str,
  *,
  what: str = "--host",
  token: str | None = None,
  timeout_s: float = 5.0,
  http_get: Callable[[str, Mapping[str, str], float], HttpAnswer] | None = None,
) -> None:
  """Checks quickly that `host` is a Kubeflow Pipelines 2.x API server.

  ``kfp.Client`` retries its health check five times, five seconds apart, logging a traceback
  each time, and then reports only a timeout. This asks ``GET <host>/apis/v2beta1/healthz``
  once, with a short timeout, and turns whatever answered into one sentence. Answers that
  may come from a real KFP behind authentication (401, 403) pass, so that the client, which
  knows more ways to authenticate, reports them.

  Args:
    host: The KFP host URL.
    what: Where the host came from, for the message (``--host``, ``$KFP_HOST``...).
    token: Bearer token to send (never sent on to a redirect target).
    timeout_s: Seconds to wait for connecting and for each read.
    http_get: Replaces the HTTP call (tests); takes (url, headers, timeout_s).

  Raises:
    ScheduleError: If nothing answers, or what answers is not KFP 2.x.
  """
  base = kfp_host_url(host)
  shown = redact_host(base)
  parts = urllib.parse.urlsplit(base)
  if "@" in parts.netloc or re.search(r"googleusercontent\.com$", parts.hostname or ""):
    # Credentials in the URL, or Google's inverse proxy for which the client fetches a Google
    # token itself: this check could not authenticate like the client will.
    return
  get = http_get or _http_get
  headers = {"Authorization": f"Bearer {token}"} if token else {}
  hint = f"is {what} the Kubeflow Pipelines API endpoint?"
  answer = _ask(get, base + HEALTHZ_V2, headers, timeout_s, shown, what)
  if answer.status in (401, 403) or (answer.status == 200 and _is_json_object(answer.body)):
    return
  if answer.status == 404:
    v1 = _ask(get, base + HEALTHZ_V1, headers, timeout_s, shown, what)
    if v1.status == 200 and _is_json_object(v1.body):
      raise ScheduleError(
        f"{shown} answers KFP's v1 health check ({HEALTHZ_V1}) but not v2 ({HEALTHZ_V2}): it "
        "runs Kubeflow Pipelines 1.x, and this tool's kfp 2.5 client needs KFP 2.0 or later."
      )
  kind = answer.content_type or "no Content-Type"
  if answer.status == 200:
    kind += ", not JSON"
  redirected = ""
  if answer.url != base + HEALTHZ_V2:
    target = urllib.parse.urlsplit(answer.url)
    redirected = f" after a redirect to {target.scheme}://{target.netloc}{target.path}"
  if answer.status >= 500:
    hint = f"is the KFP API server behind {what} up?"
  raise ScheduleError(
    f"{shown} answered HTTP {answer.status} ({kind}) to the KFP health check "
    f"{HEALTHZ_V2}{redirected}; {hint}"
  )


def _is_json_object(body: bytes) -> bool:
  try:
    return isinstance(json.loads(body), dict)
  except ValueError:  # Not UTF-8 or not JSON.
    return False


def _ask(
  get: Callable[[str, Mapping[str, str], float], HttpAnswer],
  url: str,
  headers: Mapping[str, str],
  timeout_s: float,
  shown: str,
  what: str,
) -> HttpAnswer:
  try:
    return get(url, headers, timeout_s)
  except urllib.error.URLError as e:
    reason = e.reason
  except (OSError, http.client.HTTPException, ValueError) as e:
    reason = e
  if isinstance(reason, ConnectionRefusedError):
    raise ScheduleError(
      f"cannot connect to {shown}: connection refused; check {what} and that the KFP API "
      "server (or your kubectl port-forward) is running."
    )
  if isinstance(reason, socket.gaierror):
    raise ScheduleError(f"cannot resolve the host name of {shown}; check {what}.")
  if isinstance(reason, TimeoutError):
    raise ScheduleError(
      f"{shown} did not answer the KFP health check within {timeout_s:g} s; check {what}, "
      "firewalls and port-forwards."
    )
  if isinstance(reason, ssl.SSLError | ssl.CertificateError):
    raise ScheduleError(
      f"TLS with {shown} failed ({one_line(str(reason))}); check {what} (http:// or https://) "
      "and the server's certificate."
    )
  if isinstance(reason, http.client.HTTPException | ConnectionResetError):
    raise ScheduleError(
      f"{shown} did not answer the KFP health check with HTTP ({type(reason).__name__}); "
      f"is {what} the Kubeflow Pipelines API endpoint?"
    )
  if isinstance(reason, ValueError):
    raise ScheduleError(f"{what} {shown!r} is not a valid URL ({one_line(str(reason))}).")
  detail = getattr(reason, "strerror", None) or str(reason)
  raise ScheduleError(f"cannot connect to {shown}: {one_line(str(detail))}; check {what}.")


class _NoAuthOnRedirect(urllib.request.HTTPRedirectHandler):
  """Follows redirects like the KFP client does, never carrying the token along."""

  def redirect_request(self, req, fp, code, msg, headers, newurl):
    new = super().redirect_request(req, fp, code, msg, headers, newurl)
    if new is not None:
      new.remove_header("Authorization")
    return new


def _http_get(url: str, headers: Mapping[str, str], timeout_s: float) -> HttpAnswer:
  context = None
  try:
    import certifi  # What kfp_server_api's urllib3 pool verifies against.

    context = ssl.create_default_context(cafile=certifi.where())
  except ImportError:
    context = ssl.create_default_context()
  opener = urllib.request.build_opener(
    urllib.request.ProxyHandler({}),  # kfp's client ignores $http_proxy too.
    urllib.request.HTTPSHandler(context=context),
    _NoAuthOnRedirect(),
  )
  request = urllib.request.Request(url, headers={"Accept": "application/json", **headers})
  try:
    response = opener.open(request, timeout=timeout_s)
  except urllib.error.HTTPError as e:
    response = e
  with response:
    body = response.read(_BODY_LIMIT)
    content_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
    return HttpAnswer(response.status, content_type, body, response.geturl())
