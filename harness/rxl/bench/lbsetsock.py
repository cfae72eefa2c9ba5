"""``rxl kcount setsockopt``: the tagging cost targets, in the guest.

Targets (issue 23, "Measured"): on a 256-member group

* a loop of ``setsockopt(TCP_REUSPORT_LB_CPU)`` calls by an unprivileged
  process: with the tag each member has, 0 rebuilds; with real changes
  (``--change``: member k alternates between two CPUs, so every call
  rebuilds the group's map), one rebuild per call; either way a
  bystander's connect(2)+accept(2) latency on another port stays within
  1.2x of idle while it runs (the rebuild count needs a groups view that
  shows one; the series' has none since review-15d's R5, so only the
  latency is judged there);
* creating the 256 tagged members (tag, bind, listen) takes at most 1.1x
  what a pristine kernel takes for untagged members (``--untagged``
  ``--calls 0`` on the pristine kernel), and the creating process makes
  no more voluntary context switches (no syscall sleeps).

Tagging is one more setsockopt(2) per member, which no kernel change can
make free: ``--control`` (with ``--untagged``, on the pristine kernel)
makes that call with another IPPROTO_TCP option (``TCP_NODELAY``, the
same tcp_ctloutput path under the inpcb lock), so that a pristine run
with it against one without gives the syscall's own share, and the series'
tagged run against it what the series adds beyond the call.

``lbsetsock.c`` (next to this module) does the work inside a QEMU guest
(no NIC traffic: everything is over loopback) and prints ``==RXL== LBSET``
lines; this module cross-compiles it, stages a root whose ``/etc/rc`` runs
it once, boots it, and judges the lines: :func:`parse`, :func:`verdict`
and :func:`create_verdict` (pure).

The bystander is timed idle, beside the loop, and beside a control loop of
as many ``setsockopt(SO_SNDBUF)`` calls (same syscall path, nothing of the
series), interleaved in blocks so that the host's load drift falls on all
three. In a TCG guest on a small host every busy vCPU slows the others, so
``loop / control`` isolates what the series' path costs a bystander;
the target is still judged on ``loop / idle``.

``--accept`` (review 15l MINOR-3; only with calls) follows each call of the
loop and of the control with one connection to the group over loopback,
accepted from the member that has it. With ``--change`` every such
accept(2) deals the group's map under the VNET's hash lock, the worst an
unprivileged member owner can make; without it the same accepts deal
nothing (the baseline). That is a measurement, not the row's target: its
verdict has no ``ratio_ok`` and no call floor, and instead checks that every
connection was accepted and, in the groups view, that each checked tag
change marked the group and its accept(2) dealt it (``deals_ok``).
Errors: :class:`LbsetError`, one line.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from rxl.cli.options import check_out_dir, missing
from rxl.errors import BadOption, DataError, reason, show
from rxl.guest import console, image, qemu
from rxl.guest.protocol import MARK
from rxl.tree import base as tree_base
from rxl.tree import build as tree_build
from rxl.tree import world as tree_world

#: The targets' numbers: calls, members (INPCBLBGROUP_SIZMAX in
#: sys/netinet/in_pcb_var.h is 256 too), latency ratio, creation ratio.
CALLS = 1_000_000
MEMBERS = 256
MAX_RATIO = 1.2
MAX_CREATE_RATIO = 1.1
#: Creations of the group timed per run (lbsetsock.c -k; MAXREPS 1000).
CREATE_REPS = 20
MAX_CREATE_REPS = 1000
#: The user the loop runs as (nobody).
LOOP_UID = 65534
#: lbsetsock.c's MAXLAT: the most bystander samples it keeps per condition.
MAX_ROUNDS = 200_000
#: Where the program sits in the guest root.
GUEST_BIN = "/rxl/lbsetsock"
PREFIX = MARK + " LBSET "

_KV = re.compile(r"(\w+)=(\S+)")


class LbsetError(DataError):
    """Bad input or output of the setsockopt run (one-line message)."""


def source() -> Path:
    """Path of lbsetsock.c next to this module."""
    return Path(__file__).with_name("lbsetsock.c")


def cc_argv(output: str, sysroot: str, *, tree: Optional[str] = None) -> List[str]:
    """argv cross-compiling lbsetsock statically against the world's sysroot, with
    ``tree``'s compiler and triple (:func:`rxl.tree.world.compiler_for`). Pure."""
    clang, triple = tree_world.compiler_for(tree)
    return [clang, f"--target={triple}", f"--sysroot={sysroot}", "-fuse-ld=lld", "-O2",
            "-Wall", "-static", "-o", output, str(source())]


def program_args(*, members: int = MEMBERS, calls: int = CALLS, rounds: int = 2000,
                 blocks: int = 10, change: bool = False, untagged: bool = False,
                 control: bool = False, create_reps: int = CREATE_REPS,
                 uid: int = LOOP_UID, accept: bool = False) -> List[str]:
    """lbsetsock's argument words (each keyword is the ``rxl kcount setsockopt``
    option of its name). Raises BadOption naming the option for a combination
    it refuses: ``untagged`` only with ``calls`` 0 (untagged members have no
    tag to set), ``change`` only with calls (it changes the tags the calls
    set), ``control`` only with ``untagged`` (it takes the tag's place),
    ``accept`` only with calls (it connects after each call),
    ``blocks`` from 1 to min(rounds, calls) when calls > 0."""
    if control and not untagged:
        raise BadOption("--control makes its setsockopt(TCP_NODELAY) where the tag "
                        "would be: it needs --untagged", "--control")
    if untagged and change:
        raise BadOption("--untagged members have no tag for --change to change: give "
                        "one of them", "--untagged")
    if untagged and calls:
        raise BadOption(f"--untagged members are only created, never tagged: give "
                        f"--calls 0, not {calls}", "--untagged")
    if change and not calls:
        raise BadOption("--change changes the tag at each setsockopt call: --calls 0 "
                        "makes none", "--change")
    if accept and not calls:
        raise BadOption("--accept connects to the group after each setsockopt call: "
                        "--calls 0 makes none", "--accept")
    if calls and not 1 <= blocks <= min(rounds, calls):
        raise BadOption(f"must be from 1 to min(--rounds, --calls) = {min(rounds, calls)}, "
                        f"got {blocks}", "--blocks")
    args = ["-n", str(members), "-k", str(create_reps), "-c", str(calls), "-r", str(rounds),
            "-P", str(blocks), "-U", str(uid)]
    return (args + (["-a"] if change else []) + (["-u"] if untagged else [])
            + (["-s"] if control else []) + (["-A"] if accept else []))


def render_rc(args: Sequence[str], guest_bin: str = GUEST_BIN) -> str:
    """The guest's ``/etc/rc``: lo0 up, the program once, the end marker, power off.

    ``args``: lbsetsock's arguments (words). Raises LbsetError for a word
    with whitespace or shell metacharacters.
    """
    for w in [guest_bin, *args]:
        if not w or shlex.quote(w) != w:
            raise LbsetError(f"rc: {w!r} must be a plain word")
    cmd = " ".join([guest_bin, *args])
    return ("#!/bin/sh\n"
            "# Generated by rxl kcount setsockopt (harness/rxl/bench/lbsetsock.py).\n"
            "PATH=/sbin:/bin:/usr/sbin:/usr/bin\nexport PATH\n"
            f"M='{MARK}'\n"
            "echo \"$M BEGIN lbsetsock\"\n"
            "ifconfig lo0 inet 127.0.0.1/8 up\n"
            "echo \"$M SYSCTL kern.ident: $(sysctl -n kern.ident)\"\n"
            f"{cmd}\n"
            "echo \"$M NOTE lbsetsock exit $?\"\n"
            "echo \"$M END\"\n"
            "reboot -p\n")


def parse(lines: Sequence[str]) -> Dict[str, dict]:
    """The program's ``LBSET`` lines as ``{"create": {...}, "group": {...},
    "lat": {phase: {...}}, "loop": {...}, "control": {...}, "rebuilds":
    {"before", "after"}, "deals": {"checks", "marked", "dealt", "errors"},
    "done": bool}`` (phases: idle, control, loop; ``deals`` is empty
    without ``-A``); values are ints. Other lines are ignored. Raises LbsetError for an
    LBSET line whose values are not integers.
    """
    res: Dict[str, dict] = {"create": {}, "group": {}, "lat": {}, "loop": {}, "control": {},
                            "rebuilds": {}, "deals": {}, "done": False}
    for line in lines:
        if not line.startswith(PREFIX):
            continue
        words = line[len(PREFIX):].split()
        if not words:
            continue
        try:
            kv = {k: int(v) for k, v in _KV.findall(line[len(PREFIX):])}
        except ValueError:
            raise LbsetError(f"not an integer in: {line.strip()}") from None
        kind = words[0]
        if kind == "LAT" and len(words) > 1:
            res["lat"][words[1]] = kv
        elif kind in ("CREATE", "GROUP", "LOOP", "CONTROL", "REBUILDS", "DEALS"):
            res[kind.lower()] = kv
        elif kind == "DONE":
            res["done"] = True
    return res


def verdict(res: Dict[str, dict]) -> Dict[str, object]:
    """The loop target's two checks on :func:`parse`'s result.

    Returns ``{"change": bool, "accept": bool, "rebuilds": N,
    "rebuilds_expected": 0 or calls, "rebuilds_ok": bool, "idle_p50_ns",
    "loop_p50_ns", "ratio": loop p50 / idle p50, "ratio_ok": bool, "calls",
    "errors", "members", "uid", "loop_per_call_ns"}``, and when the run had
    a control loop also ``"control_p50_ns"``, ``"control_ratio"`` (control
    p50 / idle p50), ``"loop_vs_control"`` (loop p50 / control p50) and
    ``"control_per_call_ns"``. Ratios are rounded to 3 places, per-call
    times (the loop's elapsed time over its calls) to whole ns. Raises
    LbsetError when the run did not finish, made fewer calls or members
    than the target, had errors (also in the control), or lacks the
    group's rebuild count or a latency.  A kernel whose groups view has no
    rebuild count (the series since review-15d's R5) reports -1 for both:
    ``rebuilds`` and ``rebuilds_ok`` are then None (not measured), never a
    pass.

    A run with ``--accept`` (GROUP ``accept=1``) is a measurement with no
    target: any number of calls will do, ``ratio_ok`` is None, and a run
    with ``--change`` expects one deal (rebuild) per call. It also needs the
    control loop, every connection of both loops accepted, and the DEALS
    check without errors; ``"deals"`` is its line and ``"deals_ok"`` says
    whether each checked call marked the group and its accept(2) dealt it
    (with ``--change``), or none did (without): None where the view shows
    no deal flag (-1).
    """
    if not res.get("done"):
        raise LbsetError("lbsetsock did not finish (no LBSET DONE line)")
    grp, loop = res["group"], res["loop"]
    accept = bool(grp.get("accept", 0))
    if grp.get("members", 0) < MEMBERS or grp.get("tagerr", 1) != 0:
        raise LbsetError(f"group: {grp}: need {MEMBERS} members, all tagged")
    floor = 1 if accept else CALLS
    if loop.get("calls", 0) < floor or loop.get("errors", -1) != 0:
        raise LbsetError(f"loop: {loop}: need {floor} calls without error")
    ctr = res["rebuilds"]
    if "before" not in ctr or "after" not in ctr:
        raise LbsetError("no rebuild count of the group (net.inet.tcp.reuseport_lb.groups) "
                         "before and after the loop")
    lat = res["lat"]
    for phase in ("idle", "loop"):
        if not lat.get(phase, {}).get("p50_ns"):
            raise LbsetError(f"no {phase} latency")
    change = bool(grp.get("change", 0))
    expected = loop["calls"] if change else 0
    counted = ctr["before"] >= 0 and ctr["after"] >= 0
    rebuilds = ctr["after"] - ctr["before"] if counted else None
    idle, lp = lat["idle"]["p50_ns"], lat["loop"]["p50_ns"]
    ratio = lp / idle
    v: Dict[str, object] = {
        "change": change, "accept": accept, "rebuilds": rebuilds,
        "rebuilds_expected": expected,
        "rebuilds_ok": rebuilds == expected if counted else None,
        "idle_p50_ns": idle, "loop_p50_ns": lp,
        "ratio": round(ratio, 3), "ratio_ok": None if accept else ratio <= MAX_RATIO,
        "calls": loop["calls"], "errors": loop["errors"], "members": grp["members"],
        "uid": grp.get("uid"), "loop_per_call_ns": _per_call(loop)}
    ctl = res.get("control") or {}
    if accept and not ctl:
        raise LbsetError("--accept: no CONTROL line (the loop is judged against the "
                         "control's same connections)")
    if ctl:
        if ctl.get("errors", -1) != 0:
            raise LbsetError(f"control: {ctl}: the control loop had errors")
        cp = lat.get("control", {}).get("p50_ns")
        if not cp:
            raise LbsetError("no control latency")
        v.update({"control_p50_ns": cp, "control_ratio": round(cp / idle, 3),
                  "loop_vs_control": round(lp / cp, 3),
                  "control_per_call_ns": _per_call(ctl)})
    if accept:
        v.update(_accept_checks(res, change))
    return v


def _per_call(loop: dict) -> Optional[int]:
    """A LOOP or CONTROL line's elapsed ns per call (None without calls or time)."""
    if not loop.get("calls") or "elapsed_ns" not in loop:
        return None
    return round(loop["elapsed_ns"] / loop["calls"])


def _accept_checks(res: Dict[str, dict], change: bool) -> Dict[str, object]:
    """--accept: every connection of both loops accepted, the DEALS line and
    whether it shows one deal per checked change (or none). Raises LbsetError."""
    for name in ("loop", "control"):
        part = res[name]
        if part.get("accepted") != part.get("calls"):
            raise LbsetError(f"--accept: {name} accepted {part.get('accepted')} of "
                             f"{part.get('calls')} connections")
    d = res.get("deals") or {}
    if not all(k in d for k in ("checks", "marked", "dealt", "errors")):
        raise LbsetError("--accept: no DEALS line (the deals checked in the groups view)")
    if d["errors"] != 0 or d["checks"] < 1:
        raise LbsetError(f"--accept: deal check {d}: need checks without error")
    if d["marked"] < 0 or d["dealt"] < 0:
        ok = None
    elif change:
        ok = d["marked"] == d["checks"] and d["dealt"] == d["checks"]
    else:
        ok = d["marked"] == 0 and d["dealt"] == 0
    return {"deals": {k: d[k] for k in ("checks", "marked", "dealt")}, "deals_ok": ok}


def create_verdict(patched: Dict[str, dict], pristine: Dict[str, dict]) -> Dict[str, object]:
    """The creation target: ``patched`` (tagged members on the series' kernel)
    against ``pristine`` (untagged members on the base's), each a :func:`parse`
    result. Returns ``{"patched_p50_ns", "pristine_p50_ns", "ratio", "ratio_ok",
    "patched_nvcsw", "pristine_nvcsw", "sleeps_ok", "members"}``; ``sleeps_ok``:
    the patched run made no more voluntary context switches than the pristine
    one. When both runs timed the group's first connection (``total_p50_ns``:
    creation plus that connect(2) and accept(2), where the series deals),
    also ``"patched_total_p50_ns"``, ``"pristine_total_p50_ns"``,
    ``"total_ratio"`` and ``"total_ratio_ok"`` (the same 1.1x bound). Raises LbsetError when a run lacks its CREATE line, the patched one
    is untagged or had tag errors, the pristine one made the ``--control``
    call (the target's baseline is plain untagged members), or the member
    counts differ or are short."""
    pc, bc = patched.get("create") or {}, pristine.get("create") or {}
    if not pc or not bc:
        raise LbsetError("no CREATE line in the " + ("patched" if not pc else "pristine") +
                         " run")
    if bc.get("control"):
        raise LbsetError("pristine creation made the --control setsockopt: the target's "
                         "baseline is plain untagged members")
    if not pc.get("tagged") or pc.get("tagerr", 1) != 0:
        raise LbsetError(f"patched creation {pc}: need every member tagged")
    if pc.get("members") != bc.get("members") or pc.get("members", 0) < MEMBERS:
        raise LbsetError(f"creation: {pc.get('members')} members patched, "
                         f"{bc.get('members')} pristine; need {MEMBERS} each")
    ratio = pc["p50_ns"] / bc["p50_ns"]
    v = {"patched_p50_ns": pc["p50_ns"], "pristine_p50_ns": bc["p50_ns"],
         "ratio": round(ratio, 3), "ratio_ok": ratio <= MAX_CREATE_RATIO,
         "patched_nvcsw": pc["nvcsw"], "pristine_nvcsw": bc["nvcsw"],
         "sleeps_ok": pc["nvcsw"] <= bc["nvcsw"], "members": pc["members"]}
    if "total_p50_ns" in pc and "total_p50_ns" in bc:
        # The series deals a changed group at its first accept(2): the
        # creation's target holds only if it holds with that connection too.
        total = pc["total_p50_ns"] / bc["total_p50_ns"]
        v.update({"patched_total_p50_ns": pc["total_p50_ns"],
                  "pristine_total_p50_ns": bc["total_p50_ns"],
                  "total_ratio": round(total, 3),
                  "total_ratio_ok": total <= MAX_CREATE_RATIO})
    return v


def run(kernel: str, src: str, objdir: str, out: str, args: Sequence[str], *,
        tunables: Dict[str, str] = None, dry_run: bool = False,
        echo=print) -> Dict[str, object]:
    """Compile, stage, boot once, judge. Writes lbsetsock (the binary),
    root/, console.log and result.json under ``out``.

    ``kernel``: the series' kernel to boot; ``src`` / ``objdir``: the tree
    whose world (loader, /bin/sh, sysctl, ifconfig) the root takes (the
    kernel must be of its release: rxl.tree.build.check_kernel_release);
    ``tunables``: loader tunables for the boot (e.g. net.isr.bindthreads).  With
    ``dry_run`` prints the compiler and QEMU command lines and returns {}.
    Returns the run's CREATE values under ``"create"`` and, when it had a
    loop, :func:`verdict`'s. Raises LbsetError for a missing file, a failed
    compile or boot, or as :func:`verdict`.
    """

    # what a dry run would plan with is checked first: the plan is of a run that can start
    tree_build.check_kernel_file(kernel)
    for path, opt in ((src, "--src"), (objdir, "--objdir")):
        if not Path(path).is_dir():  # missing, a loop, or said to be what it is
            raise BadOption(f"{show(path)}: {missing(path, 'directory')}", opt)
    tree_build.check_kernel_release(kernel, "--kernel", src)  # rxl run's: src's world boots it
    try:  # the program sets the series' TCP_REUSPORT_LB_CPU: rxl run's release check
        tree_base.check_series_release(src, "lbsetsock sets the series' "
                                       "TCP_REUSPORT_LB_CPU, which only its release has: "
                                       "give a tree of the series' release")
    except tree_base.TreeError as exc:
        raise BadOption(str(exc).partition(" ")[2], "--src") from None
    check_out_dir(out, "--out")  # the binary, root and log are made under it
    outp = Path(out).resolve()
    wout = tree_world.world_outputs(src, objdir)
    binary, root, log = outp / "lbsetsock", outp / "root", outp / "console.log"
    cc = cc_argv(str(binary), str(wout.sysroot), tree=src)
    cfg = qemu.GuestConfig(root_dir=str(root))
    fw = qemu.find_ovmf()
    try:
        argv = qemu.build_argv(cfg, firmware=fw or "OVMF_CODE.fd")
    except qemu.QemuConfigError as exc:
        raise LbsetError(f"qemu: {exc}") from None
    if dry_run:
        echo(shlex.join(cc))
        echo(f"# root {root}: kernel {kernel}, {GUEST_BIN} {' '.join(args)}")
        for k, val in sorted((tunables or {}).items()):
            echo(f"# loader tunable {k}={val}")
        echo(shlex.join(argv))
        return {}
    if not fw:
        raise LbsetError("no OVMF firmware (apt-get install -y ovmf)")
    absent = wout.missing()
    if absent:
        raise LbsetError(f"world: missing {absent[0]} (build it with rxl learn or rxl world)")
    outp.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(cc, capture_output=True, text=True)
    if p.returncode:
        raise LbsetError(f"cc exited {p.returncode}: {(p.stderr or p.stdout).strip()[:300]}")
    progs = {g: str(pth) for g, pth in wout.programs.items()}
    try:
        libs = image.resolve_libs([pth for g, pth in progs.items()
                                       if g != "/libexec/ld-elf.so.1"], str(wout.sysroot))
        acts = image.plan_root(loader_efi=str(wout.loader_efi), kernel=kernel,
                                   programs=progs, libs=libs, tests={GUEST_BIN: str(binary)},
                                   loader_rc=image.render_loader_rc(tunables or {}),
                                   rc=render_rc(args))
        image.stage_root(str(root), acts)
    except (image.ImageError, ValueError, OSError) as exc:
        raise LbsetError(f"image: {reason(exc)}") from None
    echo(f"boot: {shlex.join(argv)}\n  console {log}")
    try:
        console.watch(console.SerialTransport(argv), str(log), echo=echo,
                          total_timeout=3600, idle_timeout=1900)
    except console.GuestError as exc:
        raise LbsetError(f"guest {exc.kind}: {exc}") from None
    res = parse(log.read_text(errors="replace").splitlines())
    if not res["done"]:
        raise LbsetError("lbsetsock did not finish (no LBSET DONE line)")
    if not res["create"]:
        raise LbsetError("lbsetsock did not report the group's creation (no LBSET CREATE line)")
    # A GROUP line: the run had a loop (calls > 0) to judge.
    v = verdict(res) if res["group"] else {}
    (outp / "result.json").write_text(json.dumps({"parsed": res, "verdict": v}, indent=2))
    return {"create": res["create"], **v}
