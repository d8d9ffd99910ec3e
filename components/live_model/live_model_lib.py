"""LiveModel's cache key: what the serving folder serves now, read before the run.

What is live is `components.serving.live`'s to say (the highest complete version, on every
orchestrator); this module turns it into the key a runner caches LiveModel by.
"""

from __future__ import annotations

import hashlib
import json

from components.serving import manifest
from components.serving.live import LiveVersion, check_intact, live_version


def live_key(live: LiveVersion | None) -> str:
  """A short key that changes whenever the live version does: its number and manifest digest."""
  if live is None:
    return "none"
  digest = hashlib.sha256(json.dumps(live.manifest, sort_keys=True).encode()).hexdigest()
  return f"{live.version}:{digest[:16]}"


def live_model_key(
  serving_dir: str, model_name: str, pipeline_name: str, verify: bool = True, settings: str = ""
) -> str:
  """The key a runner caches LiveModel by: what the serving folder serves, read before the run.

  LiveModel's output depends on the serving folder, not on its inputs, so no cache can see
  when it changes; this key, an input of LiveModel, changes exactly when the live version
  does. A rerun with nothing new then reuses LiveModel, and with it the Evaluator and a
  warm-started Trainer. LocalDagRunner (`pipeline/run_local.py`) computes it before the run;
  on Kubeflow a small uncached task does (`pipeline.definition.kubeflow_lib.add_live_key_task`).

  One refinement keeps the first rerun after a push cached too: the Pusher records the key of
  its run's LiveModel in the manifest (`manifest.LIVE_KEY_FIELD`). When the live version
  carries a key of this pipeline with the same settings and is not a rollback, that key is
  reused: that run evaluated and trained this very model against what was live before it, and
  the Pusher, which always runs, finds the candidate already live and pushes nothing. New data
  changes LiveModel's input and makes it run regardless. Other settings (another module, other
  training steps) make a new model, which must be compared with the live version: the key is
  then the live version's own, and LiveModel runs. Before the settings were part of the key, such
  a rerun reused the pushing run's "nothing was live", and a far worse model was blessed without
  a comparison and pushed over the live one.

  Args:
    serving_dir, model_name: the serving folder and model.
    pipeline_name: the pipeline's name.
    settings: the run's `PipelineConfig.settings_fingerprint()` ('' where unknown).
    verify: check the live version's files first (`live.check_intact`); a runner that checked
      them before the run passes False.

  Returns:
    A JSON string naming the pipeline and the live version's `live_key`.

  Raises:
    PusherError: the live version's files do not match its manifest.
  """
  live = live_version(serving_dir, model_name)
  if live is not None and verify:
    check_intact(live, model_name)
  recorded = manifest.recorded_live_key(live.manifest) if live else None
  if recorded is not None:
    try:
      fields = json.loads(recorded)
      if fields.get("pipeline") == pipeline_name and fields.get("settings", "") == settings:
        return recorded
    except (json.JSONDecodeError, AttributeError):
      pass
  key = {"pipeline": pipeline_name, "live": live_key(live)}
  if settings:
    key["settings"] = settings
  return json.dumps(key, sort_keys=True)
