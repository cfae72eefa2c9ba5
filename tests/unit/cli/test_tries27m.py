"""Issue 27, the three faults the short eleventh pass left open, not counted
(docs/results/newcomer.md, "Eleventh pass, short": "Still as the tenth pass
left them" and "Questionable"), each fixed for its whole kind:

1. a compiler that is no program (``bench accept --cc /dev/zero``, a
   directory, a missing path, a name not on PATH; the same as ``$CC``, the
   option's default) was taken under ``--dry-run`` (exit 0) and failed at
   run time (exit 1): it is bad input, refused before anything runs;
2. ``rxl inspect`` of an empty file said "no group ...", exit 0: zero bytes
   are no dump of the view (sysctl(8) prints a newline for an empty string:
   sbin/sysctl/sysctl.c, show_var() and parse()), so an empty input is a
   command that printed nothing; a view of no group (a blank line) still is
   one. The other readers of a file already refused an empty one (pinned
   here); an empty targets file is, as it was, the empty set of targets;
3. a named FIFO with no writer blocked every reader of an input file for
   ever (its open(2) waits for a writer): a named FIFO is refused before it
   is opened, by the one input-kind check (options.stream_reason); the pipe
   ``<(...)`` gives (``/dev/fd/N``, an anonymous pipe, whose open never
   waits) and ``-`` are read as before.

Each bad input: one ``Error:`` line, exit 2, nothing changed, no traceback.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes
from rxl.errors import show
from rxl.guest.targets import BUILTIN_TARGETS

DATA = Path(__file__).resolve().parents[2] / "data"
HARNESS = Path(__file__).resolve().parents[3] / "harness"
TOPOLOGY = DATA / "topology" / "qemu-2s-numa.xml"
CONSOLE = DATA / "console" / "synthetic-pass.log"
VIEW = "group port 8080 af inet members 1 map 16\nmember 0 tag 0 explicit\n" \
       "cpu 0 offset 0 slots 16\n"
LOOP = "a symlink loop, it cannot be resolved (Too many levels of symbolic links)"


def _tree(root: Path):
    """Every path under ``root`` with its size, for 'nothing changed'."""
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else -1)
                  for p in root.rglob("*"))


# ------------------------------------------------------------ 1: a compiler that is no program

@pytest.fixture
def cc(work):
    """In ``work``: a file that is not executable, a symlink loop, a FIFO, an
    empty build directory; ``work/absent`` is not there."""
    (work / "plain").write_text("int main;\n")
    os.symlink("loop", work / "loop")
    os.mkfifo(work / "fifo")
    (work / "b").mkdir()
    return work


#: (--cc value, what the message says after it); "{w}": the fixture's directory.
BAD_CC = {
    "device": ("/dev/zero", "/dev/zero: a character device, not a compiler"),
    "directory": ("{w}", "{w}: a directory, not a compiler"),
    "missing": ("{w}/absent", "{w}/absent: no such file"),
    "under-a-file": ("{w}/plain/cc", "{w}/plain/cc: no such file"),
    "not-executable": ("{w}/plain", "{w}/plain: not executable"),
    "loop": ("{w}/loop", "{w}/loop: " + LOOP),
    "fifo": ("{w}/fifo", "{w}/fifo: a FIFO, not a compiler"),
    "not-on-path": ("rxl-no-such-cc", "rxl-no-such-cc: not found on PATH"),
    "first-word": ("rxl-no-such-cc -O1", "rxl-no-such-cc -O1: rxl-no-such-cc: not found on "
                                         "PATH"),
}


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("kind", BAD_CC)
def test_bench_accept_cc_that_is_no_compiler_is_refused(kind, dry, cc):
    """1: --dry-run printed the plan with it (exit 0); a run failed at the
    compile (exit 1, "Permission denied"). Now bad input, before anything."""
    value, why = (x.replace("{w}", str(cc)) for x in BAD_CC[kind])
    before = _tree(cc)
    line = _error(["bench", "accept", *(["--dry-run"] if dry else []), "--setup", "noflag",
                   "--repetitions", "1", "--build-dir", cc / "b", "--cc", value])
    assert line == f"Error: Invalid value for '--cc': {why}", line
    assert _tree(cc) == before


@pytest.mark.parametrize("kind", ["device", "missing", "not-on-path", "first-word"])
def test_bench_accept_cc_from_the_environment_is_checked_too(kind, cc, monkeypatch):
    """$CC is --cc's default: the same check, the message naming CC."""
    value, why = (x.replace("{w}", str(cc)) for x in BAD_CC[kind])
    monkeypatch.setenv("CC", value)
    line = _error(["bench", "accept", "--dry-run", "--setup", "noflag", "--repetitions", "1",
                   "--build-dir", cc / "b"])
    assert line == f"Error: CC {why} (bench accept's compiler when --cc is not given)", line


@pytest.mark.parametrize("value", ["cc", "gcc -O1", "/usr/bin/cc", "cc -std=c11"])
def test_bench_accept_cc_that_is_a_program_passes(value, cc):
    r = _run(["bench", "accept", "--dry-run", "--setup", "noflag", "--repetitions", "1",
              "--build-dir", cc / "b", "--cc", value])
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[0].startswith(f"{value} -std=c99 "), r.stdout


def test_bench_accept_a_blank_cc_in_the_environment_is_unset(cc, monkeypatch):
    """CC=' ' is unset, as the C cores' build takes it (it said "--cc is empty")."""
    monkeypatch.setenv("CC", " ")
    r = _run(["bench", "accept", "--dry-run", "--setup", "noflag", "--repetitions", "1",
              "--build-dir", cc / "b"])
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("cc -std=c99 "), r.stdout


# ------------------------------------------------------------------ 2: an empty input

@pytest.fixture
def empty(work):
    (work / "empty").write_bytes(b"")
    (work / "kern").write_bytes(kernel_bytes())
    return work / "empty"


@pytest.mark.parametrize("json", [[], ["--json"]], ids=["table", "json"])
def test_inspect_of_an_empty_file_is_refused(json, empty):
    """2: "no group with a map, a tag or learning", exit 0."""
    assert _error(["inspect", *json, empty]) == (
        f"Error: {empty}: empty (no bytes): not a groups view or a console log "
        "(sysctl -n net.inet.tcp.reuseport_lb.groups prints a line even for no group)")


def test_inspect_of_empty_stdin_is_refused(empty):
    r = _run(["inspect", "-"], input=b"")
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.splitlines() == [
        "Error: -: empty (no bytes): not a groups view or a console log "
        "(sysctl -n net.inet.tcp.reuseport_lb.groups prints a line even for no group)"]


@pytest.mark.parametrize("text", ["\n", "\n\n", "  \n"])
def test_inspect_of_a_view_of_no_group_says_so(text, empty):
    """What the sysctl prints when no socket is in a group: one newline. It
    is a view; the old words ("no group with a map, a tag or learning")
    suggested groups left out, which the view never does."""
    empty.write_text(text)
    r = _run(["inspect", empty])
    assert r.exit_code == 0 and r.stderr == "", r.output
    assert r.stdout == "no load-balancing group (the view is empty)\n"
    r = _run(["inspect", "--json", empty])
    assert r.exit_code == 0 and r.stdout == "[]\n", r.output


@pytest.mark.parametrize("args, why", [
    (["parse", "{e}"], "{e}: no ==RXL== BEGIN: not a console log"),
    (["learn", "--log", "{e}"], "{e}: no ==RXL== LEARN line: not a console log of rxl learn"),
    (["kcount", "analyze", "{e}"], "{e}: not a kcount trace: not JSON (expecting value "
                                   "at line 1, column 1)"),
    (["kcount", "sites", "{e}", "--kernel", "{k}"], "{e}: not a kcount trace: not JSON "
                                                    "(expecting value at line 1, column 1)"),
    (["kcount", "diff", "{e}", "{k}", "{e}", "{k}"], "{e}: not a kcount trace: not JSON "
                                                     "(expecting value at line 1, column 1)"),
    (["kcount", "table", "--trace", "accept-off", "pristine", "{e}"],
     "{e}: not a kcount trace: not JSON (expecting value at line 1, column 1)"),
    (["deal", "--topology", "{e}", "--members", "0"], "Invalid value for '--topology': {e}: "
     "no <groups> or <group> element found (expected sysctl -n kern.sched.topology_spec "
     "output)"),
    (["spread", "--topology", "{e}"], "Invalid value for '--topology': {e}: no <groups> or "
     "<group> element found (expected sysctl -n kern.sched.topology_spec output)"),
    (["outcomes", "--topology", "{e}"], "Invalid value for '--topology': {e}: no <groups> or "
     "<group> element found (expected sysctl -n kern.sched.topology_spec output)"),
], ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else "")
def test_every_other_reader_refuses_an_empty_file(args, why, empty):
    """The kind, across every command that reads a file: each already refused
    an empty one in one line (pinned, so none drifts back to inspect's fault)."""
    k = empty.parent / "kern"
    fill = lambda s: s.replace("{e}", str(empty)).replace("{k}", str(k))  # noqa: E731
    assert _error([fill(a) for a in args]) == "Error: " + fill(why)


def test_an_empty_targets_file_is_the_empty_set_of_targets(empty):
    """Decided, not a fault: a targets file is YAML, whose empty document is
    no target; a file of comments only is the same document, and a missing
    default file is the empty set too (rxl.guest.targets.load). Each lists
    the built-in targets only, exit 0."""
    comments = empty.parent / "comments.yaml"
    comments.write_text("# no targets yet\n")
    listed = []
    for args in (["--targets", empty], ["--targets", comments], []):
        r = _run(["targets", *args])
        assert r.exit_code == 0 and r.stderr == "", r.output
        listed.append(r.stdout)
    assert listed[0] == listed[1] == listed[2]
    assert [ln.split()[0] for ln in listed[0].splitlines()] == list(BUILTIN_TARGETS)


# ------------------------------------------------- 3: a named FIFO with no writer

def _rxl(args, timeout=60, **kw):
    """``rxl ARGS`` in a child (a read that blocks must not block the suite):
    (exit status, stdout, stderr); a child still running at ``timeout`` is
    killed and the test fails saying it hung.  A blocked open never returns,
    so any bound tells it; 60 s, not 10, because a niced child on a host busy
    with a kernel build waited 4 s for its imports alone (load average 5)."""
    env = dict(os.environ, PYTHONPATH=str(HARNESS))
    try:
        r = subprocess.run([sys.executable, "-m", "rxl", *map(str, args)], capture_output=True,
                           text=True, timeout=timeout, env=env, **kw)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rxl {' '.join(map(str, args))}: still running after {timeout} s "
                    "(blocked opening the FIFO)")
    return r.returncode, r.stdout, r.stderr


@pytest.fixture
def fifo(work):
    """In ``work``: a FIFO nothing writes to, a link to it, a kernel."""
    os.mkfifo(work / "fifo")
    os.symlink("fifo", work / "lfifo")
    (work / "kern").write_bytes(kernel_bytes())
    return work


WAITS = "a FIFO, not a regular file (its open waits for a writer; give a file, - or <(...))"
#: The same for an input that takes no stdin (nc15 fault 27).
WAITS_NO_STDIN = "a FIFO, not a regular file (its open waits for a writer; give a file or <(...))"
TOPO_WAITS = "a FIFO, not a topology dump (its open waits for a writer; give a file, - or <(...))"
FIFO_READERS = {
    "parse": (["parse", "{f}"], "Invalid value for LOG: {f}: " + WAITS),
    "inspect": (["inspect", "{f}"], "Invalid value for SOURCE: {f}: " + WAITS),
    "learn --log": (["learn", "--log", "{f}"], "Invalid value for '--log': {f}: " + WAITS),
    "kcount analyze": (["kcount", "analyze", "{f}"],
                       "Invalid value for 'TRACES...': {f}: " + WAITS),
    "kcount sites": (["kcount", "sites", "{f}", "--kernel", "{k}"],
                     "Invalid value for 'TRACE': {f}: " + WAITS_NO_STDIN),
    "targets": (["targets", "--targets", "{f}"],
                "{f}: " + WAITS_NO_STDIN + ": not a targets file"),
    "deal": (["deal", "--topology", "{f}", "--members", "0"],
             "Invalid value for '--topology': {f}: " + TOPO_WAITS),
    "spread": (["spread", "--topology", "{f}"],
               "Invalid value for '--topology': {f}: " + TOPO_WAITS),
    "outcomes": (["outcomes", "--topology", "{f}"],
                 "Invalid value for '--topology': {f}: " + TOPO_WAITS),
    "learn --topology": (["learn", "--dry-run", "--kernel", "{k}", "--topology", "{f}"],
                         "Invalid value for '--topology': {f}: " + TOPO_WAITS),
    "bench --topology": (["bench", "accept", "--dry-run", "--setup", "ebpf-deal",
                          "--topology", "{f}"],
                         "Invalid value for '--topology': {f}: " + TOPO_WAITS),
}


@pytest.mark.parametrize("name", ["fifo", "lfifo"], ids=["fifo", "link-to-fifo"])
@pytest.mark.parametrize("reader", FIFO_READERS)
def test_a_named_fifo_with_no_writer_is_refused_at_once(reader, name, fifo):
    """3: each blocked for ever in open(2) (the pass's `timeout 20`, exit 124)."""
    args, why = FIFO_READERS[reader]
    f, k = fifo / name, fifo / "kern"
    fill = lambda s: s.replace("{f}", str(f)).replace("{k}", str(k))  # noqa: E731
    code, out, err = _rxl([fill(a) for a in args])
    lines = err.splitlines()
    if reader == "targets":  # its mistakes are listed on stdout first, then the one line
        assert code == 2 and lines == [fill("Error: {f}: 1 mistake (listed above)")], \
            (code, out, err)
        assert out.splitlines() == [fill(why)], out
        return
    assert (code, out, lines) == (2, "", ["Error: " + fill(why)]), (code, out, err)


@pytest.fixture
def series(work):
    """A git work tree, and a patches directory holding the series' BASE and
    its first three patches."""
    subprocess.run(["git", "init", "-q", str(work / "src")], check=True)
    pt = work / "pt"
    pt.mkdir()
    for p in sorted((HARNESS.parent / "patches").iterdir()):
        if p.name == "BASE" or p.name[:4] in ("0001", "0002", "0003"):
            (pt / p.name).write_bytes(p.read_bytes())
    return work


@pytest.mark.parametrize("cmd, which, noun", [
    ("apply", "BASE", "the series' BASE file"), ("export", "BASE", "the series' BASE file"),
    ("apply", "0004-tcp-x.patch", "a patch file")])
def test_a_series_file_that_is_a_named_fifo_is_refused_at_once(cmd, which, noun, series):
    """The kind, beyond the input options: series apply/export read --patches'
    BASE (and apply its NNNN-*.patch files) before anything runs; a FIFO
    there blocked for ever too. Refused before it is opened."""
    pt = series / "pt"
    (pt / which).unlink(missing_ok=True)
    os.mkfifo(pt / which)
    code, out, err = _rxl(["series", cmd, "--src", series / "src", "--patches", pt])
    assert (code, out, err.splitlines()) == (
        2, "", [f"Error: Invalid value for '--patches': {show(str(pt / which))}: a FIFO, not "
                f"{noun}"])


def _pipe_path(data: bytes):
    """An anonymous pipe holding ``data`` (its writer closed), as ``<(...)``
    gives one: (read fd, its /dev/fd path)."""
    r, w = os.pipe()
    os.write(w, data)
    os.close(w)
    return r, f"/dev/fd/{r}"


@pytest.mark.parametrize("args, data, expect", [
    (["parse", "{p}"], CONSOLE.read_bytes(), "so_reuseport_lb_test:basic_ipv4"),
    (["inspect", "{p}"], VIEW.encode(), "port 8080 (inet): 1 member, map 16"),
    (["deal", "--topology", "{p}", "--members", "0"], TOPOLOGY.read_bytes(), "member"),
    (["targets", "--targets", "{p}"], b"targets:\n  b: {kind: box, host: h.example}\n",
     "ssh://root@h.example"),
], ids=lambda v: v[0] if isinstance(v, list) else "")
def test_the_pipe_of_process_substitution_is_read(args, data, expect, work):
    """``--topology <(ssh host sysctl -n ...)`` (the help's own example), and
    ``inspect <(...)``: bash hands rxl /dev/fd/N, an anonymous pipe, whose
    open never waits. Read as before."""
    r, path = _pipe_path(data)
    try:
        code, out, err = _rxl([a.replace("{p}", path) for a in args], pass_fds=(r,))
    finally:
        os.close(r)
    assert code == 0 and expect in out, (code, out, err)


def test_a_named_fifo_is_no_input_but_stdin_is(fifo):
    """options.check_input, the one check: a named FIFO is refused, ``-`` passes."""
    from rxl.cli import options
    from rxl.errors import BadOption
    options.check_input("-")
    with pytest.raises(BadOption) as exc:
        options.check_input(str(fifo / "fifo"), "LOG")
    assert exc.value.message == f"{fifo / 'fifo'}: {WAITS}"
