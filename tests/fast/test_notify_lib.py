"""components.nights.notify_lib: --notify forms and their refusals, delivery to loopback servers."""

import logging
import time

import pytest

from components.nights import apprise_logs, notify_lib
from components.nights.notify_lib import Delivery, NotifyError, Target
from core.errors import UserInputError
from tests.support import notify_servers

SMTP_USER = notify_servers.SMTP_USER
SMTP_PASSWORD = notify_servers.SMTP_PASSWORD
MMOST_TOKEN = "tok3nxyz9abc4def"
ENV_NAME = "TEST_NOTIFY_LIB_URL"


@pytest.fixture
def http_server():
  with notify_servers.http_server() as server:
    yield server


@pytest.fixture
def smtp_server():
  with notify_servers.smtp_server() as pair:
    yield pair


@pytest.fixture
def dead_port():
  return notify_servers.dead_port()


_mail_url = notify_servers.mail_url


def _assert_one_line_without(message, *secrets):
  assert "\n" not in message
  for secret in secrets:
    assert secret not in message


# --- delivery to real loopback servers ---------------------------------------------------------


@pytest.mark.parametrize(("failed", "kind"), [(True, "failure"), (False, "success")])
def test_json_webhook_receives_title_body_and_type(http_server, failed, kind):
  port = http_server.server_address[1]
  [target] = notify_lib.parse_targets([f"json://127.0.0.1:{port}/night"])

  deliveries = notify_lib.send(
    [target], "Night 2026-11-26 failed", "Trainer: out of memory", failed=failed, backoff_s=0
  )

  assert deliveries == [Delivery(target=target.label(), ok=True, attempts=1, error="")]
  [request] = http_server.requests
  assert request["path"] == "/night"
  assert request["headers"]["Content-Type"].startswith("application/json")
  assert request["json"]["title"] == "Night 2026-11-26 failed"
  assert request["json"]["message"] == "Trainer: out of memory"
  assert request["json"]["type"] == kind


def test_mattermost_webhook_from_env_posts_slack_style_text(http_server, monkeypatch):
  port = http_server.server_address[1]
  monkeypatch.setenv(ENV_NAME, f"mmost://127.0.0.1:{port}/{MMOST_TOKEN}")
  [target] = notify_lib.parse_targets([f"env:{ENV_NAME}"])
  assert target.label() == f"env:{ENV_NAME}"

  [delivery] = notify_lib.send(
    [target], "Night stopped", "Stopped by the operator", failed=True, backoff_s=0
  )

  assert delivery.ok, delivery.error
  [request] = http_server.requests
  assert request["path"] == f"/hooks/{MMOST_TOKEN}"
  # Mattermost has no title field: apprise puts the title on the text's first line.
  assert "Night stopped" in request["json"]["text"]
  assert "Stopped by the operator" in request["json"]["text"]


def test_mail_with_password_from_file_is_delivered_over_plain_smtp(smtp_server, tmp_path):
  controller, mailbox = smtp_server
  url_file = tmp_path / "notify.url"
  url_file.write_text(f"# the night's mail\n\n  {_mail_url(controller.port)}  \n")
  url_file.chmod(0o600)
  [target] = notify_lib.parse_targets([f"file:{url_file}"])

  [delivery] = notify_lib.send(
    [target], "Night 2026-11-26 failed", "Evaluator: not blessed", failed=True, backoff_s=0
  )

  assert delivery == Delivery(target=f"file:{url_file}", ok=True, attempts=1, error="")
  [mail] = mailbox.messages
  assert mail["authenticated"]
  assert mail["rcpt_tos"] == ["ops@example.com"]
  assert "Night 2026-11-26 failed" in mail["message"]["Subject"]
  body = mail["message"].get_body(preferencelist=("plain", "html")).get_content()
  assert "Evaluator: not blessed" in body


def test_a_title_longer_than_a_mail_header_line_is_shortened_and_the_mail_delivered(
  smtp_server, http_server, tmp_path
):
  # A data gate's stop line with several findings: over 1,000 characters. As the subject, the
  # mail server refused it ("500 Line too long"), so a stopped night reached nobody by mail.
  controller, mailbox = smtp_server
  url_file = tmp_path / "notify.url"
  url_file.write_text(_mail_url(controller.port) + "\n")
  url_file.chmod(0o600)
  line = "taxi: night stopped: " + "; ".join(
    f"'column_{i}' drifted: 0.{i}1 > 0.1" for i in range(40)
  )
  assert len(line) > 1000
  targets = notify_lib.parse_targets(
    [f"file:{url_file}", f"json://127.0.0.1:{http_server.server_address[1]}/night"]
  )

  deliveries = notify_lib.send(targets, line, line + "\n\nthe record", failed=True, backoff_s=0)

  assert [d.ok for d in deliveries] == [True, True], deliveries
  [mail] = mailbox.messages
  subject = str(mail["message"]["Subject"])
  assert subject == notify_lib.short_title(line)
  assert len(subject) <= notify_lib.TITLE_MAX_CHARS and subject.endswith("...")
  assert line.startswith(subject[: -len("...")])
  assert line in mail["message"].get_body(preferencelist=("plain",)).get_content()
  [posted] = http_server.requests
  assert posted["json"]["title"] == subject and line in posted["json"]["message"]


def test_short_titles_are_kept_and_long_ones_cut_after_a_word():
  assert notify_lib.short_title("Night 2026-11-26 failed") == "Night 2026-11-26 failed"
  assert notify_lib.short_title("two\nlines") == "two lines"
  cut = notify_lib.short_title("word " * 100)
  assert cut == "word " * 28 + "word..." and len(cut) <= notify_lib.TITLE_MAX_CHARS
  assert notify_lib.short_title("x" * 400) == "x" * (notify_lib.TITLE_MAX_CHARS - 3) + "..."


# --- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
  ("text", "secret"),
  [
    (f"mailto://{SMTP_USER}:{SMTP_PASSWORD}@smtp.example.com?to=ops@example.com", SMTP_PASSWORD),
    (f"mmost://chat.example.com/{MMOST_TOKEN}", MMOST_TOKEN),
    ("json://hooks.example.com/night?+Authorization=Bearer%20h3aders3cret", "h3aders3cret"),
    ("json://hooks.example.com/night?:api_token=f1elds3cret", "f1elds3cret"),
  ],
)
def test_literal_url_with_a_credential_is_refused_without_showing_it(text, secret):
  with pytest.raises(NotifyError) as raised:
    notify_lib.parse_target(text, check_source=False)

  message = str(raised.value)
  _assert_one_line_without(message, secret)
  assert "holds a credential" in message
  assert "env:NAME" in message
  assert "file:PATH" in message
  assert isinstance(raised.value, UserInputError)


@pytest.mark.parametrize("path", ["", "/", "/?to=ops@example.com", "/ops@example.com"])
def test_a_credential_in_a_url_apprise_cannot_parse_is_refused_as_a_credential(path):
  # apprise parses no mail server given by its IP address; the password is in the URL anyway.
  text = f"mailto://{SMTP_USER}:{SMTP_PASSWORD}@127.0.0.1:2525{path}"
  with pytest.raises(NotifyError) as raised:
    notify_lib.parse_target(text, check_source=False)

  message = str(raised.value)
  _assert_one_line_without(message, SMTP_PASSWORD)
  assert message.startswith(
    f"--notify mailto://{SMTP_USER}:****@127.0.0.1:2525/... holds a credential; keep it out"
  )
  assert "--notify env:NAME" in message and "--notify file:PATH" in message


@pytest.mark.parametrize(
  ("text", "shown"),
  [
    ("nosuchscheme://host/s3cretpart", "--notify nosuchscheme://..."),
    ("mmost://chat.example.com", "--notify mmost://..."),
    ("just-a-token-s3cretpart", "the --notify value"),
  ],
)
def test_url_apprise_cannot_parse_is_refused_naming_the_forms(text, shown):
  with pytest.raises(NotifyError) as raised:
    notify_lib.parse_target(text)

  message = str(raised.value)
  _assert_one_line_without(message, "s3cretpart", "chat.example.com")
  assert message.startswith(f"{shown} is neither env:NAME, file:PATH nor a URL apprise can parse")
  for form in ("json://", "mmost://", "slack://", "mailto://", "env:NAME", "file:PATH"):
    assert form in message


@pytest.mark.parametrize(
  "text", ["env:", "env:1NAME", "env:MY-URL", f"env:mmost://host/{MMOST_TOKEN}", "file:"]
)
def test_malformed_env_or_file_form_is_refused_even_without_source_checks(text):
  with pytest.raises(NotifyError) as raised:
    notify_lib.parse_target(text, check_source=False)

  message = str(raised.value)
  _assert_one_line_without(message, MMOST_TOKEN)
  assert ("env:NAME" if text.startswith("env:") else "file:PATH") in message


def test_unset_or_empty_env_var_is_refused_naming_it(monkeypatch):
  monkeypatch.delenv(ENV_NAME, raising=False)
  with pytest.raises(NotifyError, match=f"env:{ENV_NAME}: the environment variable {ENV_NAME}"):
    notify_lib.parse_target(f"env:{ENV_NAME}")
  monkeypatch.setenv(ENV_NAME, "  ")
  with pytest.raises(NotifyError, match="is not set or is empty"):
    notify_lib.parse_target(f"env:{ENV_NAME}")


def test_missing_or_empty_file_is_refused_naming_it(tmp_path):
  missing = tmp_path / "missing.url"
  with pytest.raises(NotifyError) as raised:
    notify_lib.parse_target(f"file:{missing}")
  assert f"file:{missing}" in str(raised.value)
  assert "No such file" in str(raised.value)

  comments = tmp_path / "comments.url"
  comments.write_text("# not yet\n\n")
  with pytest.raises(NotifyError, match="holds no URL"):
    notify_lib.parse_target(f"file:{comments}")


def test_unparseable_url_in_env_or_file_is_refused_without_showing_it(monkeypatch, tmp_path):
  monkeypatch.setenv(ENV_NAME, f"nosuchscheme://{MMOST_TOKEN}")
  url_file = tmp_path / "notify.url"
  url_file.write_text(f"nosuchscheme://{MMOST_TOKEN}\n")
  for text in (f"env:{ENV_NAME}", f"file:{url_file}"):
    with pytest.raises(NotifyError) as raised:
      notify_lib.parse_target(text)
    _assert_one_line_without(str(raised.value), MMOST_TOKEN, "nosuchscheme")
    assert "is not one apprise can parse" in str(raised.value)


def test_without_source_checks_only_the_form_is_checked(monkeypatch, tmp_path):
  monkeypatch.delenv(ENV_NAME, raising=False)
  missing = tmp_path / "missing.url"
  targets = notify_lib.parse_targets(
    [f"env:{ENV_NAME}", f"file:{missing}", f"env:{ENV_NAME}"], check_source=False
  )
  assert targets == [Target(f"env:{ENV_NAME}"), Target(f"file:{missing}")]


def test_literal_url_without_credentials_is_kept_and_labelled_by_apprise():
  target = notify_lib.parse_target(" json://hooks.example.com:8080/night ")
  assert target == Target("json://hooks.example.com:8080/night")
  assert target.label() == "json://hooks.example.com:8080/night"  # apprise's defaults left out
  given = notify_lib.parse_target("json://hooks.example.com/night?method=PUT")
  assert given.label() == "json://hooks.example.com/night?method=PUT"
  # A Target made by hand with a credential still prints without it.
  assert SMTP_PASSWORD not in Target(_mail_url(25)).label()


# --- failures during send ----------------------------------------------------------------------


def test_a_webhook_slower_than_the_timeout_is_sent_once(caplog):
  # The request reached the endpoint, which may act on it after the timeout (a Slack message
  # posted late): a second try would post it twice, so it is not sent again.
  with notify_servers.http_server(delay_s=2.5) as server:
    [target] = notify_lib.parse_targets([f"json://127.0.0.1:{server.server_address[1]}/night"])
    with caplog.at_level(logging.WARNING):
      [delivery] = notify_lib.send(
        [target], "Night failed", "the body", failed=True, attempts=3, backoff_s=0, timeout_s=1
      )
    deadline = time.monotonic() + 10
    while not server.requests and time.monotonic() < deadline:
      time.sleep(0.1)
    time.sleep(1)

  assert (delivery.ok, delivery.attempts) == (False, 1), delivery
  assert delivery.error == (
    "sent, and not answered within 1 s; not sent again, so that it cannot arrive twice"
  )
  assert len(server.requests) == 1
  assert "trying again" not in caplog.text


@pytest.mark.parametrize(("status", "tries"), [(404, 1), (403, 1), (429, 3), (500, 3)])
def test_a_request_the_endpoint_refuses_is_not_tried_again(status, tries):
  # A wrong webhook path or a revoked token answers 4xx every time; rate limiting and server
  # errors may pass.
  with notify_servers.http_server(status=status) as server:
    [target] = notify_lib.parse_targets([f"json://127.0.0.1:{server.server_address[1]}/night"])
    [delivery] = notify_lib.send(
      [target], "Night failed", "the body", failed=True, attempts=3, backoff_s=0, timeout_s=2
    )
  assert (delivery.ok, delivery.attempts, len(server.requests)) == (False, tries, tries)
  assert delivery.error.endswith("(refused, so not tried again)") == (tries == 1), delivery.error
  assert f"error={status}" in delivery.error


@pytest.mark.parametrize(
  ("where", "reply", "tries"),
  [
    ("data", "554 5.7.1 message refused", 1),
    ("rcpt", "550 5.1.1 mailbox unavailable", 1),
    ("data", "451 4.3.0 try again later", 3),
  ],
)
def test_a_mail_the_server_refuses_for_good_is_not_tried_again(where, reply, tries, tmp_path):
  # SMTP's 5xx replies are permanent (a wrong address, a policy refusal); its 4xx ones are
  # transient. Before, each try was retried, and the error did not say what the server answered.
  with notify_servers.smtp_server(**{f"{where}_reply": reply}) as (controller, mailbox):
    url_file = tmp_path / "notify.url"
    url_file.write_text(_mail_url(controller.port))
    url_file.chmod(0o600)
    [target] = notify_lib.parse_targets([f"file:{url_file}"])
    [delivery] = notify_lib.send(
      [target], "Night failed", "the body", failed=True, attempts=3, backoff_s=0, timeout_s=2
    )
  assert (delivery.ok, delivery.attempts, mailbox.refused) == (False, tries, tries)
  assert f"the mail server answered {reply}" in delivery.error, delivery.error
  assert delivery.error.endswith("(refused, so not tried again)") == (tries == 1), delivery.error
  _assert_one_line_without(delivery.error, notify_servers.SMTP_PASSWORD)


def test_dead_endpoint_fails_after_every_try_without_raising(dead_port, caplog):
  [target] = notify_lib.parse_targets([f"json://127.0.0.1:{dead_port}/night"])

  with caplog.at_level(logging.DEBUG):
    [delivery] = notify_lib.send(
      [target], "Night failed", "the body", failed=True, attempts=3, backoff_s=0, timeout_s=2
    )

  assert not delivery.ok
  assert delivery.attempts == 3
  assert delivery.target == target.label()
  assert delivery.error
  _assert_one_line_without(delivery.error, "json://")
  warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
  assert not [r for r in warnings if r.name == "apprise"]
  ours = [r.getMessage() for r in warnings if r.name == notify_lib.__name__]
  assert len(ours) == 4  # two retries, the final failure and the notice's text
  assert all(target.label() in message for message in ours[:3])
  assert "the body" in ours[3]


def test_dead_mail_server_error_holds_neither_url_nor_password(dead_port, tmp_path, caplog):
  url_file = tmp_path / "notify.url"
  url_file.write_text(_mail_url(dead_port))

  with caplog.at_level(logging.DEBUG):
    [delivery] = notify_lib.send(
      [Target(f"file:{url_file}")], "t", "b", failed=True, attempts=2, backoff_s=0, timeout_s=2
    )

  assert (delivery.ok, delivery.attempts) == (False, 2)
  _assert_one_line_without(delivery.error, SMTP_PASSWORD, "mailto://")
  assert SMTP_PASSWORD not in caplog.text


def test_env_var_removed_between_parse_and_send_is_a_failed_delivery(http_server, monkeypatch):
  port = http_server.server_address[1]
  monkeypatch.setenv(ENV_NAME, f"mmost://127.0.0.1:{port}/{MMOST_TOKEN}")
  gone, kept = notify_lib.parse_targets([f"env:{ENV_NAME}", f"json://127.0.0.1:{port}/night"])
  monkeypatch.delenv(ENV_NAME)

  first, second = notify_lib.send([gone, kept], "t", "b", failed=False, backoff_s=0)

  assert (first.ok, first.attempts, first.target) == (False, 0, f"env:{ENV_NAME}")
  assert f"environment variable {ENV_NAME} is not set" in first.error
  assert second.ok
  assert [r["path"] for r in http_server.requests] == ["/night"]


def test_timeouts_are_added_unless_the_url_sets_them():
  assert notify_lib._with_timeouts("json://h/p", 10) == "json://h/p?cto=10&rto=10"
  assert notify_lib._with_timeouts("json://h/p?rto=30", 2.5) == "json://h/p?rto=30&cto=2.5"
  assert notify_lib._with_timeouts("json://h/p?cto=1&rto=1", 10) == "json://h/p?cto=1&rto=1"


def test_send_rejects_wrong_arguments_as_our_bug():
  with pytest.raises(TypeError):
    notify_lib.send("json://h/p", "t", "b", failed=True)
  with pytest.raises(ValueError, match="attempts >= 1"):
    notify_lib.send([Target("json://h/p")], "t", "b", failed=True, attempts=0)


def test_apprise_records_during_a_send_are_masked_and_warnings_kept_off_the_handlers(caplog):
  capture = apprise_logs.Capture(secrets=(MMOST_TOKEN,), hide_all=False)
  apprise_logger = logging.getLogger("apprise")

  with caplog.at_level(logging.DEBUG), apprise_logs.guard(capture):
    apprise_logger.debug("POST URL: http://host/hooks/%s", MMOST_TOKEN)
    apprise_logger.error("Could not send to http://host/hooks/%s", MMOST_TOKEN)
  with caplog.at_level(logging.DEBUG):
    apprise_logger.warning("outside our calls")

  assert capture.messages == ["Could not send to http://host/hooks/***"]
  assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
    ("DEBUG", "POST URL: http://host/hooks/***"),
    ("WARNING", "outside our calls"),
  ]
  assert not capture.unanswered


def test_a_read_timeout_logged_below_the_shown_level_is_read_and_not_shown(caplog):
  capture = apprise_logs.Capture(secrets=(), hide_all=False)
  apprise_logger = logging.getLogger("apprise")

  with caplog.at_level(logging.INFO, logger="apprise"):
    with apprise_logs.guard(capture):
      apprise_logger.debug("Socket Exception: HTTPConnectionPool(): Read timed out. (rto=1)")
    assert apprise_logger.level == logging.INFO  # the guard put back the level it found

  assert capture.unanswered
  assert caplog.records == []
