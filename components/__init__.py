"""Custom TFX components of the pipeline kit.

tensorflow-model-optimization needs Keras 2, so every process that imports the
components uses tf_keras as tf.keras unless the caller already chose.

The kit's artifact types (`components.artifacts`) are exported here because
Kubeflow v2 containers import an artifact class from its TYPE_NAME
(`components.OptimizedModel`).
"""

import os
from typing import Any

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

__all__ = ["HtmlReport", "OptimizationReport", "OptimizedModel"]


def __getattr__(name: str) -> Any:
  # Lazy, so that importing a plain library module does not import TFX.
  if name in __all__:
    from components import artifacts

    return getattr(artifacts, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
