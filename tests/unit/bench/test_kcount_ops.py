"""rxl.bench.kcount_ops: atomics and lock acquisitions in synthetic gdb traces.

The instruction texts are gdb's AT&T disassembly as it prints the
sequences FreeBSD's amd64 lock primitives compile to; the constants are
the lock words of sys/mutex.h, sys/rwlock.h and sys/sx.h."""

import pytest

from rxl.bench import kcount_ops as K

TD = 0xFFFFF80003A1C740          # a struct thread in the direct map
OTHER_TD = 0xFFFFF80003B00000


@pytest.mark.parametrize("asm,atomic", [
    ("lock cmpxchg %rcx,(%rdi)", True),
    ("lock cmpxchg %rdx,0x18(%rbx)", True),
    ("lock xadd %eax,0x30(%rbx)", True),
    ("lock incl 0x1c(%rax)", True),
    ("lock addq $0x1,%gs:0x0(%rax)", True),
    ("lock btsl $0x0,(%rdi)", True),
    ("xchg %rax,(%rdx)", True),             # implicitly locked
    ("xchg   %eax,0x8(%rdi)", True),
    ("xchg %ax,%ax", False),                # a register nop
    ("cmpxchg %rcx,(%rdi)", False),         # no lock prefix: UP only
    ("mov %gs:0x0,%rax", False),
    ("addq $0x1,%gs:(%rax)", False),        # counter(9): per-CPU, no lock
    ("call 0xffffffff80b1f2a0 <_rm_rlock>", False),
])
def test_is_atomic(asm, atomic):
    assert K.is_atomic(asm) is atomic


def test_cas_source_only_for_wide_lock_cmpxchg():
    assert K.cas_source("lock cmpxchg %rcx,(%rdi)") == "rcx"
    assert K.cas_source("lock cmpxchg %r12,0x10(%rbx)") == "r12"
    assert K.cas_source("lock cmpxchg %ecx,(%rdi)") is None     # 32-bit
    assert K.cas_source("cmpxchg %rcx,(%rdi)") is None
    assert K.cas_source("lock xadd %rcx,(%rdi)") is None


@pytest.mark.parametrize("expected,new,kind", [
    (0x0, TD, "exclusive"),           # mtx_lock / mtx_lock_spin / thread_lock
    (0x1, TD, "exclusive"),           # rw_wlock / sx_xlock / lockmgr excl.
    (0x1, 0x21, "shared"),            # rw_rlock / sx_slock, first reader
    (0x41, 0x61, "shared"),           # a third reader
    (TD, 0x0, None),                  # mtx_unlock
    (TD, 0x1, None),                  # rw_wunlock
    (0x21, 0x1, None),                # rw_runlock, last reader
    (0x0, OTHER_TD, None),            # another thread's word: not ours
    (0x5, 0x6, None),                 # a refcount or flag word
    (0x40, 0x60, None),               # + 1 << 5 without the shared flag
])
def test_acquisition(expected, new, kind):
    assert K.acquisition(expected, new, TD) == kind


def test_acquisition_without_curthread_uses_the_address():
    assert K.acquisition(0x0, OTHER_TD, None) == "exclusive"
    assert K.acquisition(0x0, 0x7, None) is None


# A synthetic accept: mtx_lock(&so->so_lock), an rmlock read, a refcount,
# mtx_unlock, then rw_rlock / rw_runlock through a function.
ASM = {
    0x100: "push %rbp",
    0x101: "mov %gs:0x0,%rcx",
    0x102: "xor %eax,%eax",
    0x103: "lock cmpxchg %rcx,(%rdi)",          # mtx_lock
    0x104: "call 0x300 <_rm_rlock>",
    0x105: "lock xadd %eax,0x30(%rbx)",         # refcount_acquire
    0x106: "lock cmpxchg %rdx,(%rdi)",          # mtx_unlock
    0x107: "call 0x200 <__rw_rlock_int>",
    0x108: "ret",
    0x200: "lock cmpxchg %rdx,(%rdi)",          # rlock fast path
    0x201: "lock cmpxchg %rdx,(%rdi)",          # runlock
    0x202: "ret",
    0x300: "incl %gs:0x100",
    0x301: "ret",
}
PCS = [0x100, 0x101, 0x102, 0x103, 0x104, 0x300, 0x301, 0x105, 0x106,
       0x107, 0x200, 0x201, 0x202, 0x108]
CAS = [(3, 0x0, TD), (8, TD, 0x0), (10, 0x1, 0x21), (11, 0x21, 0x1)]


def test_count_ops_on_a_synthetic_accept():
    ops = K.count_ops(PCS, ASM, CAS, TD, rm_entries=[0x300])
    assert ops == K.Ops(atomics=5, locks=3, exclusive=1, shared=1,
                        rm_reads=1)


def test_count_ops_refuses_a_cas_step_that_is_not_one():
    with pytest.raises(ValueError, match="step 1 is not a lock cmpxchg"):
        K.count_ops(PCS, ASM, [(1, 0, TD)], TD)
    with pytest.raises(ValueError, match="step 99"):
        K.count_ops(PCS, ASM, [(99, 0, TD)], TD)
    with pytest.raises(KeyError):
        K.count_ops(PCS + [0x999], ASM, [], TD)


def test_parse_helpers():
    assert K.parse_cas([[3, 0, 5]]) == ((3, 0, 5),)
    assert K.parse_cas(None) == ()
    with pytest.raises(ValueError, match="triples"):
        K.parse_cas([[1, 2]])
    assert K.parse_asm({"0x10": "ret"}) == {16: "ret"}
    with pytest.raises(ValueError, match="hex address"):
        K.parse_asm({"zz": "ret"})
