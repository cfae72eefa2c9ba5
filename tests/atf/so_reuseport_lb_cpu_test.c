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

/*
 * Tests for SO_REUSEPORT_LB_CPU: load-balancing group members tagged with
 * CPUs, dealt to the CPUs that receive their connections.
 *
 * Loopback connections are not received on a CPU the test can choose:
 * lo0 queues every packet to the netisr, whose thread runs wherever the
 * scheduler puts it.  The tests therefore never predict a CPU.  They read
 * back, from each accepted socket, the CPU that completed its handshake
 * (the CPU on which the listener was selected) and check the selection
 * against it.  Where a test needs every CPU to be a steered one, it tags
 * a member with every CPU of the system.  Nothing is learned from
 * loopback, so the explicit tags stand in as the receiving CPUs, each
 * supplying an equal share; which member a connection gets is then fully
 * determined by its handshake CPU and its tuple hash.
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/socket.h>
#include <sys/sysctl.h>

#include <netinet/in.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>

#ifndef SO_REUSEPORT_LB_CPU
/* Lets the program be built against headers that predate the option. */
#define	SO_REUSEPORT_LB_CPU	0x1030
#endif

#define	TAG_NONE	(-2)	/* Leave the member untagged. */
#define	TAG_HASH	(-1)	/* Set -1: untagged, refusing capture. */
#define	MAXMEMBERS	256

struct lbgroup {
	int	domain;
	int	n;
	int	sds[MAXMEMBERS];
	int	tags[MAXMEMBERS];
	int	accepted[MAXMEMBERS];
	struct sockaddr_storage addr;
};

/* The CPUs of the system, from the root cpuset; returns how many. */
static int
lb_cpus(int *cpus, int max)
{
	cpuset_t mask;
	int cpu, n;

	ATF_REQUIRE_MSG(cpuset_getaffinity(CPU_LEVEL_ROOT, CPU_WHICH_PID, -1,
	    sizeof(mask), &mask) == 0,
	    "cpuset_getaffinity(root) failed: %s", strerror(errno));
	n = 0;
	for (cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++) {
		if (CPU_ISSET(cpu, &mask))
			cpus[n++] = cpu;
	}
	ATF_REQUIRE_MSG(n > 0, "no CPUs in the root cpuset");
	return (n);
}

static int
lb_getcpu(int sd)
{
	socklen_t len;
	int val;

	len = sizeof(val);
	ATF_REQUIRE_MSG(getsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB_CPU, &val,
	    &len) == 0,
	    "getsockopt(SO_REUSEPORT_LB_CPU) failed: %s", strerror(errno));
	ATF_REQUIRE_MSG(len == sizeof(val), "getsockopt returned %u bytes",
	    (unsigned)len);
	return (val);
}

static void
lb_setcpu(int sd, int cpu)
{
	ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB_CPU, &cpu,
	    sizeof(cpu)) == 0,
	    "setsockopt(SO_REUSEPORT_LB_CPU, %d) failed: %s", cpu,
	    strerror(errno));
}

static void
lb_loopback(int domain, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;

	memset(ss, 0, sizeof(*ss));
	if (domain == AF_INET) {
		sin = (struct sockaddr_in *)ss;
		sin->sin_len = sizeof(*sin);
		sin->sin_family = AF_INET;
		sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	} else {
		sin6 = (struct sockaddr_in6 *)ss;
		sin6->sin6_len = sizeof(*sin6);
		sin6->sin6_family = AF_INET6;
		sin6->sin6_addr = in6addr_loopback;
	}
}

/*
 * Open n non-blocking listeners in one load-balancing group on a loopback
 * address.  tags[i] is set before bind(2) (the member joins tagged) when
 * early is true and after listen(2) (the member is retagged) otherwise;
 * TAG_NONE leaves the member untagged.
 */
static void
lb_group(struct lbgroup *g, int domain, int n, const int *tags, bool early)
{
	socklen_t len;
	int i, one, sd;

	ATF_REQUIRE(n > 0 && n <= MAXMEMBERS);
	memset(g, 0, sizeof(*g));
	g->domain = domain;
	g->n = n;
	lb_loopback(domain, &g->addr);
	for (i = 0; i < n; i++) {
		g->tags[i] = tags[i];
		sd = socket(domain, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ATF_REQUIRE_MSG(sd >= 0, "socket failed: %s", strerror(errno));
		one = 1;
		ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB,
		    &one, sizeof(one)) == 0,
		    "setsockopt(SO_REUSEPORT_LB) failed: %s", strerror(errno));
		if (early && tags[i] != TAG_NONE)
			lb_setcpu(sd, tags[i]);
		ATF_REQUIRE_MSG(bind(sd, (struct sockaddr *)&g->addr,
		    g->addr.ss_len) == 0,
		    "bind of member %d failed: %s", i, strerror(errno));
		if (i == 0) {
			len = sizeof(g->addr);
			ATF_REQUIRE_MSG(getsockname(sd,
			    (struct sockaddr *)&g->addr, &len) == 0,
			    "getsockname failed: %s", strerror(errno));
		}
		ATF_REQUIRE_MSG(listen(sd, 128) == 0, "listen failed: %s",
		    strerror(errno));
		if (!early && tags[i] != TAG_NONE)
			lb_setcpu(sd, tags[i]);
		g->sds[i] = sd;
	}
}

static void
lb_group_close(struct lbgroup *g)
{
	int i;

	for (i = 0; i < g->n; i++)
		ATF_REQUIRE(close(g->sds[i]) == 0);
}

/*
 * Make one connection to the group and accept it on whichever member it
 * was given to.  Returns that member's index and stores the CPU that
 * completed the handshake, as read back from the accepted socket.
 */
static int
lb_connect(struct lbgroup *g, int *hcpup)
{
	struct pollfd pfd[MAXMEMBERS];
	const struct linger lopt = { 1, 0 };
	int csd, i, idx, sd;

	csd = socket(g->domain, SOCK_STREAM, 0);
	ATF_REQUIRE_MSG(csd >= 0, "socket failed: %s", strerror(errno));
	ATF_REQUIRE_MSG(connect(csd, (struct sockaddr *)&g->addr,
	    g->addr.ss_len) == 0, "connect failed: %s", strerror(errno));
	ATF_REQUIRE(setsockopt(csd, SOL_SOCKET, SO_LINGER, &lopt,
	    sizeof(lopt)) == 0);

	idx = -1;
	sd = -1;
	while (sd < 0) {
		for (i = 0; i < g->n; i++) {
			pfd[i].fd = g->sds[i];
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		ATF_REQUIRE_MSG(poll(pfd, g->n, 10000) > 0,
		    "no member accepted a connection within 10 s");
		for (i = 0; i < g->n && sd < 0; i++) {
			if ((pfd[i].revents & POLLIN) == 0)
				continue;
			sd = accept(g->sds[i], NULL, NULL);
			if (sd >= 0)
				idx = i;
			else
				ATF_REQUIRE_MSG(errno == EAGAIN,
				    "accept failed: %s", strerror(errno));
		}
	}
	*hcpup = lb_getcpu(sd);
	/*
	 * As so_reuseport_lb_test does: the server closes first, the client
	 * lingers with a zero timeout and resets, so neither end is left in
	 * TIME_WAIT.  Were the accepted end to reset too, the client's close
	 * could fail with ECONNRESET.
	 */
	ATF_REQUIRE_MSG(close(sd) == 0, "close of the accepted socket: %s",
	    strerror(errno));
	ATF_REQUIRE_MSG(close(csd) == 0, "close of the client socket: %s",
	    strerror(errno));
	g->accepted[idx]++;
	return (idx);
}

static bool
lb_tagged(int tag)
{
	return (tag >= 0);
}

/*
 * Every CPU tagged exactly once: every CPU's share goes to the member
 * tagged with it, so each connection must land on the member whose tag is
 * its handshake CPU.
 */
static void
lb_steering(int domain, bool early)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS];
	int c, hcpu, idx, ncpu, nconns;

	ncpu = lb_cpus(cpus, MAXMEMBERS);
	lb_group(&g, domain, ncpu, cpus, early);
	for (c = 0; c < ncpu; c++)
		ATF_REQUIRE_MSG(lb_getcpu(g.sds[c]) == cpus[c],
		    "member %d reads back tag %d, set %d", c,
		    lb_getcpu(g.sds[c]), cpus[c]);
	nconns = MAX(32, 8 * ncpu);
	for (c = 0; c < nconns; c++) {
		idx = lb_connect(&g, &hcpu);
		ATF_REQUIRE_MSG(hcpu >= 0,
		    "accepted socket reports no handshake CPU (%d)", hcpu);
		ATF_REQUIRE_MSG(g.tags[idx] == hcpu,
		    "connection %d: handshake on CPU %d, but given to member "
		    "%d tagged with CPU %d", c, hcpu, idx, g.tags[idx]);
	}
	lb_group_close(&g);
}

ATF_TC_WITHOUT_HEAD(steering_ipv4);
ATF_TC_BODY(steering_ipv4, tc)
{
	lb_steering(AF_INET, false);
}

ATF_TC_WITHOUT_HEAD(steering_ipv6);
ATF_TC_BODY(steering_ipv6, tc)
{
	lb_steering(AF_INET6, true);
}

/*
 * Two members on every CPU: each CPU's share is exactly its two members'
 * quota, so a connection goes to one of the two members tagged with its
 * handshake CPU, and a CPU that completes many handshakes feeds both.
 */
ATF_TC_WITHOUT_HEAD(duplicates);
ATF_TC_BODY(duplicates, tc)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS / 2], tags[MAXMEMBERS];
	int *seen;
	int c, hcpu, i, idx, ncpu, nconns;

	ncpu = lb_cpus(cpus, MAXMEMBERS / 2);
	for (c = 0; c < ncpu; c++)
		tags[c] = tags[ncpu + c] = cpus[c];
	lb_group(&g, AF_INET, 2 * ncpu, tags, true);
	seen = calloc(cpus[ncpu - 1] + 1, sizeof(*seen));
	ATF_REQUIRE(seen != NULL);
	nconns = MAX(64, 16 * ncpu);
	for (i = 0; i < nconns; i++) {
		idx = lb_connect(&g, &hcpu);
		ATF_REQUIRE_MSG(g.tags[idx] == hcpu,
		    "connection %d: handshake on CPU %d, but given to member "
		    "%d tagged with CPU %d", i, hcpu, idx, g.tags[idx]);
		seen[hcpu]++;
	}
	/*
	 * The tuple hash picks between the two; with 48 connections from
	 * one CPU, one member getting none has a chance of 2^-47.
	 */
	for (c = 0; c < ncpu; c++) {
		if (seen[cpus[c]] < 48)
			continue;
		ATF_REQUIRE_MSG(g.accepted[c] > 0 && g.accepted[ncpu + c] > 0,
		    "CPU %d completed %d handshakes but its members got %d "
		    "and %d", cpus[c], seen[cpus[c]], g.accepted[c],
		    g.accepted[ncpu + c]);
	}
	free(seen);
	lb_group_close(&g);
}

/*
 * Handshakes on a member's own CPU after which a tagged member must have
 * been fed: its share there is at least half, so 48 misses in a row have
 * a chance below 2^-48.
 */
#define	FED_AFTER	48

/*
 * Whether member i must have been given a connection by now.  Untagged
 * members are owed slots on every steered CPU and share the hash on the
 * others, so they always must.  A tagged member is fed from its own CPU
 * first, and over loopback that CPU may never complete a handshake (the
 * netisr thread runs where the scheduler puts it), so it must only once
 * its CPU has completed FED_AFTER handshakes.
 */
static bool
lb_owed(const struct lbgroup *g, const int *seen, int i)
{
	return (!lb_tagged(g->tags[i]) || seen[g->tags[i]] >= FED_AFTER);
}

/*
 * Untagged members are dealt in member order from whichever CPUs still
 * have supply in the last ring, so one of them may hold no slot on the
 * CPU that happens to receive (over loopback, the netisr thread's).  With
 * every CPU tagged once and two untagged members, though, every CPU's
 * range holds untagged slots: the untagged members are owed connections
 * as a group.  Returns whether that group (if any) has been fed.
 */
static bool
lb_untagged_fed(const struct lbgroup *g)
{
	bool any;
	int i;

	any = false;
	for (i = 0; i < g->n; i++) {
		if (lb_tagged(g->tags[i]))
			continue;
		if (g->accepted[i] > 0)
			return (true);
		any = true;
	}
	return (!any);
}

/*
 * Make connections until every member that is owed one (lb_owed()) has
 * been given one, or fail after maxconns.  Each connection is checked
 * with check(), if given.
 */
static void
lb_until_all_fed(struct lbgroup *g, int maxconns,
    void (*check)(const struct lbgroup *, int, int, int))
{
	int *seen;
	int hcpu, i, idx, k, missing;

	seen = calloc(CPU_SETSIZE, sizeof(*seen));
	ATF_REQUIRE(seen != NULL);
	for (k = 0; k < maxconns; k++) {
		idx = lb_connect(g, &hcpu);
		ATF_REQUIRE_MSG(hcpu >= 0 && hcpu < CPU_SETSIZE,
		    "accepted socket reports handshake CPU %d", hcpu);
		seen[hcpu]++;
		if (check != NULL)
			check(g, k, idx, hcpu);
		for (missing = 0, i = 0; i < g->n; i++)
			missing += lb_tagged(g->tags[i]) &&
			    lb_owed(g, seen, i) && g->accepted[i] == 0;
		if (missing == 0 && lb_untagged_fed(g) && k >= 64)
			break;
	}
	for (i = 0; i < g->n; i++)
		ATF_REQUIRE_MSG(!lb_tagged(g->tags[i]) ||
		    g->accepted[i] > 0 || !lb_owed(g, seen, i),
		    "member %d (tag %d) got no connection out of %d; its "
		    "CPU completed %d handshakes", i, g->tags[i], k,
		    seen[g->tags[i]]);
	ATF_REQUIRE_MSG(lb_untagged_fed(g),
	    "no untagged member got a connection out of %d", k);
	free(seen);
}

/*
 * Tagged members fill their own CPU's share; whatever a CPU supplies
 * beyond that goes to untagged members only.
 */
static void
lb_check_exact_or_untagged(const struct lbgroup *g, int k, int idx, int hcpu)
{
	int i;
	bool hcpu_tagged;

	hcpu_tagged = false;
	for (i = 0; i < g->n; i++)
		hcpu_tagged |= g->tags[i] == hcpu;
	if (!hcpu_tagged)
		return;
	ATF_REQUIRE_MSG(g->tags[idx] == hcpu || !lb_tagged(g->tags[idx]),
	    "connection %d: handshake on tagged CPU %d, but given to member "
	    "%d tagged with another CPU, %d", k, hcpu, idx, g->tags[idx]);
}

/*
 * Every CPU tagged, plus two untagged members (one never set, one set to
 * -1): every CPU's range holds untagged slots, so the untagged members
 * get connections whichever CPU receives, and every tagged member whose
 * CPU completes handshakes gets its own.
 */
ATF_TC_WITHOUT_HEAD(untagged_share);
ATF_TC_BODY(untagged_share, tc)
{
	struct lbgroup g;
	int tags[MAXMEMBERS];
	int ncpu;

	ncpu = lb_cpus(tags, MAXMEMBERS - 2);
	tags[ncpu] = TAG_NONE;
	tags[ncpu + 1] = TAG_HASH;
	lb_group(&g, AF_INET, ncpu + 2, tags, false);
	ATF_REQUIRE_MSG(lb_getcpu(g.sds[ncpu]) == -1,
	    "untagged member reads back %d", lb_getcpu(g.sds[ncpu]));
	ATF_REQUIRE_MSG(lb_getcpu(g.sds[ncpu + 1]) == -1,
	    "member set to -1 reads back %d", lb_getcpu(g.sds[ncpu + 1]));
	lb_until_all_fed(&g, 4000, lb_check_exact_or_untagged);
	lb_group_close(&g);
}

/*
 * Only some CPUs claimed (every other one, at least one), with as many
 * untagged members as tagged ones: no member starves (a tagged one once
 * its CPU completes handshakes), and handshakes on a claimed CPU never go
 * to a member claiming another CPU.
 */
ATF_TC_WITHOUT_HEAD(partial_claims);
ATF_TC_BODY(partial_claims, tc)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS], tags[MAXMEMBERS];
	int c, n, ncpu;

	ncpu = lb_cpus(cpus, MAXMEMBERS / 2);
	n = 0;
	for (c = 0; c < ncpu; c += 2)
		tags[n++] = cpus[c];
	for (c = n; c < 2 * n; c++)
		tags[c] = TAG_NONE;
	lb_group(&g, AF_INET, 2 * n, tags, true);
	lb_until_all_fed(&g, 4000, lb_check_exact_or_untagged);
	lb_group_close(&g);
}

/*
 * Setting and getting the option, valid and invalid values, on TCP and
 * UDP sockets of both families, listening and accepted.
 */
ATF_TC_WITHOUT_HEAD(option);
ATF_TC_BODY(option, tc)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS];
	const int bad[] = { -2, -3, INT_MIN, 0x7fff + 1, 0xffff, 0x10000,
	    INT_MAX };
	size_t i;
	int domains[] = { AF_INET, AF_INET6 };
	int types[] = { SOCK_STREAM, SOCK_DGRAM };
	int d, hcpu, maxcpu, ncpu, sd, t, val;
	char c;

	ncpu = lb_cpus(cpus, MAXMEMBERS);
	maxcpu = cpus[ncpu - 1];
	for (d = 0; d < 2; d++) {
		for (t = 0; t < 2; t++) {
			sd = socket(domains[d], types[t], 0);
			ATF_REQUIRE_MSG(sd >= 0, "socket failed: %s",
			    strerror(errno));
			ATF_REQUIRE_MSG(lb_getcpu(sd) == -1,
			    "a new socket reads back %d, not -1",
			    lb_getcpu(sd));
			lb_setcpu(sd, cpus[0]);
			ATF_REQUIRE_MSG(lb_getcpu(sd) == cpus[0],
			    "set %d, read back %d", cpus[0], lb_getcpu(sd));
			lb_setcpu(sd, maxcpu);
			ATF_REQUIRE_MSG(lb_getcpu(sd) == maxcpu,
			    "set %d, read back %d", maxcpu, lb_getcpu(sd));
			lb_setcpu(sd, -1);
			ATF_REQUIRE_MSG(lb_getcpu(sd) == -1,
			    "set -1, read back %d", lb_getcpu(sd));
			for (i = 0; i < nitems(bad); i++) {
				val = bad[i];
				ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET,
				    SO_REUSEPORT_LB_CPU, &val,
				    sizeof(val)) == -1 && errno == EINVAL,
				    "setting %d did not fail with EINVAL", val);
			}
			val = maxcpu + 1;
			if (val < CPU_SETSIZE) {
				ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET,
				    SO_REUSEPORT_LB_CPU, &val,
				    sizeof(val)) == -1 && errno == EINVAL,
				    "setting absent CPU %d did not fail with "
				    "EINVAL", val);
			}
			c = 0;
			ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET,
			    SO_REUSEPORT_LB_CPU, &c, sizeof(c)) == -1 &&
			    errno == EINVAL,
			    "a one-byte value did not fail with EINVAL");
			ATF_REQUIRE_MSG(lb_getcpu(sd) == -1,
			    "failed sets changed the tag to %d",
			    lb_getcpu(sd));
			ATF_REQUIRE(close(sd) == 0);
		}
	}

	/* An accepted socket reports the CPU of its handshake. */
	lb_group(&g, AF_INET, 1, (int []){ TAG_NONE }, false);
	(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE_MSG(hcpu >= 0 && hcpu <= maxcpu,
	    "accepted socket reports handshake CPU %d, not in 0..%d", hcpu,
	    maxcpu);
	lb_group_close(&g);
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, steering_ipv4);
	ATF_TP_ADD_TC(tp, steering_ipv6);
	ATF_TP_ADD_TC(tp, duplicates);
	ATF_TP_ADD_TC(tp, untagged_share);
	ATF_TP_ADD_TC(tp, partial_claims);
	ATF_TP_ADD_TC(tp, option);

	return (atf_no_error());
}
