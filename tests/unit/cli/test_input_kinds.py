"""Issue 27, the tenth pass's faults 8-10, at their root in rxl.cli.options.

8. An input directory that is there but is no directory (/dev/zero, a FIFO,
   a socket, a file) was "no such directory" (``series check --src
   /dev/zero``, ``build --src``, ``--patches``, ``--project``, ``--base-url``
   ...): rxl.cli.options.missing now says what it is ("a character device,
   not a directory"), for every input check that goes through it.
9. click.Path's messages wrote a byte of a name that is not UTF-8 as U+FFFD
   (``Directory 'caf\\ufffd.bin' is a file.``), click's others (and
   ``{value!r}``) as ``\\udce9``: the path options now have rxl's own type
   (options.PathOf) and the error surface writes such a byte ``\\xe9``, as
   rxl.errors.show does in every other message.
10. ``build --objdir`` and ``--lock`` given as a symlink loop, a FIFO or
   /dev/zero exited 0 (the plan printed; a FIFO lock would block flock(1)):
   refused with one ``Error:`` line, exit 2, nothing made.
"""

import errno
import os
import socket
import subprocess

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import _tree, kernel_bytes
from rxl.cli import options
from rxl.errors import message

LOOP = f"a symlink loop, it cannot be resolved ({os.strerror(errno.ELOOP)})"
#: A file name with a byte that is not UTF-8 (0xe9), as os.fsdecode gives it.
CAF = "caf\udce9.bin"


@pytest.fixture
def f(work):
    """In ``work``: a FIFO, a socket, an empty file, one with a non-UTF-8 name,
    a loop ``l1 -> l2 -> l1``, a git work tree ``g``, a kernel, a 15 tree ``fb``."""
    os.mkfifo(work / "fifo")
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(work / "sock"))
    s.close()
    (work / "afile").write_text("")
    (work / CAF).write_text("")
    os.symlink("l2", work / "l1")
    os.symlink("l1", work / "l2")
    (work / "g").mkdir()
    subprocess.run(["git", "init", "-q", str(work / "g")], check=True)
    (work / "kernel").write_bytes(kernel_bytes())
    _tree(work / "fb", major=15)
    return work


def _tree_of(work):
    return sorted(str(p.relative_to(work)) for p in work.rglob("*") if ".git" not in p.parts)


#: (what it is, how a message names it).
KINDS = {"device": ("/dev/zero", "a character device"),
         "fifo": ("{w}/fifo", "a FIFO"),
         "socket": ("{w}/sock", "a socket"),
         "file": ("{w}/afile", "a file")}

#: (command line, {} the path, the option named) of every input directory.
INPUT_DIRS = [
    (["build", "--dry-run", "--src", "{}"], "'--src'"),
    (["series", "check", "--src", "{}"], "'--src'"),
    (["series", "check", "--project", "{}"], "'--project'"),
    (["series", "apply", "--src", "{}"], "'--src'"),
    (["series", "apply", "--src", "{g}", "--patches", "{}"], "'--patches'"),
    (["series", "export", "--src", "{}"], "'--src'"),
    (["series", "export", "--src", "{g}", "--patches", "{}"], "'--patches'"),
    (["series", "sync", "--src", "{}"], "'--src'"),
    (["series", "sync", "--src", "{g}", "--project", "{}"], "'--project'"),
    (["run", "--check-only", "--src", "{}"], "'--src'"),
    (["run", "--check-only", "--pristine-src", "{}"], "'--pristine-src'"),
    (["run", "--check-only", "--base-url", "{}"], "'--base-url'"),
    (["run", "--check-only", "--atf-dir", "{}"], "'--atf-dir'"),
    (["run", "--check-only", "--target", "ssh://u@h", "--programs", "{}"], "'--programs'"),
    (["learn", "--dry-run", "--src", "{}"], "--src"),
    (["guest", "up", "--dry-run", "--kernel", "{k}", "--src", "{}"], "'--src'"),
    (["kcount", "setsockopt", "--kernel", "{k}", "--src", "{}", "--objdir", "{g}",
      "--out", "{w}/o", "--dry-run"], "'--src'"),
    (["kcount", "setsockopt", "--kernel", "{k}", "--src", "{g}", "--objdir", "{}",
      "--out", "{w}/o", "--dry-run"], "'--objdir'"),
]


def _args(args, value, w):
    return [a.format(value, w=w, g=w / "g", k=w / "kernel", fb=w / "fb") for a in args]


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("args,named", INPUT_DIRS, ids=[" ".join(a) for a, _ in INPUT_DIRS])
def test_an_input_directory_of_another_kind_is_said_to_be_that(args, named, kind, f):
    """Fault 8: "/dev/zero: no such directory" for a path that is there."""
    value, what = KINDS[kind]
    value = value.format(w=f)
    before = _tree_of(f)
    line = _error(_args(args, value, f))
    assert f"{value}: {what}, not a directory" in line and named in line, line
    assert "no such" not in line, line
    assert _tree_of(f) == before


def test_rxl_base_url_of_another_kind_is_said_to_be_that(f, monkeypatch):
    monkeypatch.setenv("RXL_BASE_URL", str(f / "afile"))
    line = _error(["run", "--check-only"])
    assert f"{f / 'afile'}: a file, not a directory" in line and "no such" not in line, line


def test_missing_says_what_a_path_of_another_kind_is(f):
    """The root: rxl.cli.options.missing, and what stat(2) says (file_kind)."""
    assert options.missing("/dev/zero", "directory") == "a character device, not a directory"
    assert options.missing(f / "fifo", "directory") == "a FIFO, not a directory"
    assert options.missing(f / "sock") == "a socket, not a regular file"
    assert options.missing(f / "g") == "a directory, not a regular file"
    assert options.missing(f / "g", "kernel") == "a directory, not a kernel"
    assert options.missing(f / "afile", "directory") == "a file, not a directory"
    assert options.missing(f / "absent", "directory") == "no such directory"
    assert options.missing(f / "afile" / "d", "directory") == "no such directory"
    assert options.missing(f / "l1", "directory") == LOOP


# ------------------------------------------------------------- 9: a name not UTF-8

#: (command line with {} for the path, the option, what the path is instead).
NAMED = [
    (["build", "--dry-run", "--src", "{}"], "'--src'", "dir"),
    (["build", "--dry-run", "--src", "{fb}", "--objdir", "{}"], "'--objdir'", "dir"),
    (["build", "--dry-run", "--src", "{fb}", "--logdir", "{}"], "'--logdir'", "dir"),
    (["series", "check", "--src", "{}"], "'--src'", "dir"),
    (["series", "check", "--project", "{}"], "'--project'", "dir"),
    (["series", "apply", "--src", "{}"], "'--src'", "dir"),
    (["series", "apply", "--src", "{g}", "--patches", "{}"], "'--patches'", "dir"),
    (["series", "export", "--src", "{}"], "'--src'", "dir"),
    (["series", "export", "--src", "{g}", "--patches", "{}"], "'--patches'", "dir"),
    (["series", "sync", "--src", "{}"], "'--src'", "dir"),
    (["bench", "accept", "--dry-run", "--raw-dir", "{}"], "'--raw-dir'", "dir"),
    (["bench", "accept", "--dry-run", "--build-dir", "{}"], "'--build-dir'", "dir"),
    (["learn", "--log", "{}"], "'--log'", "file"),
    (["kcount", "record", "--kernel", "{k}", "--out", "{}"], "'--out'", "file"),
    (["kcount", "table", "--trace", "accept-off", "patched", "{k}", "--out", "{}"],
     "'--out'", "file"),
    (["series", "apply", "--src", "{g}", "--lock", "{}"], "'--lock'", "file"),
]


@pytest.mark.parametrize("args,named,wants", NAMED, ids=[" ".join(a) for a, _, _ in NAMED])
def test_a_path_not_utf8_is_named_as_every_message_names_it(args, named, wants, f):
    """Fault 9: click.Path wrote ``caf\\ufffd.bin``; now ``caf\\xe9.bin`` and
    what the path is: a file where a directory is wanted, and the reverse."""
    if wants == "dir":
        value, what = f / CAF, "a file, not a directory"
    else:
        (f / "d" / CAF).mkdir(parents=True)
        value, what = f / "d" / CAF, "is a directory, not a file"
    shown = str(value).replace("\udce9", "\\xe9")
    line = _error(_args(args, value, f))
    assert f"{shown}: {what}" in line and named in line, line
    assert "\ufffd" not in line and "udce9" not in line, line


@pytest.mark.parametrize("args", [
    ["build", "--dry-run", "--src", "{fb}", "--jobs", CAF],
    ["run", "--check-only", "--transport", CAF],
    ["build", "--src" + CAF],
    ["run", "--check-only", "--test", CAF],
    ["spread", "--topology", "2x4x2", "--queues", "2", "--intr-cpus", CAF],
])
def test_click_and_repr_messages_write_the_byte_as_show_does(args, f):
    """click's own messages (and ``{value!r}``) wrote ``'caf\\udce9.bin'``."""
    line = _error(_args(args, "", f))
    assert "caf\\xe9.bin" in line and "udce9" not in line and "\ufffd" not in line, line


def test_message_writes_repr_surrogates_as_bytes_and_nothing_else():
    assert message(repr("caf\udce9"), 100) == "'caf\\xe9'"
    assert message(repr("a\\udce9"), 100) == "'a\\\\udce9'"  # a backslash given stays
    assert message("x \\udcff \\\\udcff \\\\\\udcff", 100) == "x \\xff \\\\udcff \\\\\\xff"


# ------------------------------------------------- 10: --objdir and --lock of build

BAD = {"loop": ("{w}/l1", LOOP),
       "fifo": ("{w}/fifo", "a FIFO, not a {}"),
       "device": ("/dev/zero", "a character device, not a {}"),
       "socket": ("{w}/sock", "a socket, not a {}"),
       "dangling": ("{w}/dangl", "a symlink to {w}/gone/x, which does not exist (a dangling link)")}


def _bad(kind, noun, w):
    value, why = BAD[kind]
    if kind == "dangling":
        os.symlink(w / "gone" / "x", w / "dangl")
    return value.format(w=w), why.format(noun, w=w)


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize("kind", sorted(BAD))
def test_build_refuses_an_objdir_no_directory_can_be_made_at(kind, dry, f):
    """--objdir LOOP|FIFO|/dev/zero: the plan was printed, exit 0 (and a build
    failed at its mkdir, exit 1)."""
    value, why = _bad(kind, "directory", f)
    before = _tree_of(f)
    line = _error(["build", "--src", f / "fb", "--objdir", value, "--lock", ""]
                  + (["--dry-run"] if dry else []))
    assert line == f"Error: Invalid value for '--objdir': {value}: {why}", line
    assert _tree_of(f) == before and not (f / "gone").exists()


@pytest.mark.parametrize("kind", sorted(BAD))
def test_build_refuses_a_lock_that_is_no_lock_file(kind, f):
    """--lock FIFO|/dev/zero: exit 0 (a FIFO blocks flock(1)'s open for ever)."""
    value, why = _bad(kind, "lock file", f)
    before = _tree_of(f)
    line = _error(["build", "--dry-run", "--src", f / "fb", "--objdir", f / "obj",
                   "--lock", value])
    assert line == f"Error: Invalid value for '--lock': {value}: {why}", line
    assert _tree_of(f) == before and not (f / "obj").exists()


@pytest.mark.parametrize("cmd", ["apply", "sync"])
@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
def test_series_refuses_a_lock_that_is_no_lock_file_first(cmd, kind, f):
    """series apply/sync --lock FIFO passed the check (a directory only was
    refused), and was looked at only after the tree."""
    value, why = _bad(kind, "lock file", f)
    line = _error(["series", cmd, "--src", f / "g", "--lock", value])
    assert line == f"Error: Invalid value for '--lock': {value}: {why}", line


def test_check_lock_file_takes_a_regular_file_or_none(f):
    options.check_lock_file(str(f / "afile"))
    options.check_lock_file(str(f / "new.lock"))
    for value in ("/dev/zero", str(f / "fifo"), str(f / "sock"), str(f / "g")):
        with pytest.raises(options.BadOption, match="not a lock file"):
            options.check_lock_file(value)
