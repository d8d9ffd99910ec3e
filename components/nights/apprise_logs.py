"""apprise's log records during our calls: masked, kept off the handlers, read for the outcome.

apprise logs a failed delivery (at WARNING, with the reason) and the request's own exception (at
DEBUG), and either may name the URL and its secrets. While `guard` holds a `Capture`, the
"apprise" logger's records are masked with the capture's secrets; those at WARNING and above are
kept on the capture instead of reaching a handler, and a read timeout marks the capture as a
request that went out unanswered.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import re
from collections.abc import Iterator

# How requests words a read timeout, which apprise's plugins log as their socket exception.
_READ_TIMED_OUT = "Read timed out"
# How apprise's HTTP plugins end a failed delivery's warning: "...error=404."
_HTTP_STATUS = re.compile(r"error=(\d{3})\b")
# How apprise's mail plugin logs (at DEBUG) the smtplib exception of a refused mail: "Socket
# Exception: (554, b'5.7.1 message refused')", or a dict of such replies by recipient.
_SMTP_REPLY = re.compile(r"^Socket Exception: .*?\((\d{3}), b(['\"])(.*?)\2\)")


@dataclasses.dataclass
class Capture:
  """What apprise logs during one call of ours: secrets to mask, and the kept WARNING+ text."""

  secrets: tuple[str, ...]
  # True while a URL is parsed: its secrets are not known yet, so every record is dropped.
  hide_all: bool
  messages: list[str] = dataclasses.field(default_factory=list)
  # Set when a request went out and its answer timed out (apprise logs that at DEBUG).
  unanswered: bool = False
  # The HTTP status a failed delivery was answered with (0: none logged).
  status: int = 0
  # The mail server's reply to a refused mail, code first ("" where none was logged).
  smtp_reply: str = ""
  # The apprise logger's own level: records below it are read here, then dropped.
  shown_level: int = logging.WARNING

  def redact(self, text: str) -> str:
    for secret in self.secrets:
      text = text.replace(secret, "***")
    return text


# apprise sends from worker threads that copy the caller's context, so a context variable
# (not a thread-local) finds the capture of the call that caused a record.
_CAPTURE: contextvars.ContextVar[Capture | None] = contextvars.ContextVar(
  "apprise_logs_capture", default=None
)


class _AppriseLogGuard(logging.Filter):
  """On the "apprise" logger: masks records made during our calls; keeps WARNING+ for us."""

  def filter(self, record: logging.LogRecord) -> bool:
    capture = _CAPTURE.get()
    if capture is None:
      return True
    if capture.hide_all:
      return False
    message = capture.redact(record.getMessage())
    capture.unanswered = capture.unanswered or _READ_TIMED_OUT in message
    reply = _SMTP_REPLY.search(message)
    if reply:
      capture.smtp_reply = f"{reply.group(1)} {reply.group(3)}".strip()
    if record.levelno < capture.shown_level:
      return False
    if record.levelno >= logging.WARNING:
      capture.messages.append(message)
      answered = _HTTP_STATUS.search(message)
      capture.status = int(answered.group(1)) if answered else capture.status
      return False
    record.msg, record.args = message, None
    return True


_LOG_GUARD = _AppriseLogGuard()


@contextlib.contextmanager
def guard(capture: Capture) -> Iterator[Capture]:
  apprise_logger = logging.getLogger("apprise")
  apprise_logger.addFilter(_LOG_GUARD)  # once: addFilter skips a filter it holds
  level, capture.shown_level = apprise_logger.level, apprise_logger.getEffectiveLevel()
  apprise_logger.setLevel(logging.DEBUG)  # a read timeout is logged at DEBUG
  token = _CAPTURE.set(capture)
  try:
    yield capture
  finally:
    _CAPTURE.reset(token)
    apprise_logger.setLevel(level)
