"""``python -m rxl.decide.core``: what ``make core`` and ``make core-check`` run.

A compiler is faked with true(1) and false(1): the argv and exit statuses
are the subject here; the real compiles run in ``make core-check``."""

import shlex

from rxl.decide import core


def _env(monkeypatch, tmp_path, cc):
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", cc)
    monkeypatch.setenv("RXL_BUILD_DIR", str(tmp_path))


def test_dry_run_prints_the_build_line_or_the_six_check_lines(tmp_path, monkeypatch, capsys):
    _env(monkeypatch, tmp_path, "true")
    assert core.main(["--dry-run"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert shlex.split(line) == core.build_argv(core.library_path())
    assert core.main(["--dry-run", "--check"]) == 0
    lines = [shlex.split(ln) for ln in capsys.readouterr().out.splitlines()]
    # each core alone, without and with INVARIANTS, as the kernel builds it
    assert [(a[a.index("-c") + 1], a[-1], "-DINVARIANTS" in a) for a in lines] == [
        (str(core.ROOT / src), str(tmp_path / "check" / (src.rsplit("/", 1)[1][:-2] + suffix)),
         inv)
        for src in core.CORE_SOURCES for suffix, inv in ((".o", False), (".inv.o", True))]
    assert all(a[0] == "true" and a[1:1 + len(core.CFLAGS)] == list(core.CFLAGS) for a in lines)
    assert not (tmp_path / "check").exists()            # a dry run compiles nothing


def test_check_runs_every_line_and_fails_on_the_first_failure(tmp_path, monkeypatch, capsys):
    _env(monkeypatch, tmp_path, "true")
    assert core.main(["--check"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2 * len(core.CORE_SOURCES)
    _env(monkeypatch, tmp_path, "false")
    assert core.main(["--check"]) == 1
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 1               # stopped at the first
    assert out.err.startswith("rxl: core check failed:")


def test_a_failed_build_is_exit_1_with_one_line(tmp_path, monkeypatch, capsys):
    _env(monkeypatch, tmp_path, "/nonexistent/rxl-cc")
    assert core.main([]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rxl: building the C cores: /nonexistent/rxl-cc: ")
    assert err.count("\n") == 1


def test_another_compiler_names_another_library(monkeypatch):
    """The library's name hashes the compiler's argv too: a build with another
    CC (make test-asan's RXL_CORE_CC) is never served by the plain one."""
    monkeypatch.delenv("RXL_CORE_CC", raising=False)
    monkeypatch.setenv("CC", "cc")
    plain = core.sources_digest()
    monkeypatch.setenv("CC", "clang-16 -fsanitize=address")
    assert core.sources_digest() != plain
    monkeypatch.setenv("CC", "cc")
    assert core.sources_digest() == plain
