"""rxl series and rxl build: every error in the one documented form.

``rxl --help``: one line on stderr, ``Error: ...``, exit 2 for a bad option
value and 1 for a failure at run time; nothing changed before a refusal.
The old prefixes (``rxl series: error:``, ``rxl build: error:``) are gone.
"""

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


def test_series_runtime_failure_is_exit_1(tmp_path):
    """The branch exists already: a failure at run time, said once, nothing changed."""
    src = tmp_path / "src"
    base = _tree(src)
    patches = _series(tmp_path, src, base)
    _git(src, "branch", "rxl")
    before = (_git(src, "rev-parse", "rxl"), (src / ".git/config").read_text())
    line = _one_error(_rxl("series", "apply", "--src", str(src), "--patches", str(patches),
                           "--lock", str(tmp_path / "lock")), 1)
    assert "already exists" in line
    assert (_git(src, "rev-parse", "rxl"), (src / ".git/config").read_text()) == before


def test_build_of_a_tree_without_make_py_is_a_usage_error(tmp_path):
    (tmp_path / "t").mkdir()
    line = _one_error(_rxl("build", "--src", str(tmp_path / "t"), "--lock", ""), 2)
    assert "not a FreeBSD source tree" in line
    assert list((tmp_path / "t").iterdir()) == []
