"""The HTML of the report pages: escaping, tables, facts, figures and the page around them.

Every text that comes from a run goes through `esc` (html.escape); only `Html` values, built
here from escaped parts, pass through unchanged.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from typing import Any


class Html(str):
  """Markup built from escaped parts: tables and page helpers insert it as it is."""


def esc(value: Any) -> Html:
  """`value` as text safe inside HTML ('-' for None); Html passes through."""
  if isinstance(value, Html):
    return value
  return Html(html.escape(fmt(value), quote=True))


def fmt(value: Any) -> str:
  """A value as the page shows it: 4 significant digits for floats, '-' for None."""
  if value is None:
    return "-"
  if isinstance(value, bool):
    return "yes" if value else "no"
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


def fact(key: str, value: Any, text: Any = None) -> Html:
  """A figure the browser test compares with run_summary.json: `data-fact` names it and
  `data-value` holds it exactly, as JSON (the text may round it)."""
  shown = esc(value if text is None else text)
  raw = esc(json.dumps(value, default=str))
  return Html(f'<span class="fact" data-fact="{esc(key)}" data-value="{raw}">{shown}</span>')


def join(parts: Iterable[Any], sep: str = "") -> Html:
  return Html(esc(sep).join(esc(p) for p in parts))


def tag(name: str, content: Any, cls: str = "") -> Html:
  attr = f' class="{esc(cls)}"' if cls else ""
  return Html(f"<{name}{attr}>{esc(content)}</{name}>")


def table(headers: Sequence[Any], rows: Iterable[Sequence[Any]], cls: str = "") -> Html:
  """A table; cells are escaped unless they are Html."""
  head = "".join(f"<th>{esc(h)}</th>" for h in headers)
  body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
  attr = f' class="{esc(cls)}"' if cls else ""
  return Html(f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def pairs(items: Iterable[tuple[Any, Any]]) -> Html:
  """A two-column table of labels and values."""
  rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in items)
  return Html(f'<table class="pairs"><tbody>{rows}</tbody></table>')


def figure(name: str, svg: str, caption: Any = "") -> Html:
  """A chart: matplotlib's SVG text, inline; `data-chart` names it for the browser test."""
  cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
  return Html(f'<figure class="chart" data-chart="{esc(name)}">{svg}{cap}</figure>')


def code(text: str) -> Html:
  return Html(f"<pre><code>{esc(text)}</code></pre>")


def note(text: Any) -> Html:
  return Html(f'<p class="note">{esc(text)}</p>')


def section(anchor: str, title: str, *parts: Any) -> Html:
  body = "".join(esc(p) for p in parts)
  return Html(f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{body}</section>')


_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1d2330;
background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:14px 28px}header h1{margin:0;font-size:20px}
header .sub{color:#c5cad3;font-size:13px}nav{margin-top:6px}nav a{color:#9fc3ff;margin-right:14px}
main{padding:8px 28px 40px;max-width:1280px}
section{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:16px 0;
padding:6px 18px 14px}
h2{font-size:17px;border-bottom:1px solid #eceef2;padding-bottom:4px}
h3{font-size:15px;margin:14px 0 6px}
table{border-collapse:collapse;margin:6px 0 10px;font-size:13px}
th,td{border-bottom:1px solid #eceef2;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
thead th{border-bottom:2px solid #cdd2da}
table.pairs th{color:#5a6272;font-weight:500;padding-right:18px}
.status{display:inline-block;border-radius:4px;padding:1px 8px;font-weight:600}
.succeeded,.ran,.pushed,.ok{color:#196c2e}.failed,.stopped{color:#b42318}
.cached,.skipped{color:#6b7280}
.error{background:#fef3f2;border:1px solid #fecdca;padding:8px 12px;border-radius:4px}
.note{color:#5a6272}figure.chart{display:inline-block;margin:4px 8px 4px 0}
figure.chart svg{max-width:100%;height:auto}figcaption{font-size:12px;color:#5a6272}
td figure.chart{margin:0}pre{background:#f1f3f6;padding:8px 10px;border-radius:4px;overflow-x:auto;
font-size:12px;white-space:pre-wrap;word-break:break-all}.key{color:#5a6272;font-size:12px}
.sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;border-radius:2px}
"""


def document(title: str, subtitle: Any, links: Sequence[tuple[str, str]], body: Any) -> str:
  """The whole page: one file, its style inline, no script and nothing fetched."""
  nav = "".join(f'<a href="#{esc(anchor)}">{esc(text)}</a>' for anchor, text in links)
  return (
    '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
    '<meta name="viewport" content="width=device-width, initial-scale=1">'
    f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>"
    f'<header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div><nav>{nav}</nav></header>'
    f"<main>{esc(body)}</main></body></html>\n"
  )
