"""Where the output cannot go, one line says so (exit 1), never a traceback:
a full stdout (/dev/full: ENOSPC at click.echo's flush), a closed one
(``>&-``: Python's sys.stdout is None and every line would be lost). And the
C cores' build directory is a path the loader can open: an empty or a
relative ``RXL_BUILD_DIR`` loaded a bare library name (a traceback)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rxl.decide import core

RXL = [sys.executable, "-m", "rxl"]
DEAL = ["deal", "--topology", "2x4x2", "--members", "0,1"]


def _rxl(args, **kw):
    return subprocess.run(RXL + args, capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args", [DEAL, ["targets", "--targets", "/dev/null"]])
def test_a_full_stdout_is_one_line(args):
    with open("/dev/full", "w") as full:
        r = subprocess.run(RXL + args, stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.splitlines() == ["Error: cannot write the output: No space left on device"]


def test_a_closed_stdout_is_one_line():
    r = subprocess.run(RXL + DEAL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, timeout=60, preexec_fn=lambda: os.close(1))
    assert r.returncode == 1
    assert r.stderr.splitlines() == ["Error: stdout is closed: the output would go nowhere"]


def test_a_closed_pipe_stays_quiet():
    p = subprocess.Popen(RXL + ["deal", "--topology", "2x4x2", "--members",
                                ",".join(["0"] * 256)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    assert p.wait(60) in (0, 1, 120, -13) and b"Traceback" not in p.stderr.read()


@pytest.mark.parametrize("value", ["", "abs"])
def test_the_build_dir_is_absolute_or_the_checkouts(value, tmp_path, monkeypatch):
    value = str(tmp_path / "b") if value == "abs" else value
    monkeypatch.setenv("RXL_BUILD_DIR", value)
    monkeypatch.chdir(tmp_path)
    assert core.build_dir() == (Path(value) if value else core.ROOT / "build")
    r = _rxl(DEAL, cwd=tmp_path, env=dict(os.environ, RXL_BUILD_DIR=value,
                                          PYTHONPATH=str(Path(core.__file__).parents[2])))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["relative", "file", "under-a-file"])
@pytest.mark.parametrize("argv", [RXL + DEAL, RXL + ["parse", "/dev/null"],
                                  RXL + ["bench", "accept", "--dry-run"],
                                  [sys.executable, "-m", "rxl.decide.core"],
                                  [sys.executable, "-m", "rxl.decide.fuzz", "replay",
                                   "--skip-missing"]],
                         ids=["deal", "parse", "bench-accept", "core", "fuzz"])
def test_a_build_dir_that_is_relative_or_a_file_is_refused(kind, argv, tmp_path):
    """F24: RXL_BUILD_DIR=rel/build built and loaded the cores under whatever
    directory the command ran in; a file was a HostError (exit 1, "cannot create
    it: File exists") only once the library was built. Refused as RXL_WORK is:
    one line naming the variable, exit 2, before any command, nothing made."""
    (tmp_path / "f").write_text("a file\n")
    value, why = {
        "relative": ("rel/build", "not an absolute path (every command of every directory "
                     "must find the same build directory)"),
        "file": (str(tmp_path / "f"), "a file, not a directory (where the C cores are "
                 "built)"),
        "under-a-file": (str(tmp_path / "f" / "b"), f"cannot be created, {tmp_path / 'f'} "
                         "is a file")}[kind]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp_path,
                       env=dict(os.environ, RXL_BUILD_DIR=value,
                                PYTHONPATH=str(Path(core.__file__).parents[2])))
    assert r.returncode == 2, (r.returncode, r.stderr)
    prefix = "rxl: " if argv[-1] == "rxl.decide.core" else \
        "rxl fuzz: " if "rxl.decide.fuzz" in argv else "Error: "
    assert r.stderr.splitlines() == [f"{prefix}RXL_BUILD_DIR {value}: {why}"]
    assert r.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("module", ["rxl.tree.build", "rxl.tree.world"])
def test_the_tree_modules_are_no_commands(module):
    """Their __main__ blocks (a debugging aid: an IndexError without arguments, a
    plan for a tree named --help) are gone; rxl build/run --dry-run print those plans."""
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and "Traceback" not in r.stderr


def _opens_a_pipe(pid: int, skip) -> bool:
    """Whether process ``pid`` has a pipe open on an fd not in ``skip``. An fd
    it closes between the listing and the readlink (Python's start-up opens
    and closes files) is not one: that race failed this test under load."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        if fd in skip:
            continue
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                return True
        except FileNotFoundError:
            continue
    return False


@pytest.mark.parametrize("args", [["parse", "{fifo}"],
                                  ["deal", "--topology", "{fifo}", "--members", "0"],
                                  ["kcount", "analyze", "{fifo}"]])
def test_sigint_while_blocked_on_a_fifo_is_one_line_exit_130(args, tmp_path):
    """^C while a command waits for its input (a FIFO whose writer sends
    nothing): one ``Error: interrupted`` line, exit 130 (128 + SIGINT), as a
    shell reports a command SIGINT ended; click's own blank line is not printed."""
    import errno
    import signal
    import time
    # The pipe of <(...) (a named FIFO is refused before it is opened): its
    # writer stays open here and sends nothing, so the child blocks in read(2).
    rfd, writer = os.pipe()
    fifo = f"/dev/fd/{rfd}"
    # A shell without job control starts background commands with SIGINT
    # ignored, and Python then keeps it ignored: a suite run under `nohup ... &`
    # hung here. The child gets the default disposition, as a terminal's has.
    p = subprocess.Popen(RXL + [a.format(fifo=fifo) for a in args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, pass_fds=(rfd,),
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    os.close(rfd)
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(f"/proc/{p.pid}/fd/{rfd}") or not _opens_a_pipe(
                p.pid, ("0", "1", "2", str(rfd))):
            # the child has opened /dev/fd/N again (a second fd on the pipe)
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()
            time.sleep(0.05)
        time.sleep(0.3)  # past open(2), into read(2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        os.close(writer)
        if p.poll() is None:
            p.kill()
    assert (p.returncode, out, err) == (130, "", "Error: interrupted\n")


@pytest.mark.parametrize("cc,core_cc,argv", [("", None, ["cc"]), (" ", None, ["cc"]),
                                             ("gcc -m64", "", ["gcc", "-m64"]),
                                             ("", "clang -O1", ["clang", "-O1"])])
def test_an_empty_cc_is_unset(cc, core_cc, argv, monkeypatch):
    """P5: CC='' split to no word, and the first flag (-std=c99) was run as the
    compiler ("-std=c99: No such file or directory"). Empty or blank is unset."""
    monkeypatch.setenv("CC", cc)
    if core_cc is None:
        monkeypatch.delenv("RXL_CORE_CC", raising=False)
    else:
        monkeypatch.setenv("RXL_CORE_CC", core_cc)
    assert core.cc_argv() == argv
    assert core.build_argv(Path("/o.so"))[:len(argv) + 1] == argv + ["-std=c99"]


@pytest.mark.parametrize("name", ["CC", "RXL_CORE_CC"])
def test_a_cc_no_shell_could_split_is_one_line_naming_it(name, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "RXL_CORE_CC")}
    env.update({name: '"', "RXL_BUILD_DIR": str(tmp_path / "b")})
    r = _rxl(DEAL, env=env)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.splitlines() == [f'Error: {name} ": cannot be split into a command as '
                                     "a shell would (No closing quotation); set it to a "
                                     "compiler, or unset it for cc"]
