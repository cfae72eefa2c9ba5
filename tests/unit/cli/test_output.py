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


@pytest.mark.parametrize("value", ["", "rel/build"])
def test_the_build_dir_is_absolute_or_the_checkouts(value, tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_BUILD_DIR", value)
    monkeypatch.chdir(tmp_path)
    d = core.build_dir()
    assert d.is_absolute()
    assert d == (tmp_path / value if value else core.ROOT / "build")
    r = _rxl(DEAL, cwd=tmp_path, env=dict(os.environ, RXL_BUILD_DIR=value,
                                          PYTHONPATH=str(Path(core.__file__).parents[2])))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("module", ["rxl.tree.build", "rxl.tree.world"])
def test_the_tree_modules_are_no_commands(module):
    """Their __main__ blocks (a debugging aid: an IndexError without arguments, a
    plan for a tree named --help) are gone; rxl build/run --dry-run print those plans."""
    r = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "" and "Traceback" not in r.stderr
