/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * The userspace library's entry points.  harness/rxl/core.py declares
 * these same prototypes to cffi; keep the two in step.
 */

#ifndef _RXLCORE_H_
#define	_RXLCORE_H_

struct rxl_topo;
struct rxl_learn;

struct rxl_topo *rxl_topo_new(int ngroups, const int *parent,
	    const int *level, const int *flags, const int *ncpus,
	    const int *cpus);
void	rxl_topo_free(struct rxl_topo *t);
int	rxl_spread(const struct rxl_topo *t, const int *eligible,
	    int neligible, int ncpu, int mode, unsigned *order);
int	rxl_deal(const struct rxl_topo *t, int nmembers, const uint16_t *tags,
	    const uint32_t *counts, int ncpu, uint32_t *cpuent,
	    uint16_t *slots, unsigned *nslots);
unsigned rxl_select(const uint32_t *cpuent, int ncpu, int cpu, uint32_t h,
	    int n, int *steered);
uint32_t rxl_mix(uint32_t h);
size_t	rxl_deal_scratch_size(const struct rxl_topo *t, int nmembers,
	    int ncpu);
struct rxl_learn *rxl_learn_new(int ncpu, int window, int now);
void	rxl_learn_free(struct rxl_learn *l);
void	rxl_learn_count(struct rxl_learn *l, int cpu, uint32_t n);
int	rxl_learn_roll(struct rxl_learn *l, int now);
uint64_t rxl_learn_sum(const struct rxl_learn *l, uint32_t *sum);
void	rxl_learn_window(const struct rxl_learn *l, int cpu, uint32_t *last,
	    uint32_t *cur);

#endif /* !_RXLCORE_H_ */
