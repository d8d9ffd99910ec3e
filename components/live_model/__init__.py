"""LiveModel: the version the serving folder serves now, as Models for Evaluator and Trainer."""

from typing import Any

__all__ = ["BaselineAwareEvaluator", "LiveModel"]


def __getattr__(name: str) -> Any:
  if name == "LiveModel":
    from components.live_model.component import LiveModel

    return LiveModel
  if name == "BaselineAwareEvaluator":
    from components.live_model.evaluator import BaselineAwareEvaluator

    return BaselineAwareEvaluator
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
