"""core.machine: thread pools that run each item once, also where threads cannot be started."""
import collections
import threading

import pytest

import core.machine as machine


def _starts_allowed(monkeypatch, allowed: int) -> None:
    """threading.Thread.start raises "can't start new thread" (an address-space limit) after ``allowed`` starts:
    what CPython does inside ThreadPoolExecutor.submit, after the item is queued."""
    real, count = threading.Thread.start, [0]

    def start(self):
        if count[0] >= allowed:
            raise RuntimeError("can't start new thread")
        count[0] += 1
        return real(self)

    monkeypatch.setattr(threading.Thread, "start", start)


@pytest.mark.parametrize("allowed", [0, 1, 2, 3])
def test_threaded_map_runs_each_item_once_whatever_threads_start(monkeypatch, allowed):
    """A review: an item whose thread failed to start ran here and, queued, on a started thread too (twice the
    work where memory is short); a RuntimeError of the function itself re-ran every item."""
    monkeypatch.setattr(machine, "available_cores", lambda: 4)
    calls = collections.Counter()
    lock = threading.Lock()

    def square(x):
        with lock:
            calls[x] += 1
        return x * x

    _starts_allowed(monkeypatch, allowed)
    assert machine.threaded_map(square, list(range(10)), limit=4, name="t") == [x * x for x in range(10)]
    assert set(calls.values()) == {1}, calls


def test_threaded_map_raises_the_functions_own_error_once_in_item_order(monkeypatch):
    monkeypatch.setattr(machine, "available_cores", lambda: 2)
    calls = collections.Counter()

    def fail_on_two(x):
        calls[x] += 1
        if x >= 2:
            raise RuntimeError(f"item {x}")
        return x

    with pytest.raises(RuntimeError, match="item 2"):
        machine.threaded_map(fail_on_two, [0, 1, 2, 3], limit=2, name="t")
    assert max(calls.values()) == 1, "not run again one after the other"


@pytest.mark.parametrize("allowed", [0, 1, 2])
def test_ordered_map_yields_in_order_and_runs_each_item_once(monkeypatch, allowed):
    from explain.uncertainty import ordered_map

    calls = collections.Counter()
    lock = threading.Lock()

    def work(x, y):
        with lock:
            calls[x] += 1
        return x + y

    _starts_allowed(monkeypatch, allowed)
    items = [(k, 100) for k in range(12)]
    assert list(ordered_map(work, items, threads=3)) == [k + 100 for k in range(12)]
    assert set(calls.values()) == {1}, calls
