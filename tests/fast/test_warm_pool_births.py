"""The warm pool hands each spawn its own child's pid (tests/support/warm_python.py).

A whole-suite run once waited over a minute for a fork: the spawn gave up, its child's pid came
later, and the next spawn took that orphan for its own cluster's worker.
"""

import queue
import threading

import pytest

from tests.support.warm_python import _Births


@pytest.fixture
def births():
  killed = []
  return _Births(killed.append), killed


def test_each_spawn_receives_the_pid_of_its_own_request_whatever_the_order(births):
  b, killed = births
  first, second = b.expect(1), b.expect(2)
  b.born(2, 202)
  b.born(1, 101)
  assert (first.get(timeout=1), second.get(timeout=1), killed) == (101, 202, [])


def test_a_child_born_after_its_spawn_gave_up_is_killed_and_goes_to_no_later_spawn(births):
  b, killed = births
  late = b.expect(1)
  b.abandon(1, late)
  following = b.expect(2)
  b.born(1, 101)  # the late reply
  assert killed == [101]
  assert following.empty()
  b.born(2, 202)
  assert following.get(timeout=1) == 202
  assert killed == [101]


def test_a_pid_that_arrived_as_the_spawn_gave_up_is_killed(births):
  b, killed = births
  box = b.expect(1)
  b.born(1, 101)
  b.abandon(1, box)
  assert killed == [101]


def test_every_waiting_spawn_and_every_later_one_learns_that_the_server_ended(births):
  b, _ = births
  waiting = b.expect(1)
  got = []
  reader = threading.Thread(target=lambda: got.append(waiting.get(timeout=5)))
  reader.start()
  b.server_ended()
  reader.join(5)
  assert got == [None]
  assert b.expect(2).get(timeout=1) is None
  with pytest.raises(queue.Empty):
    waiting.get_nowait()
