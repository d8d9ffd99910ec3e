"""The command-line tools as a user meets them: flags, one-line errors, schedule and rollback."""
