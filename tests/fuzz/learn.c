/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * libFuzzer target: the learning windows (sys/netinet/in_pcblb_learn.c)
 * driven by random event sequences through the userspace library: a CPU
 * counts handshakes (its cumulative counter, which wraps, as
 * syncache_socket() increments it), ticks move forward across the wrap
 * of a C int, the group rolls its windows when asked, and the deal reads
 * the windows.
 *
 * Invariants, against an exact model in 64-bit arithmetic that never
 * wraps (in_pcblb_learn.h):
 *   - a roll happens exactly when the current window has ended, once per
 *     call, and the new window starts then;
 *   - every CPU's count in the last complete window and in the current
 *     one equals the model's: never negative (a wrapped difference), never
 *     lost, never counted twice, across the wrap of the cumulative
 *     counters and of ticks;
 *   - the deal's input, fixed at a roll, is the ending window plus the one
 *     before it when the ending one lasted less than two windows, and its
 *     total the sum.
 * The core's stated preconditions are kept: a CPU counts fewer than 2^32
 * handshakes in two windows, and a roll is asked for at least every
 * 2^31 ticks.
 */

#include "fuzz_common.h"

#define	MAXEV		4096

static int ncpu, window, now0, nev;
static uint8_t evop[MAXEV];
static int evcpu[MAXEV];
static uint32_t evarg[MAXEV];

static void
fz_print_case(FILE *fp)
{
	int i;

	fprintf(fp, "FUZZ_CASE {\"target\": \"learn\", \"ncpu\": %d, "
	    "\"window\": %d, \"now\": %d, \"events\": [", ncpu, window, now0);
	for (i = 0; i < nev; i++)
		fprintf(fp, "%s[\"%s\", %d, %u]", i ? ", " : "",
		    evop[i] == 0 ? "count" : evop[i] == 1 ? "tick" : "roll",
		    evcpu[i], evarg[i]);
	fprintf(fp, "]}\n");
}

/* The model: exact counts of the windows, time in 64 bits. */
static uint64_t m_last[FZ_MAXCPU], m_cur[FZ_MAXCPU], m_sum[FZ_MAXCPU];
static int64_t m_now, m_start;

static void
check_all(const struct rxl_learn *l, int step)
{
	static uint32_t sum[FZ_MAXCPU];
	uint64_t total, mtotal;
	uint32_t p, c;
	int cpu;

	total = rxl_learn_sum(l, sum);
	mtotal = 0;
	for (cpu = 0; cpu < ncpu; cpu++) {
		rxl_learn_window(l, cpu, &p, &c);
		FZ_CHECK(p == m_last[cpu] && c == m_cur[cpu],
		    "event %d: cpu %d windows %u, %u, model %llu, %llu",
		    step, cpu, p, c, (unsigned long long)m_last[cpu],
		    (unsigned long long)m_cur[cpu]);
		FZ_CHECK(sum[cpu] == m_sum[cpu], "event %d: cpu %d sum %u, "
		    "model %llu", step, cpu, sum[cpu],
		    (unsigned long long)m_sum[cpu]);
		mtotal += m_sum[cpu];
	}
	FZ_CHECK(total == mtotal, "event %d: total %llu, model %llu", step,
	    (unsigned long long)total, (unsigned long long)mtotal);
	/* CPUs the group does not track have empty windows. */
	rxl_learn_window(l, ncpu, &p, &c);
	FZ_CHECK(p == 0 && c == 0, "cpu %d beyond ncpu counted", ncpu);
	rxl_learn_window(l, -1, &p, &c);
	FZ_CHECK(p == 0 && c == 0, "cpu -1 counted");
}

static void
decode(struct fz *f)
{
	uint32_t b;
	int i;

	b = fz_byte(f);
	ncpu = 1 + (int)fz_below(f, (b & 0xf0) == 0xf0 ? FZ_MAXCPU : 16);
	/* 1 tick (hz = 1 in effect) to 10 s at hz = 1000, and beyond. */
	switch (b & 3) {
	case 0:
		window = 1 + (int)fz_below(f, 4);
		break;
	case 1:
		window = 1000;		/* LBLEARN_WINDOW_SEC at hz = 100 */
		break;
	case 2:
		window = 10000;		/* at hz = 1000 */
		break;
	default:
		window = 1 + (int)(fz_u32(f, 3) % (1 << 24));
		break;
	}
	/* Start anywhere; often just before ticks wraps at INT_MAX. */
	now0 = (b & 4) ? (int)(INT32_MAX - (int32_t)fz_below(f, 4 *
	    (uint32_t)window)) : (int)fz_u32(f, 4);
	nev = 1 + (int)fz_below(f, 256);
	for (i = 0; i < nev; i++) {
		b = fz_byte(f);
		evcpu[i] = 0;
		evarg[i] = 0;
		switch (b % 8) {
		case 0: case 1: case 2: case 3:
			evop[i] = 0;
			/* -1 and ncpu: CPUs the group does not track. */
			evcpu[i] = (int)fz_below(f, (uint32_t)ncpu + 2) - 1;
			b = fz_byte(f);
			evarg[i] = b < 200 ? 1 : b < 250 ? fz_byte(f) :
			    fz_u32(f, 4);
			break;
		case 4: case 5:
			evop[i] = 1;
			b = fz_byte(f);
			/* Within a window, at its edges, or windows on. */
			evarg[i] = b < 128 ? fz_below(f, (uint32_t)window) :
			    b < 192 ? (uint32_t)window - 1 + fz_below(f, 3) :
			    fz_below(f, 5 * (uint32_t)window + 1);
			break;
		default:
			evop[i] = 2;
			break;
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fz f;
	struct rxl_learn *l;
	int64_t age;
	uint32_t n;
	int i, now, rolled, mrolled, cpu;

	fz_init(&f, data, size);
	decode(&f);
	if (getenv("RXL_FUZZ_PRINT") != NULL)
		fz_print_case(stdout);
	l = rxl_learn_new(ncpu, window, now0);
	FZ_CHECK(l != NULL, "rxl_learn_new refused ncpu %d window %d", ncpu,
	    window);
	memset(m_last, 0, (size_t)ncpu * sizeof(m_last[0]));
	memset(m_cur, 0, (size_t)ncpu * sizeof(m_cur[0]));
	memset(m_sum, 0, (size_t)ncpu * sizeof(m_sum[0]));
	m_now = m_start = 0;
	now = now0;
	for (i = 0; i < nev; i++) {
		switch (evop[i]) {
		case 0:
			cpu = evcpu[i];
			n = evarg[i];
			if (cpu >= 0 && cpu < ncpu) {
				/* Fewer than 2^32 in two windows (the core's
				 * precondition): count what still fits. */
				if (m_last[cpu] + m_cur[cpu] + n > UINT32_MAX)
					n = (uint32_t)(UINT32_MAX -
					    m_last[cpu] - m_cur[cpu]);
				m_cur[cpu] += n;
			}
			rxl_learn_count(l, cpu, n);
			break;
		case 1:
			/* A roll is asked for at least every 2^31 ticks. */
			if (m_now + evarg[i] - m_start >= INT32_MAX)
				evarg[i] = 0;
			m_now += evarg[i];
			now = (int)((uint32_t)now + evarg[i]);
			break;
		default:
			age = m_now - m_start;
			mrolled = age >= window;
			if (mrolled) {
				for (cpu = 0; cpu < ncpu; cpu++) {
					m_sum[cpu] = m_cur[cpu] +
					    (age < 2 * (int64_t)window ?
					    m_last[cpu] : 0);
					m_last[cpu] = m_cur[cpu];
					m_cur[cpu] = 0;
				}
				m_start = m_now;
			}
			rolled = rxl_learn_roll(l, now);
			FZ_CHECK(rolled == mrolled, "event %d: roll %d, model "
			    "%d (age %lld of %d)", i, rolled, mrolled,
			    (long long)age, window);
			check_all(l, i);
			break;
		}
	}
	check_all(l, nev);
	rxl_learn_free(l);
	return (0);
}
