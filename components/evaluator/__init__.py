"""The Evaluator: stock TFX's, against LiveModel's baseline, with an automatic floor."""

from typing import Any

__all__ = ["BaselineAwareEvaluator"]


def __getattr__(name: str) -> Any:
  if name == "BaselineAwareEvaluator":
    from components.evaluator.component import BaselineAwareEvaluator

    return BaselineAwareEvaluator
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
