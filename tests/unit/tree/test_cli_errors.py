"""rxl series and rxl build: every error in the one documented form.

``rxl --help``: one line on stderr, ``Error: ...``, exit 2 for a bad option
value and 1 for a failure at run time; nothing changed before a refusal.
The old prefixes (``rxl series: error:``, ``rxl build: error:``) are gone.
"""

import json
import os
import subprocess
import sys

import pytest

from fakefreebsd import _git, _series, _tree


def _rxl(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rxl", *args], capture_output=True,
                          text=True, env=env)


def _one_error(cp, code):
    assert cp.returncode == code, (cp.returncode, cp.stderr)
    assert "Traceback" not in cp.stderr
    (line,) = cp.stderr.strip().splitlines()[-1:]
    assert line.startswith("Error: "), cp.stderr
    assert "rxl series: error" not in cp.stderr and "rxl build: error" not in cp.stderr
    return line


@pytest.mark.parametrize("cmd", [["series", "apply"], ["series", "export"],
                                 ["series", "sync"], ["series", "check"], ["build"]])
def test_missing_src_is_a_usage_error_naming_the_cause(tmp_path, cmd):
    line = _one_error(_rxl(*cmd, "--src", str(tmp_path / "absent")), 2)
    assert "'--src'" in line and "no such directory" in line


@pytest.mark.parametrize("cmd", [["series", "apply"], ["series", "export"]])
def test_folder_inside_a_git_tree_is_refused_unchanged(tmp_path, cmd):
    src = tmp_path / "src"
    _tree(src)
    before = (_git(src, "branch", "--list"), (src / ".git/config").read_text())
    line = _one_error(_rxl(*cmd, "--src", str(src / "sys")), 2)
    assert "folder inside the git tree" in line
    assert (_git(src, "branch", "--list"), (src / ".git/config").read_text()) == before


def test_not_a_git_tree_is_a_usage_error(tmp_path):
    line = _one_error(_rxl("series", "apply", "--src", str(tmp_path)), 2)
    assert "not a git work tree" in line


def _state(src):
    """What a refused apply must leave as it was: the index, config, branches, HEAD."""
    return ((src / ".git/index").read_bytes() if (src / ".git/index").exists() else None,
            (src / ".git/config").read_text(), _git(src, "branch", "--list"),
            _git(src, "rev-parse", "HEAD"))


@pytest.mark.parametrize("branch, why", [
    ("rxl", "branch rxl already exists in"), ("main", "branch main already exists in"),
    ("bad..name", "bad..name: not a git branch name"), ("-x", "-x: not a git branch name"),
    ("", "an empty value"), ("a b", "a b: not a git branch name"),
    ("x~1", "x~1: not a git branch name"), ("@{-1}", "@{-1}: not a git branch name"),
    ("HEAD", "HEAD: not a git branch name")])
def test_series_apply_refuses_a_bad_branch_first_and_changes_nothing(tmp_path, branch, why):
    """A --branch git cannot create (a bad name, an existing branch) is a bad option
    value, exit 2, said in one line before the index of a clone whose checkout
    stopped (an empty index) is rebuilt or anything else is written."""
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    _git(src, "branch", "rxl")
    _git(src, "read-tree", "--empty")  # what a clone of the snapshot leaves behind
    before = _state(src)
    line = _one_error(_rxl("series", "apply", "--src", str(src), "--patches", str(patches),
                           "--branch", branch, "--lock", str(tmp_path / "lock")), 2)
    assert line.startswith("Error: Invalid value for '--branch': ") and why in line, line
    assert _state(src) == before


@pytest.mark.parametrize("cmd", ["apply", "export", "sync"])
def test_a_tree_without_the_base_commit_is_bad_input_naming_src(tmp_path, cmd):
    """F21: series apply (and sync, and export past its --branch check) of a
    repository lacking patches/BASE's commit exited 1, as a failure at run time;
    the tree is unusable input: exit 2, one line naming --src, the commit, where
    it is and the fetch that brings it, as rxl run --src says it; nothing
    changed."""
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    other = tmp_path / "other"
    _tree(other, salt="another history")
    _git(other, "checkout", "-q", "-b", "rxl")   # export's and sync's branch exists
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run(["cp", "-r", str(patches), str(project / "patches")], check=True)
    opt = ["--project", str(project)] if cmd == "sync" else ["--patches", str(patches)]
    before = _state(other)
    lock = ["--lock", str(tmp_path / "lock")] if cmd != "export" else []
    env = {k: v for k, v in os.environ.items() if k != "RXL_BASE_URL"}
    cp = _rxl("series", cmd, "--src", str(other), *opt, *lock, env=env)
    line = _one_error(cp, 2)
    assert line == (f"Error: Invalid value for '--src': {other}: does not have the base "
                    f"commit {base[:12]} (patches/BASE): it is in owner/repo; fetch it "
                    f"(git -C {other} fetch https://github.com/owner/repo.git {base}), or "
                    "give a clone of that repository"), line
    assert _state(other) == before


def test_series_apply_says_gits_whole_reason_in_one_line(tmp_path):
    """git checkout's refusal (an untracked file in the way) is its message, its
    lines joined: not a Python list of the last line ('Aborting')."""
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    _git(src, "rm", "-q", "sys/kern/kern_x.c")
    _git(src, "commit", "-qm", "gone")
    (src / "sys/kern").mkdir()
    (src / "sys/kern/kern_x.c").write_text("untracked\n")
    line = _one_error(_rxl("series", "apply", "--src", str(src), "--patches", str(patches),
                           "--lock", str(tmp_path / "lock")), 1)
    assert "git checkout -b rxl failed: error: The following untracked working tree files " \
        "would be overwritten by checkout: sys/kern/kern_x.c; Please move or remove them " \
        "before you switch branches. Aborting" in line
    assert "[" not in line and _git(src, "branch", "--list") == "* main"


def test_build_of_a_tree_without_make_py_is_a_usage_error(tmp_path):
    (tmp_path / "t").mkdir()
    line = _one_error(_rxl("build", "--src", str(tmp_path / "t"), "--lock", ""), 2)
    assert "not a FreeBSD source tree" in line
    assert list((tmp_path / "t").iterdir()) == []


@pytest.mark.parametrize("cmd", [["series", "check"], ["series", "check", "--json"],
                                 ["series", "sync", "--src", "SRC"]])
@pytest.mark.parametrize("project", ["absent", "empty", "file"])
def test_a_project_without_patches_is_a_usage_error(tmp_path, cmd, project):
    """--project that is no rxl project (absent, no patches/, a file): one Error line
    naming --project, exit 2, nothing on stdout; never '[Errno 2] ...' as a problem."""
    src = tmp_path / "src"
    _tree(src)
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x\n")
    cp = _rxl(*[str(src) if a == "SRC" else a for a in cmd], "--project",
              str(tmp_path / project))
    line = _one_error(cp, 2)
    assert line.startswith("Error: Invalid value for '--project': ") and "Errno" not in line
    assert {"absent": "no such directory", "empty": "no patches/ directory",
            "file": "a file, not a directory"}[project] in line
    assert cp.stdout == ""


BAD_BASES = [
    ("repository: x/y\ncommit: zzzz\n", "no '__FreeBSD_version' line"),
    ("repository: x/y\ncommit: zzzz\n__FreeBSD_version: 1500068\n", "is not a full sha1"),
    (f"repository: x/y\ncommit: {'a' * 40}\n__FreeBSD_version: fifteen\n",
     "'fifteen' is not a seven-digit __FreeBSD_version"),
    (b"\xff\xfe\x00r", "not UTF-8 text"),
]


@pytest.mark.parametrize("text, why", BAD_BASES)
def test_apply_of_a_malformed_base_is_a_usage_error_naming_the_file(tmp_path, text, why):
    src = tmp_path / "src"
    patches = _series(tmp_path, src, _tree(src))
    (patches / "BASE").write_bytes(text if isinstance(text, bytes) else text.encode())
    before = _state(src)
    line = _one_error(_rxl("series", "apply", "--src", str(src), "--patches", str(patches),
                           "--lock", str(tmp_path / "lock")), 2)
    assert line.startswith(f"Error: Invalid value for '--patches': {patches}/BASE: ") \
        and why in line, line
    assert _state(src) == before


def test_apply_of_a_patch_that_is_no_mail_is_a_usage_error(tmp_path):
    """A 0001-x.patch saying 'not a patch' is refused as --patches before git runs."""
    src = tmp_path / "src"
    patches = _series(tmp_path, src, _tree(src))
    (patches / "0002-x.patch").write_text("not a patch\n")
    before = _state(src)
    line = _one_error(_rxl("series", "apply", "--src", str(src), "--patches", str(patches),
                           "--lock", str(tmp_path / "lock")), 2)
    assert line == ("Error: Invalid value for '--patches': 0002-x.patch: not a format-patch "
                    "mail (no From/Subject)")
    assert _state(src) == before


@pytest.mark.parametrize("text, why", BAD_BASES + [(None, "no BASE file")])
def test_check_says_a_malformed_base_in_words(tmp_path, text, why):
    """series check of a project whose BASE is missing or malformed: a problem (exit 1)
    in words, the file named; no '[Errno 2]'."""
    project = tmp_path / "project"
    (project / "patches").mkdir(parents=True)
    if text is not None:
        (project / "patches/BASE").write_bytes(text if isinstance(text, bytes) else text.encode())
    cp = _rxl("series", "check", "--project", str(project))
    assert cp.returncode == 1 and "Traceback" not in cp.stderr, cp.stderr
    assert "Errno" not in cp.stdout
    assert any(ln.startswith(f"problem: {project}/patches") and why in ln
               for ln in cp.stdout.splitlines()), cp.stdout


@pytest.mark.parametrize("json_", [[], ["--json"]], ids=["text", "json"])
def test_check_with_problems_says_so_in_one_error_line(tmp_path, json_):
    """F9: series check with problems exited 1 with nothing on stderr but its
    notes; the problems stay on stdout, and stderr ends with the one Error line
    (as rxl doctor's 'Error: N missing: ...')."""
    project = tmp_path / "project"
    (project / "patches").mkdir(parents=True)
    cp = _rxl("series", "check", "--project", str(project), *json_)
    assert cp.returncode == 1, cp.stderr
    errors = [ln for ln in cp.stderr.splitlines() if ln.startswith("Error:")]
    assert errors == [ln for ln in cp.stderr.splitlines() if not ln.startswith("note:")]
    n = (json.loads(cp.stdout)["problems"] if json_ else
         [ln for ln in cp.stdout.splitlines() if ln.startswith("problem: ")])
    assert n and errors == [f"Error: {len(n)} problem(s) in the series (listed on stdout)"]
