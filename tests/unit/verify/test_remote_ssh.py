"""rxl.verify.remote.RemoteRun over real SSH (tests/unit/sshd_fixture.py) to a fake FreeBSD.

The server runs commands with a PATH whose first directory holds small
shell stand-ins for FreeBSD's uname, sysctl, sha256, nextboot, shutdown
(and kyua), keeping their state in files; the ATF programs are shell
scripts speaking atf-c's ``-l`` and ``-r`` protocol. Everything else - SSH,
SFTP, the streamed run script, the console watcher, the parser - is real.
"""

import os
import shlex
import textwrap

import paramiko
import pytest

from rxl.verify import remote as R
from rxl.guest.protocol import host_sysctl_snapshot
from rxl.guest import ssh
from sshd_fixture import SSHD

TOPO = ('<groups><group level="1" cache-level="0"><cpu count="4" mask="f,0,0,0">0, 1, 2, 3'
        '</cpu><children><group level="2" cache-level="3"><cpu count="2" mask="3,0,0,0">0, 1'
        '</cpu></group><group level="2" cache-level="3"><cpu count="2" mask="c,0,0,0">2, 3'
        '</cpu></group></children></group></groups>')
#: The rebranded 15.0 snapshot's kernels (patches/BASE; sys/conf/newvers.sh: TYPE
#: Irid, RELEASE 0.0.2-ALPHA, sys/sys/param.h: 1500068): uname says Irid, the
#: osreldate says 15.
PRISTINE = "Irid 0.0.2-ALPHA #0 main-n1-2ec8aa904381: Mon Nov 30 05:00:00 UTC 2026"
PATCHED = "Irid 0.0.2-ALPHA #0 rxl-n5-6e3263468abc: Mon Nov 30 06:40:00 UTC 2026"


def fake_freebsd(bindir, state, boot):
    """Write the stand-ins; ``state`` holds bootfile, version, boottime, series."""
    scripts = {
        "uname": 'case "$1" in -s) echo Irid;; -r) echo 0.0.2-ALPHA;; -m) echo amd64;; '
                 'esac',
        "sysctl": textwrap.dedent(f"""\
            S={state}
            if [ "$1" = -NW ] && [ "$2" = net.inet.tcp ]; then  # settings: not the view
                ls $S/lb 2>/dev/null | sed /groups/d; exit 0
            fi
            if [ "$1" = -N ]; then
                case "$2" in
                net.inet.tcp) ls $S/lb 2>/dev/null;;
                net.inet.tcp.reuseport_lb.groups) [ -e $S/series ] && echo "$2" && exit 0; exit 1;;
                dev) echo dev.em.0.iflib.rxq0.cpu; echo dev.em.0.iflib.rxq1.cpu;
                     echo dev.em.0.iflib.core_spread; echo dev.em.0.%desc;;
                esac; exit 0
            fi
            case "$2" in
            kern.osreldate) echo 1500068;;
            kern.bootfile) cat $S/bootfile;;
            kern.version) cat $S/version; echo "    root@h:/obj/RXL";;
            kern.boottime) cat $S/boottime;;
            kern.sched.topology_spec) echo '{TOPO}';;
            hw.ncpu) echo 4;;
            net.isr.dispatch) echo direct;;
            dev.em.0.iflib.rxq0.cpu) echo 0;;
            dev.em.0.iflib.rxq1.cpu) echo 2;;
            dev.em.0.iflib.core_spread) echo 1;;
            net.inet.tcp.reuseport_lb.*) [ -f $S/lb/$2 ] && cat $S/lb/$2 && exit 0; exit 1;;
            *) echo "sysctl: unknown oid '$2'" >&2; exit 1;;
            esac"""),
        "sha256": 'sha256sum "$2" | cut -d" " -f1',
        "nextboot": f'[ "$1" = -k ] && echo "$2" > {state}/nextboot',
        "shutdown": textwrap.dedent(f"""\
            S={state}
            echo "{{ sec = $(date +%s%N), usec = 0 }}" > $S/boottime
            if [ -e $S/nextboot ]; then
                k={boot}/$(cat $S/nextboot)/kernel
                echo $k > $S/bootfile
                tr '\\000' '\\n' < $k | grep -a -o 'Irid 0.*2026' | head -n 1 > $S/version
                touch $S/series
                rm $S/nextboot
            fi"""),
    }
    bindir.mkdir()
    for name, body in scripts.items():
        (bindir / name).write_text("#!/bin/sh\n" + body + "\n")
        (bindir / name).chmod(0o755)
    state.mkdir()
    (state / "bootfile").write_text("/boot/kernel/kernel\n")
    (state / "version").write_text(PRISTINE + "\n")
    (state / "boottime").write_text("{ sec = 1, usec = 0 }\n")


ATF_PROG = textwrap.dedent("""\
    #!/bin/sh
    # an ATF program: -l lists cases, -r FILE CASE writes the result to FILE
    if [ "$1" = -l ]; then
        printf 'Content-Type: application/X-atf-tp; version="1"\\n\\n'
        printf 'ident: works\\n\\nident: breaks\\n'
        exit 0
    fi
    case "$3" in
    works) echo passed > "$2"; exit 0;;
    breaks) echo "some output"; echo "failed: member 4 got no connection" > "$2"; exit 1;;
    esac
    """)


@pytest.fixture
def box(tmp_path, monkeypatch):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    key = ssh.harness_key()
    fake_freebsd(tmp_path / "bin", tmp_path / "state", str(tmp_path / "boot"))
    (tmp_path / "boot").mkdir()
    root = tmp_path / "home"
    root.mkdir()
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    srv = SSHD(str(root), paramiko.Ed25519Key.from_private_key_file(str(key)),
               sftp_root="/", env=env).start()
    prog = tmp_path / "lb_test"
    prog.write_text(ATF_PROG)
    yield tmp_path, srv, prog
    srv.stop()


def job(tmp_path, prog, **kw):
    return R.RemoteJob(out=str(tmp_path / "out"), tests={"lb_test": str(prog)},
                       workdir=str(tmp_path / "target-work"), boot_dir=str(tmp_path / "boot"),
                       reboot_timeout=20, path=f"{tmp_path / 'bin'}:/usr/bin:/bin", **kw)


def test_refuses_pristine_kernel_then_installs_and_runs(box):
    tmp_path, srv, prog = box
    kernel = tmp_path / "kernel"
    kernel.write_bytes(b"\x7fELF\x00@(#)" + PATCHED.encode() + b"\n    root@h:/obj\n\x00")
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog))
        info = run.probe()
        assert info.bootfile == "/boot/kernel/kernel" and info.version == PRISTINE
        with pytest.raises(R.RemoteError, match="lacks the series"):
            R.check_target(info)
        summary = run.install_kernel(str(kernel))
        plan = run.install
        assert summary.startswith(f"kernel switched: /boot/kernel/kernel -> {plan.bootfile}")
        assert run.info.version == PATCHED and run.info.series
        R.check_target(run.info)
        assert (tmp_path / "boot" / f"kernel.rxl-{R.kernel_id(kernel.read_bytes())}" /
                "kernel").read_bytes() == kernel.read_bytes()
        # a second install of the same kernel is a no-op
        assert "not reinstalled" in run.install_kernel(str(kernel))

        assert "1 program, run.sh" in run.upload()
        res = run.run_tests(str(tmp_path / "out" / "console-patched.log"))
    assert res.outcome == "completed" and res.label == "patched"
    assert [(c.name, c.status) for c in res.cases] == [("lb_test:works", "passed"),
                                                       ("lb_test:breaks", "failed")]
    assert res.cases[1].reason == "member 4 got no connection"
    assert ("target reports FreeBSD 15 (kern.osreldate 1500068); uname: Irid 0.0.2-ALPHA, "
            "rebranded") in res.notes
    assert res.rxq == {"dev.em.0.iflib.rxq0.cpu": 0, "dev.em.0.iflib.rxq1.cpu": 2}
    assert res.sockets == [(0, 1), (2, 3)]
    assert res.sysctls["net.isr.dispatch"] == "direct"
    # nothing outside the work directory and the kernel directory was written
    assert sorted(p.name for p in (tmp_path / "target-work").iterdir()) == [
        ".rxl-workdir", "run.sh", "tests"]


def test_install_refuses_a_kernel_that_did_not_boot(box):
    tmp_path, srv, prog = box
    kernel = tmp_path / "kernel"
    kernel.write_bytes(b"\x7fELF\x00@(#)" + PATCHED.encode() + b"\n\x00")
    (tmp_path / "bin" / "nextboot").write_text("#!/bin/sh\nexit 0\n")  # setting lost
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog))
        run.probe()
        with pytest.raises(R.RemoteError, match="the new kernel did not boot"):
            run.install_kernel(str(kernel))


def test_kyua_path(box):
    tmp_path, srv, prog = box
    (tmp_path / "state" / "series").touch()
    (tmp_path / "bin" / "kyua").write_text(textwrap.dedent("""\
        #!/bin/sh
        # kyua's global options come before the command, as kyua(1) parses them
        while case "$1" in --*) true;; *) false;; esac; do
            case "$1" in --logfile=*) log=${1#--logfile=};; esac
            echo "$1" >> "$log.options"; shift
        done
        echo "kyua $1" > "$log"  # kyua truncates its log
        case "$1" in
        test) ls Kyuafile lb_test >/dev/null || exit 2; [ ! -e "${3#--results-file=}" ] || exit 3
            : > "${3#--results-file=}"; exit 1;;
        report-junit) out=${3#--output=}
            printf '<testsuite><testcase classname="lb_test" name="works" time="2.0"/>' > $out
            printf '<testcase classname="lb_test" name="breaks" time="1"><failure message="x"/>' >> $out
            printf '</testcase></testsuite>' >> $out;;
        esac
        """))
    (tmp_path / "bin" / "kyua").chmod(0o755)
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog))
        assert run.probe().kyua.endswith("/bin/kyua") and run.use_kyua()
        assert "Kyuafile" in run.upload()
        res = run.run_tests(str(tmp_path / "out" / "console-patched.log"))
    assert [(c.name, c.status, c.seconds) for c in res.cases] == [
        ("lb_test:works", "passed", 2), ("lb_test:breaks", "failed", 1)]
    assert any("kyua" in n for n in res.notes)
    assert (tmp_path / "target-work" / "tests" / "Kyuafile").read_text() == \
        R.kyuafile(["lb_test"], timeout=run.job.case_timeout)
    # one case at a time whatever the target's kyua.conf says; the log copied back
    assert "--variable=parallelism=1" in \
        (tmp_path / "target-work" / "kyua-test.log.options").read_text().split()
    assert (tmp_path / "out" / "kyua-test-patched.log").read_text() == "kyua test\n"
    assert (tmp_path / "out" / "kyua-report-patched.log").read_text() == "kyua report-junit\n"
    # kyua's own output is kept per boot (label), with each command and its exit status
    out = (tmp_path / "out" / "kyua-patched.out").read_text()
    assert out.startswith("$ cd ") and "[exit 1]\n$ kyua --logfile=" in out
    # a second run in the same work directory starts a new results file
    run.run_tests(str(tmp_path / "out" / "console-patched2.log"))


def lb_sysctls(state, **values):
    """The fake target's host lbgroup sysctls: the groups view and ``values``."""
    d = state / "lb"
    d.mkdir(exist_ok=True)
    (d / "net.inet.tcp.reuseport_lb.groups").write_text("(the view)\n")
    for name, value in values.items():
        (d / f"net.inet.tcp.reuseport_lb.{name}").write_text(f"{value}\n")


@pytest.mark.parametrize("kyua", [True, False])
def test_host_sysctls_are_recorded_after_the_cases_whoever_runs_them(box, kyua):
    """run.sh records the host's lbgroup sysctls before the cases; with kyua the
    record after them is taken once kyua is done (here kyua's run sets learn=1,
    as a case that forgot its vnet jail would), without kyua by run.sh itself."""
    from rxl.verify import hostsysctl
    tmp_path, srv, prog = box
    state = tmp_path / "state"
    (state / "series").touch()
    lb_sysctls(state, learn=0, window_ms=10000)
    learn = state / "lb" / "net.inet.tcp.reuseport_lb.learn"
    (tmp_path / "bin" / "kyua").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        while case "$1" in --*) true;; *) false;; esac; do shift; done
        case "$1" in
        test) echo 1 > {learn}; : > "${{3#--results-file=}}"; exit 0;;
        report-junit) printf '<testsuite><testcase classname="lb_test" name="works" ' \
            > ${{3#--output=}}; printf 'time="1"/></testsuite>' >> ${{3#--output=}};;
        esac
        """))
    (tmp_path / "bin" / "kyua").chmod(0o755)
    if not kyua:  # the case itself leaves learn set, and the window gone
        prog.write_text(ATF_PROG.replace("works) echo passed",
                                         f"works) echo 1 > {learn}; rm {learn.parent}/"
                                         "net.inet.tcp.reuseport_lb.window_ms; echo passed"))
    log = tmp_path / "out" / "console-patched.log"
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog, kyua=kyua))
        run.probe()
        run.upload()
        res = run.run_tests(str(log))
    got = {k: v for k, v in res.sysctls.items() if "reuseport_lb" in k}
    want = {"net.inet.tcp.reuseport_lb*@before": "3",
            "net.inet.tcp.reuseport_lb.groups@before": "(read-only)",
            "net.inet.tcp.reuseport_lb.learn@before": "0",
            "net.inet.tcp.reuseport_lb.window_ms@before": "10000",
            "net.inet.tcp.reuseport_lb.groups@after": "(read-only)",
            "net.inet.tcp.reuseport_lb.learn@after": "1"}
    if kyua:
        want.update({"net.inet.tcp.reuseport_lb*@after": "3",
                     "net.inet.tcp.reuseport_lb.window_ms@after": "10000"})
        # the record after kyua is in the log too: `rxl parse` of it sees it
        assert "==RXL== SYSCTL net.inet.tcp.reuseport_lb.learn@after: 1" in \
            log.read_text().split("==RXL== END patched")[1]
    else:
        want["net.inet.tcp.reuseport_lb*@after"] = "2"
    assert got == want
    assert hostsysctl.reasons({"patched": res}) == [
        "patched: host sysctl net.inet.tcp.reuseport_lb.learn: 0 before the cases, 1 after"] + \
        ([] if kyua else ["patched: host sysctl net.inet.tcp.reuseport_lb.window_ms: vanished "
                          "after the cases (was 10000)"])


UNLISTABLE_KYUA = textwrap.dedent("""\
    #!/bin/sh
    # kyua 0.13 with a program whose head sets is.exclusive: the listing is broken
    while case "$1" in --*) true;; *) false;; esac; do shift; done
    case "$1" in
    test) : > "${3#--results-file=}"; exit 1;;
    report-junit) out=${3#--output=}
        printf '<testsuite><testcase classname="lb_test" name="__test_cases_list__" ' > $out
        printf 'time="0.01"><error message="Unknown test case metadata property ' >> $out
        printf '&apos;is.exclusive&apos;"/></testcase></testsuite>' >> $out;;
    esac
    """)


@pytest.mark.parametrize("asked", [None, True])
def test_a_program_kyua_cannot_list_runs_directly_unless_kyua_was_asked_for(box, asked):
    """Auto (the target has kyua): the program kyua cannot list runs with run.sh's loop
    and its cases are the run's; with --kyua the broken listing stays the result."""
    tmp_path, srv, prog = box
    (tmp_path / "state" / "series").touch()
    (tmp_path / "bin" / "kyua").write_text(UNLISTABLE_KYUA)
    (tmp_path / "bin" / "kyua").chmod(0o755)
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog, kyua=asked))
        run.probe()
        run.upload()
        res = run.run_tests(str(tmp_path / "out" / "console-patched.log"))
    got = [(c.name, c.status) for c in res.cases]
    note = next(n for n in res.notes if n.startswith("kyua could not list lb_test"))
    direct = tmp_path / "out" / "console-patched-direct.log"
    if asked is None:
        assert got == [("lb_test:works", "passed"), ("lb_test:breaks", "failed")]
        assert note.endswith("its cases ran directly (run.sh's loop, console-*-direct.log)")
        assert "CASE" in direct.read_text()
        assert (tmp_path / "target-work" / "run-direct.sh").is_file()
    else:
        assert got == [("lb_test:__test_cases_list__", "broken")]
        assert note.endswith(", or --no-kyua") and not direct.exists()


def test_dry_run_lists_every_remote_action(tmp_path):
    kernel = tmp_path / "kernel"
    kernel.write_bytes(b"@(#)" + PATCHED.encode() + b"\n")
    prog = tmp_path / "lb_test"
    prog.write_text(ATF_PROG)
    d = ssh.DryRun(ssh.SSHTarget("h"))
    run = R.RemoteRun(d, R.RemoteJob(out=str(tmp_path / "out"), tests={"lb_test": str(prog)},
                                     kyua=True))
    assert run.probe() is None
    run.install_kernel(str(kernel))
    run.upload()
    assert run.run_tests(str(tmp_path / "c.log")) is None
    kid = R.kernel_id(kernel.read_bytes())
    text = "\n".join(d.commands)
    for want in [R.PROBE_COMMAND, f"mkdir -p /boot/kernel.rxl-{kid}",
                 f"sha256 -q /boot/kernel.rxl-{kid}/kernel.tmp",
                 f"nextboot -k kernel.rxl-{kid}", "shutdown -r now",
                 "mkdir -p /var/tmp/rxl/tests",
                 f"# sftp put {prog} /var/tmp/rxl/tests/lb_test (mode 755)",
                 "sh /var/tmp/rxl/run.sh", *R.kyua_commands("/var/tmp/rxl"),
                 "==RXL== SYSCTL $n@before: $v",  # run.sh's text: the record before
                 "sh -c " + shlex.quote(host_sysctl_snapshot("after"))]:  # after kyua
        assert want in text, want
    assert text.index("sh -c " + shlex.quote(host_sysctl_snapshot("after"))) > \
        text.index(R.kyua_commands("/var/tmp/rxl")[-1])
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


# ------------------------------------------------------------------ the pipeline and the CLI

def _opts(tmp_path, **kw):
    from rxl.verify.request import RunRequest
    base = dict(src=str(tmp_path / "src"), objdir=str(tmp_path / "obj"),
                out=str(tmp_path / "out"), guest_dir=str(tmp_path / "g"), kernel=None,
                pristine_kernel=None, spread=False, case_timeout=30,
                new_programs=("lb_test",), extra_tests=(), memory_mib=1024, dry_run=False,
                rebuild_world=False, auto_pristine=False,
                workdir=str(tmp_path / "target-work"))
    base.update(kw)
    return RunRequest(**base)


def test_pipeline_over_ssh_writes_the_three_reports(box, monkeypatch):
    import functools
    import json

    from rxl.verify import pipeline
    from rxl.verify.pipeline import StageRecord
    from rxl.verify.target import Target
    tmp_path, srv, prog = box
    (tmp_path / "state" / "series").touch()
    monkeypatch.setattr(R, "RemoteJob", functools.partial(
        R.RemoteJob, path=f"{tmp_path / 'bin'}:/usr/bin:/bin"))

    def world(opts, st):  # the ATF programs, as the world stage would hand them on
        st.tests = {"lb_test": prog}
        return StageRecord("world", "ok")

    opts = _opts(tmp_path, target=ssh.SSHTarget("127.0.0.1", srv.port, name="box"),
                 programs_dir=str(tmp_path))
    steps = (("world", world),) + tuple(s for s in Target().stages() if s[0] != "world")
    ok, st = pipeline.run(opts, steps, echo=lambda s: None)
    assert [r.name for r in st.records] == ["world", "series", "build", "target", "tests",
                                            "report"]
    assert [r.status for r in st.records] == ["ok", "skipped", "skipped", "ok", "ok", "ok"]
    target = st.records[3]
    assert ("box: FreeBSD 15 (kern.osreldate 1500068); uname: Irid 0.0.2-ALPHA, rebranded, "
            "amd64") in target.detail and "series yes" in target.detail
    assert f"rm -rf {opts.workdir}" in target.detail
    out = tmp_path / "out"
    rep = json.loads((out / "report.json").read_text())
    assert rep["verdict"]["ok"] is False
    assert rep["verdict"]["reasons"] == ["lb_test:breaks: failed on patched, must pass"]
    assert rep["runs"]["patched"]["rxq"] == {"dev.em.0.iflib.rxq0.cpu": 0,
                                             "dev.em.0.iflib.rxq1.cpu": 2}
    assert any("must-fail-on-pristine rule is not checked" in n
               for n in rep["runs"]["patched"]["notes"])
    assert '<testcase classname="patched.lb_test" name="breaks"' in (out / "junit.xml").read_text()
    assert "lb_test:works" in (out / "report.txt").read_text()
    log = (out / "target-commands.log").read_text()
    assert R.PROBE_COMMAND in log and f"sh {opts.workdir}/run.sh" in log


def test_pipeline_refuses_a_target_without_the_series(box):
    from rxl.verify import pipeline
    from rxl.verify.pipeline import StageRecord
    from rxl.verify.target import Target
    tmp_path, srv, prog = box

    def world(opts, st):
        st.tests = {"lb_test": prog}
        return StageRecord("world", "ok")

    opts = _opts(tmp_path, target=ssh.SSHTarget("127.0.0.1", srv.port, name="box"),
                 programs_dir=str(tmp_path))
    steps = (("world", world),) + tuple(s for s in Target().stages() if s[0] != "world")
    ok, st = pipeline.run(opts, steps, echo=lambda s: None)
    assert not ok and st.records[-1].name == "target"
    assert "lacks the series" in st.records[-1].detail
    assert not (tmp_path / "target-work").exists()  # nothing was copied


def test_cli_dry_run_over_ssh_prints_remote_commands(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from rxl.cli.main import main
    from fakefreebsd import kernel_bytes
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "work"))
    kernel = tmp_path / "kernel"
    kernel.write_bytes(kernel_bytes(tail=b"@(#)" + PATCHED.encode() + b"\n"))
    progs = tmp_path / "progs"
    progs.mkdir()
    (progs / "lb_test").write_text("#!/bin/sh\n")
    (progs / "lb_test").chmod(0o755)
    res = CliRunner().invoke(main, ["run", "--programs", str(progs), "--out",
                                    str(tmp_path / "out"), "--target", "ssh://root@h:2222",
                                    "--kernel", str(kernel), "--install-kernel", "--kyua",
                                    "--dry-run"])
    assert res.exit_code == 0, res.output
    kid = R.kernel_id(kernel.read_bytes())
    for want in ["# target: planned", R.PROBE_COMMAND, f"nextboot -k kernel.rxl-{kid}",
                 "shutdown -r now", "# tests: planned", "sh /var/tmp/rxl/run.sh",
                 "report-junit --results-file=/var/tmp/rxl/kyua.db",
                 "undo: rm -rf /var/tmp/rxl", "nextboot -D"]:
        assert want in res.output, want
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args,msg", [
    (["--install-kernel"], "needs an SSH target"),
    (["--target", "ssh://h:0"], "port 0 is not in 1..65535"),
    (["--target", "nosuch"], "no such target"),
])
def test_cli_target_refusals(tmp_path, monkeypatch, args, msg):
    from click.testing import CliRunner

    from rxl.cli.main import main
    monkeypatch.setenv("RXL_WORK", str(tmp_path))
    res = CliRunner().invoke(main, ["run", "--src", str(tmp_path), "--dry-run"] + args)
    assert res.exit_code != 0 and msg in res.output


def test_programs_dir_replaces_the_world_stage(tmp_path):
    from rxl.errors import BadOption
    from rxl.verify.pipeline import RunState
    from rxl.verify.target import Target
    d = tmp_path / "progs"
    d.mkdir()
    (d / "a_test").write_text("#!/bin/sh\n")
    (d / "a_test").chmod(0o755)
    (d / "notes.txt").write_text("not a program")
    opts = _opts(tmp_path, programs_dir=str(d))
    st = RunState.start(opts, lambda s: None)
    rec = Target().world(opts, st)
    assert rec.status == "skipped" and list(st.tests) == ["a_test"]
    (d / "a_test").chmod(0o644)
    with pytest.raises(BadOption, match="no executable files"):
        Target().world(opts, RunState.start(opts, lambda s: None))


@pytest.mark.parametrize("make", ["dir", "file", "link"])
def test_a_workdir_rxl_did_not_make_is_refused_and_left_alone(box, make):
    """An existing directory without the mark (or a file, or a symbolic link
    to one) is never written to: its undo, rm -rf, would take what it holds."""
    tmp_path, srv, prog = box
    w = tmp_path / "target-work"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "keep").write_text("x")
    if make == "dir":
        w.mkdir()
        (w / "keep").write_text("x")
    elif make == "file":
        w.write_text("x")
    else:
        w.symlink_to(theirs)
    def state():  # everything but the harness's own $RXL_WORK (known_hosts)
        return sorted(str(p) for p in tmp_path.rglob("*")
                      if not str(p).startswith(str(tmp_path / "work")))
    before = state()
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog))
        with pytest.raises(R.RemoteError, match="--workdir .*(did not make|symbolic link)"):
            run.upload()
    assert state() == before


def test_a_workdir_rxl_made_is_used_again(box):
    tmp_path, srv, prog = box
    with ssh.SSHSession(ssh.SSHTarget("127.0.0.1", srv.port), connect_timeout=5) as s:
        run = R.RemoteRun(s, job(tmp_path, prog))
        run.upload()
        assert "1 program, run.sh" in run.upload()
    assert (tmp_path / "target-work" / R.WORKDIR_MARK).is_file()
