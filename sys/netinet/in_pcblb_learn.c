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
 * The kernel counts a handshake on the CPU that completes it, where the
 * group's member was selected, so the counts follow where the NIC and
 * iflib put the flow.  This file only keeps the windows: snapshots of the
 * cumulative counts, taken when a window begins.  Two windows rather than
 * one keep a CPU's supply steady across a roll: its count in the previous
 * window carries it until the current one has seen it again.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#endif

#include <netinet/in_pcblb_learn.h>

void
lblearn_init(struct lblearn *ll, uint32_t *snap0, uint32_t *snap1,
    u_int ncpu, int window, int now, const uint32_t *cum)
{

	KASSERT(window > 0, ("%s: window %d", __func__, window));
	ll->ll_snap[0] = snap0;
	ll->ll_snap[1] = snap1;
	ll->ll_ncpu = ncpu;
	ll->ll_cur = 0;
	ll->ll_start = now;
	ll->ll_window = window;
	ll->ll_rolls = 0;
	if (cum == NULL) {
		memset(snap0, 0, ncpu * sizeof(*snap0));
		memset(snap1, 0, ncpu * sizeof(*snap1));
	} else {
		memcpy(snap0, cum, ncpu * sizeof(*snap0));
		memcpy(snap1, cum, ncpu * sizeof(*snap1));
	}
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

bool
lblearn_roll(struct lblearn *ll, int now, const uint32_t *cum)
{
	u_int age, cur;

	age = lblearn_age(ll, now);
	if (age < (u_int)ll->ll_window)
		return (false);
	/*
	 * The older snapshot becomes the start of the new current window;
	 * the one that started the ending window now starts the previous.
	 */
	cur = ll->ll_cur ^ 1;
	memcpy(ll->ll_snap[cur], cum, ll->ll_ncpu * sizeof(uint32_t));
	ll->ll_cur = cur;
	ll->ll_rolls++;
	if (age >= 2 * (u_int)ll->ll_window) {
		/*
		 * No roll for two windows: no handshake came (the first one
		 * after a window ends asks for the roll), so what the current
		 * window holds is older than a window.  Both start empty, now.
		 */
		memcpy(ll->ll_snap[cur ^ 1], cum,
		    ll->ll_ncpu * sizeof(uint32_t));
		ll->ll_start = now;
	} else
		ll->ll_start = (int)((u_int)ll->ll_start +
		    (u_int)ll->ll_window);
	return (true);
}

void
lblearn_window(const struct lblearn *ll, const uint32_t *cum, u_int cpu,
    uint32_t *prev, uint32_t *cur)
{
	const uint32_t *scur, *sprev;

	if (cpu >= ll->ll_ncpu) {
		*prev = *cur = 0;
		return;
	}
	scur = ll->ll_snap[ll->ll_cur];
	sprev = ll->ll_snap[ll->ll_cur ^ 1];
	*prev = scur[cpu] - sprev[cpu];
	*cur = cum[cpu] - scur[cpu];
}

uint64_t
lblearn_sum(const struct lblearn *ll, const uint32_t *cum, uint32_t *sum)
{
	const uint32_t *sprev;
	uint64_t total;
	u_int c;

	sprev = ll->ll_snap[ll->ll_cur ^ 1];
	total = 0;
	for (c = 0; c < ll->ll_ncpu; c++) {
		sum[c] = cum[c] - sprev[c];
		total += sum[c];
	}
	return (total);
}
