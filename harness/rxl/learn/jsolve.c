/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Copyright (c) 2026 The rxl project
 */

/*
 * jsolve: recover the one unknown of the lbgroup lookup's tuple hash in a
 * learning run, so that the kernel's choice of slot can be recomputed per
 * connection.  Every connection of a run comes from one foreign address
 * to one local port, so the tuple hash is J ^ (lport ^ fport) with a
 * single unknown 32-bit J (the seeded Jenkins hash of the address,
 * in_pcb.h's IN_ADDR_JHASH32()).  A steered lookup reads slot
 * LBDEAL_MIX(h) * cnt >> 32 of its CPU's range.
 *
 * Input on stdin, one observation a line: "x lo hi", where x is
 * lport ^ fport and [lo, hi) is the range of LBDEAL_MIX(h) (as a 32-bit
 * value) that the observed member's slots cover.  Prints every J that
 * satisfies all of them, one per line in hex, stopping after 16.
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define	MAXOBS	4096
#define	PHI	0x9e3779b1u

static uint32_t x[MAXOBS];
static uint64_t lo[MAXOBS], hi[MAXOBS];

int
main(void)
{
	unsigned long long a, b;
	unsigned int xv;
	uint64_t j;
	uint32_t m;
	int n, i, found;

	n = 0;
	while (n < MAXOBS && scanf("%u %llu %llu", &xv, &a, &b) == 3) {
		x[n] = xv;
		lo[n] = a;
		hi[n] = b;
		n++;
	}
	if (n == 0) {
		fprintf(stderr, "jsolve: no observations\n");
		return (2);
	}
	found = 0;
	for (j = 0; j <= 0xffffffffu; j++) {
		for (i = 0; i < n; i++) {
			m = (uint32_t)(((uint32_t)j ^ x[i]) * PHI);
			if (m < lo[i] || m >= hi[i])
				break;
		}
		if (i == n) {
			printf("%08x\n", (unsigned int)j);
			if (++found == 16)
				break;
		}
	}
	return (found ? 0 : 1);
}
