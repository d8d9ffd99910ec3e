"""Fast CSV ExampleGen component."""

from typing import Any

__all__ = ["CsvExampleGen"]


def __getattr__(name: str) -> Any:
  # Lazy, so that Beam workers importing the csv_* modules do not import TFX and TensorFlow.
  if name == "CsvExampleGen":
    from components.example_gen.component import CsvExampleGen

    return CsvExampleGen
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
