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
 * The order in which the queues of an iflib device with the core_spread
 * tunable set take the CPUs of its interrupt set: one NUMA domain after
 * another, and within a domain every core's first thread before any
 * core's second thread, the L3 cache groups taking turns among the CPUs
 * of one such round.  See iflib_spread.c for the terms.
 *
 * This file and iflib_spread.c are also compiled in userspace, with a
 * compat header supplying cpuset_t and struct cpu_group.
 */

struct cpu_group;

/*
 * Fill order[] with the CPUs of eligible below ncpu in spread order and
 * return how many there are.  root is the scheduler's topology (NULL:
 * none, the order is numeric).  order[] and the scratch keys[] must have
 * room for CPU_COUNT(eligible) entries each.
 */
u_int	iflib_spread_order(const struct cpu_group *root,
	    const cpuset_t *eligible, u_int ncpu, u_int *order, uint64_t *keys);

#endif /* !_NET_IFLIB_SPREAD_H_ */
