"""rxl.decide.attach against sys/net/iflib.c (FreeBSD 15.0): get_ctx_core_offset()
and cpuid_advance(), worked by hand from the C."""

import pytest

from rxl.decide import attach
from rxl.decide.attach import CORE_OFFSET_UNSPECIFIED, Device


@pytest.mark.parametrize("cpus,offset,base", [
    # outside [first, last]: base += first; base = (base - first) % (last - first + 1)
    ([1, 2, 3, 4, 5], 7, 2),          # 7 + 1 = 8; 7 % 5 = 2, in the set
    ([3, 4, 5, 6, 7], 9, 4),          # 9 + 3 = 12; 9 % 5 = 4, in the set
    ([3, 4, 5, 6, 7], 1, 3),          # 1 % 5 = 1, not in the set: up to 3
    # inside [first, last] and not in the set: up to the next CPU that is
    ([0, 4, 8], 5, 8),
])
def test_a_tunable_is_shifted_wrapped_and_moved_up_as_iflib_does(cpus, offset, base):
    assert attach.tunable_base(cpus, offset) == base


def test_a_device_needs_a_queue_and_an_interrupt_set():
    with pytest.raises(ValueError, match=r"^device 0: no queue$"):
        attach.attach([Device(0, [0, 1])])
    with pytest.raises(ValueError, match=r"^device 1: an empty interrupt set$"):
        attach.attach([Device(1, [0, 1]), Device(1, [])])


def test_the_tunable_is_a_uint16_whose_top_value_means_unset():
    assert CORE_OFFSET_UNSPECIFIED == 0xFFFF
    for bad in (-1, CORE_OFFSET_UNSPECIFIED, 1 << 16):
        with pytest.raises(ValueError) as exc:
            attach.attach([Device(1, [0, 1], bad)])
        assert str(exc.value) == (f"device 0: core_offset {bad} is not in 0..65534 (a uint16_t "
                                  "tunable; 65535 means unset)")
    (top,) = attach.attach([Device(1, [0, 1], CORE_OFFSET_UNSPECIFIED - 1)])
    assert top.base == 0 and top.cpus == [0]          # 65534 % 2 = 0
    (zero,) = attach.attach([Device(2, [2, 3], 0)])
    assert zero.base == 2 and zero.cpus == [2, 3]     # 0 % 2 = 0, up to 2


def test_a_tunable_takes_no_cursor_and_leaves_the_shared_one_alone():
    a, b, c = attach.attach([Device(2, [0, 1, 2, 3]), Device(1, [0, 1, 2, 3], 1),
                             Device(2, [0, 1, 2, 3])])
    assert (a.shared, b.shared, c.shared) == (True, False, True)
    assert (a.cpus, b.cpus, c.cpus) == ([0, 1], [1], [2, 3])
    # a device whose queues outnumber its CPUs consumes each CPU once
    d, e = attach.attach([Device(6, [0, 1, 2, 3]), Device(1, [0, 1, 2, 3])])
    assert d.cpus == [0, 1, 2, 3, 0, 1] and e.base == 0
