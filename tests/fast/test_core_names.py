"""core.properties and core.sources: the names writers and readers share, and their helpers."""

from core import properties, sources


class _Artifact:
  """The part of a TFX artifact `live_available` reads: its int custom properties."""

  def __init__(self, **ints: int):
    self.ints = ints

  def has_custom_property(self, name: str) -> bool:
    return name in self.ints

  def get_int_custom_property(self, name: str) -> int:
    return self.ints[name]


def test_the_rows_property_of_a_split_is_the_prefix_and_its_name():
  assert properties.examples_rows(properties.TRAIN_SPLIT) == "num_rows_train"
  assert properties.examples_rows("eval").startswith(properties.EXAMPLES_ROWS_PREFIX)


def test_a_live_model_output_is_available_unless_marked_0():
  name = properties.LIVE_AVAILABLE_PROPERTY
  assert properties.live_available(_Artifact())
  assert properties.live_available(_Artifact(**{name: 1}))
  assert not properties.live_available(_Artifact(**{name: 0}))


def test_the_version_live_at_evaluation_is_read_from_live_models_baseline():
  available, version = properties.LIVE_AVAILABLE_PROPERTY, properties.LIVE_VERSION_PROPERTY
  assert properties.evaluated_while_live([_Artifact(**{available: 1, version: 4})]) == 4
  assert properties.evaluated_while_live([_Artifact(**{available: 0})]) == 0  # Nothing live.
  assert properties.evaluated_while_live([]) is None  # No LiveModel in the pipeline.
  assert properties.evaluated_while_live(None) is None


def test_a_pointer_is_the_uri_and_the_named_properties_read_by_get():
  read = []

  def get(name):
    read.append(name)
    return name.upper()

  assert sources.pointer("/a/uri", ("x", "y"), get) == {
    "uri": "/a/uri",
    "properties": {"x": "X", "y": "Y"},
  }
  assert read == ["x", "y"]
  assert sources.pointer("/b", (), get) == {"uri": "/b", "properties": {}}


def test_the_report_roles_are_distinct_names():
  assert len(set(sources.ROLES)) == len(sources.ROLES) == 7
  assert sources.ARTIFACTS not in sources.ROLES
