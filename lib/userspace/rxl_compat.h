/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * The userspace stand-in for the few kernel definitions the rxl cores
 * use, so that sys/net/iflib_spread.c, sys/netinet/in_pcblb_deal.c and
 * sys/netinet/in_pcblb_learn.c compile unchanged outside the kernel.  It
 * is force-included (cc -include) by the userspace build and never by the
 * kernel; the cores themselves include only <sys/...> headers under
 * _KERNEL.  Field names and flag values follow FreeBSD's sys/sys/smp.h and
 * sys/sys/_cpuset.h (14.0) so that code reading them is the same code.
 */

#ifndef _RXL_COMPAT_H_
#define	_RXL_COMPAT_H_

#ifdef _KERNEL
#error "rxl_compat.h is for the userspace build only"
#endif

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef unsigned int	u_int;

#ifndef __inline
#define	__inline	inline
#endif
#define	__predict_true(e)	__builtin_expect((e), 1)
#define	__predict_false(e)	__builtin_expect((e), 0)
#define	KASSERT(exp, msg)	assert(exp)
#define	MIN(a, b)		(((a) < (b)) ? (a) : (b))
#define	MAX(a, b)		(((a) > (b)) ? (a) : (b))
#define	nitems(x)		(sizeof((x)) / sizeof((x)[0]))
#define	howmany(x, y)		(((x) + ((y) - 1)) / (y))

/* A fixed-size CPU set, as FreeBSD's cpuset_t; 1024 is CPU_MAXSIZE. */
#define	CPU_SETSIZE	1024
#define	_RXL_LONGBITS	(sizeof(long) * 8)
typedef struct _cpuset {
	long	__bits[CPU_SETSIZE / (sizeof(long) * 8)];
} cpuset_t;

#define	_RXL_CPUWORD(n)	((n) / _RXL_LONGBITS)
#define	_RXL_CPUBIT(n)	(1UL << ((n) % _RXL_LONGBITS))
#define	CPU_ZERO(p)	memset((p), 0, sizeof(*(p)))
#define	CPU_SET(n, p)	((p)->__bits[_RXL_CPUWORD(n)] |= (long)_RXL_CPUBIT(n))
#define	CPU_CLR(n, p)	((p)->__bits[_RXL_CPUWORD(n)] &= ~(long)_RXL_CPUBIT(n))
#define	CPU_ISSET(n, p)							\
	(((unsigned long)(p)->__bits[_RXL_CPUWORD(n)] & _RXL_CPUBIT(n)) != 0)

static inline int
rxl_cpu_count(const cpuset_t *p)
{
	size_t i;
	int n;

	n = 0;
	for (i = 0; i < nitems(p->__bits); i++)
		n += __builtin_popcountl((unsigned long)p->__bits[i]);
	return (n);
}
#define	CPU_COUNT(p)	rxl_cpu_count(p)
#define	CPU_EMPTY(p)	(rxl_cpu_count(p) == 0)

/* The scheduler's topology, as sys/sys/smp.h declares it. */
struct cpu_group {
	struct cpu_group *cg_parent;
	struct cpu_group *cg_child;
	cpuset_t	cg_mask;
	int32_t		cg_count;
	int32_t		cg_first;
	int32_t		cg_last;
	int16_t		cg_children;
	int8_t		cg_level;
	int8_t		cg_flags;
};

#define	CG_SHARE_NONE	0
#define	CG_SHARE_L1	1
#define	CG_SHARE_L2	2
#define	CG_SHARE_L3	3
#define	CG_FLAG_HTT	0x01
#define	CG_FLAG_SMT	0x02
#define	CG_FLAG_THREAD	(CG_FLAG_HTT | CG_FLAG_SMT)
#define	CG_FLAG_NODE	0x04

/* sys/sys/atomic_common.h and machine/atomic.h. */
#define	atomic_load_int(p)	__atomic_load_n((p), __ATOMIC_RELAXED)
#define	atomic_load_32(p)	__atomic_load_n((p), __ATOMIC_RELAXED)
#define	atomic_store_int(p, v)	__atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define	atomic_add_32(p, v)	((void)__atomic_fetch_add((p), (v),	\
	    __ATOMIC_RELAXED))

#endif /* !_RXL_COMPAT_H_ */
