"""Errors a user can cause and fix; runners print them as one line instead of a traceback."""


class UserInputError(ValueError):
  """Bad data, a wrong option or missing hardware; the message names the fix."""
