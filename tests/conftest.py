"""Shared pytest fixtures; forces Keras 2 before anything imports TensorFlow."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pathlib

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
DIGITS_CSV = REPO_ROOT / "data" / "digits" / "digits.csv"


@pytest.fixture
def repo_root() -> pathlib.Path:
  return REPO_ROOT


@pytest.fixture
def digits_csv() -> pathlib.Path:
  return DIGITS_CSV
