"""Loopback stand-ins for notification endpoints: a webhook (HTTP) and a mail server (SMTP)."""

import contextlib
import email
import email.policy
import http.server
import json
import socket
import threading
import time

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

SMTP_USER = "nightbot"
SMTP_PASSWORD = "s3cret-smtp-pw"


class _Recorder(http.server.BaseHTTPRequestHandler):
  """Answers 200 to each POST and keeps its path, headers and JSON body on the server."""

  def do_POST(self):
    data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
    time.sleep(self.server.delay_s)
    self.server.requests.append(
      {"path": self.path, "headers": dict(self.headers), "json": json.loads(data or b"null")}
    )
    self.send_response(self.server.status)
    self.send_header("Content-Length", "0")
    self.end_headers()

  def log_message(self, *args):
    pass


@contextlib.contextmanager
def http_server(delay_s: float = 0.0, status: int = 200):
  """A webhook on a free loopback port; its `requests` list holds what was posted.

  Args:
    delay_s: how long it takes over each request before keeping it and answering.
    status: the HTTP status it answers with.
  """
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
  server.requests = []
  server.delay_s = delay_s
  server.status = status
  thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
  thread.start()
  try:
    yield server
  finally:
    server.shutdown()
    server.server_close()
    thread.join()


class Mailbox:
  """An aiosmtpd handler that keeps each message and whether its session logged in; given a
  `data_reply` or `rcpt_reply` (e.g. "550 5.1.1 mailbox unavailable"), it refuses with it instead
  and counts the refused tries."""

  def __init__(self, data_reply: str = "", rcpt_reply: str = ""):
    self.messages = []
    self.data_reply, self.rcpt_reply = data_reply, rcpt_reply
    self.refused = 0

  async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
    if self.rcpt_reply:
      self.refused += 1
      return self.rcpt_reply
    envelope.rcpt_tos.append(address)
    return "250 OK"

  async def handle_DATA(self, server, session, envelope):
    if self.data_reply:
      self.refused += 1
      return self.data_reply
    self.messages.append(
      {
        "message": email.message_from_bytes(envelope.content, policy=email.policy.default),
        "rcpt_tos": envelope.rcpt_tos,
        "authenticated": session.authenticated,
      }
    )
    return "250 Message accepted for delivery"


def _authenticate(server, session, envelope, mechanism, auth_data):
  ok = isinstance(auth_data, LoginPassword) and auth_data == (
    SMTP_USER.encode(),
    SMTP_PASSWORD.encode(),
  )
  return AuthResult(success=ok)


class _LoopbackController(Controller):
  """A Controller on port 0: it learns the port the system chose before its readiness probe."""

  def _trigger_server(self):
    self.port = self.server.sockets[0].getsockname()[1]
    super()._trigger_server()


@contextlib.contextmanager
def smtp_server(data_reply: str = "", rcpt_reply: str = ""):
  """A mail server on a free loopback port that takes SMTP_USER/SMTP_PASSWORD without TLS.

  Yields (controller, mailbox): `controller.port` is the port, `mailbox.messages` the mails;
  `data_reply` and `rcpt_reply` make it refuse each mail (see `Mailbox`).
  """
  mailbox = Mailbox(data_reply, rcpt_reply)
  controller = _LoopbackController(
    mailbox,
    hostname="127.0.0.1",
    port=0,
    # Plain SMTP on loopback: AUTH must be offered without STARTTLS.
    auth_require_tls=False,
    auth_required=True,
    authenticator=_authenticate,
  )
  controller.start()
  try:
    yield controller, mailbox
  finally:
    controller.stop()


def dead_port() -> int:
  """A loopback port that was bound and closed, so connecting to it is refused."""
  with socket.socket() as sock:
    sock.bind(("127.0.0.1", 0))
    return sock.getsockname()[1]


def mail_url(port: int) -> str:
  """An apprise mailto:// URL for `smtp_server` (it holds the password: pass it as file:)."""
  return (
    f"mailto://{SMTP_USER}:{SMTP_PASSWORD}@127.0.0.1:{port}"
    "?mode=insecure&from=night@example.com&to=ops@example.com"
  )
