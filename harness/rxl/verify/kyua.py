"""The kyua path of ``rxl run --target``: the Kyuafile, the kyua commands, kyua's JUnit.

Used by :class:`rxl.verify.remote.RemoteRun` when the target has kyua (or
``--kyua``): the programs are copied with a Kyuafile (:func:`kyuafile`), kyua
runs them one at a time and logs in the work directory (:func:`kyua_commands`),
and ``kyua report-junit``'s file becomes the run's cases
(:func:`cases_from_kyua_junit`). Run for real on the own guest with the
snapshot's kyua 0.13 (docs/results/ssh.md).
"""

from __future__ import annotations

import math
import re
import shlex
import xml.etree.ElementTree as ET
from typing import List, Optional, Sequence, Tuple

from rxl.errors import MachineError
from rxl.verify.parse import CaseResult

#: The Kyuafile's metadata for every program (kyuafile(5); a test case's own
#: metadata overrides it): the series' cases change global sysctls and listen on
#: fixed ports, so none runs beside another (``is_exclusive``), and they set
#: sysctls and tunables, so root (``required_user``). The snapshot's kyua 0.13 does
#: not accept the ATF head variable ``is.exclusive`` (engine/atf_list.cpp knows
#: only descr, has.cleanup, require.*, timeout and X-*), so a Kyuafile (as
#: FreeBSD's TEST_METADATA makes one) is the place that says it.
KYUAFILE_METADATA = 'is_exclusive=true, required_user="root"'


#: The test suite the Kyuafile declares; --atf-var values are its variables.
SUITE = "rxl"


def kyuafile(programs: Sequence[str], *, timeout: Optional[int] = None) -> str:
    """A Kyuafile (syntax 2) listing ATF test ``programs`` (basenames in its directory),
    each with :data:`KYUAFILE_METADATA` and, when given, ``timeout`` (seconds per
    case, as the rc loop's ``--case-timeout``; a case's own ``timeout`` wins).
    Raises ValueError for a name that is not a plain file name or a timeout < 1."""
    if timeout is not None and timeout < 1:
        raise ValueError(f"timeout {timeout}: must be at least 1 s")
    meta = KYUAFILE_METADATA + (f", timeout={timeout}" if timeout else "")
    lines = ["syntax(2)", "", f'test_suite("{SUITE}")', ""]
    for p in sorted(programs):
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", p):
            raise ValueError(f"{p!r}: not a plain program name")
        lines.append(f'atf_test_program{{name="{p}", {meta}}}')
    return "\n".join(lines) + "\n"


#: kyua(1)'s logs of ``kyua test`` and ``kyua report-junit``, in the work directory
#: (the default, ``~/.kyua/logs``, is outside it; root's home does not exist on the
#: own guest), copied back to ``<out>``. One per command: kyua truncates its log.
KYUA_LOGS = ("kyua-test.log", "kyua-report.log")
#: kyua.conf(5) ``parallelism`` for the run, given on the command line so a
#: target's own /etc/kyua/kyua.conf cannot raise it: one case at a time (the
#: default of kyua 0.13 too, engine/config.cpp).
KYUA_PARALLELISM = 1


def kyua_commands(workdir: str, atf_vars: Sequence[Tuple[str, str]] = ()) -> List[str]:
    """``kyua test`` over the work directory's Kyuafile (one case at a time,
    :data:`KYUA_PARALLELISM`; a results file of an earlier run removed first), then
    ``kyua report-junit``; each logs to its file of :data:`KYUA_LOGS` in ``workdir``.
    ``atf_vars`` (``--atf-var NAME=VALUE``) become the suite's configuration
    variables, which kyua hands to every ATF case as ``-v NAME=VALUE``."""
    tests = f"{workdir}/tests"
    db = f"{workdir}/kyua.db"
    test_log, report_log = (f"{workdir}/{n}" for n in KYUA_LOGS)
    suite = "".join(" " + shlex.quote(f"--variable=test_suites.{SUITE}.{k}={v}")
                    for k, v in atf_vars)
    return [f"cd {tests} && rm -f {db} && kyua --logfile={test_log} "
            f"--variable=parallelism={KYUA_PARALLELISM}{suite} "
            f"test --kyuafile={tests}/Kyuafile --results-file={db}",
            f"kyua --logfile={report_log} report-junit --results-file={db} "
            f"--output={workdir}/kyua-junit.xml"]


#: JUnit child element -> ATF status (kyua report-junit: failed -> failure,
#: broken -> error, skipped -> skipped; passed and expected_failure have none).
_KYUA_STATUS = {"failure": "failed", "error": "broken", "skipped": "skipped"}


#: kyua report-junit's stderr block for a result without a message attribute
#: (``<skipped/>``, drivers/report_junit.cpp): "Skipped result details", a dashed
#: line, a blank line, the reason, a blank line.
_DETAILS = re.compile(r"^\w+ result details\n-+\n\n(.*?)\n\n", re.S | re.M)


def _details(system_err: str) -> str:
    """The reason in kyua's "... result details" block of ``system_err``, or ""."""
    m = _DETAILS.search(system_err)
    return " ".join(m.group(1).split()) if m else ""


class KyuaJUnitError(MachineError):
    """kyua's JUnit file of a target's run does not parse."""


#: Longest case time believed, s: a week (kyua's own timeout is 300 s per case).
MAX_CASE_SECONDS = 7 * 86400


def case_seconds(text: Optional[str]) -> Optional[int]:
    """A JUnit ``time`` attribute as whole seconds; None when absent or not a
    time (not a number, ``inf``, ``nan``, ``1e400``, negative, over
    :data:`MAX_CASE_SECONDS`): unknown, never a guess."""
    try:
        t = float(text or 0)
    except ValueError:
        return None
    if not math.isfinite(t) or not 0 <= t <= MAX_CASE_SECONDS:
        return None
    return int(round(t))


def cases_from_kyua_junit(xml_text: str, tests_dir: str) -> List[CaseResult]:
    """kyua's JUnit -> rxl.verify.parse.CaseResult list (program as ``tests_dir/<prog>``).

    kyua names a case's class after its program path relative to the
    Kyuafile, dots for slashes. A result without a ``message`` (kyua writes
    ``<skipped/>`` bare) takes its reason from the system-err details block.
    Raises KyuaJUnitError on XML that does not parse.
    """
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise KyuaJUnitError(f"kyua's JUnit does not parse: {exc}") from None
    out = []
    for tc in root.iter("testcase"):
        prog = (tc.get("classname") or "").replace(".", "/")
        status, reason = "passed", ""
        for child in tc:
            if child.tag in _KYUA_STATUS:
                status = _KYUA_STATUS[child.tag]
                reason = (child.get("message") or "").strip()
                break
        if status != "passed" and not reason:
            reason = _details(tc.findtext("system-err") or "")
        secs = case_seconds(tc.get("time"))
        out.append(CaseResult(prog=f"{tests_dir}/{prog}", case=tc.get("name") or "",
                              status=status, reason=reason, seconds=secs))
    return out


#: The case kyua reports when a program's case list cannot be read (kyua 0.13:
#: engine/atf_list.cpp; the program's cases are then not run at all).
LIST_CASE = "__test_cases_list__"


def unlisted_programs(cases) -> List[str]:
    """Basenames of the programs kyua could not list (a ``__test_cases_list__``
    case that did not pass), in order."""
    return [c.prog.rsplit("/", 1)[-1] for c in cases
            if c.case == LIST_CASE and c.status != "passed"]


def listing_notes(cases, *, fallback: bool = False) -> List[str]:
    """Report notes for the programs kyua could not list (``cases``:
    rxl.verify.parse.CaseResult list): which program and kyua's reason, and for
    kyua 0.13's ``Unknown test case metadata property 'is.exclusive'``
    (2026-12-01 on the own guest) what to do. ``fallback``: their cases ran
    directly instead (:meth:`rxl.verify.remote.RemoteRun.run_tests`)."""
    out = []
    for c in cases:
        if c.case != LIST_CASE or c.status == "passed":
            continue
        note = f"kyua could not list {c.prog.rsplit('/', 1)[-1]}: {c.reason or c.status}"
        if "is.exclusive" in c.reason:
            note += ("; this kyua does not know the ATF head variable is.exclusive: drop "
                     "it from the test's head (the Kyuafile sets is_exclusive)")
            note += "" if fallback else ", or --no-kyua"
        if fallback:
            note += "; its cases ran directly (run.sh's loop, console-*-direct.log)"
        out.append(note)
    return out
