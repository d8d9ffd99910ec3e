"""Nightly retraining: what runs, stops and reports a night."""
