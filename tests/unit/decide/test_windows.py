"""Learning windows (seed 000, "Two windows of counts"; docs/design.md,
"Core 3"), on the C and the model alike.

The kernel counts a handshake on its CPU (``count``) and rolls the windows
in a task (``roll``); the two never wait for each other, and a roll only
copies the cumulative counters into a snapshot.
"""

import pytest

from rxl.decide import core, model

HZ = 1000
WINDOW = model.WINDOW_SEC * HZ


@pytest.fixture(params=["c", "model"])
def windows(request):
    cls = core.Windows if request.param == "c" else model.Windows
    return lambda now=0: cls(10, WINDOW, now)


def test_counts_add_up_without_any_roll(windows):
    w = windows()
    for _ in range(99):
        w.count(2)
    w.count(4, 5)
    assert w.counts() == {2: 99, 4: 5}
    assert w.window_counts(2) == (0, 99)
    assert w.roll(WINDOW - 1) is False     # not over yet
    assert w.counts() == {2: 99, 4: 5}


def test_roll_keeps_a_cpu_seen_in_both_and_drops_one_seen_in_neither(windows):
    w = windows()
    w.count(2)
    w.count(9)
    assert w.roll(WINDOW) is True
    w.count(2)                           # next window: only CPU 2
    assert w.counts() == {2: 2, 9: 1}    # CPU 9 lives on in prev
    assert w.window_counts(9) == (1, 0)
    assert w.roll(2 * WINDOW) is True
    assert w.counts() == {2: 1}          # CPU 9: zero in both, dropped
    assert w.window_counts(2) == (1, 0)


def test_two_windows_without_a_roll_forget_everything(windows):
    """No roll for two windows means no handshake came: what the current
    window holds is older than a window."""
    w = windows()
    w.count(3, 5)
    assert w.roll(2 * WINDOW + 7) is True
    assert w.counts() == {}
    w.count(5)
    assert w.counts() == {5: 1}
    assert w.roll(3 * WINDOW + 6) is False   # the new window began at 2W+7
    assert w.roll(3 * WINDOW + 7) is True


def test_exactly_two_windows_without_a_roll_is_the_boundary(windows):
    """A roll exactly two windows after the current one began forgets both
    (they start empty, now); one tick earlier it is an ordinary roll, the
    current window becoming the previous one."""
    w = windows()
    w.count(3, 5)
    assert w.roll(2 * WINDOW - 1) is True
    assert w.counts() == {3: 5} and w.window_counts(3) == (5, 0)
    assert w.roll(2 * WINDOW - 1) is False    # the next window began at WINDOW
    assert w.roll(2 * WINDOW) is True         # ... and ends at 2 x WINDOW
    assert w.counts() == {}                   # a window of nothing since 2W-1
    w = windows()
    w.count(3, 5)
    assert w.roll(2 * WINDOW) is True
    assert w.counts() == {} and w.window_counts(3) == (0, 0)
    assert w.roll(3 * WINDOW - 1) is False    # both began at 2 x WINDOW, now
    assert w.roll(3 * WINDOW) is True


def test_window_boundaries_do_not_drift(windows):
    """A window that rolls late still ends on its own schedule."""
    w = windows(now=0)
    assert w.roll(WINDOW + WINDOW // 2) is True   # window 2 began at WINDOW
    assert w.roll(2 * WINDOW - 1) is False
    assert w.roll(2 * WINDOW) is True             # at 2 x WINDOW, not later


def test_ticks_wrap(windows):
    start = 2**31 - 10
    w = windows(now=start)
    w.count(0)
    wrapped = (start + WINDOW + 2**31) % 2**32 - 2**31   # negative
    assert wrapped < 0
    assert w.roll(wrapped) is True       # a roll across the wrap
    w.count(0)
    assert w.counts() == {0: 2}


def test_counters_wrap(windows):
    """The counters are 32-bit and never reset: a window is a difference,
    right when the counter wraps inside it."""
    w = windows()
    w.count(1, 2**32 - 3)
    assert w.roll(WINDOW) is True
    assert w.roll(2 * WINDOW) is True    # both windows start past the bulk
    w.count(1, 7)                        # wraps the counter
    assert w.counts() == {1: 7}
    assert w.window_counts(1) == (0, 7)


def test_unknown_cpu_is_ignored(windows):
    w = windows()
    w.count(10)
    w.count(-1)
    assert w.counts() == {}
