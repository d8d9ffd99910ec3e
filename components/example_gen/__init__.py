"""Fast CSV ExampleGen component."""

from components.example_gen.component import CsvExampleGen

__all__ = ["CsvExampleGen"]
