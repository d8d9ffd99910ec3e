"""Atomic versioned Pusher: blessed SavedModel + optimizer variants into a TF Serving tree."""

from components.pusher.component import Pusher
from components.pusher.spec import OptimizedModel

__all__ = ["OptimizedModel", "Pusher"]
