"""rxl.verify.schedule and the own guest's boots N at a time (``rxl run --boot-jobs``).

The boots are stand-ins (the real QEMU takes minutes under TCG): each records what
the boot stage gave it (argv, port, serial log) and meets the others at a barrier,
which only boots running at the same time can pass.
"""

import re
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from rxl.cli.main import main
from rxl.guest import qemu as qemu_mod
from rxl.guest.sshkeys import generate_ed25519
from rxl.verify import modboot, ownguest, parse, pipeline, schedule
from rxl.verify.ownguest import CrashedBoot, SerialGuest, SSHGuest
from rxl.verify.pipeline import RunState, StageRecord
from rxl.verify.request import RunRequest

from test_run import PK, fake_tree  # noqa: F401  (the fixture)

DATA = Path(__file__).resolve().parents[2] / "data" / "console"
LABELS = ("patched", "spread", "pristine")


# ------------------------------------------------------------------ the pure parts
def test_default_is_one_boot_per_cpu_and_one_when_unknown():
    assert schedule.default_jobs(lambda: 2) == 2
    assert schedule.default_jobs(lambda: 1) == 1
    assert schedule.default_jobs(lambda: None) == 1      # os.cpu_count() may not know
    assert schedule.default_jobs(lambda: 64) == schedule.MAX_JOBS


def test_one_job_keeps_the_order_and_more_start_the_case_boots_first():
    cases = lambda lb: lb != "spread"  # noqa: E731
    assert schedule.order(LABELS, 1, cases) == ["patched", "spread", "pristine"]
    assert schedule.order(LABELS, 2, cases) == ["patched", "pristine", "spread"]
    assert schedule.order(LABELS, 3, cases) == ["patched", "pristine", "spread"]


def test_describe_says_what_starts_together_and_what_waits():
    assert schedule.describe(["patched", "pristine", "spread", "modules"], 2, "") == (
        "# boots: 2 at a time (--boot-jobs 2), each with its own root, logs and SSH port: "
        "patched + pristine start together; then spread, modules, each as one ends")
    assert schedule.describe(list(LABELS), 1, "") == \
        "# boots: one at a time (--boot-jobs 1): patched, spread, pristine"


def test_ports_are_distinct_even_when_the_kernel_gives_one_again():
    given = iter([40000, 40000, 40001, 40000, 40002])
    assert schedule.distinct_ports(LABELS, lambda: next(given)) == \
        {"patched": 40000, "spread": 40001, "pristine": 40002}
    with pytest.raises(RuntimeError, match="no free port for boot spread"):
        schedule.distinct_ports(LABELS, lambda: 40000, tries=3)


def test_in_order_puts_the_labels_first():
    assert list(schedule.in_order({"b": 1, "x": 0, "a": 2}, ["a", "b"])) == ["a", "b", "x"]


def test_two_jobs_run_at_once_and_every_job_ends_whatever_the_others_do():
    met = threading.Barrier(2, timeout=10)
    order = []

    def job(name, fail=False):
        def run():
            met.wait()          # passes only while both run at the same time
            order.append(name)
            if fail:
                raise OSError(5, "boom")
            return name
        return run

    out = schedule.run_jobs([("a", job("a", fail=True)), ("b", job("b"))], 2)
    assert list(out) == ["a", "b"]
    assert isinstance(out["a"].error, OSError) and out["b"].value == "b"
    assert sorted(order) == ["a", "b"]


def test_one_job_runs_them_one_after_another_in_order():
    seen = []
    out = schedule.run_jobs([(n, lambda n=n: seen.append((n, threading.current_thread())))
                             for n in ("x", "y", "z")], 1)
    assert [n for n, _ in seen] == ["x", "y", "z"] and list(out) == ["x", "y", "z"]
    assert all(t is threading.main_thread() for _, t in seen)


# ------------------------------------------------------------------ the SSH guest's boots
def _req(tmp_path, **kw):
    base = dict(src=str(tmp_path / "src"), objdir=str(tmp_path / "obj"),
                out=str(tmp_path / "out"), guest_dir=str(tmp_path / "g"),
                kernel=str(tmp_path / "kernel"), pristine_kernel=str(tmp_path / "pk"),
                case_timeout=60, new_programs=(), extra_tests=(), memory_mib=1024,
                dry_run=False, ssh_wait=1.0)
    base.update(kw)
    return RunRequest(**base)


@pytest.fixture
def ssh_boots(tmp_path, monkeypatch):
    """``run(jobs, fail=(), finish=order)``: the SSH guest's boot stage over three
    staged roots with ``boot_one`` replaced: each stand-in records its argv, port and
    serial log, waits at a barrier for ``jobs`` boots (so a schedule that ran fewer at
    once would time out), ends in the order ``finish`` gives, and either keeps the
    completed run of tests/data/console/synthetic-pass.log or (``fail``) crashes."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.setattr(qemu_mod, "find_ovmf", lambda: "/fw/OVMF_CODE.fd")

    def run(jobs, fail=(), finish=LABELS, **kw):
        req = _req(tmp_path, boot_jobs=jobs, **kw)
        Path(req.out).mkdir(parents=True, exist_ok=True)
        st = RunState.start(req, echo=lambda s: None)
        st.kernel, st.pristine_kernel = req.kernel, req.pristine_kernel
        st.roots = {lb: str(st.stage_dir / lb) for lb in LABELS}
        st.host_keys = {lb: generate_ed25519(tmp_path / f"hk-{lb}") for lb in LABELS}
        met = threading.Barrier(min(jobs, len(LABELS)), timeout=10)
        turn = threading.Condition()
        ended = []
        calls = []

        def boot_one(self, req_, st_, label, argv, port, serial):
            calls.append((label, argv, port, serial))
            if jobs > 1 and len(calls) <= jobs:
                met.wait()
            with turn:  # end in the order asked, whatever the order of starts
                turn.wait_for(lambda: [x for x in finish if x not in ended][0] == label
                              or jobs == 1, timeout=10)
                ended.append(label)
                turn.notify_all()
            if label in fail:
                raise CrashedBoot("QEMU exited with code 1 before SSH answered")
            log = str(Path(req_.out) / f"console-{label}.log")
            Path(log).write_text((DATA / "synthetic-pass.log").read_text())
            st_.logs[label] = log
            st_.runs[label] = parse.parse_file(log)
            return f"{label}: SSH after 1 s"

        monkeypatch.setattr(SSHGuest, "boot_one", boot_one)
        rec = SSHGuest().run_cases(req, st)
        return rec, st, calls, ended
    return run


def _opt(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_concurrent_guests_each_get_their_own_port_root_and_logs(ssh_boots):
    rec, st, calls, _ = ssh_boots(3)
    assert rec.status == "ok", rec.detail
    assert sorted(c[0] for c in calls) == sorted(LABELS)
    ports = [c[2] for c in calls]
    assert len(set(ports)) == 3
    for label, argv, port, serial in calls:
        netdevs = [v for v in _opt(argv, "-netdev") if "hostfwd=" in v]
        assert netdevs == [f"user,id=net1,hostfwd=tcp:127.0.0.1:{port}-:22"]
        assert _opt(argv, "-serial") == [f"file:{serial}"]
        assert serial.endswith(f"/serial-{label}.log")
        drives = [d for d in _opt(argv, "-drive") if "id=root" in d]
        assert drives == [f"if=none,id=root,format=raw,file=fat:{st.roots[label]},"
                          "snapshot=on"]
    assert len({tuple(c[1]) for c in calls}) == 3


def test_results_keep_the_boots_order_whatever_order_they_end_in(ssh_boots):
    rec, st, calls, ended = ssh_boots(3, finish=("pristine", "spread", "patched"))
    assert ended == ["pristine", "spread", "patched"]
    assert list(st.logs) == list(LABELS) and list(st.runs) == list(LABELS)
    assert rec.detail == "patched: SSH after 1 s; spread: SSH after 1 s; pristine: SSH after 1 s"
    one, st1, _, _ = ssh_boots(1)
    assert one.detail == rec.detail and list(st1.runs) == list(st.runs)


def test_one_boot_job_boots_in_today_s_order(ssh_boots):
    _, _, calls, _ = ssh_boots(1)
    assert [c[0] for c in calls] == ["patched", "spread", "pristine"]
    _, _, calls, _ = ssh_boots(2)
    assert [c[0] for c in calls][2] == "spread"   # the case boots first, spread after


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_a_failing_boot_fails_the_stage_and_the_verdict(ssh_boots, jobs, tmp_path):
    rec, st, _, _ = ssh_boots(jobs, fail=("pristine",))
    assert rec.status == "failed"
    assert "pristine: QEMU exited with code 1 before SSH answered" in rec.detail
    req = _req(tmp_path, boot_jobs=jobs)
    m = SSHGuest()
    m.collect(req, st)
    m.report(req, st)
    assert not st.verdict.ok
    assert any(r.startswith("pristine") for r in st.verdict.reasons), st.verdict.reasons


# ------------------------------------------------------------------ the module boot beside
@pytest.fixture
def with_modules(tmp_path, monkeypatch):
    """The serial guest's pipeline from the boot stage on, three boots printing
    tests/data/console/synthetic-pass.log, ``modboot.stage`` a stand-in that meets a
    boot at a barrier (it must run beside them) and leaves its own log and run, or
    raises ``fail``."""
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    monkeypatch.setattr(qemu_mod, "find_ovmf", lambda: "/fw/OVMF_CODE.fd")

    def run(jobs, fail=None):
        req = _req(tmp_path, boot_jobs=jobs, modules=True)
        met = threading.Barrier(2, timeout=10)
        seen = {}

        def stage(req_, st_, guest_config, driver):
            seen["thread"] = threading.current_thread()
            if jobs > 1:
                met.wait()
            log = str(Path(req_.out) / "console-modules.log")
            Path(log).write_text("\n".join([
                "==RXL== BEGIN modules", "==RXL== ATF BEGIN", "==RXL== LIST modules kldload",
                "==RXL== LIST modules nic", "==RXL== CASE modules kldload rc=0 t=0 passed",
                "==RXL== CASE modules nic rc=0 t=0 passed", "==RXL== ATF END",
                "==RXL== END"]) + "\n")
            st_.logs["modules"] = log
            st_.runs["modules"] = parse.parse_file(log)
            if fail:
                raise fail
            return StageRecord("modules", "ok", log=log, detail="MINIMAL (stand-in)")

        monkeypatch.setattr(modboot, "stage", stage)

        def watch(self, req_, st_, label, argv):
            log = str(Path(req_.out) / f"console-{label}.log")
            st_.logs[label] = log
            Path(log).write_text((DATA / "synthetic-pass.log").read_text())
            if jobs > 1 and label == "patched":
                met.wait()
            return f"{label}: end marker", None

        monkeypatch.setattr(SerialGuest, "watch_console", watch)
        m = SerialGuest()

        def image(req_, st_):
            st_.kernel, st_.pristine_kernel = req_.kernel, req_.pristine_kernel
            st_.roots = {lb: str(st_.stage_dir / lb) for lb in LABELS}
            return StageRecord("image", "ok")
        steps = [("image", image), ("boot", m.run_cases), ("parse", m.collect),
                 ("modules", m.modules), ("report", m.report)]
        ok, st = pipeline.run(req, steps, echo=lambda s: None)
        return ok, st, seen
    return run


def test_the_module_boot_runs_beside_the_boots_and_its_stage_hands_it_on(with_modules):
    ok, st, seen = with_modules(2)
    assert seen["thread"] is not threading.main_thread()
    assert [r.name for r in st.records] == ["image", "boot", "parse", "modules", "report"]
    mod = st.records[3]
    assert mod.status == "ok" and "built and booted beside the boots" in mod.detail
    assert list(st.runs) == ["patched", "spread", "pristine", "modules"]
    assert st.runs["modules"].cases and not modboot.reasons(st.runs)
    # the parse stage saw the boots' logs only, as with one boot at a time
    assert "modules" not in st.records[2].detail
    ok1, st1, seen1 = with_modules(1)
    assert seen1["thread"] is threading.main_thread()
    assert list(st1.runs) == list(st.runs) and st1.verdict.ok == st.verdict.ok
    assert [c.case for c in st1.runs["modules"].cases] == \
        [c.case for c in st.runs["modules"].cases]


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_module_boot_that_fails_fails_the_run_in_its_own_stage(with_modules, jobs):
    ok, st, _ = with_modules(jobs, fail=pipeline.StageFailed("modules: guest panic: x"))
    assert not ok and not st.verdict.ok
    assert [r.name for r in st.records][-1] == "modules"
    assert st.records[-1].status == "failed"
    assert st.verdict.reasons == ["modules: guest panic: x"]
    assert "modules" in st.runs   # kept for the report, as before


# ------------------------------------------------------------------ the option
def _dry(fake_tree, tmp_path, monkeypatch, *args):
    monkeypatch.setenv("RXL_WORK", str(tmp_path / "w"))
    return CliRunner().invoke(main, ["run", "--src", str(fake_tree), "--objdir",
                                     str(tmp_path / "obj"), "--out", str(tmp_path / "out"),
                                     "--guest-dir", str(tmp_path / "g"), "--dry-run",
                                     "--transport", "ssh", *PK(tmp_path), *args])


def test_dry_run_shows_the_schedule_and_every_argv(fake_tree, tmp_path,  # noqa: F811
                                                   monkeypatch):
    monkeypatch.setattr(schedule.os, "cpu_count", lambda: 2)
    res = _dry(fake_tree, tmp_path, monkeypatch)
    assert res.exit_code == 0, res.output
    assert ("# boots: 2 at a time (--boot-jobs 2; its default, os.cpu_count() = 2), each "
            "with its own root, logs and SSH port: patched + pristine start together; then "
            "spread, each as one ends") in res.output
    qemu = [ln for ln in res.output.splitlines() if ln.startswith("qemu-system-x86_64")]
    assert len(qemu) == 3
    ports = {re.search(r"hostfwd=tcp:127.0.0.1:(\d+)-:22", q).group(1) for q in qemu}
    assert len(ports) == 3
    res = _dry(fake_tree, tmp_path, monkeypatch, "--boot-jobs", "1")
    assert "# boots: one at a time (--boot-jobs 1): patched, spread, pristine" in res.output
    res = _dry(fake_tree, tmp_path, monkeypatch, "--boot-jobs", "0")
    assert res.exit_code == 2 and "--boot-jobs" in res.output
