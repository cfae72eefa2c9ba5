/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions
 * are met:
 * 1. Redistributions of source code must retain the above copyright
 *    notice, this list of conditions and the following disclaimer.
 * 2. Redistributions in binary form must reproduce the above copyright
 *    notice, this list of conditions and the following disclaimer in the
 *    documentation and/or other materials provided with the distribution.
 *
 * THIS SOFTWARE IS PROVIDED BY THE AUTHOR AND CONTRIBUTORS ``AS IS'' AND
 * ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE
 * ARE DISCLAIMED.  IN NO EVENT SHALL THE AUTHOR OR CONTRIBUTORS BE LIABLE
 * FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL, EXEMPLARY, OR CONSEQUENTIAL
 * DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF SUBSTITUTE GOODS
 * OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION)
 * HOWEVER CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT
 * LIABILITY, OR TORT (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY
 * OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF
 * SUCH DAMAGE.
 */

#ifndef _NETINET_IN_PCBLB_DEAL_H_
#define	_NETINET_IN_PCBLB_DEAL_H_

#include <sys/types.h>
#ifndef _KERNEL
#include <stdbool.h>
#endif

/*
 * Dealing the members of a load-balancing group to receiving CPUs.
 *
 * Every member is owed LBDEAL_SLOTS slots of a map of T = LBDEAL_SLOTS *
 * members entries.  Each receiving CPU supplies a contiguous range of the
 * map whose length is proportional to its handshake count.  Supply is
 * dealt ring by ring, the rings being the enclosing groups of the
 * scheduler's cpu_group tree: the CPU itself, then each enclosing group
 * from the innermost (SMT core) to the root, then a last ring that admits
 * every member with deficit, untagged ones included.
 *
 * This file and in_pcblb_deal.c are also compiled in userspace, with a
 * compat header supplying cpuset_t and struct cpu_group, so that the
 * kernel's own code is checked against an independent model.
 */

#define	LBDEAL_SLOTS		16	/* Slots owed to every member. */
#define	LBDEAL_MAXMEMBERS	4095	/* T must fit in 16 bits. */
#define	LBDEAL_MAXCPU		4096	/* CPU ids fit in 12 bits. */

/*
 * A member's tag: a CPU in the low bits, LBDEAL_TAG_LEARNED for a CPU
 * learned at accept(2) rather than set by the application, or
 * LBDEAL_TAG_NONE.  Only set tags stand in as receiving CPUs before
 * anything is counted, so learned tags alone build no map until then.
 */
#define	LBDEAL_TAG_NONE		0xffff
#define	LBDEAL_TAG_LEARNED	0x8000
#define	LBDEAL_TAG_CPUMASK	0x7fff
#define	LBDEAL_TAGGED(t)	((t) != LBDEAL_TAG_NONE)
#define	LBDEAL_TAG_SET(t)	(((t) & LBDEAL_TAG_LEARNED) == 0)
#define	LBDEAL_TAG_CPU(t)	((u_int)((t) & LBDEAL_TAG_CPUMASK))

/*
 * A per-CPU map entry packs the offset of the CPU's range in the slot
 * array (high 16 bits) and its length (low 16 bits).  Zero means the CPU
 * supplies nothing and the lookup uses the tuple hash.
 */
#define	LBDEAL_ENTRY(off, cnt)	(((uint32_t)(off) << 16) | (uint32_t)(cnt))
#define	LBDEAL_OFF(e)		((u_int)((e) >> 16))
#define	LBDEAL_CNT(e)		((u_int)((e) & 0xffff))

/*
 * Scale a 32-bit hash onto a range: a multiply and a shift, no division.
 * The slot comes from the high bits of h, so a hash that keeps its
 * entropy in the low bits (the lbgroup tuple hash's high bits hold the
 * foreign address alone) goes through LBDEAL_MIX() first, a Fibonacci
 * multiply by 2^32 / phi.
 */
#define	LBDEAL_MIX(h)		((uint32_t)(h) * 0x9e3779b1u)
#define	LBDEAL_SLOT(e, h)						\
	(LBDEAL_OFF(e) + (u_int)(((uint64_t)(uint32_t)(h) *		\
	    LBDEAL_CNT(e)) >> 32))

struct cpu_group;

/* Inputs of one deal; the caller owns every array. */
struct lbdeal_in {
	const struct cpu_group	*di_root;	/* Scheduler topology. */
	const uint16_t		*di_tags;	/* [di_nmembers] */
	void *const		*di_members;	/* [di_nmembers] */
	const uint32_t		*di_counts;	/* [di_ncpu], or NULL */
	u_int			 di_nmembers;
	u_int			 di_ncpu;	/* mp_maxid + 1 */
};

/* Output of one deal, written into the caller's arrays. */
struct lbdeal_out {
	uint32_t		*do_cpu;	/* [di_ncpu] LBDEAL_ENTRY() */
	void			**do_slot;	/* [LBDEAL_SLOTS * members] */
};

/*
 * Bytes of scratch space lbdeal() needs for nmembers over ncpu CPUs of
 * the given topology.
 */
size_t	lbdeal_scratch_size(const struct cpu_group *root, u_int nmembers,
	    u_int ncpu);

/*
 * Deal the members.  Returns true if a map was built into out, whose
 * do_slot[] then holds di_members[] entries; false if the group needs
 * none (no member is tagged, or nothing is counted and only learned tags
 * exist), and out is left untouched.  scratch must hold
 * lbdeal_scratch_size() bytes, aligned for uint64_t.
 */
bool	lbdeal(const struct lbdeal_in *in, struct lbdeal_out *out,
	    void *scratch);

/*
 * The steered half of a lookup: if cpu supplies slots in the map whose
 * per-CPU array is cpuent, store the slot for hash h in *slot and return
 * true.  cpu must be below the map's CPU count; the kernel sizes every
 * map for mp_maxid + 1 CPUs.  One load (the entry) and a multiply; the
 * caller adds LBDEAL_MIX()'s multiply and the loads of the map and the
 * slot.  Nothing to validate, since a map is immutable.
 */
static __inline bool
lbdeal_steer(const uint32_t *cpuent, u_int cpu, uint32_t h, u_int *slot)
{
	uint32_t e;

	e = cpuent[cpu];
	if (e == 0)
		return (false);
	*slot = LBDEAL_SLOT(e, h);
	return (true);
}

#endif /* !_NETINET_IN_PCBLB_DEAL_H_ */
