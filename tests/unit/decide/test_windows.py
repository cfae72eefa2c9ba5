"""Learning windows (seed 000, "Two windows of counts"; docs/design.md,
"Core 3"), on the C and the model alike.

The kernel counts a handshake on its CPU (``count``); the first accept(2)
after a window ends rolls it (``roll``).  A roll copies the cumulative
counters into a snapshot and fixes the deal's input (``counts``): the
ending window plus the one before it.  Between rolls the input does not
move, whatever is counted.
"""

import pytest

from rxl.decide import core, model

HZ = 1000
WINDOW = model.WINDOW_SEC * HZ


@pytest.fixture(params=["c", "model"])
def windows(request):
    cls = core.Windows if request.param == "c" else model.Windows
    return lambda now=0: cls(10, WINDOW, now)


def test_nothing_reaches_the_deal_before_a_roll(windows):
    w = windows()
    for _ in range(99):
        w.count(2)
    w.count(4, 5)
    assert w.counts() == {}
    assert w.window_counts(2) == (0, 99)
    assert w.roll(WINDOW - 1) is False     # not over yet
    assert w.counts() == {}
    assert w.roll(WINDOW) is True
    assert w.counts() == {2: 99, 4: 5}
    assert w.window_counts(2) == (99, 0)


def test_roll_keeps_a_cpu_seen_in_either_and_drops_one_seen_in_neither(windows):
    w = windows()
    w.count(2)
    w.count(9)
    assert w.roll(WINDOW) is True
    w.count(2)                           # next window: only CPU 2
    assert w.counts() == {2: 1, 9: 1}    # fixed at the roll
    assert w.roll(2 * WINDOW) is True
    assert w.counts() == {2: 2, 9: 1}    # CPU 9 lives on in the last window
    assert w.window_counts(9) == (0, 0)
    assert w.roll(3 * WINDOW) is True
    assert w.counts() == {2: 1}          # CPU 9: zero in both, dropped
    assert w.window_counts(2) == (0, 0)


def test_a_late_roll_forgets_the_window_before(windows):
    """A window that lasted two window lengths or more is not next to the
    one before it: only its own counts are dealt from."""
    w = windows()
    w.count(3, 5)
    assert w.roll(WINDOW) is True
    assert w.counts() == {3: 5}
    w.count(5)
    assert w.roll(3 * WINDOW) is True        # this window lasted 2W
    assert w.counts() == {5: 1}
    assert w.roll(4 * WINDOW - 1) is False   # the new window began at 3W
    assert w.roll(4 * WINDOW) is True


def test_exactly_two_windows_is_the_boundary(windows):
    """An ending window that lasted one tick under two window lengths keeps
    the one before it in the deal's input; one that lasted exactly two
    forgets it."""
    w = windows()
    w.count(3, 5)
    assert w.roll(WINDOW) is True
    w.count(3)
    assert w.roll(3 * WINDOW - 1) is True     # lasted 2 x WINDOW - 1
    assert w.counts() == {3: 6} and w.window_counts(3) == (1, 0)
    w = windows()
    w.count(3, 5)
    assert w.roll(WINDOW) is True
    w.count(3)
    assert w.roll(3 * WINDOW) is True         # lasted 2 x WINDOW
    assert w.counts() == {3: 1} and w.window_counts(3) == (1, 0)
    assert w.roll(4 * WINDOW - 1) is False    # the new window began at 3W
    assert w.roll(4 * WINDOW) is True

def test_a_window_starts_at_its_roll(windows):
    """A roll begins the next window then, not where the last should have
    ended: windows never last less than their length."""
    w = windows(now=0)
    assert w.roll(WINDOW + WINDOW // 2) is True
    assert w.roll(2 * WINDOW) is False
    assert w.roll(2 * WINDOW + WINDOW // 2) is True


def test_ticks_wrap(windows):
    start = 2**31 - 10
    w = windows(now=start)
    w.count(0)
    wrapped = (start + WINDOW + 2**31) % 2**32 - 2**31   # negative
    assert wrapped < 0
    assert w.roll(wrapped) is True       # a roll across the wrap
    w.count(0)
    assert w.counts() == {0: 1}
    assert w.window_counts(0) == (1, 1)


def test_counters_wrap(windows):
    """The counters are 32-bit and never reset: a window is a difference,
    right when the counter wraps inside it."""
    w = windows()
    w.count(1, 2**32 - 3)
    assert w.roll(WINDOW) is True
    assert w.roll(2 * WINDOW) is True
    assert w.roll(3 * WINDOW) is True    # both windows past the bulk
    w.count(1, 7)                        # wraps the counter
    assert w.window_counts(1) == (0, 7)
    assert w.roll(4 * WINDOW) is True
    assert w.counts() == {1: 7}


def test_unknown_cpu_is_ignored(windows):
    w = windows()
    w.count(10)
    w.count(-1)
    assert w.roll(WINDOW) is True
    assert w.counts() == {}
