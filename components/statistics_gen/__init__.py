"""StatisticsGen: TFX's own, computing a split's statistics in process when Beam would only cost."""

from typing import Any

__all__ = ["StatisticsGen"]


def __getattr__(name: str) -> Any:
  if name == "StatisticsGen":
    from components.statistics_gen.component import StatisticsGen

    return StatisticsGen
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
