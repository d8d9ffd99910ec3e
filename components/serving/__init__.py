"""The serving folder's one owner: what the Pusher writes there and everything that reads it.

  layout     the folder's names: files, subfolders, logs, version names
  paths      checked paths into it (serving root, model name, version) and `PusherError`
  manifest   a version's manifest.json: its fields, how it is built, read and written
  local      the local backend: lock, stage, fsync, rename, append (plain files)
  remote     the object-store backend: uploads in order, manifest last, one object per entry
  store      both backends behind one interface (`folder`, `open_folder`)
  live       the live version: the one `live_version`, and copies of its SavedModel and data
  versions   inventory: list, verify and describe the versions
  history    the push history: pushes, rollbacks, prunes and accepted data changes
  publish    publishing a version (`push_version`) and retention
  rollback   making an earlier version live again
  nights     the nights log and the open nights' facts

Plain Python: TFX's fileio is imported only where an object store or an artifact needs it,
so the rollback command and the crash tests import this package cheaply.
"""
