"""What a run may write on a target and where it may connect: a work
directory the harness owns (under /tmp or /var/tmp, made by it or marked as
its own), never a system directory; hosts that are host names or IP
literals, users that are login names, nothing else."""

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.guest import targets as T
from rxl.guest import ssh as S
from rxl.guest.ssh import TargetError, parse_url


def _run(tmp_path, monkeypatch, *args):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    return CliRunner().invoke(main, ["run", *map(str, args)])


@pytest.mark.parametrize("workdir", [
    "/usr/lib", "/usr/bin", "/usr/home", "/etc/ssh", "/root/.ssh", "/usr/local/etc",
    "/home/user", "/opt/rxl", "/var/db/rxl", "/usr/lib/rxl", "/var/tmp", "/tmp", "/tmp/",
    "/var/tmp/.", "/tmp//x", "/tmp/x/", "/tmp/.hidden/../x", "/var/tmp/..x/../rxl",
])
def test_a_workdir_the_harness_cannot_own_is_refused(workdir, tmp_path, monkeypatch):
    for extra in (["--check-only"], ["--dry-run", "--programs", str(tmp_path)]):
        r = _run(tmp_path, monkeypatch, "--target", "ssh://root@192.0.2.10",
                 "--workdir", workdir, *extra)
        assert r.exit_code == 2 and "'--workdir'" in r.stderr, (workdir, r.output)
        assert "rm -rf" not in r.stdout


@pytest.mark.parametrize("workdir", ["relative", "/", "/etc", "/tmp/a b", "/var/tmp"])
def test_the_own_guests_workdir_is_checked_as_a_targets(workdir, tmp_path, monkeypatch):
    """The own guest runs its tests in --workdir as a target does (sftp the
    programs and run.sh there): the same check refuses it."""
    for extra in (["--check-only"], ["--dry-run"]):
        r = _run(tmp_path, monkeypatch, "--workdir", workdir, *extra)
        assert r.exit_code == 2 and "'--workdir'" in r.stderr, (workdir, r.output)
        assert len(r.stderr.splitlines()) == 1 and "sh " + workdir not in r.stdout
    assert _run(tmp_path, monkeypatch, "--workdir", "/var/tmp/rxl-2", "--check-only"
                ).exit_code == 0


@pytest.mark.parametrize("workdir", ["/var/tmp/rxl", "/tmp/rxl-2", "/var/tmp/ci/run_7"])
def test_a_workdir_under_tmp_of_its_own_is_fine(workdir, tmp_path, monkeypatch):
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "t").write_text("#!/bin/sh\n")
    (progs / "t").chmod(0o755)
    r = _run(tmp_path, monkeypatch, "--target", "ssh://root@192.0.2.10", "--programs",
             progs, "--workdir", workdir, "--check-only")
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("url", [
    "ssh://root@host?x=1", "ssh://root@-oProxyCommand=x", "ssh://-lroot@host",
    "ssh://root@" + "a" * 300, "ssh://root@a..b", "ssh://root@-host", "ssh://root@host-",
    "ssh://root@ho_st", "ssh://root@1.2.3.4.5", "ssh://root@[1.2.3.4]", "ssh://root@[::1",
    "ssh://root@h%40x", "ssh://root@host#frag", "ssh://root@host/path", "ssh://ro;ot@host",
    "ssh://root@" + ("a" * 64) + ".org", "ssh://root@host:22:22", "ssh://root@[::1]x",
    "ssh://root@[fe80::1%$(reboot)]",
])
def test_a_host_or_user_that_is_not_one_is_refused(url, tmp_path, monkeypatch):
    with pytest.raises(TargetError):
        parse_url(url)
    r = _run(tmp_path, monkeypatch, "--target", url, "--check-only")
    assert r.exit_code == 2 and "'--target'" in r.stderr, (url, r.output)


@pytest.mark.parametrize("url,host,shown", [
    ("ssh://root@[::1]", "::1", "ssh://root@[::1]:22"),
    ("ssh://root@[::1]:2222", "::1", "ssh://root@[::1]:2222"),
    ("ssh://root@192.0.2.10", "192.0.2.10", "ssh://root@192.0.2.10:22"),
    ("ssh://admin@box.example.org", "box.example.org", "ssh://admin@box.example.org:22"),
    ("ssh://root@localhost:2200", "localhost", "ssh://root@localhost:2200"),
    ("ssh://root@[fe80::1%em0]", "fe80::1%em0", "ssh://root@[fe80::1%em0]:22"),
])
def test_hosts_that_are_names_or_addresses_pass(url, host, shown):
    t = parse_url(url)
    assert (t.host, t.url) == (host, shown)


@pytest.mark.parametrize("text,host", [("[::1]", "::1"), ("::1", "::1"),
                                       ("192.0.2.10", "192.0.2.10"), ("Box-1.lan", "Box-1.lan")])
def test_check_host_normalises_brackets(text, host):
    assert S.check_host(text) == host


def test_a_targets_file_host_in_brackets_is_one_pair(tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text('targets:\n  v6: {kind: box, host: "[::1]", port: 2200}\n')
    t = T.load(str(p)).get("v6")
    assert t.host == "::1" and t.ssh_target().url == "ssh://root@[::1]:2200"


@pytest.mark.parametrize("host", ["-oProxyCommand=x", "host?x=1", "a b", "[1.2.3.4]",
                                  "a" * 300, "h;reboot", "", "[::1"])
def test_a_targets_file_host_that_is_no_host_is_a_mistake(host, tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(f"targets:\n  b: {{kind: box, host: '{host}'}}\n")
    with pytest.raises(T.TargetsError, match="targets.b.host"):
        T.load(str(p))


@pytest.mark.parametrize("user", ["-lroot", "a b", "ro;ot", "x" * 40])
def test_a_targets_file_user_that_is_no_login_name_is_a_mistake(user, tmp_path):
    p = tmp_path / "t.yaml"
    p.write_text(f"targets:\n  b: {{kind: box, host: h, user: '{user}'}}\n")
    with pytest.raises(T.TargetsError, match="targets.b.user"):
        T.load(str(p))


def test_the_workdir_claim_runs_with_only_sh_and_mkdir(tmp_path):
    """The 15.0 guest's minimal world has sh and mkdir but no touch(1): its first
    SSH run refused every boot's work directory ("sh: touch: not found"). The
    claim must make and mark the directory with PATH holding mkdir alone, and
    refuse it the second time only if the mark is gone."""
    import shutil
    import subprocess
    from rxl.verify.remote import CLAIM_REFUSED, WORKDIR_MARK, claim_command
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "mkdir").symlink_to(shutil.which("mkdir"))
    work = tmp_path / "var-tmp" / "rxl"
    env = {"PATH": str(bindir)}

    def claim():
        return subprocess.run([shutil.which("sh"), "-c", claim_command(str(work))],
                              env=env, capture_output=True, text=True)
    first = claim()
    assert first.returncode == 0, first.stderr
    assert (work / "tests").is_dir() and (work / WORKDIR_MARK).is_file()
    assert claim().returncode == 0          # its own directory again
    (work / WORKDIR_MARK).unlink()
    again = claim()
    assert again.returncode == CLAIM_REFUSED
    assert "rxl did not make it" in again.stdout
