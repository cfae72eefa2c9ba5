"""Issue 27: an input path that is a symlink loop or a dangling link (at it or
on its way) was called missing: ``run --check-only --src LOOP`` said "no such
directory", and so did --patches, --project, --programs, --atf-dir, the
kernels, key files and the rest. Every input check now words a path that is
not there through one place (rxl.cli.options.missing, on link_reason, the
words the output paths got in d13dfd8); a path that really does not exist is
still "no such file" or "no such directory". One ``Error:`` line, exit 2,
nothing made."""

import errno
import os
import subprocess
from pathlib import Path

import pytest

from clierror import error_line as _error, run as _run, work  # noqa: F401 (work: fixture)
from fakefreebsd import kernel_bytes
from rxl.cli import options

#: What an input that is a symlink loop is called.
LOOP = f"a symlink loop, it cannot be resolved ({os.strerror(errno.ELOOP)})"


@pytest.fixture
def links(work):
    """``loop1 -> loop2 -> loop1`` and ``dangl -> gone/x`` (gone absent) in
    ``work``, a git work tree ``g``, a kernel file ``kernel`` and ``fb``, a
    tree with tools/build/make.py."""
    os.symlink("loop2", work / "loop1")
    os.symlink("loop1", work / "loop2")
    os.symlink(work / "gone" / "x", work / "dangl")
    (work / "g").mkdir()
    subprocess.run(["git", "init", "-q", str(work / "g")], check=True)
    (work / "kernel").write_bytes(kernel_bytes())
    (work / "fb" / "tools" / "build").mkdir(parents=True)
    (work / "fb" / "tools" / "build" / "make.py").write_text("")
    return work


def _dangling(work):
    return f"a symlink to {work / 'gone' / 'x'}, which does not exist (a dangling link)"


def _kinds(work):
    """(value, what it is called) for each way an input cannot be followed."""
    return {"loop": (work / "loop1", LOOP),
            "dangling": (work / "dangl", _dangling(work)),
            "under-a-loop": (work / "loop1" / "d", f"{work / 'loop1'} is {LOOP}"),
            "under-a-dangling": (work / "dangl" / "d", f"{work / 'dangl'} is {_dangling(work)}")}


def _tree(work):
    return sorted(str(p.relative_to(work)) for p in work.rglob("*")
                  if ".git" not in p.parts)


#: (command line with {} for the path, the option or argument it names). {g}: a
#: git work tree, {k}: a kernel file, {f}: a FreeBSD-shaped tree, {o}: an output
#: directory.
CASES = [
    (["run", "--check-only", "--src", "{}"], "'--src'"),
    (["run", "--dry-run", "--src", "{}"], "'--src'"),
    (["run", "--check-only", "--pristine-src", "{}"], "'--pristine-src'"),
    (["run", "--check-only", "--kernel", "{}"], "'--kernel'"),
    (["run", "--dry-run", "--kernel", "{}"], "'--kernel'"),
    (["run", "--check-only", "--pristine-kernel", "{}"], "'--pristine-kernel'"),
    (["run", "--check-only", "--atf-dir", "{}"], "'--atf-dir'"),
    (["run", "--check-only", "--test", "t={}"], "'--test'"),
    (["run", "--check-only", "--base-url", "{}"], "'--base-url'"),
    (["run", "--check-only", "--target", "ssh://u@h", "--programs", "{}"], "'--programs'"),
    (["run", "--check-only", "--target", "x", "--targets", "{}"], "Error: {}"),
    (["learn", "--dry-run", "--src", "{}"], "--src"),
    (["learn", "--dry-run", "--kernel", "{}"], "'--kernel'"),
    (["learn", "--log", "{}"], "'--log'"),
    (["learn", "--dry-run", "--topology", "{}"], "'--topology'"),
    (["series", "apply", "--src", "{}"], "'--src'"),
    (["series", "apply", "--src", "{g}", "--patches", "{}"], "'--patches'"),
    (["series", "check", "--src", "{}"], "'--src'"),
    (["series", "check", "--project", "{}"], "'--project'"),
    (["series", "export", "--src", "{}"], "'--src'"),
    (["series", "export", "--src", "{g}", "--patches", "{}"], "'--patches'"),
    (["series", "sync", "--src", "{}"], "'--src'"),
    (["series", "sync", "--src", "{g}", "--project", "{}"], "'--project'"),
    (["build", "--src", "{}"], "'--src'"),
    (["guest", "up", "--dry-run", "--kernel", "{}"], "'--kernel'"),
    (["guest", "up", "--dry-run", "--kernel", "{k}", "--src", "{}"], "'--src'"),
    (["guest", "up", "--dry-run", "--kernel", "{k}", "--src", "{f}", "--build",
      "--atf-dir", "{}"], "'--atf-dir'"),
    (["kcount", "setsockopt", "--kernel", "{k}", "--src", "{}", "--objdir", "{g}",
      "--out", "{o}", "--dry-run"], "'--src'"),
    (["kcount", "setsockopt", "--kernel", "{k}", "--src", "{g}", "--objdir", "{}",
      "--out", "{o}", "--dry-run"], "'--objdir'"),
    (["kcount", "sites", "{}", "--kernel", "{k}"], "'TRACE'"),
    (["vm", "--image", "{}"], "'--image'"),
    (["parse", "{}"], "LOG"),
    (["inspect", "{}"], "SOURCE"),
    (["spread", "--topology", "{}"], "'--topology'"),
    (["bench", "accept", "--raw-dir", "{}"], "--raw-dir"),
    (["bench", "accept", "--build-dir", "{}"], "--build-dir"),
]


def _args(args, value, links):
    return [a.format(value, g=links / "g", k=links / "kernel", f=links / "fb",
                     o=links / "out")
            for a in args]


@pytest.mark.parametrize("kind", ["loop", "dangling", "under-a-loop", "under-a-dangling"])
@pytest.mark.parametrize("args,named", CASES, ids=[" ".join(a) for a, _ in CASES])
def test_an_input_that_cannot_be_followed_is_called_what_it_is(args, named, kind, links):
    """Each said "no such directory" (file, kernel), or for --topology the
    bare strerror, for bench --raw-dir "cannot create it: File exists"."""
    value, why = _kinds(links)[kind]
    before = _tree(links)
    line = _error(_args(args, value, links))
    assert f"{value}: {why}" in line, line
    assert named.format(value) in line and "no such" not in line, line
    assert _tree(links) == before and not (links / "gone").exists()


@pytest.mark.parametrize("args,named,noun", [
    (["run", "--check-only", "--src", "{}"], "'--src'", "directory"),
    (["run", "--check-only", "--pristine-src", "{}"], "'--pristine-src'", "directory"),
    (["run", "--check-only", "--kernel", "{}"], "'--kernel'", "kernel"),
    (["run", "--check-only", "--atf-dir", "{}"], "'--atf-dir'", "directory"),
    (["run", "--check-only", "--test", "t={}"], "'--test'", "file"),
    (["run", "--check-only", "--target", "ssh://u@h", "--programs", "{}"], "'--programs'",
     "directory"),
    (["run", "--check-only", "--target", "x", "--targets", "{}"], "Error: {}", "file"),
    (["learn", "--dry-run", "--src", "{}"], "--src", "directory"),
    (["series", "apply", "--src", "{g}", "--patches", "{}"], "'--patches'", "directory"),
    (["series", "sync", "--src", "{g}", "--project", "{}"], "'--project'", "directory"),
    (["build", "--src", "{}"], "'--src'", "directory"),
    (["vm", "--image", "{}"], "'--image'", "file"),
    (["parse", "{}"], "LOG", "file"),
])
def test_a_path_that_is_not_there_is_still_no_such(args, named, noun, links):
    value = links / "absent"
    line = _error(_args(args, value, links))
    assert f"{value}: no such {noun}" in line and named.format(value) in line, line


def test_missing_is_the_one_wording(links):
    """The root every input check goes through."""
    assert options.missing(links / "absent") == "no such file"
    assert options.missing(links / "absent", "directory") == "no such directory"
    assert options.missing(links / "loop1", "directory") == LOOP
    assert options.missing(str(links / "dangl"), "kernel") == _dangling(links)
    assert options.missing(links / "dangl" / "d") == f"{links / 'dangl'} is {_dangling(links)}"
    (links / "f").write_text("")
    assert options.missing(links / "f" / "d", "directory") == "no such directory"  # under a file


@pytest.mark.parametrize("kind", ["loop", "dangling", "under-a-loop"])
def test_a_key_file_that_cannot_be_followed_is_not_missing(kind, links):
    """A target's key: "Too many levels of symbolic links" bare, or for a
    dangling link "no such key file" and ``missing`` (rxl targets: "needed
    when it is used"); neither is a key that can be made later."""
    pytest.importorskip("cryptography")
    from rxl.guest.sshkeys import KeyFileError, private_key_line
    value, why = _kinds(links)[kind]
    with pytest.raises(KeyFileError) as exc:
        private_key_line(str(value))
    assert str(exc.value) == f"{value}: {why}" and not exc.value.missing
    with pytest.raises(KeyFileError) as exc:
        private_key_line(str(links / "absent"))
    assert str(exc.value) == f"{links / 'absent'}: no such key file" and exc.value.missing


def test_targets_lists_a_dangling_key_as_unusable(links):
    """A dangling key is a mistake of the file, listed as every other one is
    (issue 27, fourteenth pass, fault 9: the checker's own list)."""
    y = links / "t.yaml"
    y.write_text(f"targets:\n  b: {{kind: box, host: h, key: {links / 'dangl'}}}\n")
    r = _run(["targets", "--targets", y])
    assert r.exit_code == 2, r.output
    assert r.stdout.splitlines() == [f"{y}: targets.b.key: {links / 'dangl'}: "
                                     f"{_dangling(links)}"]
    assert r.stderr == f"Error: {y}: 1 mistake (listed above)\n"


def test_a_default_targets_file_that_dangles_is_not_taken_as_absent(links, work):
    (work / "w").mkdir()
    os.symlink(links / "gone" / "t.yaml", work / "w" / "targets.yaml")
    y = work / "w" / "targets.yaml"
    assert _error(["targets"], quiet_stdout=False) == f"Error: {y}: 1 mistake (listed above)"
    assert _run(["targets"]).stdout.splitlines()[0] == \
        f"{y}: a symlink to {links / 'gone' / 't.yaml'}, which does not exist (a dangling link)"


def test_check_tree_dir_and_ensure_git_tree(links):
    """Below the CLI: rxl.tree.base.check_tree_dir and series.ensure_git_tree."""
    from rxl.tree.base import TreeError, check_tree_dir
    from rxl.tree.patch import SeriesError
    from rxl.tree.series import ensure_git_tree
    for kind, (value, why) in _kinds(links).items():
        with pytest.raises(TreeError, match="^") as exc:
            check_tree_dir(str(value), "--pristine-src")
        assert str(exc.value) == f"--pristine-src {value}: {why}", kind
        with pytest.raises(SeriesError) as exc:
            ensure_git_tree(Path(value))
        assert str(exc.value) == f"{value}: {why}", kind


def test_a_compiler_that_is_a_loop_is_one_error_line(links):
    """bench accept --cc LOOP ended in OSError with no Error: line (exit 1)."""
    cc = links / "loop1"
    r = _run(["bench", "accept", "--cc", cc, "--build-dir", links / "b"])
    assert r.exit_code == 2 and r.stderr.splitlines() == [
        f"Error: Invalid value for '--cc': {cc}: {LOOP}"], \
        (r.exit_code, r.output, r.exception)
