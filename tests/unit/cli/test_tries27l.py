"""Issue 27, the short eleventh pass (docs/results/newcomer.md, "Eleventh pass,
short"): its four faults, each refused at its root with one ``Error:`` line,
exit 2."""

import os
import socket

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes


@pytest.fixture
def f(work):
    """In ``work``: a Unix socket, a FIFO, a link to it, a kernel."""
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(work / "sock"))
    s.close()
    os.mkfifo(work / "fifo")
    os.symlink("fifo", work / "lfifo")
    (work / "kern").write_bytes(kernel_bytes())
    return work


# ------------------------------------------------------- 1: a socket as an input file

@pytest.mark.parametrize("args", [["parse", "{s}"], ["inspect", "{s}"],
                                  ["kcount", "analyze", "{s}"]], ids=" ".join)
def test_a_socket_as_an_input_file_is_said_to_be_one(args, f):
    """1: "Error: SOCK: No such device or address" (open(2)'s ENXIO)."""
    s = str(f / "sock")
    line = _error([a.format(s=s) for a in args])
    assert line.endswith(f"{s}: a socket, not a regular file"), line


def test_a_socket_as_a_targets_file_is_said_to_be_one(f):
    s = str(f / "sock")
    r = _run(["targets", "--targets", s])
    assert r.exit_code == 2, r.output
    assert "a socket, not a regular file" in r.output and "No such device" not in r.output, \
        r.output


def test_a_socket_as_a_topology_is_said_to_be_one(f):
    line = _error(["learn", "--dry-run", "--kernel", str(f / "kern"), "--topology",
                   str(f / "sock")])
    assert line == (f"Error: Invalid value for '--topology': {f / 'sock'}: a socket, not a "
                    "topology dump"), line


# ------------------------------------------------ 2: kcount record --out not a file

@pytest.mark.parametrize("name, kind", [("sock", "a socket"), ("fifo", "a FIFO"),
                                        ("lfifo", "a FIFO"),
                                        ("/dev/zero", "a character device")])
def test_kcount_record_out_that_is_no_regular_file_is_refused(name, kind, f):
    """2: exit 0, the gdb command writing to it (a FIFO blocks for ever)."""
    out = name if name.startswith("/") else str(f / name)
    assert _error(["kcount", "record", "--dry-run", "--kernel", str(f / "kern"),
                   "--out", out]) == \
        f"Error: Invalid value for '--out': {out}: {kind}, not a regular file"


def test_kcount_record_out_dev_null_and_a_new_file_are_taken(f):
    for out in ("/dev/null", str(f / "new.txt")):
        r = _run(["kcount", "record", "--dry-run", "--kernel", str(f / "kern"),
                  "--out", out])
        assert r.exit_code == 0, r.output
    assert not (f / "new.txt").exists()


# ------------------------------------------------------------ 3: an empty IPv6 scope

@pytest.mark.parametrize("target", ["ssh://root@[fe80::1%]", "ssh://root@[::1%]",
                                    "ssh://root@[fe80::1%]:22"])
def test_an_empty_ipv6_scope_is_refused(target):
    """3: exit 0, the '%' dropped ("[fe80::1%%]" was refused)."""
    line = _error(["run", "--check-only", "--target", target])
    assert "an IPv6 scope is an interface name (fe80::1%em0)" in line, line


def test_an_empty_ipv6_scope_in_a_targets_file_is_refused(work):
    (work / "targets.yaml").write_text('targets:\n  b:\n    kind: box\n    host: "fe80::1%"\n')
    r = _run(["targets", "--targets", str(work / "targets.yaml")])
    assert r.exit_code == 2, r.output
    assert "an IPv6 scope is an interface name (fe80::1%em0)" in r.output, r.output


def test_a_scope_that_is_an_interface_is_still_taken():
    r = _run(["run", "--check-only", "--target", "ssh://root@[fe80::1%em0]"])
    assert r.exit_code == 0, r.output


# ------------------------------------------------------------ 4: learn --memory

@pytest.mark.parametrize("mib, said", [
    ("255", "255 MiB over 2 NUMA nodes is 127.5 MiB per node, below 128 MiB per NUMA node "
            "(at least 256 MiB)"),
    ("-1", "-1 MiB: not a memory size, below 128 MiB per NUMA node (at least 256 MiB)")])
def test_learn_memory_below_the_least_says_it_as_run_does(mib, said, f):
    """4: "guest (32 vCPUs, --memory 255): memory_mib=255: 255 MiB ...", the value
    three times; -1 said "-0.5 MiB per node"."""
    assert _error(["learn", "--dry-run", "--kernel", str(f / "kern"), "--memory", mib]) == \
        f"Error: Invalid value for '--memory': {said}"
