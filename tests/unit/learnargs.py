"""``rxl learn --dry-run`` over a plain 15 tree, for the tests of learn's
options: the tree fixture (``t15``, with an empty objdir beside it) and the
argv with every path a dry run needs.  A test module imports ``t15`` with
clierror's ``work`` fixture, which it depends on."""

import pytest

from fakefreebsd import kernel_bytes, plain_tree

#: Commit 4's learning sysctl, as patches/0004 names it.
SYSCTL = "net.inet.tcp.reuseport_lb.learn"
#: A 15.0-RELEASE kernel's two version strings (what check_kernel_file reads).
PRISTINE_TAIL = (b"\0@(#)FreeBSD 15.0-RELEASE #1: Fri Dec  4 2026\n"
                 b"\0FreeBSD 15.0-RELEASE #1: Fri Dec  4 2026\n")


@pytest.fixture
def t15(work):
    (work / "adir").mkdir(exist_ok=True)
    return plain_tree(work / "t15", 15, "GENERIC")


def pristine_kernel(work):
    """``work/pristine``: a stand-in pristine 15.0 kernel, made anew."""
    other = work / "pristine"
    other.write_bytes(kernel_bytes(tail=PRISTINE_TAIL))
    return other


def learn_args(work, src, kernel, *args):
    """The argv of ``rxl learn --dry-run`` of ``src`` with ``kernel`` and a
    pristine stand-in, then ``args``."""
    return ["learn", "--dry-run", "--src", src, "--objdir", work / "adir",
            "--guest-dir", work / "g", "--learn-sysctl", SYSCTL, "--lb-cpu-opt", "1027",
            "--kernel", kernel, "--pristine-kernel", pristine_kernel(work), *args]
