"""No input reaches a traceback: the harness key under an $RXL_WORK that is a
file, cannot be made or holds a damaged key; a kyua JUnit time that is not a
time; a targets key that is a directory or not a key."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.verify.kyua import cases_from_kyua_junit


def _one_error(r, code):
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, (r.exit_code, r.output)
    (line,) = r.stderr.splitlines()
    assert line.startswith("Error: ") and "Errno" not in line
    return line


@pytest.mark.parametrize("work", ["{tmp}/file", "{tmp}/file/below", "/proc/1/rxl-none"])
def test_targets_key_where_rxl_work_cannot_hold_it(work, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv("RXL_WORK", work.format(tmp=tmp_path))
    line = _one_error(CliRunner().invoke(main, ["targets", "--key"]), 2)
    if work.startswith("{tmp}/file"):  # refused before any command (rxl.cli.options)
        assert line.startswith(f"Error: RXL_WORK {work.format(tmp=tmp_path)}: ")
    else:
        assert "cannot make the harness key" in line


@pytest.mark.parametrize("priv,pub,why", [
    (b"garbage\n", None, "not a private key"),
    (b"", None, "not a private key"),
    (None, None, "is a directory"),
])
def test_targets_key_with_a_damaged_harness_key(priv, pub, why, tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    d = tmp_path / "ssh"
    d.mkdir()
    if priv is None:
        (d / "id_ed25519").mkdir()
    else:
        (d / "id_ed25519").write_bytes(priv)
    line = _one_error(CliRunner().invoke(main, ["targets", "--key"]), 2)
    assert why in line and "remove" in line


def test_a_pub_that_is_not_the_keys_half_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    assert CliRunner().invoke(main, ["targets", "--key"]).exit_code == 0
    (tmp_path / "ssh" / "id_ed25519.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 x\n")
    line = _one_error(CliRunner().invoke(main, ["targets", "--key"]), 2)
    assert "does not hold the public half" in line


@pytest.mark.parametrize("key,why", [("{d}", "is a directory"), ("{f}", "not a private key")])
def test_a_targets_key_that_is_a_directory_or_not_a_key(key, why, tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    (tmp_path / "f").write_text("not a key\n")
    (tmp_path / "d").mkdir()
    t = tmp_path / "targets.yaml"
    t.write_text("targets:\n  box: {kind: box, host: box.example.org, key: "
                 + key.format(d=tmp_path / "d", f=tmp_path / "f") + "}\n")
    line = _one_error(CliRunner().invoke(main, ["run", "--target", "box", "--targets", str(t),
                                                "--check-only"]), 2)
    assert "targets.box.key" in line and why in line and "no such file" not in line


@pytest.mark.parametrize("time", ["1e400", "inf", "-inf", "nan", "-3", "x", "1e9"])
def test_a_junit_time_that_is_not_a_time_is_unknown(time):
    xml = (f'<testsuite><testcase classname="tests.prog" name="c" time="{time}"/>'
           "</testsuite>")
    (case,) = cases_from_kyua_junit(xml, "/w/tests")
    assert case.status == "passed" and case.seconds is None
    xml = '<testsuite><testcase classname="tests.prog" name="c" time="2.6"/></testsuite>'
    assert cases_from_kyua_junit(xml, "/w/tests")[0].seconds == 3
