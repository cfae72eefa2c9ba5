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

#ifndef _NET_IFLIB_SPREAD_H_
#define	_NET_IFLIB_SPREAD_H_

#include <sys/types.h>
#ifdef __FreeBSD__
#include <sys/_cpuset.h>
#endif

/*
 * The order in which an iflib device's queues take CPUs, by the value of
 * its core_spread tunable:
 *
 * IFLIB_SPREAD_OFF (0): the eligible CPUs by ascending id, the order
 *	iflib walks without the tunable.
 * IFLIB_SPREAD_LOCAL (1): every core's first thread comes before any
 *	second thread, and among the CPUs of one such round the L3 groups
 *	of the device's NUMA domain take turns (in order of their lowest
 *	CPU, each giving its CPUs by id), so that queue i and queue i + 1
 *	land on different L3 groups while any remain.  Every CPU of the
 *	domain comes before any other CPU; the others follow, spread the
 *	same way.  When the domain is unknown, the domain (or package) of
 *	the lowest eligible CPU counts as local.
 * IFLIB_SPREAD_ACROSS (2): the same, but within a round the domains take
 *	turns too (the local one first, then by their lowest CPU), each
 *	giving its CPUs in the order above; consecutive queues cross sockets.
 *
 * A topology that reports no L3 group gets the numeric order either way.
 *
 * This file and iflib_spread.c are also compiled in userspace, with a
 * compat header supplying cpuset_t and struct cpu_group.
 */

#define	IFLIB_SPREAD_OFF	0
#define	IFLIB_SPREAD_LOCAL	1
#define	IFLIB_SPREAD_ACROSS	2

struct cpu_group;

/*
 * Fill order[] with the CPUs of eligible in the order of mode (one of
 * the above) and return how many there are.  local is the set of CPUs in
 * the device's NUMA domain, or NULL if the domain is unknown.  Only CPUs
 * below ncpu are considered; order[] and the scratch keys[] must have
 * room for CPU_COUNT(eligible) entries each.
 */
u_int	iflib_spread_order(const struct cpu_group *root,
	    const cpuset_t *eligible, const cpuset_t *local, u_int ncpu,
	    int mode, u_int *order, uint64_t *keys);

#endif /* !_NET_IFLIB_SPREAD_H_ */
