"""Issue 27's eighth pass (docs/results/newcomer.md, "Eighth pass"): the
faults 3-7, 10-12, 20 and 21 of /work/coord/nc8.md, each refused at its root
in one ``Error:`` line with the exit status the README gives."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main

HARNESS = Path(__file__).resolve().parents[3] / "harness"


def _run(args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def _error(args, code=2):
    """The one stderr line of a command that failed with ``code``."""
    r = _run(args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.output)
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: "), line
    return line


@pytest.fixture(autouse=True)
def work(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.delenv("RXL_BASE_URL", raising=False)
    return tmp_path


# ------------------------------------------------- 3: a key that is a directory

def test_targets_lists_a_directory_key_as_run_refuses_it(work):
    """3: ``key: /tmp`` was listed as "no such file yet" (exit 0) while run
    said "is a directory"; the listing now makes run's own check."""
    y = work / "t.yaml"
    y.write_text(f"targets:\n  kd: {{kind: box, host: h, key: {work}}}\n")
    line = _error(["targets", "--targets", y])
    assert line == f"Error: {y}: targets.kd.key: {work}: is a directory, not a private key file"
    r = _run(["targets", "--targets", y])
    (kd,) = [l for l in r.stdout.splitlines() if l.startswith("kd ")]
    assert "no such file" not in kd and "is a directory" in kd
    run = _error(["run", "--check-only", "--targets", y, "--target", "kd"])
    assert f"{work}: is a directory, not a private key file" in run


def test_targets_still_lists_a_missing_key_as_needed_later(work):
    y = work / "t.yaml"
    y.write_text(f"targets:\n  km: {{kind: box, host: h, key: {work}/nokey}}\n")
    r = _run(["targets", "--targets", y])
    assert r.exit_code == 0, r.output
    (km,) = [l for l in r.stdout.splitlines() if l.startswith("km ")]
    assert km.endswith(f"key {work}/nokey (no such file yet: needed when it is used)")


# ------------------------------------------------- 4: an unwritable RXL_WORK

@pytest.mark.parametrize("args,option", [
    (["run", "--check-only"], "--out"),
    (["run", "--dry-run"], "--out"),
    (["learn", "--dry-run"], "--guest-dir"),
])
def test_an_unwritable_work_root_is_named_not_a_default_option(args, option):
    """4: RXL_WORK where nothing can be made (a read-only mount; /proc here)
    was blamed on --out, which was not given; the message names RXL_WORK.
    A new process: the defaults under RXL_WORK are read when rxl starts."""
    env = dict(os.environ, RXL_WORK="/proc/rxlw", PYTHONPATH=str(HARNESS))
    p = subprocess.run([sys.executable, "-c", "import sys; from rxl.cli.main import main; "
                        "sys.argv[0] = 'rxl'; main()", *args], env=env, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    (line,) = p.stderr.splitlines()
    assert line.startswith("Error: RXL_WORK /proc/rxlw: cannot be created in /proc: "), line
    assert f"({option} /proc/rxlw/" in line and "Invalid value" not in line


def test_an_unwritable_out_given_elsewhere_still_names_out(work):
    line = _error(["run", "--check-only", "--out", "/proc/nope"])
    assert line == ("Error: Invalid value for '--out': /proc/nope: cannot be created in "
                    "/proc: No such file or directory")
