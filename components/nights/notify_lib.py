"""Notices for failed or stopped nights over apprise: the --notify forms, their checks, delivery.

A --notify value is `env:NAME` or `file:PATH`, read when the notice is sent, or a literal apprise
URL that holds no credential: flags end up in crontabs, shell histories and process lists, so a
URL with a password, token or webhook secret must come from the environment or a file.

`send` never raises for a delivery problem: a night's outcome must not depend on whether its
notice got through. It retries each target, bounds every request with apprise's connect and read
timeouts, and reports each target as a `Delivery`. A request that was sent and not answered in
time is not sent again: the endpoint may have acted on it, and a second try would post it twice.
While this module calls apprise, apprise's own log records (which may name the URL) are masked,
and those at WARNING and above are kept off the handlers (`apprise_logs`): their masked text
becomes the `Delivery`'s error, logged here with the target's label.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
import time
import urllib.parse
from collections.abc import Sequence

import apprise

from components.nights.apprise_logs import Capture, guard
from core.errors import UserInputError

logger = logging.getLogger(__name__)

ENV_PREFIX = "env:"
FILE_PREFIX = "file:"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# apprise masks passwords and tokens in `url(privacy=True)` but prints the custom HTTP headers,
# payload fields and query arguments of json://, form:// and xml:// (`?+Name=`, `?:name=`,
# `?-name=`) as given, so one of those that carries a credential is recognised by its name.
_SECRET_PARAM = re.compile(r"auth|token|key|secret|pass|cookie|signature", re.IGNORECASE)
# Characters that separate the parts of an apprise URL: a part of `url(privacy=False)` that
# `url(privacy=True)` does not show is a secret.
_URL_SEPARATORS = re.compile(r"[/:@?&=,]+")
_MAX_ERROR_CHARS = 400
# Client errors that are worth another try: a timeout on the server's side, and rate limiting.
_TRANSIENT_STATUSES = (408, 425, 429)

_FORMS = (
  "json://HOST:PORT/PATH (a generic JSON webhook), mmost://HOST/TOKEN (a Slack-compatible "
  "incoming webhook), slack://TOKEN_A/TOKEN_B/TOKEN_C or mailto://USER:PASSWORD@HOST?to=ADDRESS, "
  "and a URL that holds a credential goes in env:NAME or file:PATH"
)
_KEEP_OUT = (
  "keep it out of flags and the crontab: put the URL in an environment variable and pass "
  "--notify env:NAME, or in a file (mode 600) and pass --notify file:PATH"
)


class NotifyError(UserInputError):
  """A --notify value that cannot be used; the message is one sentence that names the fix."""


@dataclasses.dataclass(frozen=True)
class Target:
  """One --notify destination as the user wrote it.

  Attributes:
    text: "env:NAME", "file:PATH" or a literal apprise URL without credentials.
  """

  text: str

  def label(self) -> str:
    """The target as it may be printed or logged: never a resolved URL or a secret."""
    if self.text.startswith((ENV_PREFIX, FILE_PREFIX)):
      return self.text
    return _literal_label(self.text)


@dataclasses.dataclass(frozen=True)
class Delivery:
  """The outcome of sending one notice to one target.

  Attributes:
    target: the target's `Target.label()`.
    ok: True when apprise reported the notice delivered.
    attempts: how many times it was sent (0 when the URL could not be read or parsed).
    error: "" when ok; else one line on why, without the resolved URL or any secret.
  """

  target: str
  ok: bool
  attempts: int
  error: str


def parse_target(text: str, *, check_source: bool = True) -> Target:
  """Checks one --notify value.

  Args:
    text: "env:NAME", "file:PATH" or a literal apprise URL without credentials.
    check_source: also check that the variable is set or the file readable, and that the URL
      in it parses (local runs); False checks only the form (compiling for Kubeflow, where the
      variable comes from a Kubernetes secret at run time).

  Returns:
    The target.

  Raises:
    NotifyError: the value cannot be used; the message names the fix and shows no secret.
  """
  if not isinstance(text, str):
    raise TypeError(f"parse_target takes a str, not {type(text).__name__}")
  text = text.strip()
  if text.startswith(ENV_PREFIX):
    if not _NAME.fullmatch(text[len(ENV_PREFIX) :]):
      raise NotifyError(
        "--notify env:NAME needs an environment variable name after env: (letters, digits and _, "
        "not starting with a digit), e.g. --notify env:NIGHT_NOTIFY_URL"
      )
  elif text.startswith(FILE_PREFIX):
    if not text[len(FILE_PREFIX) :]:
      raise NotifyError(
        "--notify file: names no file; pass --notify file:PATH with PATH a file (mode 600) that "
        "holds the URL"
      )
  else:
    _check_literal(text)
    return Target(text)
  target = Target(text)
  if check_source and _instantiate(resolve_url(target)) is None:
    raise NotifyError(
      f"--notify {text}: the URL in {_source(text)} is not one apprise can parse; put one of "
      f"these forms there: {_FORMS}"
    )
  return target


def parse_targets(texts: Sequence[str], *, check_source: bool = True) -> list[Target]:
  """Checks every --notify value (see `parse_target`); a value given twice counts once.

  Args:
    texts: the --notify values, in the order given.
    check_source: as in `parse_target`.

  Returns:
    The targets, in the order given.

  Raises:
    NotifyError: the first value that cannot be used.
  """
  if isinstance(texts, str):
    raise TypeError("parse_targets takes a sequence of --notify values, not one str")
  targets = [parse_target(text, check_source=check_source) for text in texts]
  return list(dict.fromkeys(targets))


def resolve_url(target: Target) -> str:
  """The URL a target names, read now from its environment variable or file.

  Args:
    target: a target from `parse_target`.

  Returns:
    The URL: the variable's value, or the file's first line that is neither blank nor a
    `#` comment, stripped; a literal target's own text.

  Raises:
    NotifyError: the variable is unset or empty, or the file is unreadable or holds no URL.
  """
  text = target.text
  if text.startswith(ENV_PREFIX):
    name = text[len(ENV_PREFIX) :]
    url = os.environ.get(name, "").strip()
    if not url:
      raise NotifyError(
        f"--notify {text}: the environment variable {name} is not set or is empty; export it "
        "with the notification URL before the run, or pass --notify file:PATH instead"
      )
    return url
  if text.startswith(FILE_PREFIX):
    path = os.path.expanduser(text[len(FILE_PREFIX) :])
    try:
      with open(path, encoding="utf-8") as stream:
        lines = stream.read().splitlines()
    except (OSError, UnicodeDecodeError) as error:
      why = error.strerror if isinstance(error, OSError) else "it is not UTF-8 text"
      raise NotifyError(
        f"--notify {text}: cannot read {path} ({why}); write the notification URL into that "
        "file (mode 600), or pass --notify env:NAME instead"
      ) from error
    for line in lines:
      if line.strip() and not line.strip().startswith("#"):
        return line.strip()
    raise NotifyError(
      f"--notify {text}: {path} holds no URL (only blank or # lines); write the notification "
      "URL on a line of its own"
    )
  return text


# The longest title sent: a mail's subject is one header line, and mail servers refuse a line
# over 998 characters (RFC 5321 4.5.3.1.6; aiosmtpd answers "500 Line too long"), which a data
# gate's stop line with several findings exceeds. The body keeps the whole text.
TITLE_MAX_CHARS = 150


def short_title(title: str) -> str:
  """`title` on one line, cut after a whole word with "..." when over TITLE_MAX_CHARS."""
  line = " ".join(title.split())
  if len(line) <= TITLE_MAX_CHARS:
    return line
  cut = line[: TITLE_MAX_CHARS - 3]
  if " " in cut:
    cut = cut[: cut.rindex(" ")]
  return cut.rstrip(" ,;:") + "..."


def send(
  targets: Sequence[Target],
  title: str,
  body: str,
  *,
  failed: bool,
  attempts: int = 3,
  backoff_s: float = 1.0,
  timeout_s: float = 10.0,
) -> list[Delivery]:
  """Sends one notice to every target; a target that fails does not stop the others.

  Args:
    targets: from `parse_targets`; each URL is read when it is sent to.
    title: the notice's title (a mail's subject), sent as `short_title` makes it.
    body: the notice's text, sent as plain text; it should hold the title's whole text.
    failed: True sends it as an apprise FAILURE notice, False as SUCCESS.
    attempts: tries per target.
    backoff_s: the sleep after the first failed try; it doubles after each further one.
    timeout_s: apprise's connect and read timeouts per request (`cto`, `rto`), unless the URL
      sets its own; apprise stops waiting for a target after three times this.

  Returns:
    One `Delivery` per target, in order. Failures are logged at WARNING with the target's label
    and the reason, and when a target failed, the notice's text is logged too.

  Raises:
    TypeError: `targets` is not a sequence of `Target`, or `title` or `body` is not a str.
    ValueError: attempts < 1, backoff_s < 0 or timeout_s <= 0.
  """
  if isinstance(targets, (str, Target)) or not all(isinstance(t, Target) for t in targets):
    raise TypeError("send takes a sequence of Target (see parse_targets)")
  if not isinstance(title, str) or not isinstance(body, str):
    raise TypeError("send takes the title and body as str")
  if attempts < 1 or backoff_s < 0 or timeout_s <= 0:
    raise ValueError(
      f"send needs attempts >= 1, backoff_s >= 0 and timeout_s > 0 (got {attempts}, "
      f"{backoff_s}, {timeout_s})"
    )
  notify_type = apprise.NotifyType.FAILURE if failed else apprise.NotifyType.SUCCESS
  subject = short_title(title)
  deliveries = [
    _deliver(target, subject, body, notify_type, attempts, backoff_s, timeout_s)
    for target in targets
  ]
  if not all(delivery.ok for delivery in deliveries):
    logger.warning("The notice that did not reach every target, kept here: %s\n%s", title, body)
  return deliveries


def _deliver(
  target: Target,
  title: str,
  body: str,
  notify_type: apprise.NotifyType,
  attempts: int,
  backoff_s: float,
  timeout_s: float,
) -> Delivery:
  label = target.label()
  try:
    url = _with_timeouts(resolve_url(target), timeout_s)
  except NotifyError as error:
    return _failed(label, 0, str(error))
  asset = apprise.AppriseAsset(service_timeout=3 * timeout_s)
  plugin = _instantiate(url, asset)
  if plugin is None:
    return _failed(label, 0, f"apprise cannot parse the URL; use one of these forms: {_FORMS}")
  capture = Capture(secrets=_secrets(plugin, url), hide_all=False)
  error = ""
  for attempt in range(1, attempts + 1):
    if attempt > 1:
      time.sleep(backoff_s * 2 ** (attempt - 2))
      # A fresh plugin per try: a plugin throttles its own successive sends (5.5 s for mail),
      # which would add to the backoff and count against apprise's service timeout.
      plugin = _instantiate(url, asset) or plugin
    notifier = apprise.Apprise(asset=asset)
    notifier.add(plugin)
    error = _attempt(notifier, capture, title, body, notify_type, 3 * timeout_s)
    if not error:
      return Delivery(target=label, ok=True, attempts=attempt, error="")
    if capture.unanswered:
      reason = f"sent, and not answered within {timeout_s:g} s"
      return _failed(label, attempt, f"{reason}; not sent again, so that it cannot arrive twice")
    if _refused_for_good(capture):
      # The endpoint refused the request itself (a wrong URL, token, login or address): another
      # try cannot help.
      return _failed(label, attempt, f"{error} (refused, so not tried again)")
    if attempt < attempts:
      logger.warning(
        "Notice to %s failed (try %d of %d, trying again): %s", label, attempt, attempts, error
      )
  return _failed(label, attempts, error)


def _attempt(
  notifier: apprise.Apprise,
  capture: Capture,
  title: str,
  body: str,
  notify_type: apprise.NotifyType,
  limit_s: float,
) -> str:
  """One try; returns "" when delivered, else the masked reason in one line."""
  capture.messages.clear()
  capture.unanswered, capture.status, capture.smtp_reply = False, 0, ""
  with guard(capture):
    try:
      result = notifier.notify(
        body=body, title=title, notify_type=notify_type, body_format=apprise.NotifyFormat.TEXT
      )
    # apprise reports a failed delivery by its result; a raise is a failure all the same, and
    # must not stop the night.
    except Exception as error:
      return _one_line(capture.redact(f"apprise raised {type(error).__name__}: {error}"))
  if result:
    return ""
  if result.status == apprise.AppriseResultStatus.TIMEOUT:
    return f"no answer within {limit_s:g} s"
  reasons = "; ".join(dict.fromkeys(capture.messages))
  if capture.smtp_reply:
    reasons = f"{reasons.rstrip('.')}: the mail server answered {capture.smtp_reply}"
  return _one_line(reasons or f"apprise reported {result.status.name}")


def _refused_for_good(capture: Capture) -> bool:
  """A 4xx HTTP answer other than the transient ones, or a mail server's 5xx reply (SMTP's
  permanent failures; its 4xx replies are transient by RFC 5321)."""
  if 400 <= capture.status < 500 and capture.status not in _TRANSIENT_STATUSES:
    return True
  return capture.smtp_reply.startswith("5")


def _failed(label: str, attempts: int, error: str) -> Delivery:
  if attempts:
    logger.warning("Notice to %s not delivered after %d tries: %s", label, attempts, error)
  else:
    logger.warning("Notice to %s not sent: %s", label, error)
  return Delivery(target=label, ok=False, attempts=attempts, error=error)


def _one_line(text: str) -> str:
  text = " ".join(text.split())
  return text if len(text) <= _MAX_ERROR_CHARS else text[: _MAX_ERROR_CHARS - 3] + "..."


def _source(text: str) -> str:
  if text.startswith(ENV_PREFIX):
    return f"the environment variable {text[len(ENV_PREFIX) :]}"
  return f"the file {text[len(FILE_PREFIX) :]}"


def _check_literal(text: str) -> None:
  plugin = _instantiate(text)
  if plugin is None:
    shown = _with_password_masked(text)
    if shown:  # The credential is the first thing to move, whether or not apprise reads the rest.
      raise NotifyError(f"--notify {shown} holds a credential; {_KEEP_OUT}")
    scheme = text.split("://", 1)[0] if "://" in text else ""
    what = f"--notify {scheme}://..." if _SCHEME.fullmatch(scheme) else "the --notify value"
    raise NotifyError(
      f"{what} is neither env:NAME, file:PATH nor a URL apprise can parse; pass one of these "
      f"forms: {_FORMS}"
    )
  shown = _shown_url(plugin)
  if shown != plugin.url(privacy=False):
    raise NotifyError(f"--notify {shown} holds a credential; {_KEEP_OUT}")


def _with_password_masked(text: str) -> str:
  """'SCHEME://USER:****@HOST:PORT/...' for a URL with a password in its user part, else ''.

  apprise cannot parse some URLs that hold one (mail to an IP address), so the password is
  looked for in the URL itself; the path and query, which apprise's forms can fill with more
  secrets, are not shown.
  """
  try:
    parts = urllib.parse.urlsplit(text)
    port = parts.port
  except ValueError:
    return ""
  if not (_SCHEME.fullmatch(parts.scheme) and parts.password):
    return ""
  where = f"{parts.hostname or ''}{f':{port}' if port else ''}"
  return f"{parts.scheme}://{parts.username or ''}:****@{where}/..."


@functools.lru_cache(maxsize=64)
def _literal_label(text: str) -> str:
  plugin = _instantiate(text)
  if plugin is not None:
    # Without the parameters apprise adds that the user did not write (method=POST, retry=0).
    base, _, query = _shown_url(plugin).partition("?")
    given = {key for key, _ in urllib.parse.parse_qsl(urllib.parse.urlsplit(text.strip()).query)}
    kept = [p for p in query.split("&") if urllib.parse.unquote(p.partition("=")[0]) in given]
    return f"{base}?{'&'.join(kept)}" if kept else base
  scheme = text.split("://", 1)[0] if "://" in text else ""
  return f"{scheme}://... (unparseable)" if _SCHEME.fullmatch(scheme) else "(unparseable URL)"


def _shown_url(plugin: apprise.NotifyBase) -> str:
  """apprise's privacy=True form of the URL, with credential-bearing custom parameters masked."""
  shown = plugin.url(privacy=True)
  base, _, query = shown.partition("?")
  if not query:
    return shown
  parts = []
  for part in query.split("&"):
    key, sep, value = part.partition("=")
    name = urllib.parse.unquote(key)
    secret = sep and name[:1] in ("+", ":", "-") and _SECRET_PARAM.search(name) and value
    parts.append(f"{key}=***" if secret else part)
  return f"{base}?{'&'.join(parts)}"


def _secrets(plugin: apprise.NotifyBase, url: str) -> tuple[str, ...]:
  """What to mask in apprise's log records: the URL and the parts its privacy form hides."""
  shown = set(_URL_SEPARATORS.split(_shown_url(plugin)))
  hidden = {part for part in _URL_SEPARATORS.split(plugin.url(privacy=False)) if part}
  hidden -= shown
  hidden |= {urllib.parse.unquote(part) for part in hidden}
  password = getattr(plugin, "password", None)
  if isinstance(password, str):
    hidden.add(password)
  hidden.add(url)
  # Longest first, so that a secret containing another is masked whole.
  return tuple(sorted((s for s in hidden if s), key=len, reverse=True))


def _with_timeouts(url: str, timeout_s: float) -> str:
  """The URL with apprise's connect and read timeouts added, where it sets none of its own."""
  query = url.partition("?")[2]
  given = {key.lower() for key, _ in urllib.parse.parse_qsl(query, keep_blank_values=True)}
  extra = {key: f"{timeout_s:g}" for key in ("cto", "rto") if key not in given}
  if not extra:
    return url
  return f"{url}{'&' if '?' in url else '?'}{urllib.parse.urlencode(extra)}"


def _instantiate(url: str, asset: apprise.AppriseAsset | None = None) -> apprise.NotifyBase | None:
  """apprise's plugin for the URL, or None; nothing apprise logs meanwhile reaches a handler."""
  with guard(Capture(secrets=(), hide_all=True)):
    return apprise.Apprise.instantiate(url, asset=asset)
