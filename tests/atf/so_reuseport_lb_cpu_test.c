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
 * (SO_HANDSHAKE_CPU, the CPU on which the listener was selected) and
 * check the selection against it.  Where a test needs every CPU to be a
 * steered one, it tags a member with every CPU it may use (up to 256, the
 * group's limit; handshakes on other CPUs are not checked).  Nothing is
 * learned (learning is off by default), so the explicit tags stand in as
 * the receiving CPUs, each supplying an equal share; which member a
 * connection gets is then fully determined by its handshake CPU and its
 * tuple hash.
 *
 * A map is rebuilt after a member joins or leaves by a task, so tests
 * wait until no group is waiting for a rebuild (lb_settle()) before they
 * check steering.
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <arpa/inet.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atf-c.h>

#define	TAG_NONE	SO_REUSEPORT_LB_CPU_NONE	/* Left untagged. */
#define	TAG_HASH	SO_REUSEPORT_LB_CPU_HASH	/* Untagged, by hash. */
#define	MAXMEMBERS	256
#define	GROUPS_SYSCTL	"net.inet.tcp.reuseport_lb.groups"
#define	TASK_RUNS	"net.inet.tcp.reuseport_lb.task_runs"
#define	TASK_GROUPS	"net.inet.tcp.reuseport_lb.task_groups"

struct lbgroup {
	int	domain;
	int	n;
	int	sds[MAXMEMBERS];
	int	tags[MAXMEMBERS];
	int	accepted[MAXMEMBERS];
	struct sockaddr_storage addr;
};

/*
 * The CPUs this process may run on (its root cpuset, which a jail or a
 * restricted cpuset narrows), at most max of them; returns how many.
 */
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

/* The CPU that completed an accepted socket's handshake. */
static int
lb_hscpu(int sd)
{
	socklen_t len;
	int val;

	len = sizeof(val);
	ATF_REQUIRE_MSG(getsockopt(sd, SOL_SOCKET, SO_HANDSHAKE_CPU, &val,
	    &len) == 0,
	    "getsockopt(SO_HANDSHAKE_CPU) failed: %s", strerror(errno));
	return (val);
}

/*
 * The load-balancing groups view, as text, into buf; fails the test on a
 * kernel without it.
 */
static void
lb_groups(char *buf, size_t size)
{
	size_t len;

	len = size - 1;
	ATF_REQUIRE_MSG(sysctlbyname(GROUPS_SYSCTL, buf, &len, NULL, 0) == 0,
	    "sysctl %s: %s", GROUPS_SYSCTL, strerror(errno));
	buf[len] = '\0';
}

/* Wait (at most 5 s) until no group waits for its map to be rebuilt. */
static void
lb_settle(void)
{
	static char buf[1 << 20];
	int i;

	for (i = 0; i < 500; i++) {
		lb_groups(buf, sizeof(buf));
		if (strstr(buf, " dirty 1 ") == NULL)
			return;
		usleep(10000);
	}
	atf_tc_fail("a dealt map was not rebuilt within 5 s:\n%s", buf);
}

static uint64_t
lb_counter(const char *name)
{
	uint64_t val;
	size_t len;

	len = sizeof(val);
	ATF_REQUIRE_MSG(sysctlbyname(name, &val, &len, NULL, 0) == 0,
	    "sysctl %s: %s", name, strerror(errno));
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
	lb_settle();
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
	*hcpup = lb_hscpu(sd);
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

/* Whether cpu is one of cpus[0..n-1] (the CPUs a test tagged). */
static bool
lb_in(const int *cpus, int n, int cpu)
{
	int i;

	for (i = 0; i < n; i++) {
		if (cpus[i] == cpu)
			return (true);
	}
	return (false);
}

/*
 * Skip the case if none of its connections was checked: their handshakes
 * all ran on CPUs it did not tag (more CPUs than a group has members, or
 * the loopback path ran elsewhere), so it would pass without checking.
 */
static void
lb_checked(int checked, int conns)
{
	if (checked == 0)
		atf_tc_skip("none of %d handshakes ran on a tagged CPU: "
		    "nothing was checked", conns);
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
	int c, checked, hcpu, idx, ncpu, nconns;

	ncpu = lb_cpus(cpus, MAXMEMBERS);
	lb_group(&g, domain, ncpu, cpus, early);
	for (c = 0; c < ncpu; c++)
		ATF_REQUIRE_MSG(lb_getcpu(g.sds[c]) == cpus[c],
		    "member %d reads back tag %d, set %d", c,
		    lb_getcpu(g.sds[c]), cpus[c]);
	nconns = MAX(32, 8 * ncpu);
	for (c = checked = 0; c < nconns; c++) {
		idx = lb_connect(&g, &hcpu);
		ATF_REQUIRE_MSG(hcpu >= 0,
		    "accepted socket reports no handshake CPU (%d)", hcpu);
		if (!lb_in(cpus, ncpu, hcpu))
			continue;
		ATF_REQUIRE_MSG(g.tags[idx] == hcpu,
		    "connection %d: handshake on CPU %d, but given to member "
		    "%d tagged with CPU %d", c, hcpu, idx, g.tags[idx]);
		checked++;
	}
	lb_group_close(&g);
	lb_checked(checked, nconns);
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
	int c, checked, hcpu, i, idx, maxseen, ncpu, nconns, pairs;

	ncpu = lb_cpus(cpus, MAXMEMBERS / 2);
	for (c = 0; c < ncpu; c++)
		tags[c] = tags[ncpu + c] = cpus[c];
	lb_group(&g, AF_INET, 2 * ncpu, tags, true);
	seen = calloc(cpus[ncpu - 1] + 1, sizeof(*seen));
	ATF_REQUIRE(seen != NULL);
	/* Until some CPU completed 48, within 64 per CPU at most. */
	nconns = MAX(64, 16 * ncpu);
	checked = maxseen = 0;
	for (i = 0; i < nconns || (maxseen < 48 && i < 64 * MAX(ncpu, 4));
	    i++) {
		idx = lb_connect(&g, &hcpu);
		if (!lb_in(cpus, ncpu, hcpu))
			continue;
		ATF_REQUIRE_MSG(g.tags[idx] == hcpu,
		    "connection %d: handshake on CPU %d, but given to member "
		    "%d tagged with CPU %d", i, hcpu, idx, g.tags[idx]);
		seen[hcpu]++;
		maxseen = MAX(maxseen, seen[hcpu]);
		checked++;
	}
	/*
	 * The tuple hash picks between the two; with 48 connections from
	 * one CPU, one member getting none has a chance of 2^-47.
	 */
	for (c = pairs = 0; c < ncpu; c++) {
		if (seen[cpus[c]] < 48)
			continue;
		ATF_REQUIRE_MSG(g.accepted[c] > 0 && g.accepted[ncpu + c] > 0,
		    "CPU %d completed %d handshakes but its members got %d "
		    "and %d", cpus[c], seen[cpus[c]], g.accepted[c],
		    g.accepted[ncpu + c]);
		pairs++;
	}
	free(seen);
	lb_group_close(&g);
	lb_checked(checked, i);
	if (pairs == 0)
		atf_tc_skip("no CPU completed 48 handshakes in %d connections: "
		    "no pair of members was checked", i);
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
	ATF_REQUIRE_MSG(lb_getcpu(g.sds[ncpu]) == TAG_NONE,
	    "untagged member reads back %d", lb_getcpu(g.sds[ncpu]));
	ATF_REQUIRE_MSG(lb_getcpu(g.sds[ncpu + 1]) == TAG_HASH,
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

/* Sets val and expects it to fail with err. */
static void
lb_setcpu_fails(int sd, int name, int val, int err)
{
	ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, name, &val,
	    sizeof(val)) == -1 && errno == err,
	    "setting option %#x to %d: errno %d (%s), not %d", name, val,
	    errno, strerror(errno), err);
}

/*
 * Setting and getting SO_REUSEPORT_LB_CPU, valid and invalid values, on
 * TCP sockets of both families, listening and accepted; SO_HANDSHAKE_CPU
 * on both.
 */
ATF_TC_WITHOUT_HEAD(option);
ATF_TC_BODY(option, tc)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS];
	const int bad[] = { -3, INT_MIN, 0x7fff + 1, 0xffff, 0x10000,
	    0x40000000, INT_MAX };
	size_t i, len;
	int domains[] = { AF_INET, AF_INET6 };
	int csd, d, hcpu, maxcpu, maxid, ncpu, sd;
	char c;

	ncpu = lb_cpus(cpus, MAXMEMBERS);
	maxcpu = cpus[ncpu - 1];
	/*
	 * The first CPU id past the machine's (not past this process's root
	 * set, which a jail or a restricted cpuset narrows: any CPU of the
	 * machine is a valid tag).
	 */
	len = sizeof(maxid);
	ATF_REQUIRE_MSG(sysctlbyname("kern.smp.maxid", &maxid, &len, NULL,
	    0) == 0, "sysctl kern.smp.maxid: %s", strerror(errno));
	for (d = 0; d < 2; d++) {
		sd = socket(domains[d], SOCK_STREAM, 0);
		ATF_REQUIRE_MSG(sd >= 0, "socket failed: %s", strerror(errno));
		ATF_REQUIRE_MSG(lb_getcpu(sd) == TAG_NONE,
		    "a new socket reads back %d, not %d", lb_getcpu(sd),
		    TAG_NONE);
		ATF_REQUIRE_MSG(lb_hscpu(sd) == -1,
		    "a new socket reports handshake CPU %d", lb_hscpu(sd));
		lb_setcpu(sd, cpus[0]);
		ATF_REQUIRE_MSG(lb_getcpu(sd) == cpus[0],
		    "set %d, read back %d", cpus[0], lb_getcpu(sd));
		lb_setcpu(sd, maxcpu);
		ATF_REQUIRE_MSG(lb_getcpu(sd) == maxcpu,
		    "set %d, read back %d", maxcpu, lb_getcpu(sd));
		lb_setcpu(sd, TAG_HASH);
		ATF_REQUIRE_MSG(lb_getcpu(sd) == TAG_HASH,
		    "set %d, read back %d", TAG_HASH, lb_getcpu(sd));
		lb_setcpu(sd, TAG_NONE);
		ATF_REQUIRE_MSG(lb_getcpu(sd) == TAG_NONE,
		    "set %d, read back %d", TAG_NONE, lb_getcpu(sd));
		for (i = 0; i < nitems(bad); i++)
			lb_setcpu_fails(sd, SO_REUSEPORT_LB_CPU, bad[i],
			    EINVAL);
		if (maxid + 1 <= 0x7fff)
			lb_setcpu_fails(sd, SO_REUSEPORT_LB_CPU, maxid + 1,
			    EINVAL);
		c = 0;
		ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET,
		    SO_REUSEPORT_LB_CPU, &c, sizeof(c)) == -1 &&
		    errno == EINVAL,
		    "a one-byte value did not fail with EINVAL");
		lb_setcpu_fails(sd, SO_HANDSHAKE_CPU, 0, EINVAL);
		ATF_REQUIRE_MSG(lb_getcpu(sd) == TAG_NONE,
		    "failed sets changed the tag to %d", lb_getcpu(sd));
		ATF_REQUIRE(close(sd) == 0);
	}

	/*
	 * An accepted socket reports the CPU of its handshake, has no tag
	 * and takes none; its listener reports no handshake CPU.
	 */
	lb_group(&g, AF_INET, 1, (int []){ TAG_NONE }, false);
	csd = socket(AF_INET, SOCK_STREAM, 0);
	ATF_REQUIRE(csd >= 0);
	ATF_REQUIRE_MSG(connect(csd, (struct sockaddr *)&g.addr,
	    g.addr.ss_len) == 0, "connect failed: %s", strerror(errno));
	ATF_REQUIRE_MSG(lb_hscpu(csd) == -1,
	    "a connect(2)ed socket reports handshake CPU %d", lb_hscpu(csd));
	ATF_REQUIRE(poll(&(struct pollfd){ .fd = g.sds[0], .events = POLLIN },
	    1, 10000) == 1);
	sd = accept(g.sds[0], NULL, NULL);
	ATF_REQUIRE_MSG(sd >= 0, "accept failed: %s", strerror(errno));
	hcpu = lb_hscpu(sd);
	ATF_REQUIRE_MSG(hcpu >= 0 && hcpu < CPU_SETSIZE,
	    "accepted socket reports handshake CPU %d", hcpu);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == TAG_NONE,
	    "accepted socket reads back tag %d", lb_getcpu(sd));
	lb_setcpu_fails(sd, SO_REUSEPORT_LB_CPU, cpus[0], EINVAL);
	ATF_REQUIRE_MSG(lb_hscpu(g.sds[0]) == -1,
	    "listener reports handshake CPU %d", lb_hscpu(g.sds[0]));
	ATF_REQUIRE(close(sd) == 0);
	ATF_REQUIRE(close(csd) == 0);
	lb_group_close(&g);
}

/* Both options fail on sd with err, for set and get. */
static void
lb_refused(int sd, int err, const char *what)
{
	socklen_t len;
	int opts[] = { SO_REUSEPORT_LB_CPU, SO_HANDSHAKE_CPU };
	int i, val;

	ATF_REQUIRE_MSG(sd >= 0, "socket (%s) failed: %s", what,
	    strerror(errno));
	for (i = 0; i < 2; i++) {
		val = 0;
		ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, opts[i], &val,
		    sizeof(val)) == -1 && errno == err,
		    "setsockopt(%#x, 0) on %s: errno %d (%s), not %d",
		    opts[i], what, errno, strerror(errno), err);
		val = TAG_HASH;
		ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, opts[i], &val,
		    sizeof(val)) == -1 && errno == err,
		    "setsockopt(%#x, -1) on %s: errno %d (%s), not %d",
		    opts[i], what, errno, strerror(errno), err);
		len = sizeof(val);
		ATF_REQUIRE_MSG(getsockopt(sd, SOL_SOCKET, opts[i], &val,
		    &len) == -1 && errno == err,
		    "getsockopt(%#x) on %s: errno %d (%s), not %d",
		    opts[i], what, errno, strerror(errno), err);
	}
	ATF_REQUIRE(close(sd) == 0);
}

/*
 * Every protocol but TCP refuses both options with ENOPROTOOPT: UDP
 * (selecting a datagram's member by the receiving CPU would break a
 * flow's 4-tuple stickiness), UNIX-domain and raw sockets.  Raw sockets
 * need root.
 */
ATF_TC(udp_refused);
ATF_TC_HEAD(udp_refused, tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}
ATF_TC_BODY(udp_refused, tc)
{
	int sd;

	/* The kernel has the option: TCP takes it. */
	sd = socket(AF_INET, SOCK_STREAM, 0);
	ATF_REQUIRE(sd >= 0);
	lb_setcpu(sd, TAG_HASH);
	ATF_REQUIRE(close(sd) == 0);
	lb_refused(socket(AF_INET, SOCK_DGRAM, 0), ENOPROTOOPT, "UDP");
	lb_refused(socket(AF_INET6, SOCK_DGRAM, 0), ENOPROTOOPT, "UDP6");
	lb_refused(socket(AF_UNIX, SOCK_STREAM, 0), ENOPROTOOPT,
	    "UNIX stream");
	lb_refused(socket(AF_UNIX, SOCK_DGRAM, 0), ENOPROTOOPT,
	    "UNIX datagram");
	/* A jail without allow.raw_sockets refuses raw sockets to root. */
	sd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (sd < 0 && errno == EPERM)
		atf_tc_skip("raw sockets are not allowed here (a jail?)");
	lb_refused(sd, ENOPROTOOPT, "raw IPv4");
	lb_refused(socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6), ENOPROTOOPT,
	    "raw IPv6");
}

/*
 * A set that leaves the tag as it was rebuilds nothing: 10,000 of them
 * on a member of a group with every CPU tagged add 10,000 to the no-op
 * counter and nothing to the rebuild counter.  The counters are global:
 * the Makefile makes this program exclusive.
 */
ATF_TC_WITHOUT_HEAD(noop_set);
ATF_TC_BODY(noop_set, tc)
{
	struct lbgroup g;
	int cpus[MAXMEMBERS];
	uint64_t noop0, noop1, rb0, rb1;
	int i, ncpu;

	ncpu = lb_cpus(cpus, MAXMEMBERS);
	lb_group(&g, AF_INET, ncpu, cpus, false);
	rb0 = lb_counter("net.inet.tcp.reuseport_lb.rebuilds");
	noop0 = lb_counter("net.inet.tcp.reuseport_lb.noop");
	for (i = 0; i < 10000; i++)
		lb_setcpu(g.sds[i % ncpu], cpus[i % ncpu]);
	rb1 = lb_counter("net.inet.tcp.reuseport_lb.rebuilds");
	noop1 = lb_counter("net.inet.tcp.reuseport_lb.noop");
	ATF_REQUIRE_MSG(rb1 == rb0, "%ju rebuilds after unchanged sets",
	    (uintmax_t)(rb1 - rb0));
	ATF_REQUIRE_MSG(noop1 - noop0 == 10000, "%ju no-op sets counted",
	    (uintmax_t)(noop1 - noop0));
	/* A set that changes the tag does rebuild. */
	lb_setcpu(g.sds[0], TAG_HASH);
	rb1 = lb_counter("net.inet.tcp.reuseport_lb.rebuilds");
	ATF_REQUIRE_MSG(rb1 == rb0 + 1, "%ju rebuilds after one change",
	    (uintmax_t)(rb1 - rb0));
	lb_group_close(&g);
}

/*
 * Closing a tagged member: the map is rebuilt without it (the view counts
 * one member less), every connection is still accepted, and a handshake
 * on another tagged CPU still goes to that CPU's member or to the
 * untagged one, which every CPU's range feeds.  The closed member's CPU
 * no longer stands in (no explicit tag names it), so its handshakes are
 * hashed over the remaining members.  Over loopback the handshake runs in
 * the netisr thread (if_simloop() queues the packet), wherever the
 * scheduler runs it: the member closed is one whose CPU did not complete a
 * first handshake, so a netisr thread that stays on one CPU keeps
 * completing checked handshakes.
 */
ATF_TC_WITHOUT_HEAD(close_tagged);
ATF_TC_BODY(close_tagged, tc)
{
	static char buf[1 << 20];
	struct lbgroup g;
	int cpus[MAXMEMBERS], tags[MAXMEMBERS];
	int c, checked, closed, hcpu, idx, ncpu;
	char line[64];

	ncpu = lb_cpus(cpus, MAXMEMBERS - 1);
	if (ncpu < 2)
		atf_tc_skip("needs two CPUs");
	memcpy(tags, cpus, ncpu * sizeof(*tags));
	tags[ncpu] = TAG_NONE;
	lb_group(&g, AF_INET, ncpu + 1, tags, true);
	(void)lb_connect(&g, &hcpu);
	closed = hcpu == cpus[0] ? 1 : 0;
	ATF_REQUIRE(close(g.sds[closed]) == 0);
	g.sds[closed] = g.sds[--g.n];
	g.tags[closed] = g.tags[g.n];
	lb_settle();
	lb_groups(buf, sizeof(buf));
	snprintf(line, sizeof(line), "port %u af inet members %d ",
	    ntohs(((struct sockaddr_in *)&g.addr)->sin_port), g.n);
	ATF_REQUIRE_MSG(strstr(buf, line) != NULL,
	    "no group line with \"%s\" in:\n%s", line, buf);
	for (c = checked = 0; c < MAX(32, 8 * ncpu); c++) {
		idx = lb_connect(&g, &hcpu);
		if (hcpu == cpus[closed] || !lb_in(cpus, ncpu, hcpu))
			continue;
		/* Beyond its own member's share, a CPU feeds the untagged. */
		ATF_REQUIRE_MSG(g.tags[idx] == hcpu || !lb_tagged(g.tags[idx]),
		    "connection %d: handshake on CPU %d, but given to member "
		    "%d tagged with CPU %d", c, hcpu, idx, g.tags[idx]);
		checked++;
	}
	lb_group_close(&g);
	lb_checked(checked, c);
}

/*
 * The view's section of the group on port: from its group line to the
 * next group line, into sec; fails if the view has no such group.
 */
static void
lb_section(const char *buf, unsigned port, char *sec, size_t size)
{
	char key[40];
	const char *p, *end;

	snprintf(key, sizeof(key), "group port %u af ", port);
	p = strstr(buf, key);
	ATF_REQUIRE_MSG(p != NULL, "no group on port %u in:\n%s", port, buf);
	end = strstr(p + 1, "group port ");
	if (end == NULL)
		end = p + strlen(p);
	ATF_REQUIRE((size_t)(end - p) < size);
	memcpy(sec, p, end - p);
	sec[end - p] = '\0';
}

/*
 * A member bound but not listening yet is not dealt in: it could not take
 * the connections of its slots.  Two members tagged before bind(2), only
 * the first listening: the map has the first one's 16 slots and none of
 * the second's.  listen(2) on the second deals it in: 32 slots, 16 each.
 */
ATF_TC_WITHOUT_HEAD(listen_late);
ATF_TC_BODY(listen_late, tc)
{
	static char buf[1 << 20];
	struct sockaddr_storage addr;
	socklen_t len;
	char sec[4096], line[64];
	int cpus[1], i, one, sds[2];
	unsigned port;

	(void)lb_cpus(cpus, 1);
	lb_loopback(AF_INET, &addr);
	for (i = 0; i < 2; i++) {
		sds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ATF_REQUIRE(sds[i] >= 0);
		one = 1;
		ATF_REQUIRE(setsockopt(sds[i], SOL_SOCKET, SO_REUSEPORT_LB,
		    &one, sizeof(one)) == 0);
		lb_setcpu(sds[i], cpus[0]);
		ATF_REQUIRE_MSG(bind(sds[i], (struct sockaddr *)&addr,
		    addr.ss_len) == 0, "bind failed: %s", strerror(errno));
		len = sizeof(addr);
		ATF_REQUIRE(getsockname(sds[i], (struct sockaddr *)&addr,
		    &len) == 0);
	}
	port = ntohs(((struct sockaddr_in *)&addr)->sin_port);
	ATF_REQUIRE(listen(sds[0], 128) == 0);
	lb_settle();
	lb_groups(buf, sizeof(buf));
	lb_section(buf, port, sec, sizeof(sec));
	ATF_REQUIRE_MSG(strstr(sec, " members 2 ") != NULL &&
	    strstr(sec, " map 16 ") != NULL,
	    "one of two members listening, not a map of 16 slots:\n%s", sec);
	snprintf(line, sizeof(line), "member 1 tag %d explicit slots 0\n",
	    cpus[0]);
	ATF_REQUIRE_MSG(strstr(sec, line) != NULL,
	    "the member not listening was dealt in:\n%s", sec);
	ATF_REQUIRE(listen(sds[1], 128) == 0);
	lb_settle();
	lb_groups(buf, sizeof(buf));
	lb_section(buf, port, sec, sizeof(sec));
	snprintf(line, sizeof(line), "member 1 tag %d explicit slots 16\n",
	    cpus[0]);
	ATF_REQUIRE_MSG(strstr(sec, " map 32 ") != NULL &&
	    strstr(sec, line) != NULL,
	    "listen(2) did not deal the second member in:\n%s", sec);
	for (i = 0; i < 2; i++)
		ATF_REQUIRE(close(sds[i]) == 0);
}

struct lb_churn {
	pid_t	pid;
	int	fd;		/* Read end: the child's cycle count. */
};

static volatile sig_atomic_t lb_churn_stop;

static void
lb_churn_sig(int sig __unused)
{
	lb_churn_stop = 1;
}

/*
 * Fork a child that makes a member join and leave the group at addr as
 * fast as it can until SIGTERM, then writes how many times it did.
 */
static void
lb_churn_start(struct lb_churn *ch, const struct sockaddr_storage *addr)
{
	struct sigaction sa;
	int fds[2], cycles, one, sd;

	ATF_REQUIRE(pipe(fds) == 0);
	ch->pid = fork();
	ATF_REQUIRE(ch->pid >= 0);
	if (ch->pid > 0) {
		close(fds[1]);
		ch->fd = fds[0];
		return;
	}
	close(fds[0]);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = lb_churn_sig;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	cycles = 0;
	while (!lb_churn_stop) {
		sd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (sd < 0)
			break;
		one = 1;
		if (setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB, &one,
		    sizeof(one)) != 0 ||
		    bind(sd, (const struct sockaddr *)addr,
		    addr->ss_len) != 0 || listen(sd, 8) != 0) {
			close(sd);
			break;
		}
		close(sd);
		cycles++;
	}
	(void)write(fds[1], &cycles, sizeof(cycles));
	_exit(0);
}

/* Stop the child; returns its cycle count. */
static int
lb_churn_end(struct lb_churn *ch)
{
	int cycles, status;

	ATF_REQUIRE(kill(ch->pid, SIGTERM) == 0);
	ATF_REQUIRE(waitpid(ch->pid, &status, 0) == ch->pid);
	cycles = 0;
	ATF_REQUIRE(read(ch->fd, &cycles, sizeof(cycles)) ==
	    sizeof(cycles));
	close(ch->fd);
	return (cycles);
}

/*
 * Members joining and leaving while connections arrive.  A thread makes
 * a member join and leave in a loop; meanwhile connections are made to
 * the group.  Each must be either accepted by a steady member or reset
 * (it was given to a member that then closed); none may hang.  The
 * rebuilds the churn causes are rate-limited: at most one per group per
 * 10 ms, so fewer than the elapsed time allows plus a few.  Afterwards
 * the map steers exactly again.  The counters are global (the program
 * is exclusive).
 */
ATF_TC_WITHOUT_HEAD(join_leave);
ATF_TC_BODY(join_leave, tc)
{
	struct lbgroup g;
	struct lb_churn ch;
	struct pollfd pfd[MAXMEMBERS + 1];
	struct timespec t0, t1;
	uint64_t rb0, rb1;
	const struct linger lopt = { 1, 0 };
	int cpus[MAXMEMBERS];
	int accepted, c, checked, csd, cycles, elapsed_ms, i, ncpu, reset, sd;
	char b;

	ncpu = lb_cpus(cpus, MAXMEMBERS - 1);
	lb_group(&g, AF_INET, ncpu, cpus, true);
	rb0 = lb_counter("net.inet.tcp.reuseport_lb.rebuilds");
	ATF_REQUIRE(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	lb_churn_start(&ch, &g.addr);
	accepted = reset = 0;
	for (c = 0; c < 400; c++) {
		csd = socket(AF_INET, SOCK_STREAM, 0);
		ATF_REQUIRE(csd >= 0);
		if (connect(csd, (struct sockaddr *)&g.addr,
		    g.addr.ss_len) != 0) {
			/* Refused or reset by a member that left. */
			ATF_REQUIRE_MSG(errno == ECONNREFUSED ||
			    errno == ECONNRESET, "connect failed: %s",
			    strerror(errno));
			reset++;
			close(csd);
			continue;
		}
		ATF_REQUIRE(setsockopt(csd, SOL_SOCKET, SO_LINGER, &lopt,
		    sizeof(lopt)) == 0);
		for (sd = -1; sd < 0;) {
			for (i = 0; i < g.n; i++) {
				pfd[i].fd = g.sds[i];
				pfd[i].events = POLLIN;
				pfd[i].revents = 0;
			}
			pfd[g.n].fd = csd;
			pfd[g.n].events = POLLIN;
			pfd[g.n].revents = 0;
			ATF_REQUIRE_MSG(poll(pfd, g.n + 1, 10000) > 0,
			    "connection %d neither accepted nor reset in 10 s",
			    c);
			if (pfd[g.n].revents != 0 &&
			    read(csd, &b, 1) <= 0) {
				reset++;
				break;
			}
			for (i = 0; i < g.n && sd < 0; i++) {
				if ((pfd[i].revents & POLLIN) == 0)
					continue;
				sd = accept(g.sds[i], NULL, NULL);
				ATF_REQUIRE_MSG(sd >= 0 || errno == EAGAIN,
				    "accept failed: %s", strerror(errno));
			}
		}
		if (sd >= 0) {
			accepted++;
			close(sd);
		}
		close(csd);
	}
	cycles = lb_churn_end(&ch);
	ATF_REQUIRE(clock_gettime(CLOCK_MONOTONIC, &t1) == 0);
	rb1 = lb_counter("net.inet.tcp.reuseport_lb.rebuilds");
	lb_settle();
	elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000000;
	ATF_REQUIRE_MSG(cycles > 0, "the churning member never joined");
	ATF_REQUIRE_MSG(accepted > 0, "no connection accepted");
	ATF_REQUIRE_MSG(rb1 - rb0 <= (uint64_t)elapsed_ms / 10 + 4,
	    "%ju rebuilds in %d ms for %d joins and leaves",
	    (uintmax_t)(rb1 - rb0), elapsed_ms, cycles);
	/* Settled: every tagged CPU's handshakes go to its member. */
	for (c = checked = 0; c < 64; c++) {
		i = lb_connect(&g, &sd);
		if (!lb_in(cpus, ncpu, sd))
			continue;
		ATF_REQUIRE_MSG(g.tags[i] == sd, "after the churn, handshake "
		    "on CPU %d given to member %d tagged %d", sd, i,
		    g.tags[i]);
		checked++;
	}
	lb_group_close(&g);
	lb_checked(checked, c);
}

/*
 * Fail points (fail(9)) that a case sets: their values before the case,
 * put back by lb_fp_restore(), which the case calls at its end, an
 * atexit(3) handler calls if a requirement fails first (the guest's
 * runner has no cleanup step), and the cleanup calls from a file in the
 * work directory (kyua runs it in another process).
 */
#define	FP_PREFIX	"debug.fail_point."
#define	FP_SAVED	"saved-failpoints"
#define	FP_MAX		4

static struct {
	char	name[64];
	char	val[256];
} lb_fps[FP_MAX];
static int lb_nfps;
static pid_t lb_fp_owner;

static void
lb_fp_get(const char *name, char *buf, size_t size)
{
	char oid[128];
	size_t len;

	snprintf(oid, sizeof(oid), FP_PREFIX "%s", name);
	len = size - 1;
	ATF_REQUIRE_MSG(sysctlbyname(oid, buf, &len, NULL, 0) == 0,
	    "sysctl %s: %s", oid, strerror(errno));
	buf[len] = '\0';
}

static int
lb_fp_put(const char *name, const char *val)
{
	char oid[128];

	snprintf(oid, sizeof(oid), FP_PREFIX "%s", name);
	return (sysctlbyname(oid, NULL, NULL, val, strlen(val)));
}

/* Put back every saved fail point; never fails. */
static void
lb_fp_restore(void)
{
	FILE *f;
	char line[400], *eq;
	int i;

	if (lb_nfps > 0 && getpid() != lb_fp_owner)
		return;		/* A child exiting: not its to restore. */
	for (i = 0; i < lb_nfps; i++)
		(void)lb_fp_put(lb_fps[i].name, lb_fps[i].val);
	if (lb_nfps > 0) {
		lb_nfps = 0;
		(void)unlink(FP_SAVED);
		return;
	}
	f = fopen(FP_SAVED, "r");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		eq = strchr(line, '=');
		if (eq == NULL)
			continue;
		*eq = '\0';
		(void)lb_fp_put(line, eq + 1);
	}
	fclose(f);
	(void)unlink(FP_SAVED);
}

/*
 * Set fail point name to val, first saving the value it had.  Fails the
 * case on a kernel without the fail point.
 */
static void
lb_fp_set(const char *name, const char *val)
{
	FILE *f;
	int error, i;

	for (i = 0; i < lb_nfps && strcmp(lb_fps[i].name, name) != 0; i++)
		;
	if (i == lb_nfps) {
		ATF_REQUIRE(lb_nfps < FP_MAX);
		if (lb_nfps == 0) {
			lb_fp_owner = getpid();
			ATF_REQUIRE(atexit(lb_fp_restore) == 0);
		}
		strlcpy(lb_fps[i].name, name, sizeof(lb_fps[i].name));
		lb_fp_get(name, lb_fps[i].val, sizeof(lb_fps[i].val));
		lb_nfps++;
		f = fopen(FP_SAVED, "a");
		if (f != NULL) {
			fprintf(f, "%s=%s\n", name, lb_fps[i].val);
			fclose(f);
		}
	}
	error = lb_fp_put(name, val);
	if (error != 0 && errno == EPERM)
		atf_tc_skip("cannot set fail point %s here (a jail?)", name);
	ATF_REQUIRE_MSG(error == 0,
	    "setting fail point %s to %s: %s", name, val, strerror(errno));
}

/* Whether time a is before time b. */
static bool
lb_before(const struct timespec *a, const struct timespec *b)
{
	return (a->tv_sec < b->tv_sec ||
	    (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec));
}

/*
 * Clients: child processes, each pinned to one CPU, that connect to a
 * group until a deadline, send a byte on every connection and wait for
 * the member that accepted it to echo it back.  A child reports what it
 * saw through a pipe; it never uses the ATF macros (a child's failure
 * would be written as the case's result), but a connection that is
 * neither echoed, refused nor reset within 10 s, or any other error, is
 * reported as an error message.
 */
struct lb_tally {
	int	done;		/* Echoed: accepted by a member. */
	int	refused;	/* connect(2) refused. */
	int	reset;		/* Reset or closed before the echo. */
	char	err[200];	/* The first error, or empty. */
};

struct lb_client {
	pid_t	pid;
	int	fd;		/* Read end of the child's pipe. */
};

static void
lb_client_once(const struct sockaddr_storage *ss, struct lb_tally *t)
{
	struct pollfd pfd;
	const struct linger lopt = { 1, 0 };
	socklen_t len;
	ssize_t n;
	int csd, err;
	char b;

	csd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (csd < 0) {
		snprintf(t->err, sizeof(t->err), "socket: %s",
		    strerror(errno));
		return;
	}
	(void)setsockopt(csd, SOL_SOCKET, SO_LINGER, &lopt, sizeof(lopt));
	err = 0;
	if (connect(csd, (const struct sockaddr *)ss, ss->ss_len) != 0) {
		err = errno;
		if (err == EINPROGRESS) {
			pfd.fd = csd;
			pfd.events = POLLOUT;
			if (poll(&pfd, 1, 10000) != 1) {
				snprintf(t->err, sizeof(t->err), "a connection "
				    "was neither completed nor refused in 10 s");
				goto out;
			}
			len = sizeof(err);
			if (getsockopt(csd, SOL_SOCKET, SO_ERROR, &err,
			    &len) != 0)
				err = errno;
		}
	}
	if (err == ECONNREFUSED) {
		t->refused++;
		goto out;
	}
	if (err == ECONNRESET) {
		t->reset++;
		goto out;
	}
	if (err != 0) {
		snprintf(t->err, sizeof(t->err), "connect: %s", strerror(err));
		goto out;
	}
	b = 'e';
	if (send(csd, &b, 1, MSG_NOSIGNAL) != 1) {
		if (errno == ECONNRESET || errno == EPIPE)
			t->reset++;
		else
			snprintf(t->err, sizeof(t->err), "send: %s",
			    strerror(errno));
		goto out;
	}
	pfd.fd = csd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) != 1) {
		snprintf(t->err, sizeof(t->err), "a connection was neither "
		    "echoed nor reset in 10 s");
		goto out;
	}
	n = read(csd, &b, 1);
	if (n == 1) {
		t->done++;
		/*
		 * Confirm the echo ('k'), then wait for the member's close,
		 * so that the member tells a seen echo from an unseen one.
		 */
		b = 'k';
		if (send(csd, &b, 1, MSG_NOSIGNAL) == 1 &&
		    poll(&pfd, 1, 10000) != 1)
			snprintf(t->err, sizeof(t->err), "a member did not "
			    "close a confirmed connection in 10 s");
	} else if (n == 0 || errno == ECONNRESET)
		t->reset++;
	else
		snprintf(t->err, sizeof(t->err), "read: %s", strerror(errno));
out:
	close(csd);
}

/*
 * Start a client pinned to cpu that connects to ss every interval_us
 * microseconds (back to back if 0) for ms milliseconds.
 */
static void
lb_client_start(struct lb_client *c, const struct sockaddr_storage *ss,
    int cpu, int interval_us, int ms)
{
	struct lb_tally t;
	struct timespec end, next, now;
	cpuset_t mask;
	int fds[2];

	ATF_REQUIRE(pipe(fds) == 0);
	c->pid = fork();
	ATF_REQUIRE(c->pid >= 0);
	if (c->pid > 0) {
		close(fds[1]);
		c->fd = fds[0];
		return;
	}
	close(fds[0]);
	memset(&t, 0, sizeof(t));
	CPU_ZERO(&mask);
	CPU_SET(cpu, &mask);
	if (cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_PID, -1,
	    sizeof(mask), &mask) != 0)
		snprintf(t.err, sizeof(t.err), "pinning a client to CPU %d: "
		    "%s", cpu, strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &now);
	end = next = now;
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	while (t.err[0] == '\0' && lb_before(&now, &end)) {
		lb_client_once(ss, &t);
		next.tv_nsec += interval_us * 1000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		(void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
		    NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (lb_before(&next, &now))
			next = now;
	}
	(void)write(fds[1], &t, sizeof(t));
	_exit(0);
}

/* Wait for a client and add what it saw to *sum; fails on its error. */
static void
lb_client_end(struct lb_client *c, struct lb_tally *sum)
{
	struct lb_tally t;
	int status;

	ATF_REQUIRE_MSG(read(c->fd, &t, sizeof(t)) == sizeof(t),
	    "a client died without a report");
	ATF_REQUIRE(waitpid(c->pid, &status, 0) == c->pid);
	close(c->fd);
	ATF_REQUIRE_MSG(t.err[0] == '\0', "client: %s", t.err);
	sum->done += t.done;
	sum->refused += t.refused;
	sum->reset += t.reset;
}

/* A new member of the group at addr, bound and listening; the join's time. */
static int
lb_join(const struct sockaddr_storage *addr, int *usp)
{
	struct timespec t0, t1;
	int one, sd;

	sd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ATF_REQUIRE_MSG(sd >= 0, "socket failed: %s", strerror(errno));
	one = 1;
	ATF_REQUIRE(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) == 0);
	ATF_REQUIRE(clock_gettime(CLOCK_MONOTONIC, &t0) == 0);
	ATF_REQUIRE_MSG(bind(sd, (const struct sockaddr *)addr,
	    addr->ss_len) == 0, "bind failed: %s", strerror(errno));
	ATF_REQUIRE_MSG(listen(sd, 128) == 0, "listen failed: %s",
	    strerror(errno));
	ATF_REQUIRE(clock_gettime(CLOCK_MONOTONIC, &t1) == 0);
	*usp = (t1.tv_sec - t0.tv_sec) * 1000000 +
	    (t1.tv_nsec - t0.tv_nsec) / 1000;
	return (sd);
}

/*
 * What the members saw: echoes the client confirmed having read, and
 * echoes answered by a reset or a close instead.
 */
struct lb_echoes {
	int	seen;
	int	unseen;
};

/*
 * Accept whatever is queued on the members (waiting at most timeout_ms
 * for the first), read each connection's byte, echo it and wait for the
 * client's confirmation; count in *e.  Also returns early when fd (if
 * not -1) is readable.
 */
static void
lb_serve(const int *sds, int n, int fd, int timeout_ms, struct lb_echoes *e)
{
	struct pollfd pfd[MAXMEMBERS + 1], cp;
	int i, sd;
	char b;

	for (i = 0; i < n; i++) {
		pfd[i].fd = sds[i];
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	pfd[n].fd = fd;
	pfd[n].events = POLLIN;
	pfd[n].revents = 0;
	if (poll(pfd, n + 1, timeout_ms) <= 0)
		return;
	for (i = 0; i < n; i++) {
		if ((pfd[i].revents & POLLIN) == 0)
			continue;
		while ((sd = accept4(sds[i], NULL, NULL, 0)) >= 0) {
			cp.fd = sd;
			cp.events = POLLIN;
			ATF_REQUIRE_MSG(poll(&cp, 1, 10000) == 1,
			    "an accepted connection sent nothing in 10 s");
			if (read(sd, &b, 1) != 1 ||
			    send(sd, &b, 1, MSG_NOSIGNAL) != 1) {
				close(sd);
				continue;
			}
			ATF_REQUIRE_MSG(poll(&cp, 1, 10000) == 1,
			    "an echo was neither confirmed nor reset in 10 s");
			if (read(sd, &b, 1) == 1 && b == 'k')
				e->seen++;
			else
				e->unseen++;
			close(sd);
		}
		ATF_REQUIRE_MSG(errno == EAGAIN || errno == ECONNABORTED,
		    "accept failed: %s", strerror(errno));
	}
}

/* A free loopback TCP port of domain, in addr. */
static void
lb_free_port(int domain, struct sockaddr_storage *addr)
{
	socklen_t len;
	int sd;

	lb_loopback(domain, addr);
	sd = socket(domain, SOCK_STREAM, 0);
	ATF_REQUIRE(sd >= 0);
	ATF_REQUIRE(bind(sd, (struct sockaddr *)addr, addr->ss_len) == 0);
	len = sizeof(*addr);
	ATF_REQUIRE(getsockname(sd, (struct sockaddr *)addr, &len) == 0);
	ATF_REQUIRE(close(sd) == 0);
}

/* Busy-wait of the in_pcblb_join fail point in the window cases, in us. */
#define	JOIN_DELAY_US	20000
/* The least time a delayed join may take (the clock's slack allowed). */
#define	JOIN_DELAY_MIN	(JOIN_DELAY_US * 3 / 4)

static void
lb_fp_head(atf_tc_t *tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}

/*
 * The rebuild task's cost is bounded by the groups that have work, not by
 * the number of groups.  With 64 other tagged groups idle, a member joins
 * and leaves a tagged group in a loop for 2 s: each task run visits only
 * groups with work (at most the churned group and one of its rebuilds
 * re-armed, so at most two per run), and the runs are bounded by the
 * joins and leaves that queue them.  The counters are global (the program
 * is exclusive).
 */
ATF_TC_WITHOUT_HEAD(task_bounded);
ATF_TC_BODY(task_bounded, tc)
{
	static struct lbgroup idle[64];
	struct lbgroup g;
	struct lb_churn ch;
	int cpus[MAXMEMBERS];
	uint64_t runs, runs0, visits, visits0;
	int cycles, i, ncpu;

	ncpu = lb_cpus(cpus, MAXMEMBERS - 1);
	for (i = 0; i < (int)nitems(idle); i++)
		lb_group(&idle[i], AF_INET, 1, &cpus[i % ncpu], true);
	lb_group(&g, AF_INET, ncpu, cpus, true);
	runs0 = lb_counter(TASK_RUNS);
	visits0 = lb_counter(TASK_GROUPS);
	lb_churn_start(&ch, &g.addr);
	usleep(2000000);
	cycles = lb_churn_end(&ch);
	lb_settle();
	runs = lb_counter(TASK_RUNS) - runs0;
	visits = lb_counter(TASK_GROUPS) - visits0;
	fprintf(stderr, "task_bounded: %d joins and leaves, %ju task runs, "
	    "%ju groups visited, %zu idle groups\n", cycles,
	    (uintmax_t)runs, (uintmax_t)visits, nitems(idle));
	ATF_REQUIRE_MSG(cycles > 0, "the churning member never joined");
	ATF_REQUIRE_MSG(runs > 0, "the task never ran");
	ATF_REQUIRE_MSG(runs <= 2 * (uint64_t)cycles + 4,
	    "%ju task runs for %d joins and leaves", (uintmax_t)runs, cycles);
	ATF_REQUIRE_MSG(visits <= 2 * runs, "%ju groups visited in %ju task "
	    "runs with one group changing", (uintmax_t)visits,
	    (uintmax_t)runs);
	lb_group_close(&g);
	for (i = 0; i < (int)nitems(idle); i++)
		lb_group_close(&idle[i]);
}

/*
 * The window in which a new group is visible to lookups before its first
 * member is counted: a lookup then sees a group of zero members and must
 * find no match there (the base kernel divided by the member count).
 * The in_pcblb_join fail point busy-waits 20 ms in that window, so
 * handshakes in flight when a group is created meet it.  A child creates
 * and destroys a one-member group in a loop while clients pinned to
 * several CPUs connect; every connection must be refused or reset (the
 * member closes without accepting), none may hang, and every creation
 * must have taken the fail point's delay (so the window was open).
 */
ATF_TC_WITH_CLEANUP(zero_window);
ATF_TC_HEAD(zero_window, tc)
{
	lb_fp_head(tc);
}
ATF_TC_CLEANUP(zero_window, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(zero_window, tc)
{
	struct sockaddr_storage addr;
	struct lb_client cl[4];
	struct lb_tally sum;
	struct timespec t0, t1;
	int cpus[4], fds[2], res[2];
	int i, ncl, sd, us;
	char fp[64];

	ncl = lb_cpus(cpus, 4);
	lb_free_port(AF_INET, &addr);
	snprintf(fp, sizeof(fp), "return(%d)", JOIN_DELAY_US);
	lb_fp_set("in_pcblb_join", fp);
	ATF_REQUIRE(pipe(fds) == 0);
	for (i = 0; i < ncl; i++)
		lb_client_start(&cl[i], &addr, cpus[i], 0, 3000);
	res[0] = res[1] = 0;
	if (fork() == 0) {
		/* The group's creator: cycles and its fastest creation. */
		close(fds[0]);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		res[1] = INT_MAX;
		do {
			sd = lb_join(&addr, &us);
			close(sd);
			res[0]++;
			res[1] = MIN(res[1], us);
			clock_gettime(CLOCK_MONOTONIC, &t1);
		} while (t1.tv_sec - t0.tv_sec < 3);
		(void)write(fds[1], res, sizeof(res));
		_exit(0);
	}
	close(fds[1]);
	memset(&sum, 0, sizeof(sum));
	for (i = 0; i < ncl; i++)
		lb_client_end(&cl[i], &sum);
	ATF_REQUIRE_MSG(read(fds[0], res, sizeof(res)) == sizeof(res),
	    "the group's creator died");
	(void)wait(NULL);
	lb_fp_restore();
	ATF_REQUIRE_MSG(res[0] > 0, "the group was never created");
	ATF_REQUIRE_MSG(res[1] >= JOIN_DELAY_MIN, "a group was created in "
	    "%d us: the in_pcblb_join fail point (%d us) did not delay it",
	    res[1], JOIN_DELAY_US);
	ATF_REQUIRE_MSG(sum.refused + sum.reset > 0, "no connection made");
	ATF_REQUIRE_MSG(sum.done == 0, "%d connections echoed by nobody",
	    sum.done);
	fprintf(stderr, "zero_window: %d groups created (fastest %d us), %d "
	    "connections refused, %d reset\n", res[0], res[1], sum.refused,
	    sum.reset);
}

/*
 * The resize window: a group that grows past 8, 16 and 32 members is
 * replaced by a larger one, which is visible before its members are
 * copied and counted.  The in_pcblb_join fail point busy-waits 20 ms
 * there (and at the group's creation).  Clients pinned to several CPUs
 * connect while the test grows a group member by member to 40, serving
 * every member between joins, then closes it and starts again.  Every
 * connection must be echoed by a member, refused or reset (queued on a
 * member when the group closes); none may hang; and each join that made
 * a new or larger group took the fail point's delay.
 *
 * The members echoed exactly the connections whose clients saw the echo
 * (the client confirms it), and any other echo went to a connection its
 * client saw reset.  Such echoes happen in the base kernel: the pure ACK
 * that ends a handshake can arrive while no member listens (between two
 * rounds, or on a member being closed) and be answered with a reset,
 * which leaves the syncache entry; the client's data segment right
 * behind it then completes the handshake on a member of the next round,
 * which accepts and echoes a connection whose client is gone.
 */
ATF_TC_WITH_CLEANUP(resize_window);
ATF_TC_HEAD(resize_window, tc)
{
	lb_fp_head(tc);
}
ATF_TC_CLEANUP(resize_window, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(resize_window, tc)
{
	struct sockaddr_storage addr;
	struct lb_client cl[4];
	struct lb_echoes e;
	struct lb_tally sum;
	int cpus[4], sds[40];
	int i, left, n, ncl, rounds, slowest, us;
	char fp[64];

	ncl = lb_cpus(cpus, 4);
	lb_free_port(AF_INET, &addr);
	snprintf(fp, sizeof(fp), "return(%d)", JOIN_DELAY_US);
	lb_fp_set("in_pcblb_join", fp);
	for (i = 0; i < ncl; i++)
		lb_client_start(&cl[i], &addr, cpus[i], 500, 8000);
	memset(&e, 0, sizeof(e));
	rounds = 0;
	slowest = INT_MAX;	/* The fastest of the delayed joins. */
	memset(&sum, 0, sizeof(sum));
	for (left = ncl; left > 0;) {
		for (n = 0; n < (int)nitems(sds); n++) {
			sds[n] = lb_join(&addr, &us);
			/* Members 0, 8, 16 and 32 made a new group. */
			if (n == 0 || n == 8 || n == 16 || n == 32)
				slowest = MIN(slowest, us);
			lb_serve(sds, n + 1, -1, 0, &e);
		}
		lb_serve(sds, n, -1, 50, &e);
		for (i = 0; i < n; i++)
			ATF_REQUIRE(close(sds[i]) == 0);
		rounds++;
		/* Reap the clients that are done. */
		for (i = 0; i < ncl; i++) {
			if (cl[i].pid == 0 || poll(&(struct pollfd){
			    .fd = cl[i].fd, .events = POLLIN }, 1, 0) != 1)
				continue;
			lb_client_end(&cl[i], &sum);
			cl[i].pid = 0;
			left--;
		}
	}
	lb_fp_restore();
	fprintf(stderr, "resize_window: %d rounds of 40 joins; clients: %d "
	    "connections echoed, %d refused, %d reset; members: %d echoes "
	    "seen, %d unseen\n", rounds, sum.done, sum.refused, sum.reset,
	    e.seen, e.unseen);
	ATF_REQUIRE_MSG(slowest >= JOIN_DELAY_MIN, "a join that made a new "
	    "group took %d us: the in_pcblb_join fail point (%d us) did not "
	    "delay it", slowest, JOIN_DELAY_US);
	ATF_REQUIRE_MSG(sum.done > 0, "no connection was accepted");
	ATF_REQUIRE_MSG(e.seen == sum.done, "the members had %d echoes "
	    "confirmed, the clients saw %d echoed", e.seen, sum.done);
	ATF_REQUIRE_MSG(e.unseen <= sum.reset, "%d echoes unseen, but only "
	    "%d connections reset", e.unseen, sum.reset);
}

/*
 * A resize while a rebuild deals without the lock: the rebuild finds its
 * group replaced and drops its map, and the new group, dirty, must still
 * be rebuilt.  Seven tagged members listen and an eighth is bound (8 of 8
 * entries); a child makes the eighth listen, which rebuilds in the
 * child's thread, with the in_pcblb_deal fail point busy-waiting 200 ms
 * in the unlocked deal; meanwhile a ninth member binds, which grows the
 * group to 16 entries.  The group must settle (no rebuild left pending)
 * with the eighth member dealt in.
 */
ATF_TC_WITH_CLEANUP(resize_rebuild);
ATF_TC_HEAD(resize_rebuild, tc)
{
	lb_fp_head(tc);
}
ATF_TC_CLEANUP(resize_rebuild, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(resize_rebuild, tc)
{
	static char buf[1 << 20];
	struct lbgroup g;
	int cpus[7], fds[2], tags[7];
	int i, ncpu, one, sd8, sd9, status;
	pid_t pid;
	char b, line[64], sec[8192];
	unsigned port;

	ncpu = lb_cpus(cpus, 7);
	for (i = 0; i < 7; i++)
		tags[i] = cpus[i % ncpu];
	lb_group(&g, AF_INET, 7, tags, false);
	port = ntohs(((struct sockaddr_in *)&g.addr)->sin_port);
	one = 1;
	sd8 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ATF_REQUIRE(sd8 >= 0);
	ATF_REQUIRE(setsockopt(sd8, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) == 0);
	lb_setcpu(sd8, cpus[0]);
	ATF_REQUIRE_MSG(bind(sd8, (struct sockaddr *)&g.addr,
	    g.addr.ss_len) == 0, "bind failed: %s", strerror(errno));
	sd9 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ATF_REQUIRE(sd9 >= 0);
	ATF_REQUIRE(setsockopt(sd9, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) == 0);
	lb_fp_set("in_pcblb_deal", "return(200000)");
	ATF_REQUIRE(pipe(fds) == 0);
	pid = fork();
	ATF_REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		(void)write(fds[1], "l", 1);
		_exit(listen(sd8, 128) == 0 ? 0 : 1);
	}
	close(fds[1]);
	ATF_REQUIRE(read(fds[0], &b, 1) == 1);
	usleep(30000);
	/* The ninth join grows the group while the eighth's deal runs. */
	ATF_REQUIRE_MSG(bind(sd9, (struct sockaddr *)&g.addr,
	    g.addr.ss_len) == 0, "bind failed: %s", strerror(errno));
	ATF_REQUIRE(waitpid(pid, &status, 0) == pid);
	ATF_REQUIRE_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "listen(2) of the eighth member failed");
	lb_fp_restore();
	lb_settle();
	lb_groups(buf, sizeof(buf));
	lb_section(buf, port, sec, sizeof(sec));
	snprintf(line, sizeof(line), "member 7 tag %d explicit slots 16\n",
	    cpus[0]);
	ATF_REQUIRE_MSG(strstr(sec, " members 9 ") != NULL &&
	    strstr(sec, line) != NULL,
	    "the eighth member is not dealt in after the resize:\n%s", sec);
	ATF_REQUIRE(close(sd9) == 0);
	ATF_REQUIRE(close(sd8) == 0);
	lb_group_close(&g);
}

/*
 * A tag set while the task retries a group in back-off.  A rebuild that
 * fails for want of memory (fail point in_pcblb_map_alloc, once) leaves
 * the group dirty, and the task retries it after 1 s.  The retry's
 * unlocked deal, the second deal from here, is held for 1.5 s
 * (in_pcblb_deal); as soon as the retry is in it, the second member's
 * tag changes.  setsockopt(2) leaves a group in back-off to the task,
 * and the retry, finding the inputs changed, drops its map uncounted:
 * the task must still rebuild the group, once, and it settles with both
 * members dealt on the new tag.  Two rebuilds counted instead of one
 * would mean the tag changed after the retry, not during it.
 */
ATF_TC_WITH_CLEANUP(backoff_retag);
ATF_TC_HEAD(backoff_retag, tc)
{
	lb_fp_head(tc);
}
ATF_TC_CLEANUP(backoff_retag, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(backoff_retag, tc)
{
	static char buf[1 << 20];
	struct lbgroup g;
	char fp[256], line[64], sec[4096];
	const char *p;
	int cpus[2], i, tags[2];
	unsigned allocfail, port, rebuilds0, rebuilds1;

	if (lb_cpus(cpus, 2) < 2)
		atf_tc_skip("needs two CPUs");
	tags[0] = tags[1] = cpus[0];
	lb_group(&g, AF_INET, 2, tags, false);
	port = ntohs(((struct sockaddr_in *)&g.addr)->sin_port);
	lb_fp_set("in_pcblb_map_alloc", "1*return");
	lb_fp_set("in_pcblb_deal", "1*off->1*return(1500000)");
	lb_setcpu(g.sds[0], cpus[1]);
	lb_groups(buf, sizeof(buf));
	lb_section(buf, port, sec, sizeof(sec));
	p = strstr(sec, " rebuilds ");
	ATF_REQUIRE_MSG(strstr(sec, " dirty 1 ") != NULL && p != NULL &&
	    sscanf(p, " rebuilds %u allocfail %u", &rebuilds0,
	    &allocfail) == 2 && allocfail == 1,
	    "the rebuild did not fail for want of memory:\n%s", sec);
	/* The return fires once: then the retry is in its deal. */
	for (i = 0; i < 300; i++) {
		lb_fp_get("in_pcblb_deal", fp, sizeof(fp));
		if (strstr(fp, "return") == NULL)
			break;
		usleep(10000);
	}
	ATF_REQUIRE_MSG(i < 300, "the retry did not deal within 3 s");
	lb_setcpu(g.sds[1], cpus[1]);
	lb_fp_restore();
	lb_settle();
	lb_groups(buf, sizeof(buf));
	lb_section(buf, port, sec, sizeof(sec));
	p = strstr(sec, " rebuilds ");
	ATF_REQUIRE(p != NULL && sscanf(p, " rebuilds %u", &rebuilds1) == 1);
	ATF_REQUIRE_MSG(rebuilds1 == rebuilds0 + 1, "%u rebuilds after the "
	    "failure, not 1: the tag changed after the retry's deal:\n%s",
	    rebuilds1 - rebuilds0, sec);
	for (i = 0; i < 2; i++) {
		snprintf(line, sizeof(line), "member %d tag %d explicit "
		    "slots 16\n", i, cpus[1]);
		ATF_REQUIRE_MSG(strstr(sec, line) != NULL,
		    "member %d is not dealt on its new tag:\n%s", i, sec);
	}
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
	ATF_TP_ADD_TC(tp, udp_refused);
	ATF_TP_ADD_TC(tp, noop_set);
	ATF_TP_ADD_TC(tp, close_tagged);
	ATF_TP_ADD_TC(tp, listen_late);
	ATF_TP_ADD_TC(tp, join_leave);
	ATF_TP_ADD_TC(tp, task_bounded);
	ATF_TP_ADD_TC(tp, zero_window);
	ATF_TP_ADD_TC(tp, resize_window);
	ATF_TP_ADD_TC(tp, resize_rebuild);
	ATF_TP_ADD_TC(tp, backoff_retag);

	return (atf_no_error());
}
