"""The report's charts: matplotlib figures rendered to SVG text that the page holds inline.

matplotlib draws with no browser, no script and no network, and its SVG keeps text as text
(`svg.fonttype: none`), so a chart is a few kilobytes. The per-column histograms are the many
small charts of a page: they reuse one figure and its axes (building axes costs about 10 ms,
redrawing one about 4 ms), which keeps a page of 100 columns well under a second.
"""

from __future__ import annotations

import functools
import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

from core import properties

TRAIN, EVAL, LIVE = "#4c72b0", "#dd8452", "#55a868"
PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")
_RC = {"svg.fonttype": "none", "svg.hashsalt": "report", "font.size": 9, "axes.titlesize": 10}
_spark: Any = None


def _figure(width: float, height: float, rows: int = 1, cols: int = 1):
  from matplotlib.figure import Figure

  fig = Figure(figsize=(width, height))
  fig.subplots_adjust(left=0.08, right=0.98, bottom=0.16, top=0.88, wspace=0.25)
  axes = fig.subplots(rows, cols, squeeze=False)
  for ax in axes.flat:
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(True, color="#eceef2", linewidth=0.6)
  return fig, list(axes.flat)


def _styled(draw):
  """Runs a chart function under the report's matplotlib settings, leaving the global ones be
  (the Optimizer draws its own chart in the same process)."""

  @functools.wraps(draw)
  def wrapped(*args, **kwargs):
    import matplotlib

    with matplotlib.rc_context(_RC):
      return draw(*args, **kwargs)

  return wrapped


def _svg(fig) -> str:
  """The figure as an <svg> element, without the XML prologue."""
  from matplotlib.backends.backend_svg import FigureCanvasSVG

  buf = io.StringIO()
  FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
  text = buf.getvalue()
  return text[text.index("<svg") :]


class _Spark:
  """One small figure whose axes every histogram redraws."""

  def __init__(self):
    from matplotlib.figure import Figure

    self.fig = Figure(figsize=(2.4, 0.5))
    self.ax = self.fig.add_axes((0.01, 0.03, 0.98, 0.94))
    self.ax.set_axis_off()

  def draw(self, series: Sequence[tuple[Sequence[float], Sequence[float], str, bool]]) -> str:
    for artist in [*self.ax.patches, *self.ax.lines]:
      artist.remove()
    for edges, shares, color, filled in series:
      if filled:
        self.ax.stairs(shares, edges, fill=True, color=color, alpha=0.45, linewidth=0)
      else:
        self.ax.stairs(shares, edges, color=color, linewidth=1.3, linestyle="-")
    self.ax.relim()
    self.ax.autoscale_view()
    return _svg(self.fig)


@_styled
def histogram(series: Sequence[tuple[Sequence[float], Sequence[float], str, bool]]) -> str:
  """One column's distributions overlaid: (edges, shares, color, filled) per split."""
  global _spark
  if _spark is None:
    _spark = _Spark()
  return _spark.draw(series)


@_styled
def epochs(history: Sequence[Mapping[str, float]], metric: str | None, kept: int | None) -> str:
  """Loss (and the metric) per epoch for training and validation, the kept epoch marked."""
  names = ["loss"] + ([metric] if metric else [])
  fig, axes = _figure(9, 2.8, 1, len(names))
  x = [int(h["epoch"]) + 1 for h in history]
  for ax, name in zip(axes, names, strict=False):
    for key, color, label in (
      (name, TRAIN, properties.TRAIN_SPLIT),
      (f"val_{name}", EVAL, "validation"),
    ):
      ys = [h.get(key) for h in history]
      if any(y is not None for y in ys):
        ax.plot(x, [float("nan") if y is None else y for y in ys], color=color, label=label)
    if kept:
      ax.axvline(kept, color=LIVE, linestyle="--", linewidth=1, label=f"kept epoch {kept}")
    ax.set_title(name)
    ax.set_xlabel("epoch")
    ax.legend(frameon=False, fontsize=8)
  return _svg(fig)


@_styled
def confusion(matrix: Sequence[Sequence[int]], labels: Sequence[Any]) -> str:
  """A confusion matrix: actual classes down, predicted across, counts written in."""
  import numpy as np

  m = np.asarray(matrix, dtype=float)
  size = min(2.6 + 0.42 * len(m), 9.0)
  fig, [ax] = _figure(size, size * 0.85)
  ax.grid(False)
  ax.imshow(m, cmap="Blues")
  ticks = range(len(m))
  ax.set_xticks(ticks, [str(v) for v in labels], rotation=90 if len(m) > 8 else 0)
  ax.set_yticks(ticks, [str(v) for v in labels])
  ax.set_xlabel("predicted")
  ax.set_ylabel("actual")
  if len(m) <= 20:
    top = m.max() or 1
    for (i, j), v in np.ndenumerate(m):
      if v:
        ax.text(
          j,
          i,
          f"{int(v)}",
          ha="center",
          va="center",
          fontsize=7,
          color="white" if v > top / 2 else "#1d2330",
        )
  return _svg(fig)


@_styled
def predicted_vs_actual(actual: Sequence[float], predicted: Sequence[float]) -> str:
  """Predicted against actual values, with the line where they are equal."""
  fig, [ax] = _figure(4.6, 4.0)
  ax.scatter(actual, predicted, s=6, alpha=0.5, color=TRAIN, linewidths=0)
  low = min([*actual, *predicted], default=0.0)
  high = max([*actual, *predicted], default=1.0)
  ax.plot([low, high], [low, high], color="#8c8c8c", linewidth=1, linestyle="--")
  ax.set_xlabel("actual")
  ax.set_ylabel("predicted")
  return _svg(fig)


@_styled
def variants(points: Sequence[Mapping[str, Any]], metric: str) -> str:
  """Size and latency against the metric, one point per variant; blessed ones filled.

  Args:
    points: {"name", "metric", "kb", "ms", "blessed", "baseline"} per measured variant.
    metric: the metric's name, for the axis.
  """
  fig, axes = _figure(10, 3.4, 1, 2)
  for ax, key, label in ((axes[0], "kb", "size (KB)"), (axes[1], "ms", "latency p50 (ms)")):
    for i, p in enumerate(points):
      if p.get(key) is None or p.get("metric") is None:
        continue
      color = "#1d2330" if p.get("baseline") else PALETTE[i % len(PALETTE)]
      filled = p.get("blessed") or p.get("baseline")
      ax.scatter(
        [p[key]],
        [p["metric"]],
        s=46,
        color=color if filled else "none",
        edgecolors=color,
        linewidths=1.4,
        marker="s" if p.get("baseline") else "o",
      )
      ax.annotate(
        str(p["name"]), (p[key], p["metric"]), fontsize=7, xytext=(4, 3), textcoords="offset points"
      )
    ax.set_xlabel(label)
    ax.set_ylabel(metric)
  fig.suptitle("filled: blessed; hollow: not blessed; square: the trained model", fontsize=8)
  return _svg(fig)


# The bound a chart's series are held to: one colour and dash that no series uses.
BOUND_COLOR = "#222222"


@_styled
def nights_lines(
  labels: Sequence[str],
  lines: Mapping[str, Sequence[float | None]],
  ylabel: str,
  dashed: Sequence[str] = (),
  bound: tuple[float, str] | None = None,
) -> str:
  """Values per night, one line per series (None where a night has none).

  Args:
    labels: one per night, e.g. "2026-12-01 22:15" (drawn on two lines: date, then time).
    lines: series name -> a value per night.
    ylabel: the values' name.
    dashed: series drawn dashed (the live model's, beside tonight's).
    bound: (value, label) of a horizontal line the series are held to, drawn dotted in
      BOUND_COLOR, which no series takes, and labelled at its right end and in the legend.
  """
  return _svg(_nights_lines_figure(labels, lines, ylabel, dashed, bound))


def _nights_lines_figure(labels, lines, ylabel, dashed, bound):
  fig, [ax] = _figure(10, 3.0)
  x = list(range(len(labels)))
  for i, (name, ys) in enumerate(lines.items()):
    ax.plot(
      x,
      [float("nan") if y is None else y for y in ys],
      marker="o",
      markersize=4,
      color=PALETTE[i % len(PALETTE)],
      linestyle="--" if name in dashed else "-",
      label=name,
    )
  if bound is not None:
    value, label = bound
    ax.axhline(value, color=BOUND_COLOR, linestyle=":", linewidth=1.4, label=label)
    ax.annotate(
      label,
      (1.0, value),
      xycoords=("axes fraction", "data"),
      xytext=(0, 3),
      textcoords="offset points",
      ha="right",
      va="bottom",
      fontsize=7,
      color=BOUND_COLOR,
    )
  _night_axis(ax, labels)
  ax.set_ylabel(ylabel)
  ax.legend(frameon=False, fontsize=8, loc="best")
  return fig


@_styled
def nights_bars(labels: Sequence[str], bars: Mapping[str, Sequence[float]], ylabel: str) -> str:
  """Stacked bars per night (rows of each split)."""
  fig, [ax] = _figure(10, 2.8)
  x = list(range(len(labels)))
  bottom = [0.0] * len(labels)
  for i, (name, ys) in enumerate(bars.items()):
    ax.bar(x, ys, bottom=bottom, color=PALETTE[i % len(PALETTE)], label=name, width=0.6)
    bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
  _night_axis(ax, labels)
  ax.set_ylabel(ylabel)
  ax.legend(frameon=False, fontsize=8)
  return _svg(fig)


# Night labels on an axis: more would not fit side by side, upright, on a 10-inch chart.
_NIGHT_TICKS = 12


def _night_axis(ax, labels: Sequence[str]) -> None:
  """Labels the nights upright on two lines (date, then time and the rest), at most 12 of them,
  with room below the axes: slanted labels ran off the figure's left and bottom edges."""
  step = -(-len(labels) // _NIGHT_TICKS) if labels else 1
  ax.set_xticks(
    range(0, len(labels), step),
    [labels[i].replace(" ", "\n", 1) for i in range(0, len(labels), step)],
    fontsize=7,
  )
  ax.set_xlim(-0.6, len(labels) - 0.4)
  ax.figure.subplots_adjust(bottom=0.24)


_SVG_OPEN = re.compile(r"<svg\b")


def is_svg(text: str) -> bool:
  """Whether a chart's text is an SVG element (what every chart function returns)."""
  return bool(_SVG_OPEN.match(text))
