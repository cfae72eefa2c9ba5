"""rxl.guest.console.watch with a scripted transport and a fake clock."""

import pytest

from rxl.guest.console import (GuestCrashed, GuestHang, GuestPanic, GuestTimeout, Transport,
                         watch)


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
