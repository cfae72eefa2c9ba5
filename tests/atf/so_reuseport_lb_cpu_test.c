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
 * Tests for TCP_REUSPORT_LB_CPU: members of a load-balancing group tagged
 * with CPUs and dealt to the CPUs that receive their connections.
 *
 * Loopback connections are not received on a CPU the test can choose:
 * lo0 queues every packet to the netisr thread, which runs wherever the
 * scheduler puts it.  Nothing is counted from loopback, so the cases that
 * count handshakes connect from a client in a VNET of its own over an
 * epair(4) (lb_epair_client()), whose packets are received, without
 * options RSS, in its one task thread, which runs wherever the scheduler
 * puts it too.  The tests never predict a CPU.  They read back,
 * from each accepted socket, the CPU that completed its handshake (where
 * its listener was selected) and check the selection against it, and they
 * check the dealt map itself in net.inet.tcp.reuseport_lb.groups, which
 * is exact: before anything is counted, every tagged CPU supplies the
 * same number of slots.
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/jail.h>
#include <sys/module.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>

#define	MAXMEMBERS	256
#define	MAXCPUS		CPU_SETSIZE	/* CPU ids a view or a count holds */
#define	NOCPU		TCP_REUSPORT_LB_CPU_NOCPU

/*
 * A client in a VNET jail of its own, holding the b side of an epair(4)
 * whose a side is 192.0.2.1 here: for every port written to it, it makes
 * one connection to that port.
 */
struct lbclient {
	pid_t	pid;
	int	wfd;		/* ports to connect to */
	int	rfd;		/* EOF once the client has exited */
	char	ifname[IFNAMSIZ];	/* the a side */
	struct sockaddr_storage addr;	/* the a side's address, port 0 */
};

struct lbgroup {
	int	domain;
	int	n;
	int	sds[MAXMEMBERS];
	int	tags[MAXMEMBERS];
	struct sockaddr_storage addr;
	struct lbclient *client;	/* NULL: connect over loopback */
};

/* A group as net.inet.tcp.reuseport_lb.groups shows it. */
struct lbview {
	u_int	members;
	u_int	nslots;
	u_int	deal;			/* 1: a deal is pending */
	int	tag[MAXMEMBERS];	/* NOCPU for none */
	bool	learned[MAXMEMBERS];
	int	nrx;
	int	rxcpu[MAXCPUS];	/* CPUs that supply slots */
	u_int	rxslots[MAXCPUS];
	bool	learning;		/* the group has learning state */
	u_int	rolls;
	int	ncount;
	int	countcpu[MAXCPUS];	/* CPUs with counts */
	u_int	last[MAXCPUS];
	u_int	cur[MAXCPUS];
	u_int	sum[MAXCPUS];
};

/*
 * Every case runs in a VNET jail of its own, so that it neither reads nor
 * changes the host's knobs (net.inet.tcp.reuseport_lb.*): kyua makes one
 * from the case's metadata, and when run by hand the case makes one
 * itself (lb_setup()).  The groups view is for the superuser.
 */
static void
lb_head(atf_tc_t *tc)
{

	atf_tc_set_md_var(tc, "require.user", "root");
	atf_tc_set_md_var(tc, "execenv", "jail");
	atf_tc_set_md_var(tc, "execenv.jail.params", "vnet");
}

static void
lb_sysctl_int(const char *name, int val)
{

	ATF_REQUIRE_MSG(sysctlbyname(name, NULL, NULL, &val, sizeof(val)) ==
	    0, "%s=%d: %s", name, val, strerror(errno));
}

/*
 * Enter the case's VNET (skipping without VIMAGE; when not run by kyua,
 * making one that may hold a child jail), give loopback an address there,
 * and set the VNET's window unless window_ms is 0.
 */
static void
lb_setup(int window_ms)
{
	struct iovec iov[4];
	size_t len;
	int vnet, jid, max;

	len = sizeof(vnet);
	if (sysctlbyname("kern.features.vimage", &vnet, &len, NULL, 0) != 0)
		atf_tc_skip("the kernel has no VIMAGE");
	len = sizeof(vnet);
	if (sysctlbyname("security.jail.vnet", &vnet, &len, NULL, 0) != 0 ||
	    vnet == 0) {
		vnet = JAIL_SYS_NEW;
		max = 1;
		iov[0].iov_base = __DECONST(char *, "vnet");
		iov[0].iov_len = sizeof("vnet");
		iov[1].iov_base = &vnet;
		iov[1].iov_len = sizeof(vnet);
		iov[2].iov_base = __DECONST(char *, "children.max");
		iov[2].iov_len = sizeof("children.max");
		iov[3].iov_base = &max;
		iov[3].iov_len = sizeof(max);
		jid = jail_set(iov, nitems(iov), JAIL_CREATE | JAIL_ATTACH);
		/* A jail without children.max cannot make one. */
		if (jid < 0)
			atf_tc_skip("no VNET jail here: %s", strerror(errno));
	}
	ATF_REQUIRE(system("/sbin/ifconfig lo0 inet 127.0.0.1/8 up") == 0);
	if (window_ms != 0)
		lb_sysctl_int("net.inet.tcp.reuseport_lb.window_ms",
		    window_ms);
}

/*
 * The CPUs this process may run on (its root cpuset, which a jail
 * narrows), at most max of them; returns how many.
 */
static int
lb_cpus(int *cpus, int max)
{
	cpuset_t mask;
	int cpu, n;

	ATF_REQUIRE_MSG(cpuset_getaffinity(CPU_LEVEL_ROOT, CPU_WHICH_PID, -1,
	    sizeof(mask), &mask) == 0, "cpuset_getaffinity: %s",
	    strerror(errno));
	n = 0;
	for (cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++)
		if (CPU_ISSET(cpu, &mask))
			cpus[n++] = cpu;
	ATF_REQUIRE(n > 0);
	return (n);
}

/* setsockopt(TCP_REUSPORT_LB_CPU): 0 or the errno. */
static int
lb_setcpu(int sd, int cpu)
{

	return (setsockopt(sd, IPPROTO_TCP, TCP_REUSPORT_LB_CPU, &cpu,
	    sizeof(cpu)) == 0 ? 0 : errno);
}

static int
lb_getcpu(int sd)
{
	socklen_t len;
	int val;

	len = sizeof(val);
	ATF_REQUIRE_MSG(getsockopt(sd, IPPROTO_TCP, TCP_REUSPORT_LB_CPU, &val,
	    &len) == 0, "getsockopt(TCP_REUSPORT_LB_CPU): %s",
	    strerror(errno));
	ATF_REQUIRE(len == sizeof(val));
	return (val);
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

static int
lb_port(const struct sockaddr_storage *ss)
{

	return (ntohs(ss->ss_family == AF_INET ?
	    ((const struct sockaddr_in *)ss)->sin_port :
	    ((const struct sockaddr_in6 *)ss)->sin6_port));
}

/*
 * A new member of g, tagged with tag (or left untagged for NOCPU) before
 * bind(2), listening if listening is set.  The first member picks the
 * port.
 */
static int
lb_join(struct lbgroup *g, int tag, bool listening)
{
	socklen_t len;
	int one, sd;

	ATF_REQUIRE(g->n < MAXMEMBERS);
	sd = socket(g->domain, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ATF_REQUIRE_MSG(sd >= 0, "socket: %s", strerror(errno));
	one = 1;
	ATF_REQUIRE(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) == 0);
	if (tag != NOCPU)
		ATF_REQUIRE_EQ_MSG(lb_setcpu(sd, tag), 0, "tag %d", tag);
	ATF_REQUIRE_MSG(bind(sd, (struct sockaddr *)&g->addr,
	    g->addr.ss_len) == 0, "bind: %s", strerror(errno));
	if (g->n == 0) {
		len = sizeof(g->addr);
		ATF_REQUIRE(getsockname(sd, (struct sockaddr *)&g->addr,
		    &len) == 0);
	}
	if (listening)
		ATF_REQUIRE_MSG(listen(sd, 128) == 0, "listen: %s",
		    strerror(errno));
	g->sds[g->n] = sd;
	g->tags[g->n] = tag;
	return (g->n++);
}

static void
lb_group(struct lbgroup *g, int domain, int n, const int *tags)
{
	int i;

	memset(g, 0, sizeof(*g));
	g->domain = domain;
	lb_loopback(domain, &g->addr);
	for (i = 0; i < n; i++)
		(void)lb_join(g, tags != NULL ? tags[i] : NOCPU, true);
}

static void
lb_close(struct lbgroup *g)
{
	int i;

	for (i = 0; i < g->n; i++)
		if (g->sds[i] >= 0)
			ATF_REQUIRE(close(g->sds[i]) == 0);
}

/*
 * Make one connection to g, over loopback or from g's client, and accept
 * it, waiting for it with poll(2) (its handshake completes in the netisr
 * thread, or the epair's task thread).  Returns the member that accepted
 * it and stores the CPU that completed its handshake.
 */
static int
lb_connect(struct lbgroup *g, int *hcpu)
{
	struct pollfd pfd[MAXMEMBERS + 1];
	uint16_t port;
	int as, cs, i, n;

	cs = -1;
	if (g->client != NULL) {
		port = htons(lb_port(&g->addr));
		ATF_REQUIRE_MSG(write(g->client->wfd, &port, sizeof(port)) ==
		    sizeof(port), "the client is gone: %s", strerror(errno));
	} else {
		cs = socket(g->domain, SOCK_STREAM, 0);
		ATF_REQUIRE(cs >= 0);
		ATF_REQUIRE_MSG(connect(cs, (struct sockaddr *)&g->addr,
		    g->addr.ss_len) == 0, "connect: %s", strerror(errno));
	}
	for (i = n = 0; i < g->n; i++) {
		pfd[n].fd = g->sds[i];
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	if (g->client != NULL) {
		pfd[n].fd = g->client->rfd;
		pfd[n].events = POLLIN;
		pfd[n++].revents = 0;
	}
	ATF_REQUIRE_MSG(poll(pfd, n, 30 * 1000) > 0, "no member accepts");
	for (i = 0; i < g->n; i++)
		if ((as = accept(g->sds[i], NULL, NULL)) >= 0)
			break;
	ATF_REQUIRE_MSG(i < g->n || g->client == NULL ||
	    pfd[n - 1].revents == 0, "the client exited");
	ATF_REQUIRE_MSG(i < g->n, "accept: %s", strerror(errno));
	*hcpu = lb_getcpu(as);
	ATF_REQUIRE(close(as) == 0);
	if (cs >= 0)
		ATF_REQUIRE(close(cs) == 0);
	return (i);
}

/* Read g's entry of the groups view into v; false if it has none. */
static bool
lb_view(const struct lbgroup *g, struct lbview *v)
{
	char *buf, *line, *next, af[8], kind[16], tag[16];
	size_t len, size;
	u_int a, b, c, d, m, port, want;
	int k;
	bool found;

	/* Other groups may come and go meanwhile: grow until it fits. */
	for (size = 64 * 1024;; size *= 2) {
		buf = malloc(size + 1);
		ATF_REQUIRE(buf != NULL);
		len = size;
		if (sysctlbyname("net.inet.tcp.reuseport_lb.groups", buf, &len,
		    NULL, 0) == 0)
			break;
		ATF_REQUIRE_MSG(errno == ENOMEM, "groups: %s", strerror(errno));
		free(buf);
	}
	buf[len] = '\0';
	memset(v, 0, sizeof(*v));
	want = lb_port(&g->addr);
	found = false;
	for (line = buf; line != NULL && *line != '\0'; line = next) {
		if ((next = strchr(line, '\n')) != NULL)
			*next++ = '\0';
		if (sscanf(line, "group port %u af %7s members %u map %u "
		    "deal %u", &port, af, &a, &b, &d) == 5) {
			if (found)
				break;
			found = port == want && strcmp(af,
			    g->domain == AF_INET ? "inet" : "inet6") == 0;
			if (found) {
				v->members = a;
				v->nslots = b;
				v->deal = d;
			}
		} else if (found && (k = sscanf(line, "member %u tag %15s %15s",
		    &m, tag, kind)) >= 2 && m < MAXMEMBERS) {
			v->tag[m] = strcmp(tag, "none") == 0 ? NOCPU :
			    atoi(tag);
			v->learned[m] = k == 3 && strcmp(kind, "learned") == 0;
		} else if (found && sscanf(line, "learn window_ms %u age_ms %u "
		    "rolls %u", &a, &b, &c) == 3) {
			v->learning = true;
			v->rolls = c;
		} else if (found && sscanf(line, "rx %u last %u cur %u sum %u",
		    &m, &a, &b, &c) == 4) {
			ATF_REQUIRE_MSG(v->ncount < MAXCPUS, "more count rows "
			    "than CPUs");
			v->countcpu[v->ncount] = m;
			v->last[v->ncount] = a;
			v->cur[v->ncount] = b;
			v->sum[v->ncount++] = c;
		} else if (found && sscanf(line, "cpu %u offset %u slots %u",
		    &c, &a, &b) == 3) {
			ATF_REQUIRE_MSG(v->nrx < MAXCPUS, "more supplying CPUs "
			    "than CPUs");
			v->rxcpu[v->nrx] = c;
			v->rxslots[v->nrx++] = b;
		}
	}
	free(buf);
	return (found);
}

/*
 * Accept one connection to g, whose accept(2) deals the map if a change
 * dropped it (the hash selects until then), and read g's view into v.
 */
static void
lb_dealt(struct lbgroup *g, struct lbview *v)
{
	int hcpu;

	(void)lb_connect(g, &hcpu);
	ATF_REQUIRE(lb_view(g, v));
}

/* Slots the view's map has cpu supply. */
static u_int
lb_rxslots(const struct lbview *v, int cpu)
{
	int i;

	for (i = 0; i < v->nrx; i++)
		if (v->rxcpu[i] == cpu)
			return (v->rxslots[i]);
	return (0);
}

/*
 * Members tagged with every CPU of the process: every connection must be
 * accepted by the member tagged with the CPU that completed its
 * handshake, since each tagged CPU deals its range to its own member
 * first.
 */
static void
lb_steering(int domain)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[MAXMEMBERS], checked, hcpu, i, m, n;

	n = lb_cpus(cpus, MAXMEMBERS);
	lb_group(&g, domain, n, cpus);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, (u_int)n);
	ATF_REQUIRE_EQ(v.nslots, 16u * n);
	for (i = 0; i < n; i++) {
		ATF_REQUIRE_EQ_MSG(lb_rxslots(&v, cpus[i]), 16u,
		    "cpu %d supplies %u slots", cpus[i],
		    lb_rxslots(&v, cpus[i]));
	}
	checked = 0;
	for (i = 0; i < 64 * n && i < 2048; i++) {
		m = lb_connect(&g, &hcpu);
		ATF_REQUIRE_MSG(hcpu >= 0, "accepted socket without a CPU");
		if (lb_rxslots(&v, hcpu) == 0)
			continue;	/* A CPU outside our cpuset. */
		ATF_REQUIRE_EQ_MSG(g.tags[m], hcpu,
		    "handshake on CPU %d accepted by the member of CPU %d",
		    hcpu, g.tags[m]);
		checked++;
	}
	if (checked == 0)
		atf_tc_skip("no handshake ran on a CPU of this cpuset");
	lb_close(&g);
}

ATF_TC(option);
ATF_TC_HEAD(option, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(option, tc)
{
	struct lbgroup g;
	cpuset_t mask;
	size_t len;
	int cpus[1], bad, cs, hcpu, maxid, sd, v;

	lb_setup(0);
	(void)lb_cpus(cpus, 1);
	len = sizeof(maxid);
	ATF_REQUIRE(sysctlbyname("kern.smp.maxid", &maxid, &len, NULL, 0) ==
	    0);

	sd = socket(AF_INET, SOCK_STREAM, 0);
	ATF_REQUIRE(sd >= 0);
	ATF_REQUIRE_EQ(lb_getcpu(sd), NOCPU);
	ATF_REQUIRE_EQ(lb_setcpu(sd, cpus[0]), 0);
	ATF_REQUIRE_EQ(lb_getcpu(sd), cpus[0]);
	ATF_REQUIRE_EQ(lb_setcpu(sd, NOCPU), 0);
	ATF_REQUIRE_EQ(lb_getcpu(sd), NOCPU);

	/* The current CPU of a thread bound to one. */
	CPU_ZERO(&mask);
	CPU_SET(cpus[0], &mask);
	ATF_REQUIRE(cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_TID, -1,
	    sizeof(mask), &mask) == 0);
	ATF_REQUIRE_EQ(lb_setcpu(sd, TCP_REUSPORT_LB_CPU_CURCPU), 0);
	ATF_REQUIRE_EQ(lb_getcpu(sd), cpus[0]);

	/* Values that name no CPU, and a short option. */
	ATF_REQUIRE_EQ(lb_setcpu(sd, maxid + 1), EINVAL);
	ATF_REQUIRE_EQ(lb_setcpu(sd, -3), EINVAL);
	ATF_REQUIRE_EQ(lb_setcpu(sd, INT_MAX), EINVAL);
	ATF_REQUIRE_EQ(lb_setcpu(sd, 0x40000000), EINVAL);
	bad = 0;
	ATF_REQUIRE_ERRNO(EINVAL, setsockopt(sd, IPPROTO_TCP,
	    TCP_REUSPORT_LB_CPU, &bad, 1) == -1);
	ATF_REQUIRE_EQ(lb_getcpu(sd), cpus[0]);
	ATF_REQUIRE(close(sd) == 0);

	/* Not TCP: UDP hands the level to ip_ctloutput(), which refuses it. */
	sd = socket(AF_INET, SOCK_DGRAM, 0);
	ATF_REQUIRE(sd >= 0);
	ATF_REQUIRE_EQ(lb_setcpu(sd, cpus[0]), EINVAL);
	ATF_REQUIRE(close(sd) == 0);

	/*
	 * An accepted connection reports the CPU of its handshake and takes
	 * no tag; neither does the connected socket.
	 */
	lb_group(&g, AF_INET, 1, NULL);
	cs = socket(AF_INET, SOCK_STREAM, 0);
	ATF_REQUIRE(connect(cs, (struct sockaddr *)&g.addr, g.addr.ss_len) ==
	    0);
	ATF_REQUIRE_EQ(lb_setcpu(cs, cpus[0]), EINVAL);
	v = lb_connect(&g, &hcpu);
	ATF_REQUIRE_EQ(v, 0);
	ATF_REQUIRE_MSG(hcpu >= 0 && hcpu <= maxid, "handshake CPU %d", hcpu);
	ATF_REQUIRE(close(cs) == 0);
	lb_close(&g);
}

ATF_TC(steering_ipv4);
ATF_TC_HEAD(steering_ipv4, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(steering_ipv4, tc)
{

	lb_setup(0);
	lb_steering(AF_INET);
}

ATF_TC(steering_ipv6);
ATF_TC_HEAD(steering_ipv6, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(steering_ipv6, tc)
{

	lb_setup(0);
	lb_steering(AF_INET6);
}

/*
 * One tagged member and two untagged ones: the tagged CPU supplies the
 * whole map, 16 slots for each member, and every member is selected.
 */
ATF_TC(untagged_share);
ATF_TC_HEAD(untagged_share, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(untagged_share, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[1], hcpu, i, seen[3], tags[3];

	lb_setup(0);
	(void)lb_cpus(cpus, 1);
	tags[0] = NOCPU;
	tags[1] = cpus[0];
	tags[2] = NOCPU;
	lb_group(&g, AF_INET, 3, tags);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.nslots, 48u);
	ATF_REQUIRE_EQ(v.nrx, 1);
	ATF_REQUIRE_EQ(v.rxcpu[0], cpus[0]);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < 600 && (seen[0] == 0 || seen[1] == 0 || seen[2] == 0);
	    i++)
		seen[lb_connect(&g, &hcpu)]++;
	ATF_REQUIRE_MSG(seen[0] > 0 && seen[1] > 0 && seen[2] > 0,
	    "members selected %d, %d, %d times", seen[0], seen[1], seen[2]);
	lb_close(&g);
}

/*
 * Two members tagged with one CPU and one with another: each tagged CPU
 * supplies half of the 48 slots, whatever the number of its members.
 */
ATF_TC(duplicates);
ATF_TC_HEAD(duplicates, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(duplicates, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[2], tags[3];

	lb_setup(0);
	if (lb_cpus(cpus, 2) < 2)
		atf_tc_skip("needs two CPUs");
	tags[0] = tags[1] = cpus[0];
	tags[2] = cpus[1];
	lb_group(&g, AF_INET, 3, tags);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.nslots, 48u);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[0]), 24u);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[1]), 24u);
	lb_close(&g);
}

/*
 * Members leave and join: the next accept(2) deals the map again, from
 * the members that listen.  Each CPU still tagged supplies its own
 * member's 16 slots, so its handshakes go to that member.
 */
ATF_TC(join_leave);
ATF_TC_HEAD(join_leave, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(join_leave, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[8], hcpu, i, m, n;

	lb_setup(0);
	if ((n = lb_cpus(cpus, 8)) < 2)
		atf_tc_skip("needs two CPUs");
	lb_group(&g, AF_INET, n, cpus);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.nslots, 16u * n);

	/* The first member leaves: its CPU no longer supplies anything. */
	ATF_REQUIRE(close(g.sds[0]) == 0);
	g.sds[0] = -1;
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, (u_int)n - 1);
	ATF_REQUIRE_EQ(v.nslots, 16u * (n - 1));
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[0]), 0u);
	for (i = 1; i < n; i++)
		ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[i]), 16u);
	for (i = 0; i < 4 * n; i++) {
		m = lb_connect(&g, &hcpu);
		if (lb_rxslots(&v, hcpu) != 0)
			ATF_REQUIRE_EQ_MSG(g.tags[m], hcpu, "handshake on CPU "
			    "%d accepted by the member of CPU %d", hcpu,
			    g.tags[m]);
	}

	/* A member tagged with that CPU joins and listens. */
	(void)lb_join(&g, cpus[0], true);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, (u_int)n);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[0]), 16u);
	lb_close(&g);
}

/*
 * A member that has not called listen(2) yet is not dealt in; after
 * listen(2), the next accept(2) deals it in.
 */
ATF_TC(listen_late);
ATF_TC_HEAD(listen_late, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(listen_late, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[2], n, m;

	lb_setup(0);
	n = lb_cpus(cpus, 2);
	lb_group(&g, AF_INET, 1, cpus);
	m = lb_join(&g, cpus[n - 1], false);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, 1u);
	ATF_REQUIRE_EQ(v.nslots, 16u);
	ATF_REQUIRE(listen(g.sds[m], 128) == 0);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, 2u);
	ATF_REQUIRE_EQ(v.nslots, 32u);
	lb_close(&g);
}

/*
 * A full group of 256 tagged members, as many on each of a power of 2 of
 * CPUs, so that every such CPU keeps its slots for its own members.
 */
ATF_TC(full_group);
ATF_TC_HEAD(full_group, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(full_group, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[MAXMEMBERS], hcpu, i, m, n, tags[MAXMEMBERS];

	lb_setup(0);
	n = 1 << (fls(lb_cpus(cpus, MAXMEMBERS)) - 1);
	for (i = 0; i < MAXMEMBERS; i++)
		tags[i] = cpus[i % n];
	lb_group(&g, AF_INET, MAXMEMBERS, tags);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.members, (u_int)MAXMEMBERS);
	ATF_REQUIRE_EQ(v.nslots, 16u * MAXMEMBERS);
	for (i = 0; i < 64; i++) {
		m = lb_connect(&g, &hcpu);
		ATF_REQUIRE_MSG(hcpu >= 0, "accepted socket without a CPU");
		ATF_REQUIRE_MSG(lb_rxslots(&v, hcpu) == 0 || g.tags[m] == hcpu,
		    "handshake on CPU %d accepted by the member of CPU %d",
		    hcpu, g.tags[m]);
	}
	lb_close(&g);
}

/*
 * A change drops the map and deals nothing: the hash selects until the
 * first accept(2) after it, which deals once, from the tags as they are
 * then.  A loop of tag changes with no accept(2) between deals nothing.
 */
ATF_TC(deal_at_accept);
ATF_TC_HEAD(deal_at_accept, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(deal_at_accept, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[2], i;

	lb_setup(0);
	if (lb_cpus(cpus, 2) < 2)
		atf_tc_skip("needs two CPUs");
	lb_group(&g, AF_INET, 2, cpus);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE_EQ(v.members, 2u);
	ATF_REQUIRE_EQ_MSG(v.nslots, 0u, "a map dealt before any accept(2)");
	ATF_REQUIRE_EQ(v.deal, 1u);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.nslots, 32u);
	ATF_REQUIRE_EQ(v.deal, 0u);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[0]), 16u);

	for (i = 0; i < 1000; i++)
		ATF_REQUIRE_EQ(lb_setcpu(g.sds[0], cpus[i % 2]), 0);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.tag[0] == cpus[1] && v.tag[1] == cpus[1]);
	ATF_REQUIRE_EQ_MSG(v.nslots, 0u, "a map dealt by a tag change");
	ATF_REQUIRE_EQ(v.deal, 1u);
	lb_dealt(&g, &v);
	ATF_REQUIRE_EQ(v.nslots, 32u);
	ATF_REQUIRE_EQ(v.deal, 0u);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[0]), 0u);
	ATF_REQUIRE_EQ(lb_rxslots(&v, cpus[1]), 32u);

	/* Untagged again: no map, and nothing left for an accept(2) to do. */
	ATF_REQUIRE_EQ(lb_setcpu(g.sds[0], NOCPU), 0);
	ATF_REQUIRE_EQ(lb_setcpu(g.sds[1], NOCPU), 0);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.nslots == 0 && v.deal == 0);
	lb_close(&g);
}

/* Bind the calling thread to cpu. */
static void
lb_bind(int cpu)
{
	cpuset_t mask;

	CPU_ZERO(&mask);
	CPU_SET(cpu, &mask);
	ATF_REQUIRE(cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_TID, -1,
	    sizeof(mask), &mask) == 0);
}

/* Connect until g's view shows at least rolls windows rolled. */
static void
lb_until_rolls(struct lbgroup *g, struct lbview *v, u_int rolls)
{
	int hcpu, i;

	for (i = 0; i < 100000; i++) {
		ATF_REQUIRE(lb_view(g, v));
		if (v->learning && v->rolls >= rolls)
			return;
		(void)lb_connect(g, &hcpu);
	}
	atf_tc_fail("no roll after %d connections", i);
}

static u_int
lb_countof(const struct lbview *v, int cpu, const u_int *what)
{
	int i;

	for (i = 0; i < v->ncount; i++)
		if (v->countcpu[i] == cpu)
			return (what[i]);
	return (0);
}

/*
 * The client's side of lb_epair_client(), in the child: make its VNET,
 * tell the parent its jail ID, wait for the epair's b side and give it an
 * address, then make one connection for each port read, closing the last
 * one first.  Exits 0 at EOF.
 */
static void __dead2
lb_client_main(struct lbclient *c, int wfd, int rfd)
{
	struct iovec iov[2];
	struct sockaddr_in to;
	char cmd[128];
	uint16_t port;
	int cs, jid, vnet;
	char b;

	vnet = JAIL_SYS_NEW;
	iov[0].iov_base = __DECONST(char *, "vnet");
	iov[0].iov_len = sizeof("vnet");
	iov[1].iov_base = &vnet;
	iov[1].iov_len = sizeof(vnet);
	jid = jail_set(iov, nitems(iov), JAIL_CREATE | JAIL_ATTACH);
	if (jid < 0 || write(wfd, &jid, sizeof(jid)) != sizeof(jid) ||
	    read(rfd, &b, 1) != 1)
		_exit(1);
	c->ifname[strlen(c->ifname) - 1] = 'b';
	snprintf(cmd, sizeof(cmd), "/sbin/ifconfig %s inet 192.0.2.2/24 up",
	    c->ifname);
	if (system(cmd) != 0)
		_exit(2);
	memcpy(&to, &c->addr, sizeof(to));
	cs = -1;
	while (read(rfd, &port, sizeof(port)) == sizeof(port)) {
		if (cs >= 0)
			(void)close(cs);
		to.sin_port = port;
		if ((cs = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    connect(cs, (struct sockaddr *)&to, sizeof(to)) != 0)
			_exit(3);
	}
	_exit(0);
}

/*
 * Start c: an epair(4) whose a side is 192.0.2.1 in this VNET (after
 * lb_setup()), and a child in a VNET jail of its own (one level down)
 * holding the b side, as 192.0.2.2, which connects for lb_connect().
 * Skips without epair(4).  Make it before the groups it connects to, so
 * that the child holds none of their sockets.
 */
static void
lb_epair_client(struct lbclient *c)
{
	struct sockaddr_in *sin;
	char cmd[128];
	FILE *fp;
	size_t len;
	int c2p[2], jid, p2c[2];
	char b;

	if (modfind("if_epair") < 0)
		atf_tc_skip("no epair(4)");
	memset(c, 0, sizeof(*c));
	ATF_REQUIRE((fp = popen("/sbin/ifconfig epair create", "r")) != NULL);
	ATF_REQUIRE(fgets(c->ifname, sizeof(c->ifname), fp) != NULL);
	ATF_REQUIRE(pclose(fp) == 0);
	c->ifname[strcspn(c->ifname, "\n")] = '\0';
	len = strlen(c->ifname);
	ATF_REQUIRE(len > 1 && c->ifname[len - 1] == 'a');
	snprintf(cmd, sizeof(cmd), "/sbin/ifconfig %s inet 192.0.2.1/24 up",
	    c->ifname);
	ATF_REQUIRE(system(cmd) == 0);
	sin = (struct sockaddr_in *)&c->addr;
	sin->sin_len = sizeof(*sin);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(0xc0000201);

	ATF_REQUIRE(pipe(c2p) == 0 && pipe(p2c) == 0);
	ATF_REQUIRE(signal(SIGPIPE, SIG_IGN) != SIG_ERR);
	c->pid = fork();
	ATF_REQUIRE(c->pid >= 0);
	if (c->pid == 0) {
		/* Hold only the ends it uses, or it never reads EOF. */
		(void)close(c2p[0]);
		(void)close(p2c[1]);
		lb_client_main(c, c2p[1], p2c[0]);
	}
	/* So that a client that dies is read as EOF, not waited for. */
	ATF_REQUIRE(close(c2p[1]) == 0 && close(p2c[0]) == 0);
	c->rfd = c2p[0];
	c->wfd = p2c[1];
	ATF_REQUIRE_MSG(read(c->rfd, &jid, sizeof(jid)) == sizeof(jid),
	    "the client could not make its VNET jail");
	c->ifname[len - 1] = 'b';
	snprintf(cmd, sizeof(cmd), "/sbin/ifconfig %s vnet %d", c->ifname,
	    jid);
	c->ifname[len - 1] = 'a';
	ATF_REQUIRE(system(cmd) == 0);
	b = 0;
	ATF_REQUIRE(write(c->wfd, &b, 1) == 1);
}

/* A group as lb_group() makes it, on c's address and connected to by c. */
static void
lb_epair_group(struct lbgroup *g, struct lbclient *c, int n,
    const int *tags)
{
	int i;

	memset(g, 0, sizeof(*g));
	g->domain = AF_INET;
	g->addr = c->addr;
	g->client = c;
	for (i = 0; i < n; i++)
		(void)lb_join(g, tags != NULL ? tags[i] : NOCPU, true);
}

/* Stop c, which must not have failed, and destroy its epair. */
static void
lb_client_done(struct lbclient *c)
{
	char cmd[128];
	int status;

	ATF_REQUIRE(close(c->wfd) == 0);
	ATF_REQUIRE(waitpid(c->pid, &status, 0) == c->pid);
	ATF_REQUIRE_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	    "client status %#x", status);
	ATF_REQUIRE(close(c->rfd) == 0);
	snprintf(cmd, sizeof(cmd), "/sbin/ifconfig %s destroy", c->ifname);
	(void)system(cmd);
}

/*
 * After a roll the counts, not the tags, say which CPUs receive: the CPUs
 * that supply slots are those counted, in proportion.
 */
ATF_TC(counted_map);
ATF_TC_HEAD(counted_map, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(counted_map, tc)
{
	struct lbclient c;
	struct lbgroup g;
	struct lbview v;
	uint64_t total, want;
	int cpus[2], i, n;

	n = lb_cpus(cpus, 2);
	lb_setup(1);
	lb_epair_client(&c);
	lb_epair_group(&g, &c, n, cpus);
	lb_until_rolls(&g, &v, 2);
	for (i = 0, total = 0; i < v.ncount; i++)
		total += v.sum[i];
	if (total == 0)
		lb_until_rolls(&g, &v, v.rolls + 1);
	for (i = 0, total = 0; i < v.ncount; i++)
		total += v.sum[i];
	ATF_REQUIRE(total > 0);
	for (i = 0; i < v.nrx; i++)
		ATF_REQUIRE_MSG(lb_countof(&v, v.rxcpu[i], v.sum) > 0,
		    "cpu %d supplies %u slots and counted nothing", v.rxcpu[i],
		    v.rxslots[i]);
	for (i = 0; i < v.ncount; i++) {
		want = (uint64_t)v.nslots * v.sum[i];
		ATF_REQUIRE_MSG(lb_rxslots(&v, v.countcpu[i]) * total +
		    total > want &&
		    want + total > lb_rxslots(&v, v.countcpu[i]) * total,
		    "cpu %d supplies %u of %u slots for %u of %ju handshakes",
		    v.countcpu[i], lb_rxslots(&v, v.countcpu[i]), v.nslots,
		    v.sum[i], (uintmax_t)total);
	}
	lb_close(&g);
	lb_client_done(&c);
}

/*
 * A group with a set tag counts its handshakes (none over loopback) and
 * rolls its windows, and with learning off learns no worker; once its
 * last set tag is removed, it drops that state and has no map.
 */
ATF_TC(tagged_counts);
ATF_TC_HEAD(tagged_counts, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(tagged_counts, tc)
{
	struct lbgroup g;
	struct lbview v;
	int cpus[1], hcpu, i, tags[2];

	(void)lb_cpus(cpus, 1);
	lb_setup(1);
	lb_bind(cpus[0]);
	tags[0] = cpus[0];
	tags[1] = NOCPU;
	lb_group(&g, AF_INET, 2, tags);
	/* The first accept of the tagged group makes the state. */
	for (i = 0; i < 100 && lb_view(&g, &v) && !v.learning; i++)
		(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE_MSG(v.learning, "no learning state after %d connections "
	    "to a group with a set tag", i);
	lb_until_rolls(&g, &v, 2);
	ATF_REQUIRE_EQ(v.ncount, 0);
	ATF_REQUIRE(!v.learned[0] && !v.learned[1]);
	ATF_REQUIRE((v.tag[0] == cpus[0] && v.tag[1] == NOCPU) ||
	    (v.tag[0] == NOCPU && v.tag[1] == cpus[0]));
	ATF_REQUIRE_EQ(v.nrx, 1);
	ATF_REQUIRE_EQ(v.rxcpu[0], cpus[0]);
	ATF_REQUIRE_EQ(v.rxslots[0], 32u);

	ATF_REQUIRE_EQ(lb_setcpu(g.sds[0], NOCPU), 0);
	for (i = 0; i < 100000 && lb_view(&g, &v) && v.learning; i++)
		(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE_MSG(!v.learning, "learning state kept after %d "
	    "connections without a set tag", i);
	ATF_REQUIRE_EQ(v.nslots, 0u);
	lb_close(&g);
}

/*
 * A group with a set tag counts every handshake that arrives on an
 * interface other than loopback, with or without a flow
 * hash: here an epair(4), which gives none (without options RSS), from a
 * client in a second VNET.  The lookup steers by the CPU it runs on, the
 * one counted, so a hashless NIC's counts are as good as any.
 */
ATF_TC(count_unhashed);
ATF_TC_HEAD(count_unhashed, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(count_unhashed, tc)
{
	struct lbclient c;
	struct lbgroup g;
	struct lbview v;
	u_int total;
	int cpu, hcpu, i, n;

	n = 20;
	lb_setup(3600 * 1000);
	lb_epair_client(&c);

	/* One member, tagged: every handshake is its. */
	(void)lb_cpus(&cpu, 1);
	lb_epair_group(&g, &c, 1, &cpu);

	/* The first accept makes the learning state; n - 1 are counted. */
	for (i = 0; i < n; i++)
		ATF_REQUIRE_EQ(lb_connect(&g, &hcpu), 0);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.learning);
	for (i = 0, total = 0; i < v.ncount; i++)
		total += v.cur[i];
	ATF_REQUIRE_MSG(total == (u_int)n - 1, "%u of %d handshakes over "
	    "the epair counted", total, n - 1);
	lb_close(&g);
	lb_client_done(&c);
}

/*
 * More members are tagged than CPUs receive: once the handshakes are
 * counted, the CPUs that receive deal every member its slots, and every
 * member is selected.  A deal that let the tags stand in beside counts
 * would give the members of CPUs that receive nothing no connection.
 */
ATF_TC(tags_outnumber_rx);
ATF_TC_HEAD(tags_outnumber_rx, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(tags_outnumber_rx, tc)
{
	struct lbclient c;
	struct lbgroup g;
	struct lbview v;
	u_int hits[MAXMEMBERS];
	int cpus[8], hcpu, i, idle, n;

	n = lb_cpus(cpus, 8);
	if (n < 2)
		atf_tc_skip("needs two CPUs");
	lb_setup(1);
	lb_epair_client(&c);
	lb_bind(cpus[0]);
	lb_epair_group(&g, &c, n, cpus);
	lb_until_rolls(&g, &v, 2);
	for (i = 0, idle = 0; i < n; i++)
		if (lb_countof(&v, cpus[i], v.sum) == 0)
			idle++;
	if (v.ncount == 0 || idle == 0)
		atf_tc_skip("every tagged CPU completed handshakes");
	memset(hits, 0, sizeof(hits));
	for (i = 0; i < 64 * n; i++)
		hits[lb_connect(&g, &hcpu)]++;
	for (i = 0; i < n; i++)
		ATF_REQUIRE_MSG(hits[i] > 0, "the member tagged %d was never "
		    "selected in %d connections", g.tags[i], 64 * n);
	lb_close(&g);
	lb_client_done(&c);
}

/* Turn learning on in the case's VNET, after lb_setup(). */
static void
lb_learn(void)
{

	lb_sysctl_int("net.inet.tcp.reuseport_lb.learn", 1);
}

/*
 * Every handshake over the epair after the group's first accept(2) is
 * counted once, on the CPU that completed it.  The window is an hour, so
 * none rolls.
 */
ATF_TC(learn_counting);
ATF_TC_HEAD(learn_counting, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(learn_counting, tc)
{
	struct lbclient c;
	struct lbgroup g;
	struct lbview v;
	u_int seen[MAXCPUS], total;
	int hcpu, i;

	lb_setup(3600 * 1000);
	lb_learn();
	lb_epair_client(&c);
	lb_epair_group(&g, &c, 2, NULL);
	(void)lb_connect(&g, &hcpu);	/* Allocates the learning state. */
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.learning);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < 200; i++) {
		(void)lb_connect(&g, &hcpu);
		ATF_REQUIRE(hcpu >= 0 && hcpu < MAXCPUS);
		seen[hcpu]++;
	}
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE_EQ(v.rolls, 0u);
	for (i = total = 0; i < v.ncount; i++) {
		ATF_REQUIRE(v.countcpu[i] >= 0 && v.countcpu[i] < MAXCPUS);
		ATF_REQUIRE_EQ_MSG(v.cur[i], seen[v.countcpu[i]],
		    "cpu %d counted %u of %u", v.countcpu[i], v.cur[i],
		    seen[v.countcpu[i]]);
		total += v.cur[i];
	}
	ATF_REQUIRE_EQ(total, 200u);
	lb_close(&g);
	lb_client_done(&c);
}

/*
 * A listener without a tag, accepted from by a thread bound to a CPU, is
 * tagged with that CPU; bound to another CPU, it is tagged again at the
 * next window.
 */
ATF_TC(capture);
ATF_TC_HEAD(capture, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(capture, tc)
{
	struct lbclient c;
	struct lbgroup g;
	struct lbview v;
	int cpus[2], hcpu, i, n;

	n = lb_cpus(cpus, 2);
	lb_setup(1);
	lb_learn();
	lb_epair_client(&c);
	lb_bind(cpus[0]);
	lb_epair_group(&g, &c, 1, NULL);
	(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.learned[0] && v.tag[0] == cpus[0]);
	ATF_REQUIRE_EQ(lb_getcpu(g.sds[0]), NOCPU);	/* Not set. */
	/* Nothing counted yet: no map, and no deal left for each accept(2). */
	ATF_REQUIRE(v.nslots == 0 && v.deal == 0);
	lb_bind(cpus[n - 1]);
	for (i = 0; i < 100000 && lb_view(&g, &v) && v.tag[0] != cpus[n - 1];
	    i++)
		(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.learned[0] && v.tag[0] == cpus[n - 1]);

	/* A tag set by the application is never replaced. */
	ATF_REQUIRE_EQ(lb_setcpu(g.sds[0], cpus[0]), 0);
	lb_until_rolls(&g, &v, v.rolls + 2);
	ATF_REQUIRE(!v.learned[0] && v.tag[0] == cpus[0]);
	ATF_REQUIRE_EQ(lb_getcpu(g.sds[0]), cpus[0]);
	lb_close(&g);
	lb_client_done(&c);
}

/*
 * Over loopback with learning on (1), nothing is counted, and a group
 * whose only tag was learned has no map: a learned tag never stands in for
 * a receiving CPU.  No value of learn counts loopback: it is 0 or 1.
 */
ATF_TC(learn_not_loopback);
ATF_TC_HEAD(learn_not_loopback, tc)
{

	lb_head(tc);
}
ATF_TC_BODY(learn_not_loopback, tc)
{
	static const int bad[] = { 2, -1, INT_MAX };
	struct lbgroup g;
	struct lbview v;
	size_t len;
	int cpus[1], i, val;

	(void)lb_cpus(cpus, 1);
	lb_setup(1);
	lb_learn();
	for (i = 0; i < (int)nitems(bad); i++) {
		ATF_REQUIRE_ERRNO(EINVAL, sysctlbyname(
		    "net.inet.tcp.reuseport_lb.learn", NULL, NULL, &bad[i],
		    sizeof(bad[i])) == -1);
		len = sizeof(val);
		ATF_REQUIRE(sysctlbyname("net.inet.tcp.reuseport_lb.learn",
		    &val, &len, NULL, 0) == 0);
		ATF_REQUIRE_EQ_MSG(val, 1, "learn=%d left learn %d", bad[i],
		    val);
	}
	lb_bind(cpus[0]);
	lb_group(&g, AF_INET, 2, NULL);
	lb_until_rolls(&g, &v, 2);
	ATF_REQUIRE_EQ(v.ncount, 0);
	ATF_REQUIRE(v.learned[0] || v.learned[1]);
	ATF_REQUIRE_EQ(v.nslots, 0u);
	ATF_REQUIRE_EQ_MSG(v.deal, 0u, "a group that cannot be dealt is dealt "
	    "at every accept(2)");
	lb_close(&g);
}

/*
 * Turning learning off forgets the learned tags at once, and the counts
 * of a group without a set tag; a group with a set tag keeps its counts
 * and deals from them, so its tags do not stand in again.
 */
ATF_TC(learning_off);
ATF_TC_HEAD(learning_off, tc)
{

	lb_head(tc);
	atf_tc_set_md_var(tc, "require.kmods", "if_epair");
}
ATF_TC_BODY(learning_off, tc)
{
	struct lbclient c;
	struct lbgroup g, h;
	struct lbview v;
	u_int total;
	int cpus[1], hcpu, i;

	/*
	 * Learning from the handshakes over the epair: both members of g,
	 * selected by the hash and then by a map dealt from the counts, and
	 * h's, learn a tag.
	 */
	(void)lb_cpus(cpus, 1);
	lb_setup(1);
	lb_learn();
	lb_epair_client(&c);
	lb_bind(cpus[0]);
	lb_epair_group(&g, &c, 2, NULL);
	lb_epair_group(&h, &c, 1, NULL);
	for (i = 0; i < 1000 && lb_view(&g, &v) &&
	    !(v.learned[0] && v.learned[1]); i++)
		(void)lb_connect(&g, &hcpu);
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE(v.learned[0] && v.learned[1]);
	(void)lb_connect(&h, &hcpu);
	ATF_REQUIRE(lb_view(&h, &v));
	ATF_REQUIRE(v.learning && v.learned[0]);
	/* One member of g set by the application. */
	ATF_REQUIRE_EQ(lb_setcpu(g.sds[0], cpus[0]), 0);
	ATF_REQUIRE(lb_view(&g, &v));
	lb_until_rolls(&g, &v, v.rolls + 2);
	ATF_REQUIRE(v.ncount > 0);
	ATF_REQUIRE(v.learned[0] || v.learned[1]);

	lb_sysctl_int("net.inet.tcp.reuseport_lb.learn", 0);
	ATF_REQUIRE(lb_view(&h, &v));
	ATF_REQUIRE(!v.learning);
	ATF_REQUIRE(!v.learned[0]);
	ATF_REQUIRE_EQ(v.nslots, 0u);
	/* g's learned map is gone at once; the next accept(2) deals it. */
	ATF_REQUIRE(lb_view(&g, &v));
	ATF_REQUIRE_EQ(v.nslots, 0u);
	lb_dealt(&g, &v);
	ATF_REQUIRE_MSG(v.learning, "a group with a set tag lost its counts");
	ATF_REQUIRE(!v.learned[0] && !v.learned[1]);
	ATF_REQUIRE((v.tag[0] == cpus[0] && v.tag[1] == NOCPU) ||
	    (v.tag[0] == NOCPU && v.tag[1] == cpus[0]));
	ATF_REQUIRE_EQ(v.nslots, 32u);
	for (i = 0, total = 0; i < v.ncount; i++)
		total += v.sum[i];
	for (i = 0; total > 0 && i < v.nrx; i++)
		ATF_REQUIRE_MSG(lb_countof(&v, v.rxcpu[i], v.sum) > 0,
		    "cpu %d supplies %u slots and counted nothing", v.rxcpu[i],
		    v.rxslots[i]);
	lb_close(&h);
	lb_close(&g);
	lb_client_done(&c);
}

ATF_TP_ADD_TCS(tp)
{

	ATF_TP_ADD_TC(tp, option);
	ATF_TP_ADD_TC(tp, steering_ipv4);
	ATF_TP_ADD_TC(tp, steering_ipv6);
	ATF_TP_ADD_TC(tp, untagged_share);
	ATF_TP_ADD_TC(tp, duplicates);
	ATF_TP_ADD_TC(tp, join_leave);
	ATF_TP_ADD_TC(tp, listen_late);
	ATF_TP_ADD_TC(tp, full_group);
	ATF_TP_ADD_TC(tp, deal_at_accept);
	ATF_TP_ADD_TC(tp, counted_map);
	ATF_TP_ADD_TC(tp, tagged_counts);
	ATF_TP_ADD_TC(tp, count_unhashed);
	ATF_TP_ADD_TC(tp, tags_outnumber_rx);
	ATF_TP_ADD_TC(tp, learn_counting);
	ATF_TP_ADD_TC(tp, capture);
	ATF_TP_ADD_TC(tp, learn_not_loopback);
	ATF_TP_ADD_TC(tp, learning_off);

	return (atf_no_error());
}
