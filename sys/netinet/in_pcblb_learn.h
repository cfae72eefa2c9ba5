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
#ifdef __FreeBSD__
#include <machine/atomic.h>
#endif
#ifndef _KERNEL
#include <stdbool.h>
#endif

/*
 * Receive-CPU counts of a load-balancing group, in windows.
 *
 * The kernel counts every handshake of the group on the CPU that
 * completes it, in a per-CPU 32-bit counter that only that CPU writes and
 * that is never reset: the counts are cumulative and wrap.  A window's
 * count is the difference between the cumulative count and a snapshot
 * taken when the window began, so counting writes nothing shared, and a
 * roll reads the counters without resetting them.  The unsigned
 * differences, and their sum over two windows, are right across a wrap as
 * long as a CPU counts fewer than 2^32 handshakes in two windows.
 *
 * The deal's input is the sum of the last two complete windows, fixed at
 * a roll: a CPU that stops receiving supplies for one more window, then
 * drops out.  Time, in ticks, and the cumulative counts are passed in, so
 * that the userspace build of this file can be driven by tests.
 */

#define	LBLEARN_WINDOW_MS	10000	/* Default length of a window. */

struct lblearn {
	uint32_t	*ll_snap;	/* [ll_ncpu] counts at window start */
	uint32_t	*ll_last;	/* [ll_ncpu] the last complete window */
	uint32_t	*ll_sum;	/* [ll_ncpu] the last two: deal input */
	u_int		 ll_ncpu;
	int		 ll_start;	/* ticks at the current window start */
	int		 ll_window;	/* window length in ticks, > 0 */
	u_int		 ll_rolls;	/* windows rolled so far */
};

/*
 * Start with three caller-provided arrays of ncpu counts and a window of
 * window ticks beginning now, when the cumulative counts are all zero.
 * Nothing is counted: ll_sum[] is zero.
 */
void	lblearn_init(struct lblearn *ll, uint32_t *snap, uint32_t *last,
	    uint32_t *sum, u_int ncpu, int window, int now);

/*
 * If the current window has ended, roll: ll_sum[] becomes the sum of the
 * ending window and the one before it (that one only if the ending window
 * lasted less than two window lengths: an older one is stale), and a new
 * window of window ticks begins now at cum[].  Returns true if it rolled.
 */
bool	lblearn_roll(struct lblearn *ll, int now, int window,
	    const uint32_t *cum);

/*
 * True if the current window has ended at time now.  The kernel asks
 * without the lock a roll holds, hence the atomic loads.
 */
static __inline bool
lblearn_due(const struct lblearn *ll, int now)
{

	/* ticks wraps; the unsigned difference is right across the wrap. */
	return ((u_int)now - (u_int)atomic_load_int(&ll->ll_start) >=
	    (u_int)atomic_load_int(&ll->ll_window));
}

#endif /* !_NETINET_IN_PCBLB_LEARN_H_ */
