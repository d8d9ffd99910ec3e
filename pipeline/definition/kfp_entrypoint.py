"""Container entrypoint of every compiled Kubeflow step: TFX's, made to run on open-source KFP.

`python -m pipeline.definition.kfp_entrypoint --executor_class_path ...
--json_serialized_invocation_args {{$}} --json_serialized_inputs_spec_args ...` takes exactly the
arguments of TFX 1.16's `kubeflow_v2_run_executor` and runs it, after what that entrypoint cannot
do itself:

1. `components.tf_compat.keras_tuner_on_tf_keras()`, before TFX is imported, so that a Tuner
   step's keras_tuner builds tf_keras models (TFX imports keras_tuner with Keras 3 otherwise).
2. Upstream artifacts get their types back. The open-source KFP driver passes every input
   artifact with `type: {instanceSchema: ""}` (its MLMD client does not read the schema back),
   and TFX then fails to find the artifact class (tensorflow/tfx#7768). The inputs spec TFX put
   in the container's arguments declares each input's type; it is copied into the artifacts.
   Properties TFX wrote as `custom:<name>` because the type declares `<name>` (the span and
   version that ExampleGen's span resolution records) are given back under their own name, so
   that downstream steps read `examples.span` as they do on LocalDagRunner.
3. With an s3:// path among its artifacts or parameters, TensorFlow's S3 file system is
   registered (tensorflow-io), and the process ends with `os._exit` once the outputs are
   written (tensorflow-io aborts the interpreter at exit).

`python -m pipeline.definition.kfp_entrypoint resolve-span --executor_input {{$}}` is the span
resolver task that `kubeflow_lib.add_span_resolvers` adds in front of each ExampleGen,
`... live-key --executor_input {{$}}` the task `add_live_key_task` adds in front of LiveModel,
and `... night-end --executor_input {{$}}` the exit task `add_exit_handler` adds after every
step, which closes the night (`run_night_end`).
`python -m pipeline.definition.kfp_entrypoint check-imports CLASS_PATH...` imports classes as the
steps do (the Dockerfile runs it on every class the packages name).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from components.arguments import flag_value
from core import errors, properties
from pipeline.definition import kubeflow_lib, kubeflow_night

INVOCATION_FLAG = "--json_serialized_invocation_args"
EXECUTOR_INPUT_FLAG = "--executor_input"
CHECK_IMPORTS = "check-imports"
# The state of a final status whose DAG ended well: Vertex AI's, and KFP's (2.14 on: the ML
# Metadata state of the DAG's execution); and the states of one that did not.
SUCCEEDED_STATES = ("SUCCEEDED", "COMPLETE")
FAILED_STATES = ("FAILED", "CANCELLED", "CANCELED")
# How TFX names a custom property whose name its artifact type declares as a property.
CUSTOM_PREFIX = "custom:"


def _untyped(artifact_type: Mapping[str, Any] | None) -> bool:
  return not any((artifact_type or {}).get(k) for k in ("instanceSchema", "schemaTitle"))


def fill_input_artifact_types(
  executor_input: dict[str, Any], inputs_spec: Mapping[str, Any]
) -> list[str]:
  """Gives each input artifact without a type the type its component declares, in place.

  Also renames `custom:<name>` metadata to `<name>` (see the module docstring).

  Args:
    executor_input: the ExecutorInput as JSON (camelCase keys, as KFP writes it).
    inputs_spec: the component's ComponentInputsSpec as JSON.

  Returns:
    The input keys whose artifacts were given a type.
  """
  declared = inputs_spec.get("artifacts") or {}
  filled = []
  for key, artifact_list in (executor_input.get("inputs", {}).get("artifacts") or {}).items():
    artifact_type = (declared.get(key) or {}).get("artifactType")
    for artifact in artifact_list.get("artifacts") or []:
      metadata = artifact.get("metadata") or {}
      for name in [k for k in metadata if k.startswith(CUSTOM_PREFIX)]:
        metadata.setdefault(name[len(CUSTOM_PREFIX) :], metadata.pop(name))
      if artifact_type and _untyped(artifact.get("type")):
        artifact["type"] = dict(artifact_type)
        filled.append(key)
  return sorted(set(filled))


def _replace_flag(args: list[str], flag: str, value: str) -> None:
  for i, arg in enumerate(args):
    if arg == flag and i + 1 < len(args):
      args[i + 1] = value
      return
    if arg.startswith(flag + "="):
      args[i] = f"{flag}={value}"
      return


def patch_args(argv: Sequence[str]) -> list[str]:
  """TFX entrypoint arguments with the executor input's artifact types filled in."""
  args = list(argv)
  invocation = flag_value(args, INVOCATION_FLAG)
  inputs_spec = flag_value(args, kubeflow_lib.INPUTS_SPEC_FLAG)
  if not invocation or not inputs_spec:
    return args
  executor_input = json.loads(invocation)
  fill_input_artifact_types(executor_input, json.loads(inputs_spec))
  type_html_outputs(executor_input)
  _replace_flag(args, INVOCATION_FLAG, json.dumps(executor_input))
  return args


def type_html_outputs(executor_input: dict[str, Any]) -> list[str]:
  """Gives outputs the package declares as KFP's `system.HTML` the kit's page type, in place,
  so that TFX finds the artifact class (`kubeflow_lib.declare_html_outputs`).

  Returns:
    The output keys retyped.
  """
  retyped = []
  for key, artifact_list in (executor_input.get("outputs", {}).get("artifacts") or {}).items():
    for artifact in artifact_list.get("artifacts") or []:
      if (artifact.get("type") or {}).get("schemaTitle") == kubeflow_lib.KFP_HTML_TYPE[
        "schemaTitle"
      ]:
        schema = f"title: {kubeflow_lib.HTML_REPORT_TITLE}\ntype: object\n"
        artifact["type"] = {"instanceSchema": schema}
        retyped.append(key)
  return retyped


def _uris(args: Sequence[str]) -> list[str]:
  """Artifact URIs and string parameters of an invocation: what register_filesystems checks."""
  invocation = flag_value(args, INVOCATION_FLAG) or flag_value(args, EXECUTOR_INPUT_FLAG)
  if not invocation:
    return []
  executor_input = json.loads(invocation)
  out = []
  for side in ("inputs", "outputs"):
    for artifact_list in (executor_input.get(side, {}).get("artifacts") or {}).values():
      out.extend(a.get("uri", "") for a in artifact_list.get("artifacts") or [])
  values = executor_input.get("inputs", {}).get("parameterValues") or {}
  out.extend(v for v in values.values() if isinstance(v, str) and "://" in v[:16])
  return out


def _register_filesystems(args: Sequence[str]) -> bool:
  """Registers TensorFlow's S3 file system when the step touches s3:// (tensorflow-io)."""
  from components import tf_compat

  return tf_compat.register_filesystems(_uris(args))


def run_executor(argv: Sequence[str]) -> None:
  """Runs TFX's Kubeflow v2 container entrypoint on `argv` (its own flags), patched as above."""
  from components import tf_compat

  # Before anything imports TFX: `tfx.v1` imports keras_tuner.
  tf_compat.keras_tuner_on_tf_keras()
  tf_compat.install_user_modules_once()
  tf_compat.tfx_package_only_for_remote_beam()
  args = patch_args(argv)
  hard_exit = _register_filesystems(args)

  from absl import app
  from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_run_executor as stock

  from components import memory

  memory.freeze_imports()

  def _main(parsed):
    try:
      stock.main(parsed)
    except Exception as e:
      # A user's mistake (bad data, a cluster not ready for a TFJob) is one line in the
      # step's log, as on run_local.py; a bug of ours keeps its traceback.
      mistake = errors.find(e, errors.UserInputError)
      if mistake is None:
        raise
      lines = str(mistake).strip().splitlines()
      print(f"error: {lines[0] if lines else type(mistake).__name__}", file=sys.stderr)
      sys.exit(_exit(1, hard_exit))
    _exit(0, hard_exit)

  app.run(_main, argv=[sys.argv[0], *args], flags_parser=tf_compat.kfp_v2_executor_flags_parser())


def span_key(parameter_values: Mapping[str, Any]) -> str:
  """What identifies the data an ExampleGen with these parameters would read now.

  Resolves `{SPAN}`/`{VERSION}` with TFX's FileBasedDriver code, exactly as the ExampleGen
  executor does when no driver ran, and fingerprints (size and modification time of every file)
  the resolved span and, with `rolling_spans` > 1, each older span of the window.

  Args:
    parameter_values: the ExampleGen's `input_base`, `input_config` (JSON), optional
      `range_config` (JSON) and `rolling_spans`.

  Returns:
    A JSON string: span, version and fingerprints.

  Raises:
    components.example_gen.csv_errors.CsvInputError: when no span can be resolved.
  """
  from tfx.proto import example_gen_pb2
  from tfx.utils import io_utils, proto_utils

  from components.example_gen import example_gen_lib

  props = {
    k: parameter_values[k]
    for k in ("input_base", "input_config", "range_config")
    if parameter_values.get(k)
  }
  resolved = example_gen_lib.resolve_without_driver(props) or props
  input_config = example_gen_pb2.Input()
  proto_utils.json_to_proto(props["input_config"], input_config)
  span = int(resolved.get("span") or 0)
  version = resolved.get("version")
  fingerprints = {str(span): resolved.get("input_fingerprint")}
  rolling = int(parameter_values.get("rolling_spans") or 1)
  for s, pattern in example_gen_lib.window_patterns(input_config.splits[0].pattern, span, rolling):
    if s != span:
      path = os.path.join(props["input_base"], pattern)
      fingerprints[str(s)] = io_utils.generate_fingerprint(input_config.splits[0].name, path)
  _note_spans(parameter_values, props["input_base"], input_config.splits[0].pattern, rolling)
  return json.dumps(
    {"span": span, "version": version, "fingerprints": fingerprints}, sort_keys=True
  )


def _note_spans(
  parameter_values: Mapping[str, Any], input_base: str, pattern: str, rolling: int
) -> None:
  """Records tonight's span notes in the night's facts (`kubeflow_night.add_span_notes` gave the
  task the night and the serving folder), as run_local.py does before its run."""
  from components.nights import nights_lib, span_notes

  night = str(parameter_values.get(properties.NIGHT_ID_KEY) or "")
  serving_dir = parameter_values.get(properties.SERVING_DIR_KEY)
  if not night or "{{" in night or not serving_dir:
    return
  model_name = parameter_values[properties.MODEL_NAME_KEY]
  stale_after_s = float(parameter_values.get(kubeflow_night.STALE_AFTER_PARAMETER) or 0)
  notes = span_notes.night_notes(
    input_base, pattern, serving_dir, model_name, rolling, stale_after_s
  )
  if notes:
    print(f"notes: {'; '.join(notes)}")
    facts = {nights_lib.NOTES_FIELD: notes}
    try:
      nights_lib.record_step(serving_dir, model_name, nights_lib.DATA_STEP, facts, night)
    except Exception as e:  # Recording is not the run: the Pusher reports an unwritable folder.
      print(f"warning: the notes were not recorded in {serving_dir}: {e}", file=sys.stderr)


def live_key(parameter_values: Mapping[str, Any]) -> str:
  """LiveModel's cache key from its serving_dir and model_name and the pipeline's name."""
  from components.live_model import live_model_lib

  return live_model_lib.live_model_key(
    parameter_values[properties.SERVING_DIR_KEY],
    parameter_values[properties.MODEL_NAME_KEY],
    parameter_values[kubeflow_lib.PIPELINE_NAME_PARAMETER],
    settings=parameter_values.get(kubeflow_lib.SETTINGS_PARAMETER) or "",
  )


# Key tasks: subcommand -> (the function that computes the value, its output parameter).
KEY_TASKS = {
  kubeflow_lib.RESOLVE_SPAN: (span_key, kubeflow_lib.SPAN_KEY),
  kubeflow_lib.LIVE_KEY_COMMAND: (live_key, properties.LIVE_KEY_KEY),
}


def run_key_task(command: str, argv: Sequence[str]) -> int:
  """Runs a key task: writes its one output parameter into the executor output file."""
  compute, output = KEY_TASKS[command]
  executor_input = json.loads(flag_value(argv, EXECUTOR_INPUT_FLAG) or "{}")
  values = executor_input.get("inputs", {}).get("parameterValues") or {}
  hard_exit = _register_filesystems(argv)
  from core.errors import UserInputError

  try:
    key = compute(values)
  except UserInputError as e:
    print(f"error: {e}", file=sys.stderr)
    return _exit(1, hard_exit)
  print(f"{output}: {key}")
  output_file = executor_input["outputs"]["outputFile"]
  from tfx.dsl.io import fileio

  fileio.makedirs(os.path.dirname(output_file))
  with fileio.open(output_file, "w") as f:
    f.write(json.dumps({"parameterValues": {output: key}}))
  return _exit(0, hard_exit)


def night_outcome(
  status: Mapping[str, Any] | None,
  facts: Mapping[str, Mapping[str, Any]],
  serving_dir: str,
  model_name: str,
) -> tuple[bool, str]:
  """Whether a night succeeded, and its one-line error, from its final status and facts.

  The state of the final status decides when it is one of `SUCCEEDED_STATES` or
  `FAILED_STATES`. Without a status (open-source KFP before 2.14 cannot pass one:
  `kubeflow_night.FINAL_STATUS_TARGETS`), or with another state, the facts do: the Pusher, the
  last step and never cached, records its facts at the end of its run, so the night succeeded
  exactly when they are there. A night the data gate stopped ends with the gate's own line,
  as on run_local.py (open-source KFP passes no error message); another failure with the
  status's error message, if any.

  Args:
    status: the TASK_FINAL_STATUS value (`state`, `error.message`, ...), or None.
    facts: the night's facts so far, by step (`components.serving.nights.open_facts`).
    serving_dir, model_name: the model's serving folder (for the gate's line).

  Returns:
    (succeeded, error).
  """
  from components.nights import nights_lib

  state = str((status or {}).get("state") or "").upper()
  if state in SUCCEEDED_STATES:
    succeeded = True
  elif state in FAILED_STATES:
    succeeded = False
  else:
    succeeded = nights_lib.PUSHER_STEP in facts
  if succeeded:
    return True, ""
  report = (facts.get(nights_lib.GATE_STEP) or {}).get("report") or {}
  if report.get("passed") is False:
    from components.data_gate import report as gate_report
    from components.data_gate.executor import how_to_accept

    gate = gate_report.GateReport.from_json(report)
    return False, gate_report.stop_message(gate, how_to_accept(serving_dir, model_name))
  error = ((status or {}).get("error") or {}).get("message") or ""
  return False, " ".join(str(error).split())


def run_night_end(argv: Sequence[str]) -> int:
  """The exit task: closes the night, records it in the nights log and sends its notices.

  Exits 0 whatever the night's outcome (a failed night is reported, not failed again); a
  record or notice that cannot be written or sent is logged by `nights_lib.end_night`.
  """
  import logging

  from components.nights import nights_lib
  from components.serving import nights

  logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
  executor_input = json.loads(flag_value(argv, EXECUTOR_INPUT_FLAG) or "{}")
  values = executor_input.get("inputs", {}).get("parameterValues") or {}
  hard_exit = _register_filesystems(argv)
  serving_dir = values[properties.SERVING_DIR_KEY]
  model_name = values[properties.MODEL_NAME_KEY]
  night = nights_lib.night_id(values)
  if night is None:
    night = nights_lib.new_night_id()
    print(f"warning: the run's id did not reach this step; recording night {night} without facts")
  status = values.get(kubeflow_night.STATUS_PARAMETER) or None
  facts = nights.open_facts(serving_dir, model_name, night)
  succeeded, error = night_outcome(status, facts, serving_dir, model_name)
  record, deliveries = nights_lib.end_night(
    serving_dir,
    model_name,
    night,
    succeeded=succeeded,
    error=error,
    notify=json.loads(values.get(kubeflow_night.NOTIFY_PARAMETER) or "[]"),
    every_night=values.get(kubeflow_night.EVERY_NIGHT_PARAMETER) == "true",
    heartbeat=values.get(kubeflow_night.HEARTBEAT_PARAMETER) or "",
  )
  print(f"night {night}: {record['outcome']}: {record['line']}")
  for delivery in deliveries:
    if delivery["ok"]:
      print(f"notified {delivery['target']}")
    else:
      print(
        f"could not notify {delivery['target']} ({delivery['attempts']} tries): {delivery['error']}"
      )
  output_file = (executor_input.get("outputs") or {}).get("outputFile")
  if output_file:
    from tfx.dsl.io import fileio

    fileio.makedirs(os.path.dirname(output_file))
    with fileio.open(output_file, "w") as f:
      f.write(json.dumps({}))
  return _exit(0, hard_exit)


def _exit(code: int, hard: bool) -> int:
  """Returns `code`, or ends the process with it at once after tensorflow-io was imported.

  tensorflow-io 0.37 aborts the interpreter at exit ("pure virtual method called"); by now
  every output is written.
  """
  if hard:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
  return code


def check_imports(class_paths: Sequence[str]) -> int:
  """Imports each class path the way a step does (after pointing keras_tuner at tf_keras)."""
  from components import tf_compat

  tf_compat.keras_tuner_on_tf_keras()
  from tfx.utils import import_utils

  for path in class_paths:
    import_utils.import_class_by_path(path)
    print(f"imported {path}")
  return 0


def main(argv: Sequence[str] | None = None) -> int:
  """Dispatches to a key task, the night's end, the import check, or TFX's executor entrypoint."""
  argv = list(sys.argv[1:] if argv is None else argv)
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
  if argv[:1] and argv[0] in KEY_TASKS:
    return run_key_task(argv[0], argv[1:])
  if argv[:1] == [kubeflow_night.NIGHT_END_COMMAND]:
    return run_night_end(argv[1:])
  if argv[:1] == [CHECK_IMPORTS]:
    return check_imports(argv[1:])
  run_executor(argv)
  return 0


if __name__ == "__main__":
  sys.exit(main())
