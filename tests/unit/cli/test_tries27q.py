"""Issue 27's thirteenth pass (/work/coord/nc13.md), fault 8: ``rxl learn``,
``rxl kcount setsockopt`` and ``rxl guest up`` took a FreeBSD 14.0 tree (with
14.0 kernels) and planned learnd, lbsetsock and the series' ATF tests for
freebsd14.0, whose tcp.h has no TCP_REUSPORT_LB_CPU, while ``rxl run`` refused
the tree as "not of the series' release". They now make run's release check
(rxl.tree.base.check_series_release); guest up only while the series' tests go
in (``--atf-dir ''`` boots any tree). Faults 9, 10 and 13 are test_tries27p's.

Each refusal is one ``Error:`` line, exit 2, nothing made or changed."""

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes, plain_tree

V14 = "FreeBSD 14.0-RELEASE #1 def: Mon Nov 30 2026"
V14B = "FreeBSD 14.0-RELEASE #2 ghi: Tue Dec  1 2026"
SYSCTL = "net.inet.tcp.reuseport_lb.learn"
#: run's words for a tree of another release (rxl.tree.base.classify), and BASE's.
OTHER = ("the tree is FreeBSD 14.0 (1400507), not of the series' release "
         "(patches/BASE: __FreeBSD_version 1500068)")


def _kernel(path, version):
    path.write_bytes(kernel_bytes(tail=f"\0@(#){version}\n\0{version}\n".encode()))
    return path


@pytest.fixture
def t14(work):
    (work / "adir").mkdir()
    return plain_tree(work / "t14", 14, "GENERIC")


@pytest.fixture
def t15(work):
    (work / "adir").mkdir(exist_ok=True)
    return plain_tree(work / "t15", 15, "GENERIC")


@pytest.fixture
def kern14(work):
    return _kernel(work / "kern14", V14)


@pytest.fixture
def kern14b(work):
    return _kernel(work / "kern14b", V14B)


def _learn(work, src, *args):
    return ["learn", "--dry-run", "--src", src, "--objdir", work / "adir",
            "--guest-dir", work / "g", "--learn-sysctl", SYSCTL, "--lb-cpu-opt", "1027",
            *args]


# ------------------------------------------------------ 8: rxl learn

def test_learn_refuses_a_tree_of_another_release_than_the_series(t14, kern14, kern14b, work):
    """8: exit 0, learnd built --target=x86_64-unknown-freebsd14.0 and both boots."""
    before = _files(work)
    assert _error(_learn(work, t14, "--kernel", kern14, "--pristine-kernel", kern14b)) == (
        f"Error: --src {t14}: {OTHER}; learn runs the series' learnd (TCP_REUSPORT_LB_CPU) "
        "and kernels with its world: give a tree of the series' release")
    assert _files(work) == before


def test_learn_still_takes_a_tree_of_the_series_release(t15, kernel_file, work):
    other = _kernel(work / "pristine", "FreeBSD 15.0-RELEASE #1: Fri Dec  4 2026")
    r = _run(_learn(work, t15, "--kernel", kernel_file, "--pristine-kernel", other))
    assert r.exit_code == 0, r.output
    assert f"# kernel patched: {kernel_file} (given)" in r.stdout


# ------------------------------------------------------ 8: rxl kcount setsockopt

def _setsockopt(work, src, kernel):
    return ["kcount", "setsockopt", "--dry-run", "--kernel", kernel, "--src", src,
            "--objdir", work / "adir", "--out", work / "out" / "s"]


def test_setsockopt_refuses_a_tree_of_another_release_than_the_series(t14, kern14, work):
    """8: exit 0, lbsetsock compiled for freebsd14.0 (no TCP_REUSPORT_LB_CPU there)."""
    before = _files(work)
    assert _error(_setsockopt(work, t14, kern14)) == (
        f"Error: Invalid value for '--src': {t14}: {OTHER}; lbsetsock sets the series' "
        "TCP_REUSPORT_LB_CPU, which only its release has: give a tree of the series' "
        "release")
    assert _files(work) == before


def test_setsockopt_still_takes_a_tree_of_the_series_release(t15, kernel_file, work):
    r = _run(_setsockopt(work, t15, kernel_file))
    assert r.exit_code == 0, r.output
    assert "--target=x86_64-unknown-freebsd15.0" in r.stdout
    assert not (work / "out").exists()


# ------------------------------------------------------ 8: rxl guest up

def test_guest_up_refuses_another_release_when_the_series_tests_go_in(t14, kern14, work):
    """8: exit 0, the series' ATF tests (TCP_REUSPORT_LB_CPU) planned against the 14.0
    userland, for a guest rxl run --target refuses as a FreeBSD 14 target."""
    before = _files(work)
    assert _error(["guest", "up", "--dry-run", "--src", t14, "--kernel", kern14,
                   "--build"]) == (
        f"Error: Invalid value for '--src': {t14}: {OTHER}; guest up builds the series' "
        "ATF tests (TCP_REUSPORT_LB_CPU) against it and rxl run --target takes only a "
        "target of that release: give a tree of it, or --atf-dir '' for FreeBSD's own "
        "tests only")
    assert _files(work) == before


def test_guest_up_boots_any_tree_without_the_series_tests(t14, kern14, work):
    r = _run(["guest", "up", "--dry-run", "--src", t14, "--kernel", kern14, "--build",
              "--atf-dir", ""])
    assert r.exit_code == 0, r.output
    assert f"({kern14} as its kernel)" in r.stdout
