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

#include <sys/types.h>
#ifndef _KERNEL
#include <stdbool.h>
#endif

/*
 * Receive-CPU counts of an SO_REUSEPORT_LB group, in two windows.
 *
 * The kernel counts every handshake of the group on the CPU that
 * completes it, in a per-CPU 32-bit counter that only that CPU writes and
 * that is never reset: the counts are cumulative and wrap.  A window is
 * the difference between the cumulative counts and a snapshot of them
 * taken when the window began, so the per-handshake path writes nothing
 * shared, and a roll is a copy of the counters into a snapshot instead of
 * a reset racing with increments.  Unsigned differences are right across
 * a wrap as long as a CPU counts fewer than 2^32 handshakes in two
 * windows.
 *
 * Two windows of LBLEARN_WINDOW_SEC seconds are kept: the current one and
 * the previous one.  The deal reads their sum, so a CPU that stops
 * receiving drops out after at most two windows.
 *
 * Time, in ticks, and the cumulative counts are passed in, so that the
 * userspace build of this file can be driven by tests.
 */

#define	LBLEARN_WINDOW_SEC	10	/* Length of one counting window. */

struct lblearn {
	uint32_t	*ll_snap[2];	/* [ll_ncpu] counts at window starts. */
	u_int		 ll_ncpu;
	u_int		 ll_cur;	/* ll_snap[ll_cur]: current window. */
	int		 ll_start;	/* ticks at the current window start. */
	int		 ll_window;	/* Window length in ticks. */
	u_int		 ll_rolls;	/* Windows rolled so far. */
};

/*
 * Initialize with two caller-provided arrays of ncpu snapshots, a window
 * of window ticks (LBLEARN_WINDOW_SEC * hz in the kernel), starting now,
 * when the cumulative counts are cum[ncpu] (NULL: all zero): both
 * windows are empty.
 */
void	lblearn_init(struct lblearn *ll, uint32_t *snap0, uint32_t *snap1,
	    u_int ncpu, int window, int now, const uint32_t *cum);

/*
 * If the current window has ended, roll: the current window becomes the
 * previous one and a new one begins at the cumulative counts cum[].  The
 * new window starts when the old one should have ended, so windows keep
 * their length.  After two windows or more without a roll both windows
 * start empty, now.  Returns true if it rolled.
 */
bool	lblearn_roll(struct lblearn *ll, int now, const uint32_t *cum);

/*
 * Counts of cpu in the previous and the current window, given the
 * cumulative counts cum[].
 */
void	lblearn_window(const struct lblearn *ll, const uint32_t *cum,
	    u_int cpu, uint32_t *prev, uint32_t *cur);

/*
 * Write both windows' sum for every CPU into sum[ll_ncpu], the input of
 * lbdeal(), and return the total.
 */
uint64_t lblearn_sum(const struct lblearn *ll, const uint32_t *cum,
	    uint32_t *sum);

#endif /* !_NETINET_IN_PCBLB_LEARN_H_ */
