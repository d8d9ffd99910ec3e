"""The browser checks the report tests rely on see what they look for: console errors and
uncaught exceptions in chromium's log, charts without a drawing, and the page's figures."""

import os

import pytest

from tests.support import browser

STDERR = """\
[1:1:1127/001717.9:WARNING:ui/base/idle/idle_linux.cc:111] None of the known D-Bus services
[12:12:1127/001717.94:INFO:CONSOLE:1] "boom here", source: file:///tmp/bad.html (1)
[12:12:1127/001717.95:INFO:CONSOLE(3)] "Uncaught ReferenceError: f is not defined", source: x
"""


def test_console_messages_are_read_from_both_log_forms():
  assert browser.console_messages(STDERR) == [
    '"boom here", source: file:///tmp/bad.html (1)',
    '"Uncaught ReferenceError: f is not defined", source: x',
  ]
  assert browser.console_messages("[1:1:1:WARNING:x.cc:1] nothing from the page\n") == []


def test_a_chart_without_svg_or_drawing_counts_as_not_drawn():
  dom = (
    '<figure class="chart" data-chart="a"><svg><g><path d="M0 0"/></g></svg></figure>'
    '<figure class="chart" data-chart="b"><svg></svg></figure>'
    '<figure class="chart" data-chart="c"><p>no svg</p><text>x</text></figure>'
  )
  assert browser.charts_drawn(dom) == {"a": 1, "b": 0, "c": 0}


def _chromium():
  if browser.chromium() is None:
    if os.environ.get("CI"):
      pytest.fail("chromium is not installed; .ci/run installs it (apt-get install -y chromium)")
    pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run does it in CI)")


def test_chromium_reports_a_deliberate_script_error(tmp_path):
  _chromium()
  page = tmp_path / "bad.html"
  page.write_text(
    "<!DOCTYPE html><html><body><p>x</p>"
    '<script>console.error("deliberate"); notDefined();</script></body></html>'
  )
  opened = browser.open_page(page)
  assert any("deliberate" in m for m in opened.console), opened.stderr[-2000:]
  assert any("Uncaught ReferenceError" in m for m in opened.console), opened.stderr[-2000:]
  assert "<p>x</p>" in opened.dom
  clean = tmp_path / "clean.html"
  clean.write_text("<!DOCTYPE html><html><body><p>fine</p></body></html>")
  assert browser.open_page(clean).console == []
