"""LiveModel: the version the serving folder serves now, as Models for Evaluator and Trainer."""

from typing import Any

__all__ = ["LiveModel"]


def __getattr__(name: str) -> Any:
  if name == "LiveModel":
    from components.live_model.component import LiveModel

    return LiveModel
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
