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

/*
 * Receive-CPU counts of an SO_REUSEPORT_LB group, in two windows.
 *
 * A connection is counted at accept(2), on the CPU that completed its
 * handshake, so the counts follow where the NIC and iflib put the flow
 * and nothing is added to the packet path.  Two windows rather than one
 * keep a CPU's supply steady across a roll: its count in the previous
 * window carries it until the current one has seen it again.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#include <machine/atomic.h>
#endif

#include <netinet/in_pcblb_learn.h>

void
lblearn_init(struct lblearn *ll, uint32_t *cnt0, uint32_t *cnt1, u_int ncpu,
    int window, int now)
{

	KASSERT(window > 0, ("%s: window %d", __func__, window));
	ll->ll_cnt[0] = cnt0;
	ll->ll_cnt[1] = cnt1;
	ll->ll_ncpu = ncpu;
	ll->ll_cur = 0;
	ll->ll_start = now;
	ll->ll_window = window;
	memset(cnt0, 0, ncpu * sizeof(*cnt0));
	memset(cnt1, 0, ncpu * sizeof(*cnt1));
}

/*
 * Ticks since the current window began.  ticks wraps; the difference of
 * two unsigned values is right across the wrap.
 */
static __inline u_int
lblearn_age(const struct lblearn *ll, int now)
{

	return ((u_int)now - (u_int)ll->ll_start);
}

int
lblearn_note(struct lblearn *ll, u_int cpu, int now)
{
	uint32_t *cnt;

	if (cpu >= ll->ll_ncpu)
		return (LBLEARN_COUNTED);	/* Not a CPU we track. */
	if (lblearn_age(ll, now) >= (u_int)ll->ll_window)
		return (LBLEARN_LOCK);
	cnt = ll->ll_cnt[atomic_load_int(&ll->ll_cur)];
	if (atomic_load_32(&cnt[cpu]) == 0)
		return (LBLEARN_LOCK);
	atomic_add_32(&cnt[cpu], 1);
	return (LBLEARN_COUNTED);
}

bool
lblearn_roll(struct lblearn *ll, int now)
{
	u_int age, cur;

	age = lblearn_age(ll, now);
	if (age < (u_int)ll->ll_window)
		return (false);
	cur = ll->ll_cur ^ 1;
	if (age >= 2 * (u_int)ll->ll_window) {
		/* Idle for two windows or more: nothing recent survives. */
		memset(ll->ll_cnt[ll->ll_cur], 0,
		    ll->ll_ncpu * sizeof(uint32_t));
	}
	memset(ll->ll_cnt[cur], 0, ll->ll_ncpu * sizeof(uint32_t));
	ll->ll_cur = cur;
	/*
	 * The new window starts when the old one should have ended, so
	 * windows keep their length whatever the arrival pattern; after a
	 * long idle period it starts now.
	 */
	if (age >= 2 * (u_int)ll->ll_window)
		ll->ll_start = now;
	else
		ll->ll_start = (int)((u_int)ll->ll_start +
		    (u_int)ll->ll_window);
	return (true);
}

bool
lblearn_note_locked(struct lblearn *ll, u_int cpu, int now)
{
	uint32_t *cnt;
	bool remap;

	remap = lblearn_roll(ll, now);
	if (cpu >= ll->ll_ncpu)
		return (remap);
	cnt = ll->ll_cnt[ll->ll_cur];
	/*
	 * First sighting in this window: the CPU may be new to the map, or
	 * its share may have moved since the roll.  This happens at most
	 * once per receiving CPU per window.
	 */
	if (cnt[cpu] == 0)
		remap = true;
	atomic_add_32(&cnt[cpu], 1);
	return (remap);
}

uint32_t
lblearn_count(const struct lblearn *ll, u_int cpu)
{

	if (cpu >= ll->ll_ncpu)
		return (0);
	return (ll->ll_cnt[0][cpu] + ll->ll_cnt[1][cpu]);
}

uint64_t
lblearn_sum(const struct lblearn *ll, uint32_t *sum)
{
	uint64_t total;
	u_int c;

	total = 0;
	for (c = 0; c < ll->ll_ncpu; c++) {
		sum[c] = ll->ll_cnt[0][c] + ll->ll_cnt[1][c];
		total += sum[c];
	}
	return (total);
}
