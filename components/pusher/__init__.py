"""Atomic versioned Pusher: blessed SavedModel + optimizer variants into a TF Serving tree."""

from typing import Any

__all__ = ["Pusher"]


def __getattr__(name: str) -> Any:
  # Lazy, so that `components.pusher.spec` imports without the component and its executor.
  if name == "Pusher":
    from components.pusher.component import Pusher

    return Pusher
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
