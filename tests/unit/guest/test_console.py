"""rxl.guest.console.watch with a scripted transport and a fake clock."""

import pytest

from rxl.guest.console import (GuestCrashed, GuestHang, GuestNoRoot, GuestPanic, GuestTimeout,
                               Transport, watch)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class Scripted(Transport):
    """Yields (delay_s, bytes-or-None) steps; advances the fake clock by delay."""

    def __init__(self, clock, steps, forever=False):
        self.clock, self.steps, self.forever = clock, list(steps), forever
        self.stopped = False

    def start(self):
        pass

    def read(self, timeout):
        if not self.steps:
            self.clock.t += timeout
            return b"" if self.forever else None
        delay, data = self.steps.pop(0)
        if delay > timeout:
            self.clock.t += timeout
            self.steps.insert(0, (delay - timeout, data))
            return b""
        self.clock.t += delay
        return data

    def alive(self):
        return not self.stopped

    def stop(self):
        self.stopped = True
        return 0


def test_end_marker_then_poweroff(tmp_path):
    clock = Clock()
    log = tmp_path / "c.log"
    seen = []
    tr = Scripted(clock, [(0.5, b"boot\r\n==RXL== BEGIN x\r\n"), (2, b"==RXL== E"),
                          (0.1, b"ND x\r\nUptime: 3s\n"), (0.2, None)])
    res = watch(tr, str(log), clock=clock, echo=seen.append)
    assert res.end_seen_at == pytest.approx(2.6)
    assert res.first_output_at == pytest.approx(0.5)
    assert seen == ["==RXL== BEGIN x", "==RXL== END x"]
    assert log.read_bytes().startswith(b"boot\r\n==RXL== BEGIN x")
    assert tr.stopped


def test_end_marker_without_poweroff_is_still_done(tmp_path):
    clock = Clock()
    tr = Scripted(clock, [(1, b"==RXL== END x\n")], forever=True)
    res = watch(tr, str(tmp_path / "c.log"), clock=clock, poweroff_grace=10)
    assert res.seconds >= 10 and tr.stopped


def test_panic_raises_after_grace_with_backtrace_in_log(tmp_path):
    clock = Clock()
    log = tmp_path / "c.log"
    tr = Scripted(clock, [(1, b"panic: page fault\n"), (1, b"KDB: stack backtrace:\n")],
                  forever=True)
    with pytest.raises(GuestPanic, match="page fault") as ei:
        watch(tr, str(log), clock=clock, panic_grace=5)
    assert ei.value.log == str(log) and ei.value.seconds >= 6
    assert b"stack backtrace" in log.read_bytes()
    assert tr.stopped


def test_hang(tmp_path):
    clock = Clock()
    tr = Scripted(clock, [(1, b"Trying to mount root\n")], forever=True)
    with pytest.raises(GuestHang, match="no console output for 30 s") as ei:
        watch(tr, str(tmp_path / "c.log"), clock=clock, idle_timeout=30)
    assert ei.value.last_line == "Trying to mount root"


def test_total_timeout(tmp_path):
    clock = Clock()
    tr = Scripted(clock, [(1, b"x\n")] * 100, forever=True)
    with pytest.raises(GuestTimeout):
        watch(tr, str(tmp_path / "c.log"), clock=clock, total_timeout=50, idle_timeout=30)


def test_exit_before_end_marker_is_crashed(tmp_path):
    clock = Clock()
    tr = Scripted(clock, [(1, b"==RXL== BEGIN x\n"), (1, b"no newline at eof")])
    with pytest.raises(GuestCrashed, match="before the end marker") as ei:
        watch(tr, str(tmp_path / "c.log"), clock=clock)
    assert ei.value.last_line == "no newline at eof"


# ------------------------------------------------------------ SerialTransport, real processes

from rxl.guest.console import SerialTransport  # noqa: E402


def test_serial_real_process_end_and_exit(tmp_path):
    log = tmp_path / "c.log"
    tr = SerialTransport(["sh", "-c", "echo boot; echo '==RXL== BEGIN r'; sleep 0.2; "
                                      "echo '==RXL== END r'; exit 0"])
    res = watch(tr, str(log), poweroff_grace=10)
    assert res.marks == ["==RXL== BEGIN r", "==RXL== END r"]
    assert res.exit_code == 0 and not tr.alive()
    assert b"boot" in log.read_bytes()


def test_serial_bytes_unchanged(tmp_path):
    """The pty adds no carriage returns: the log holds exactly what was written."""
    log = tmp_path / "c.log"
    tr = SerialTransport(["sh", "-c", "printf 'a\\r\\nb\\n==RXL== END x\\n'"])
    watch(tr, str(log), poweroff_grace=10)
    assert log.read_bytes() == b"a\r\nb\n==RXL== END x\n"


def test_serial_real_process_crash_names_exit(tmp_path):
    tr = SerialTransport(["sh", "-c", "echo '==RXL== BEGIN r'; exit 3"])
    with pytest.raises(GuestCrashed, match=r"exit 3"):
        watch(tr, str(tmp_path / "c.log"))


def test_serial_real_process_hang_is_stopped(tmp_path):
    tr = SerialTransport(["sh", "-c", "echo '==RXL== BEGIN r'; exec sleep 60"])
    with pytest.raises(GuestHang):
        watch(tr, str(tmp_path / "c.log"), idle_timeout=1)
    assert not tr.alive()


def test_serial_missing_binary(tmp_path):
    with pytest.raises(FileNotFoundError, match="qemu-system-x86"):
        watch(SerialTransport(["/nonexistent/qemu"]), str(tmp_path / "c.log"))


def test_the_mountroot_prompt_fails_the_boot_at_once(tmp_path):
    """Issue 24: the 14 module boot's kernel could not load msdosfs.ko and stopped at
    vfs_mountroot.c's ``printf("\\nmountroot> ")`` (no newline after it), and the
    watch waited its 420 s idle timeout. The prompt ends the watch when it is read,
    naming the first line that says why."""
    clock = Clock()
    log = tmp_path / "c.log"
    tr = Scripted(clock, [
        (1, b"kldload: unexpected relocation type 42, symbol index 143\r\n"),
        (0.5, b"KLD file msdosfs.ko - could not finalize loading\r\n"),
        (0.5, b"Mounting from msdosfs:/dev/ada0s1 failed with error 19.\r\n"),
        (0.5, b"  <empty line>    Abort manual input\r\n\r\nmountroot> ")], forever=True)
    with pytest.raises(GuestNoRoot) as ei:
        watch(tr, str(log), clock=clock, idle_timeout=420)
    e = ei.value
    assert e.kind == "mountroot" and e.seconds == pytest.approx(2.5)
    assert "mountroot> prompt after 'kldload: unexpected relocation type 42" in str(e)
    assert e.last_line == "mountroot>"
    assert tr.stopped and log.read_bytes().endswith(b"mountroot> ")
    # a finished line too (a console that echoed a newline), and no cause line
    clock2 = Clock()
    tr2 = Scripted(clock2, [(3, b"mountroot> \r\n")], forever=True)
    with pytest.raises(GuestNoRoot, match=r"at the mountroot> prompt after 3 s") as ei:
        watch(tr2, str(tmp_path / "d.log"), clock=clock2)
    # a line that only mentions it is no prompt
    clock3 = Clock()
    tr3 = Scripted(clock3, [(1, b"see mountroot> below\n==RXL== END x\n"), (1, None)])
    assert watch(tr3, str(tmp_path / "e.log"), clock=clock3).end_seen_at == pytest.approx(1)
