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

/*
 * The order in which an iflib device's queues take CPUs when the
 * core_spread tunable is set.  The L3 groups of the device's NUMA domain
 * are interleaved, CPUs within a group in ascending id, so that queue i
 * and queue i + 1 land on different L3 groups while any remain.  Local
 * CPUs all come before any CPU of another domain.  On a machine with a
 * single L3 group (or a topology that reports none) the order is the
 * plain ascending order of the eligible set, as without the tunable.
 *
 * This file and iflib_spread.c are also compiled in userspace, with a
 * compat header supplying cpuset_t and struct cpu_group.
 */

struct cpu_group;

/*
 * Fill order[] with the CPUs of eligible in spread order and return how
 * many there are.  local is the set of CPUs in the device's NUMA domain,
 * or NULL if the domain is unknown (then every CPU counts as local).
 * Only CPUs below ncpu are considered; order[] must have room for
 * CPU_COUNT(eligible) entries.
 */
u_int	iflib_spread_order(const struct cpu_group *root,
	    const cpuset_t *eligible, const cpuset_t *local, u_int ncpu,
	    u_int *order);

#endif /* !_NET_IFLIB_SPREAD_H_ */
