"""The default tabular model, a trainer module like a user's (module.py); docs/layout.md maps it."""
