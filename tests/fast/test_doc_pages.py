"""The README and docs/ stay true: links resolve, the README stays a front page, and every
code block marked `<!-- runnable -->` runs.

A block is runnable when the line right before its opening fence is exactly
`<!-- runnable -->`. Bash blocks run with `bash -e` in the repository root, python blocks with
this interpreter; each must exit 0 within 120 s. Mark only cheap blocks (no network, no pipeline
run) that write nothing but under a folder they make with `mktemp`."""

from __future__ import annotations

import dataclasses
import pathlib
import re
import subprocess
import sys

import pytest

from tests.support.cli_runs import REPO_ROOT, project_env

README = REPO_ROOT / "README.md"
DOCS_DIR = REPO_ROOT / "docs"
PAGES = [README, *sorted(DOCS_DIR.glob("*.md"))]
README_MAX_LINES = 260
RUNNABLE_MARK = "<!-- runnable -->"
BLOCK_TIMEOUT_S = 120

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\s]*)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"(`+)(?:.|\n)*?(?<!`)\1(?!`)")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\n)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclasses.dataclass
class Block:
  page: pathlib.Path
  line: int  # 1-based line of the opening fence
  lang: str
  code: str
  runnable: bool

  @property
  def id(self) -> str:
    return f"{self.page.relative_to(REPO_ROOT)}:{self.line}"


def parse(page: pathlib.Path) -> tuple[str, list[Block]]:
  """The page's text outside fenced code blocks, and its fenced blocks."""
  lines = page.read_text(encoding="utf-8").split("\n")
  prose: list[str] = []
  blocks: list[Block] = []
  i = 0
  while i < len(lines):
    match = _FENCE.match(lines[i])
    if not match:
      prose.append(lines[i])
      i += 1
      continue
    indent, fence = len(match["indent"]), match["fence"]
    closing = re.compile(rf"^ *{re.escape(fence[0])}{{{len(fence)},}}\s*$")
    body = []
    j = i + 1
    while j < len(lines) and not closing.match(lines[j]):
      body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
      j += 1
    runnable = i > 0 and lines[i - 1].strip() == RUNNABLE_MARK
    blocks.append(Block(page, i + 1, match["info"].lower(), "\n".join(body) + "\n", runnable))
    prose.append("")  # the block ends a paragraph
    i = j + 1
  return "\n".join(prose), blocks


def github_anchors(prose: str) -> set[str]:
  """The anchors GitHub gives the page's headings: the heading's text in lower case, every
  character but letters, digits, spaces, hyphens and underscores dropped, spaces turned into
  hyphens, and -1, -2, ... added to repeats."""
  anchors: set[str] = set()
  seen: dict[str, int] = {}
  for line in prose.split("\n"):
    match = _HEADING.match(line)
    if not match:
      continue
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", match[2])  # a link's text only
    slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(slug if count == 0 else f"{slug}-{count}")
  return anchors


def relative_links(prose: str) -> list[str]:
  """Link targets in the page's prose that are not URLs (code spans are not links)."""
  text = _CODE_SPAN.sub("", prose)
  text = re.sub(r"<!--.*?-->", "", text, flags=re.DOTALL)
  return [t for t in _LINK.findall(text) if not _SCHEME.match(t)]


PARSED = {page: parse(page) for page in PAGES}
RUNNABLE = [block for _, blocks in PARSED.values() for block in blocks if block.runnable]


def test_docs_exist_and_every_page_is_linked_from_the_readme():
  assert DOCS_DIR.is_dir() and len(PAGES) > 1
  readme_targets = {
    (REPO_ROOT / t.split("#", 1)[0]).resolve() for t in relative_links(PARSED[README][0])
  }
  unlinked = [p.name for p in PAGES[1:] if p.resolve() not in readme_targets]
  assert not unlinked, f"docs pages the README does not link: {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_relative_link_resolves(page):
  prose, _ = PARSED[page]
  broken = []
  for target in relative_links(prose):
    path_part, _, anchor = target.partition("#")
    path = (page.parent / path_part).resolve() if path_part else page.resolve()
    if not path.exists():
      broken.append(f"{target}: no file {path}")
      continue
    if anchor and path.suffix == ".md":
      target_prose = PARSED[path][0] if path in PARSED else parse(path)[0]
      if anchor not in github_anchors(target_prose):
        broken.append(f"{target}: no heading with anchor #{anchor} in {path.name}")
  assert not broken, "\n".join(broken)


def test_github_anchor_rules():
  prose = "# What `--target kfp` and `--target vertex` change\n## 2. Compile\n## Tests\n## Tests"
  assert github_anchors(prose) == {
    "what---target-kfp-and---target-vertex-change",
    "2-compile",
    "tests",
    "tests-1",
  }


def test_readme_is_a_front_page():
  lines = README.read_text(encoding="utf-8").splitlines()
  assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
  # The first screen: the two commands, then the one for your own CSV.
  assert lines[0] == "# TFX pipeline kit"
  head = "\n".join(lines[:20])
  assert "make run" in head and "make test" in head
  assert "pipeline/run_local.py --data-root path/to/folder --label-key churn" in head


def test_some_blocks_are_marked_runnable():
  assert len(RUNNABLE) >= 5, [b.id for b in RUNNABLE]
  assert {b.lang for b in RUNNABLE} <= {"bash", "sh", "python"}, [(b.id, b.lang) for b in RUNNABLE]
  assert "python" in {b.lang for b in RUNNABLE}


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_runnable_block_exits_0(block):
  if block.lang == "python":
    command = [sys.executable, "-c", block.code]
  else:
    command = ["bash", "-e", "-c", block.code]
  proc = subprocess.run(
    command,
    cwd=REPO_ROOT,
    env=project_env(),
    capture_output=True,
    text=True,
    timeout=BLOCK_TIMEOUT_S,
    check=False,
  )
  assert proc.returncode == 0, (
    f"{block.id} exited {proc.returncode}\n{block.code}\n"
    f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
  )
