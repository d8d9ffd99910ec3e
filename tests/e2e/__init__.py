"""Whole pipeline runs of the real run_local.py, including the fault suite (marked e2e)."""
