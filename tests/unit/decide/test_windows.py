"""Learning windows (seed 000, "Learning at accept(2)" and "Two windows of
counts"), on the C and the model alike."""

import pytest

from rxl.decide import core, model

HZ = 1000
WINDOW = model.WINDOW_SEC * HZ


@pytest.fixture(params=["c", "model"])
def windows(request):
    cls = core.Windows if request.param == "c" else model.Windows
    return lambda now=0: cls(10, WINDOW, now)


def test_first_sighting_asks_for_remap_then_counts_quietly(windows):
    w = windows()
    assert w.note(2, 1) is True          # first time in this window
    assert all(w.note(2, t) is False for t in range(2, 100))
    assert w.counts() == {2: 99}
    assert w.note(4, 100) is True        # another CPU, first sighting


def test_roll_keeps_a_cpu_seen_in_both_and_drops_one_seen_in_neither(windows):
    w = windows()
    w.note(2, 0)
    w.note(9, 0)
    # Next window: only CPU 2 receives. The roll itself asks for a remap.
    assert w.note(2, WINDOW) is True
    assert w.counts() == {2: 2, 9: 1}    # CPU 9 lives on in prev
    assert w.note(2, 2 * WINDOW) is True  # roll: prev = {2: 1}
    assert w.counts() == {2: 2}          # CPU 9: zero in both, dropped


def test_two_idle_windows_forget_everything(windows):
    w = windows()
    for t in range(5):
        w.note(3, t)
    assert w.note(5, 2 * WINDOW + 7) is True
    assert w.counts() == {5: 1}


def test_window_boundaries_do_not_drift(windows):
    """A window that rolls late still ends on its own schedule."""
    w = windows(now=0)
    w.note(1, 0)
    w.note(1, WINDOW + WINDOW // 2)      # rolls; window 2 began at WINDOW
    assert w.note(1, 2 * WINDOW - 1) is False
    assert w.note(1, 2 * WINDOW) is True  # rolls at 2 x WINDOW, not later


def test_ticks_wrap(windows):
    start = 2**31 - 10
    w = windows(now=start)
    w.note(0, start)
    wrapped = (start + WINDOW + 2**31) % 2**32 - 2**31   # negative
    assert wrapped < 0
    assert w.note(0, wrapped) is True    # a roll across the wrap
    assert w.counts() == {0: 2}


def test_unknown_cpu_is_ignored(windows):
    w = windows()
    assert w.note(10, 0) is False
    assert w.note(-1, 0) is False
    assert w.counts() == {}
