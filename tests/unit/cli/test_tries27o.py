"""Issue 27's twelfth pass (docs/results/newcomer.md, "Twelfth pass"), fault 13
of /work/coord/nc12.md: ``rxl learn``, ``rxl guest up`` and ``rxl kcount
setsockopt`` took a FreeBSD 14.0 kernel with a 15.0 tree (exit 0, a plan to
boot it with the 15.0 userland), and learn a --pristine-kernel that is its
--kernel (a report comparing a kernel with itself). ``rxl run`` refused both
(rxl.tree.build: check_kernel_release, check_kernel_pair); every command
that boots a given kernel with a tree's userland now runs those checks. Each
refusal is one ``Error:`` line, exit 2, nothing made."""

import shutil

import pytest

from clierror import error_line as _error, files as _files, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes, plain_tree

#: A 14.0 kernel's newvers.sh version string (version[], rxl.tree.elf.kernel_version).
V14 = "FreeBSD 14.0-RELEASE #1 def: Mon Nov 30 2026"
SYSCTL = "net.inet.tcp.reuseport_lb.learn"


@pytest.fixture
def kern14(work):
    path = work / "kern14"
    path.write_bytes(kernel_bytes(tail=f"\0@(#){V14}\n\0{V14}\n".encode()))
    return path


@pytest.fixture
def fsrc(work):
    """A 15.0 tree (the rebranded base's version files, __FreeBSD_version 1500068)
    that passes for a FreeBSD tree (tools/build/make.py), and an objdir."""
    src = plain_tree(work / "fsrc", 15)
    (work / "adir").mkdir()
    return src


def _release_error(option, kern14, fsrc):
    return (f"Error: Invalid value for '{option}': {kern14}: a FreeBSD 14.0 kernel ({V14}), "
            f"but --src {fsrc} is FreeBSD 15.0 (__FreeBSD_version 1500068): the run boots "
            "it with that release's userland and test programs; give a kernel built from "
            "the tree")


def _learn(work, fsrc, *args):
    return ["learn", "--dry-run", "--src", fsrc, "--objdir", work / "adir",
            "--guest-dir", work / "g", "--learn-sysctl", SYSCTL, *args]


# ------------------------------------------------------ rxl learn

@pytest.mark.parametrize("option", ["--kernel", "--pristine-kernel"])
def test_learn_refuses_a_kernel_of_another_release_than_src(option, kern14, kernel_file,
                                                            fsrc, work):
    """13: exit 0, '# boot pristine: kernel .../kern14' with the 15.0 tree's world."""
    other = "--pristine-kernel" if option == "--kernel" else "--kernel"
    before = _files(work)
    assert _error(_learn(work, fsrc, option, kern14, other, kernel_file)) == \
        _release_error(option, kern14, fsrc)
    assert _files(work) == before


def test_learn_refuses_one_file_for_both_kernels(kernel_file, fsrc, work):
    """13: --kernel K --pristine-kernel K planned both boots of K, and the
    report would compare a kernel with itself."""
    before = _files(work)
    assert _error(_learn(work, fsrc, "--kernel", kernel_file,
                         "--pristine-kernel", kernel_file)) == (
        f"Error: Invalid value for '--pristine-kernel': {kernel_file}: the same file as "
        "--kernel: learn's pristine runs would boot the series' kernel and the report "
        "would compare that kernel with itself; give the base's kernel")
    assert _files(work) == before


def test_learn_refuses_a_copy_of_the_kernel_as_the_pristine_one(kernel_file, fsrc, work):
    copy = work / "copy"
    shutil.copyfile(kernel_file, copy)
    before = _files(work)
    assert _error(_learn(work, fsrc, "--kernel", kernel_file, "--pristine-kernel", copy)) == (
        f"Error: Invalid value for '--pristine-kernel': {copy}: a byte-identical copy of "
        f"--kernel ({kernel_file}): learn's pristine runs would boot the series' kernel "
        "and the report would compare that kernel with itself; give the base's kernel")
    assert _files(work) == before


def test_learn_still_takes_two_kernels_of_the_trees_release(kernel_file, fsrc, work):
    other = work / "pristine"
    other.write_bytes(kernel_bytes(tail=b"\0FreeBSD 15.0-RELEASE #1: Fri Dec  4 2026\n"))
    r = _run(_learn(work, fsrc, "--kernel", kernel_file, "--pristine-kernel", other))
    assert r.exit_code == 0, r.output
    assert f"# kernel patched: {kernel_file} (given)" in r.stdout
    assert f"# kernel pristine: {other} (given)" in r.stdout


# ------------------------------------------------------ rxl guest up

def test_guest_up_refuses_a_kernel_of_another_release_than_src(kern14, fsrc, work):
    """13: exit 0, the sshd userland's build of the 15.0 tree and a root with kern14."""
    before = _files(work)
    assert _error(["guest", "up", "--dry-run", "--src", fsrc, "--kernel", kern14,
                   "--build"]) == _release_error("--kernel", kern14, fsrc)
    assert _files(work) == before


def test_guest_up_still_takes_a_kernel_of_the_trees_release(kernel_file, fsrc, work):
    r = _run(["guest", "up", "--dry-run", "--src", fsrc, "--kernel", kernel_file, "--build"])
    assert r.exit_code == 0, r.output
    assert f"({kernel_file} as its kernel)" in r.stdout


# ------------------------------------------------------ rxl kcount setsockopt

def _setsockopt(work, fsrc, kernel):
    return ["kcount", "setsockopt", "--dry-run", "--kernel", kernel, "--src", fsrc,
            "--objdir", work / "adir", "--out", work / "out" / "s"]


def test_setsockopt_refuses_a_kernel_of_another_release_than_src(kern14, fsrc, work):
    """13: exit 0, lbsetsock compiled for freebsd15.0 and a root booting kern14."""
    before = _files(work)
    assert _error(_setsockopt(work, fsrc, kern14)) == _release_error("--kernel", kern14, fsrc)
    assert _files(work) == before


def test_setsockopt_still_takes_a_kernel_of_the_trees_release(kernel_file, fsrc, work):
    r = _run(_setsockopt(work, fsrc, kernel_file))
    assert r.exit_code == 0, r.output
    assert f"kernel {kernel_file}," in r.stdout
    assert not (work / "out").exists()
