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

#ifndef _NETINET_IN_PCBLB_LEARN_H_
#define	_NETINET_IN_PCBLB_LEARN_H_

/*
 * Receive-CPU counts of an SO_REUSEPORT_LB group, learned at accept(2).
 *
 * Handshakes are counted per CPU in two windows of LBLEARN_WINDOW_SEC
 * seconds: the current one and the previous one.  The deal reads their
 * sum, so a CPU that stops receiving drops out of the map after at most
 * two windows, and a CPU that starts receiving is dealt as soon as it is
 * first seen.  The common case, a CPU already counted in the current
 * window, is one atomic add with no lock and no remap; everything that
 * changes the set of receiving CPUs is done under the group's lock and
 * asks the caller to rebuild the map.
 *
 * Time is passed in, in ticks, so that the userspace build of this file
 * can be driven by tests.
 */

#define	LBLEARN_WINDOW_SEC	10	/* Length of one counting window. */

struct lblearn {
	uint32_t	*ll_cnt[2];	/* [ll_ncpu] handshakes per window. */
	u_int		 ll_ncpu;
	u_int		 ll_cur;	/* Index of the current window. */
	int		 ll_start;	/* ticks when this window began. */
	int		 ll_window;	/* Window length in ticks. */
};

/* Outcome of lblearn_note(). */
#define	LBLEARN_COUNTED		0	/* Counted; nothing else to do. */
#define	LBLEARN_LOCK		1	/* Take the lock, call _locked(). */

/*
 * Initialize with two caller-provided arrays of ncpu counters, a window
 * of window ticks (LBLEARN_WINDOW_SEC * hz in the kernel), starting now.
 */
void	lblearn_init(struct lblearn *ll, uint32_t *cnt0, uint32_t *cnt1,
	    u_int ncpu, int window, int now);

/*
 * Lock-free fast path for a hardware-hashed handshake received on cpu:
 * counts it and returns LBLEARN_COUNTED if the CPU is already counted in
 * a current window, otherwise changes nothing and returns LBLEARN_LOCK.
 */
int	lblearn_note(struct lblearn *ll, u_int cpu, int now);

/*
 * Slow path, with the group locked: rolls the windows if the current one
 * has expired, counts the handshake, and returns true if the set of
 * receiving CPUs may have changed and the map must be rebuilt.
 */
bool	lblearn_note_locked(struct lblearn *ll, u_int cpu, int now);

/*
 * With the group locked: rolls the windows if the current one has
 * expired.  Returns true if it rolled (the map must be rebuilt).
 */
bool	lblearn_roll(struct lblearn *ll, int now);

/* Handshakes counted for cpu over both windows. */
uint32_t lblearn_count(const struct lblearn *ll, u_int cpu);

/*
 * Write both windows' sum for every CPU into sum[ll_ncpu], the input of
 * lbdeal(), and return the total.
 */
uint64_t lblearn_sum(const struct lblearn *ll, uint32_t *sum);

#endif /* !_NETINET_IN_PCBLB_LEARN_H_ */
