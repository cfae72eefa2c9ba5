"""rxl run --check-only (what make run runs before installing anything)
refuses everything the dry run or a later stage would refuse, and says what
the run will do with the tree."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from fakefreebsd import kernel_bytes
from test_run import _fake_series

URL = "ssh://root@192.0.2.10"


def _run(*args):
    return CliRunner().invoke(main, ["run", *map(str, args)])


def _refused(r, opt, words):
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, (r.exit_code, r.output)
    (line,) = r.stderr.splitlines()
    assert opt in line and words in line, line
    return line


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    monkeypatch.delenv("RXL_BASE_URL", raising=False)
    return tmp_path


@pytest.mark.parametrize("make,words", [
    ("missing", "no such directory"), ("file", "not a directory"),
    ("empty", "no executable"), ("", "empty"),
])
def test_programs_that_cannot_be_run(make, words, work):
    d = work / "progs"
    if make == "file":
        d.write_text("x")
    elif make == "empty":
        d.mkdir()
        (d / "README").write_text("not a program")
    arg = "" if make == "" else d
    for mode in ("--check-only", "--dry-run"):
        _refused(_run("--target", URL, "--programs", arg, mode),
                 "'--programs'", words)


def test_a_damaged_harness_key_is_refused_before_anything(work):
    (work / "work" / "ssh").mkdir(parents=True)
    (work / "work" / "ssh" / "id_ed25519").write_text("garbage\n")
    progs = work / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    _refused(_run("--target", URL, "--programs", progs, "--check-only"), "harness key",
             "not a private key")


@pytest.mark.parametrize("opt", ["--kernel", "--pristine-kernel", "--pristine-src", "--src",
                                 "--out", "--guest-dir", "--objdir", "--base-url",
                                 "--targets"])
def test_an_empty_path_is_refused_not_ignored(opt, work):
    extra = ["--target", "guest"] if opt == "--targets" else []
    _refused(_run(opt, "", *extra, "--check-only"), f"'{opt}'", "empty")


@pytest.mark.parametrize("make,words", [("missing", "no such directory"),
                                        ("plain", "not a git repository"),
                                        ("other", "does not have the base commit")])
def test_a_base_url_that_cannot_give_the_base(make, words, work, monkeypatch):
    src, base = _fake_series(work, monkeypatch, applied=False)
    d = work / "base-repo"
    if make == "plain":
        d.mkdir()
    elif make == "other":
        from fakefreebsd import _tree
        _tree(d, salt="other")
    _refused(_run("--base-url", d, "--check-only"), "'--base-url'", words)
    monkeypatch.setenv("RXL_BASE_URL", str(d))
    _refused(_run("--check-only"), "RXL_BASE_URL", words)


def test_a_base_url_that_holds_the_base_passes(work, monkeypatch):
    src, base = _fake_series(work, monkeypatch, applied=False)
    r = _run("--base-url", src, "--check-only")
    assert r.exit_code == 0, r.output
    assert f"will be fetched from {src}" in r.stdout


def test_a_base_only_src_with_a_target_gets_the_series_applied(work, monkeypatch):
    """The test programs are built from --src: at the base they would be built
    against the unpatched headers. The series is applied in a work clone, as
    for the own guest, and the check says so."""
    src, base = _fake_series(work, monkeypatch, applied=False)
    r = _run("--src", src, "--target", URL, "--check-only")
    assert r.exit_code == 0, r.output
    assert "the series will be applied in a work clone" in r.stdout
    assert "the test programs are built from it" in r.stdout
    r = _run("--src", src, "--target", URL, "--dry-run", "--out", work / "o")
    assert r.exit_code == 0, r.output
    assert "git clone -q --shared --no-checkout" in r.stdout
    world = r.stdout.split("# world:")[1]
    assert f"{work}/work/src-{base[:12]}" in world


def test_a_target_without_src_or_programs_fetches_and_applies(work, monkeypatch):
    """It crashed in the world stage (no tree) after check-only passed."""
    src, base = _fake_series(work, monkeypatch, applied=False)
    r = _run("--target", URL, "--base-url", src, "--dry-run", "--out", work / "o")
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 0, r.output
    assert f"src-{base[:12]}" in r.stdout.split("# world:")[1]


def test_a_src_that_is_no_tree_is_refused_with_a_target(work):
    r = _run("--src", work / "nowhere", "--target", URL, "--check-only")
    _refused(r, "'--src'", "no such directory")


def test_install_kernel_of_a_file_that_is_no_kernel(work):
    progs = work / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    k = work / "kernel"
    k.write_bytes(kernel_bytes(tail=b"no version string"))  # a kernel's header only
    for mode in ("--check-only", "--dry-run"):
        r = _run("--target", URL, "--programs", progs, "--install-kernel", "--kernel", k, mode)
        _refused(r, "'--kernel'", "not a FreeBSD kernel")


#: Files that are no FreeBSD amd64 kernel, and what the refusal says each is.
NOT_AMD64_KERNELS = [
    (b"#!/bin/sh\necho hi\n", "not an ELF file (text starting '#!/bin/sh')"),
    (b"PK\x03\x04\x14\x00\x00\x00\x08",
     "not an ELF file (its first bytes 50 4b 03 04 14 00 00 00)"),
    (b"\x7fELF", "an ELF header cut short or damaged"),
    (kernel_bytes(osabi=0), "an ELF 64-bit LSB executable, x86-64, OS/ABI SYSV, "
                            "no FreeBSD brand note"),
    (kernel_bytes(osabi=3), "an ELF 64-bit LSB executable, x86-64, OS/ABI Linux, "
                            "no FreeBSD brand note"),
    (kernel_bytes(machine=183), "an ELF 64-bit LSB executable, AArch64, OS/ABI FreeBSD"),
    (kernel_bytes(bits=32, machine=3), "an ELF 32-bit LSB executable, i386, OS/ABI FreeBSD"),
    (kernel_bytes(etype=1), "an ELF 64-bit LSB relocatable object (a module?), x86-64"),
]


def _own_targets(work):
    """A targets file naming an own-guest shape, ``big``."""
    f = work / "targets.yaml"
    f.write_text("shapes:\n  two: {sockets: 1, dies: 1, cores: 2, threads: 1, "
                 "numa_nodes: 1, memory_mib: 1024}\ntargets:\n  big: {kind: qemu, shape: two}\n")
    return ["--targets", f, "--target", "big"]


@pytest.mark.parametrize("data,what", NOT_AMD64_KERNELS,
                         ids=["script", "zip", "short-elf", "sysv", "linux", "arm64", "i386",
                              "module"])
@pytest.mark.parametrize("where", ["own", "pristine", "targets-guest", "ssh"])
def test_a_kernel_that_is_no_freebsd_amd64_kernel_is_refused_up_front(data, what, where, work):
    """F10: a --kernel that is not a FreeBSD amd64 kernel (ELF64, x86-64, an executable,
    OS/ABI FreeBSD or the FreeBSD brand note) passed --check-only and --dry-run on
    every machine and failed at the boot: the one kernel check refuses it, naming
    the option and saying what the file is."""
    k = work / "k"
    k.write_bytes(data)
    progs = work / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    opt = "--pristine-kernel" if where == "pristine" else "--kernel"
    args = {"own": [], "pristine": [], "targets-guest": _own_targets(work),
            "ssh": ["--target", URL, "--programs", progs, "--install-kernel"]}[where]
    for mode in ("--check-only", "--dry-run"):
        line = _refused(_run(*args, opt, k, mode), f"'{opt}'", what)
        assert line == (f"Error: Invalid value for '{opt}': {k}: {what}"
                        + line.partition(what)[2])
        assert line.endswith("not a FreeBSD amd64 kernel" + (
            "" if what.startswith(("not an ELF", "an ELF header")) else
            " (an ELF64 x86-64 executable, OS/ABI FreeBSD or its brand note)")), line


@pytest.mark.parametrize("data", [kernel_bytes(tail=b""), kernel_bytes(note=True, tail=b""),
                                  kernel_bytes(tail=b"\0FreeBSD 15.0-RELEASE\n")],
                         ids=["header", "brand-note", "no-build-number"])
@pytest.mark.parametrize("where", ["own", "pristine", "targets-guest", "ssh"])
def test_a_freebsd_program_with_no_kernel_version_string_is_refused_everywhere(data, where,
                                                                               work):
    """P9: a static FreeBSD amd64 ET_EXEC without newvers.sh's version string
    passed --check-only and --dry-run for the own guest; only --target with
    --install-kernel refused it.  One kernel check for every path."""
    k = work / "k"
    k.write_bytes(data)
    progs = work / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    opt = "--pristine-kernel" if where == "pristine" else "--kernel"
    args = {"own": [], "pristine": [], "targets-guest": _own_targets(work),
            "ssh": ["--target", URL, "--programs", progs, "--install-kernel"]}[where]
    for mode in ("--check-only", "--dry-run"):
        line = _refused(_run(*args, opt, k, mode), f"'{opt}'", "not a FreeBSD kernel")
        assert line.startswith(f"Error: Invalid value for '{opt}': {k}: an ELF 64-bit LSB "
                               "executable, x86-64, OS/ABI FreeBSD"), line
        assert line.endswith("; it holds no '<TYPE> N.N-<BRANCH> #N' version string "
                             "(sys/conf/newvers.sh): not a FreeBSD kernel"), line


@pytest.mark.parametrize("link", [False, True], ids=["same-path", "a-link-to-it"])
def test_one_kernel_file_for_both_sides_is_refused(link, work):
    """The same file as --kernel and --pristine-kernel passed --check-only: the
    series' cases would pass on both boots and the verdict be FAIL."""
    k = work / "k"
    k.write_bytes(kernel_bytes())
    pk = k
    if link:
        pk = work / "pk"
        pk.symlink_to(k)
    line = _refused(_run("--kernel", k, "--pristine-kernel", pk, "--check-only"),
                    "'--pristine-kernel'", "the same file as --kernel")
    assert line == (f"Error: Invalid value for '--pristine-kernel': {pk}: the same file as "
                    f"--kernel{f' ({k})' if link else ''}: the run boots the patched and the "
                    "pristine kernel to compare them, and the series' cases would pass on "
                    "both (the verdict would be FAIL); give the base's kernel")


@pytest.mark.parametrize("mode", ["--check-only", "--dry-run"])
def test_a_byte_identical_copy_of_the_kernel_as_the_pristine_one_is_refused(mode, work):
    """A copy of --kernel boots the patched kernel as the pristine one, as
    the same file would: compared by contents, not only by inode."""
    k, pk = work / "k", work / "pk"
    k.write_bytes(kernel_bytes())
    pk.write_bytes(kernel_bytes())
    line = _refused(_run("--kernel", k, "--pristine-kernel", pk, mode),
                    "'--pristine-kernel'", "a byte-identical copy of --kernel")
    assert line.startswith(f"Error: Invalid value for '--pristine-kernel': {pk}: a "
                           f"byte-identical copy of --kernel ({k}): the run boots the "), line


def test_a_real_elf_of_this_host_is_no_kernel(work):
    """The running Python, a Linux ELF program, is named as one and refused."""
    import sys
    from pathlib import Path
    exe = Path(sys.executable).resolve()
    line = _refused(_run("--kernel", exe, "--check-only"), "'--kernel'",
                    f"{exe}: an ELF 64-bit LSB ")
    assert "x86-64" in line or "AArch64" in line
    assert "no FreeBSD brand note, not a FreeBSD amd64 kernel" in line


@pytest.mark.parametrize("data", [kernel_bytes(), kernel_bytes(osabi=0, note=True)],
                         ids=["osabi-freebsd", "brand-note"])
def test_a_freebsd_amd64_kernel_passes_the_check(data, work):
    """A FreeBSD amd64 kernel passes: OS/ABI FreeBSD (ld -m elf_x86_64_fbsd) or,
    with OS/ABI SYSV, the FreeBSD brand note."""
    k, pk = work / "k", work / "pk"
    k.write_bytes(data)
    pk.write_bytes(data + b"pristine")  # another kernel: a copy is refused
    for args in ([], _own_targets(work)):
        r = _run(*args, "--kernel", k, "--pristine-kernel", pk, "--check-only")
        assert r.exit_code == 0, r.output


@pytest.mark.parametrize("opt", ["--kernel", "--pristine-kernel"])
@pytest.mark.parametrize("make,words", [("empty", "an empty file, no kernel"),
                                        ("dir", "not a regular file, no kernel"),
                                        ("missing", "no such kernel")])
def test_a_kernel_that_cannot_be_one_is_refused_first(opt, make, words, work):
    """An empty --kernel (or --pristine-kernel) file passed --check-only and
    --dry-run, and failed only at boot: preflight makes rxl guest up's check."""
    k = work / "k"
    if make == "empty":
        k.write_bytes(b"")
    elif make == "dir":
        k.mkdir()
    for mode in ("--check-only", "--dry-run"):
        _refused(_run(opt, k, mode), f"'{opt}'", words)
