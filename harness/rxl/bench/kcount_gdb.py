"""The gdb side of ``rxl kcount record``: a Python script for gdb's own
interpreter, run with ``gdb -batch -nx -x <script>`` against QEMU's gdbstub.
With ``--only-syn`` it steps only the tcp_input() calls whose segment has SYN
set and ACK clear (the SYN), so a trace of the SYN holds the guest less.

It breaks at the traced function's entry, single-steps that vCPU to the
function's return (``scheduler-locking step`` keeps the other vCPUs
stopped), and writes the trace file after every sample: program counters,
stack pointers, the disassembly of every distinct instruction, and before
every 64-bit ``lock cmpxchg`` ``%rax`` and the source register, plus
``curthread`` (``%gs:0``).  A guest that goes away leaves the samples
recorded so far.  Parameters arrive as gdb convenience variables
(:func:`rxl.bench.kcount.gdb_argv`).
"""

#: The gdb side's filter for the steps whose registers it saves: the
#: source register of a 64-bit ``lock cmpxchg`` (kcount_ops.cas_source,
#: redone here because gdb's Python cannot import rxl; a test keeps the
#: two equal).
GDB_CAS_SRC = r"""
WIDE = set(["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp"] +
           ["r%d" % i for i in range(8, 16)])

def cas_src(t):
    f = t.replace(",", " ").split()
    if (len(f) >= 4 and f[0] == "lock" and f[1].rstrip("q") == "cmpxchg"
            and f[2].startswith("%") and f[2][1:] in WIDE):
        return f[2][1:]
    return None
"""

#: The constants of ``--only-syn``, which steps only a segment with SYN set
#: and ACK clear: m_data is the third pointer of struct mbuf (m_next,
#: m_nextpkt, m_data; sys/sys/mbuf.h, 14.0), the flags are byte 13 of the
#: TCP header, TH_SYN = 0x02 and TH_ACK = 0x10 (netinet/tcp.h).
GDB_SYN = r"""
MBUF_DATA = 16
TH_FLAGS = 13
TH_SYN = 0x02
TH_ACK = 0x10

def is_syn(flags):
    return flags & (TH_SYN | TH_ACK) == TH_SYN
"""

#: The gdb side, run with ``gdb -batch -nx -x <this text>``; parameters come
#: through gdb convenience variables set with -ex before it.
GDB_SCRIPT = r"""
import json
import os

import gdb

def _s(name):
    return gdb.convenience_variable(name).string()

def _i(name):
    return int(gdb.convenience_variable(name))
""" + GDB_CAS_SRC + GDB_SYN + r"""
MASK = (1 << 64) - 1
outer, out = _s("kc_outer"), _s("kc_out")
nsamples, limit = _i("kc_samples"), _i("kc_limit")
only_syn = _i("kc_only_syn")
gdb.execute("set pagination off")
gdb.execute("set confirm off")
gdb.execute("set suppress-cli-notifications on")
# The kernel is a FreeBSD ELF; Debian's gdb has no FreeBSD OS ABI and then
# rejects QEMU's register description unless told the architecture first.
gdb.execute("set osabi none")
gdb.execute("set architecture i386:x86-64")
gdb.execute("set disassembly-flavor att")
gdb.execute("target remote " + _s("kc_remote"))
# "step": the other vCPUs stay stopped while one is stepped; "off": they
# run, so one that holds a lock or owes an IPI acknowledgment can give it.
gdb.execute("set scheduler-locking " + _s("kc_sched"))

# Addresses come from the host (nm): Debian's gdb reads this FreeBSD
# kernel's minimal symbols 32 bits wide and would cut them off.
entries = dict((k, int(v, 16)) for k, v in
               (e.split("=") for e in _s("kc_entries").split(",")))
bp = gdb.Breakpoint("*%#x" % entries[outer], internal=True)
inf = gdb.selected_inferior()
asm = {}

def text(fr, pc):
    t = asm.get(pc)
    if t is None:
        t = fr.architecture().disassemble(pc)[0]["asm"]
        asm[pc] = t
    return t

def curthread(fr):
    # pc_curthread is the first word of amd64's struct pcpu, at %gs:0.
    try:
        gs = int(fr.read_register("gs_base")) & MASK
        return int.from_bytes(bytes(inf.read_memory(gs, 8)), "little")
    except (gdb.error, gdb.MemoryError, ValueError):
        return None

def rd(addr, n):
    return int.from_bytes(bytes(inf.read_memory(addr, n)), "little")

def th_flags(fr):
    # tcp_input(struct mbuf **mp, int *offp, int proto): m_data is the
    # third word of struct mbuf, *offp the IP header's length.
    try:
        m = rd(int(fr.read_register("rdi")) & MASK, 8)
        off = rd(int(fr.read_register("rsi")) & MASK, 4)
        return rd(rd(m + MBUF_DATA, 8) + off + TH_FLAGS, 1)
    except (gdb.error, gdb.MemoryError, ValueError):
        return None

def dump(samples):
    # Written after every sample, so a guest that goes away keeps the rest.
    with open(out + ".tmp", "w") as f:
        json.dump({"outer": outer, "entries": {k: "%#x" % v for k, v in entries.items()},
                   "asm": dict(("%#x" % k, v) for k, v in asm.items()),
                   "samples": samples}, f)
    os.replace(out + ".tmp", out)

samples = []
try:
    while len(samples) < nsamples:
        gdb.execute("continue", to_string=True)
        fr = gdb.selected_frame()
        pc0 = int(fr.pc()) & MASK
        if pc0 != entries[outer]:
            continue
        if only_syn:
            fl = th_flags(fr)
            if fl is not None and not is_syn(fl):
                continue
        sp0 = int(fr.read_register("rsp")) & MASK
        ret = int.from_bytes(bytes(inf.read_memory(sp0, 8)), "little")
        td = curthread(fr)
        text(fr, pc0)
        pcs, sps, cas = [pc0], [sp0], []
        bp.enabled = False
        while len(pcs) < limit:
            gdb.execute("stepi", to_string=True)
            fr = gdb.selected_frame()
            pc = int(fr.pc()) & MASK
            sp = int(fr.read_register("rsp")) & MASK
            if pc == ret and sp > sp0:
                break
            src = cas_src(text(fr, pc))
            if src is not None:
                cas.append([len(pcs), int(fr.read_register("rax")) & MASK,
                            int(fr.read_register(src)) & MASK])
            pcs.append(pc)
            sps.append(sp)
        bp.enabled = True
        samples.append({"pc": pcs, "sp": sps, "cas": cas, "curthread": td,
                        "complete": len(pcs) < limit})
        dump(samples)
        gdb.write("kcount: sample %d: %d instructions, %d cmpxchg\n"
                  % (len(samples), len(pcs), len(cas)))
except gdb.error as exc:
    gdb.write("kcount: stopped after %d samples: %s\n" % (len(samples), exc))
    raise SystemExit(0)
bp.delete()
gdb.execute("detach")
"""
