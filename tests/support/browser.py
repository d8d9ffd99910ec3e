"""Opens a page in Debian's chromium, headless and offline: its DOM, a screenshot, and what its
console said."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser

# Flags that keep chromium off the network and quiet; --enable-logging=stderr --v=0 makes it
# write the page's console messages (errors and uncaught exceptions too) to stderr.
_FLAGS = (
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--no-default-browser-check",
  "--enable-logging=stderr",
  "--v=0",
)
# chromium writes a page's console messages as `[pid:tid:time:INFO:CONSOLE:1] "text", source:`
# (older builds: CONSOLE(1)); an uncaught exception is one of them, "Uncaught ...".
_CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\]\s*(.*)$")
TIMEOUT_S = 120


def chromium() -> str | None:
  """The chromium executable, or None when it is not installed."""
  return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclasses.dataclass
class Opened:
  """What chromium made of a page."""

  dom: str  # the DOM after the page loaded (--dump-dom)
  console: list[str]  # every console message, errors included
  stderr: str


def console_messages(stderr: str) -> list[str]:
  """The page's console messages in chromium's log (a page with no script has none)."""
  return [m.group(1) for line in stderr.splitlines() if (m := _CONSOLE.search(line))]


def _run(page: pathlib.Path, *extra: str) -> subprocess.CompletedProcess:
  exe = chromium()
  assert exe, "chromium is not installed (apt-get install -y chromium)"
  with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
    return subprocess.run(
      [exe, *_FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
      capture_output=True,
      text=True,
      timeout=TIMEOUT_S,
      check=False,
      env={**os.environ, "HOME": profile},
    )


def open_page(page: pathlib.Path) -> Opened:
  """Loads the page and returns its DOM and console messages."""
  proc = _run(page, "--dump-dom")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return Opened(proc.stdout, console_messages(proc.stderr), proc.stderr)


def screenshot(page: pathlib.Path, png: pathlib.Path, size: str = "1280,4000") -> pathlib.Path:
  """Saves a screenshot of the page's top `size` pixels (width,height) to `png`."""
  proc = _run(page, f"--screenshot={png.resolve()}", f"--window-size={size}")
  assert proc.returncode == 0 and png.exists(), proc.stderr[-3000:]
  return png


class _Charts(HTMLParser):
  """Each `<figure class="chart" data-chart=NAME>`: how many drawing elements its svg holds."""

  _DRAWN = {"path", "rect", "line", "polyline", "polygon", "circle", "ellipse", "use", "text"}

  def __init__(self):
    super().__init__()
    self.charts: dict[str, int] = {}
    self._open: list[str] = []  # the figures we are inside of
    self._svg = 0  # depth of <svg> elements inside the current figure

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if tag == "figure" and "chart" in (attrs.get("class") or "").split():
      self._open.append(attrs.get("data-chart") or f"chart-{len(self.charts)}")
      self.charts.setdefault(self._open[-1], 0)
    elif self._open and tag == "svg":
      self._svg += 1
    elif self._open and self._svg and tag in self._DRAWN:
      self.charts[self._open[-1]] += 1

  def handle_endtag(self, tag):
    if tag == "figure" and self._open:
      self._open.pop()
      self._svg = 0
    elif tag == "svg" and self._svg:
      self._svg -= 1


def charts_drawn(dom: str) -> dict[str, int]:
  """Chart name -> drawing elements inside its figure's <svg> (0: no svg, or nothing drew)."""
  parser = _Charts()
  parser.feed(dom)
  return parser.charts


class _Facts(HTMLParser):
  def __init__(self):
    super().__init__()
    self.facts: dict[str, str] = {}

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if "data-fact" in attrs:
      self.facts[attrs["data-fact"]] = attrs.get("data-value") or ""


def facts(dom: str) -> dict[str, str]:
  """`data-fact` name -> its `data-value` (JSON) for every figure the page marks."""
  parser = _Facts()
  parser.feed(dom)
  return parser.facts
