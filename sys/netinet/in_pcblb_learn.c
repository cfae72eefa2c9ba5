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
 * Receive-CPU counts of a load-balancing group, in windows.
 *
 * The kernel counts a handshake on the CPU that completes it, where the
 * group's member was selected, so the counts follow where the NIC and
 * iflib put the flow.  This file only keeps the windows.  The deal reads
 * two of them rather than one so that a CPU that received in one window
 * and by chance not in the next keeps its share for a window.
 */

#ifdef _KERNEL
#include <sys/param.h>
#include <sys/systm.h>
#endif

#include <netinet/in_pcblb_learn.h>

void
lblearn_init(struct lblearn *ll, uint32_t *snap, uint32_t *last,
    uint32_t *sum, u_int ncpu, int window, int now)
{

	KASSERT(window > 0, ("%s: window %d", __func__, window));
	ll->ll_snap = snap;
	ll->ll_last = last;
	ll->ll_sum = sum;
	ll->ll_ncpu = ncpu;
	ll->ll_start = now;
	ll->ll_window = window;
	ll->ll_rolls = 0;
	memset(snap, 0, ncpu * sizeof(*snap));
	memset(last, 0, ncpu * sizeof(*last));
	memset(sum, 0, ncpu * sizeof(*sum));
}

bool
lblearn_roll(struct lblearn *ll, int now, int window, const uint32_t *cum)
{
	uint32_t cur;
	u_int c;
	bool adjacent;

	if (!lblearn_due(ll, now))
		return (false);
	adjacent = (u_int)now - (u_int)ll->ll_start <
	    2 * (u_int)ll->ll_window;
	for (c = 0; c < ll->ll_ncpu; c++) {
		cur = cum[c] - ll->ll_snap[c];
		ll->ll_sum[c] = cur + (adjacent ? ll->ll_last[c] : 0);
		ll->ll_last[c] = cur;
		ll->ll_snap[c] = cum[c];
	}
	KASSERT(window > 0, ("%s: window %d", __func__, window));
	atomic_store_int(&ll->ll_start, now);	/* lblearn_due() reads them */
	atomic_store_int(&ll->ll_window, window);
	ll->ll_rolls++;
	return (true);
}
