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
 * Tests for learning (net.inet.tcp.reuseport_lb_learn, off by default): a
 * load-balancing group counts its handshakes per CPU in two windows, and
 * a member that was never tagged takes the CPU of a thread that accepts
 * on it while pinned to one CPU, re-read once per window.
 *
 * The accepting thread is the test itself, pinned with cpuset(2), so the
 * CPU to expect is chosen by the test.  Handshakes over loopback carry no
 * NIC hash and are not counted, so the counting cases turn on
 * net.inet.tcp.reuseport_lb.learn_unhashed, which counts them too, and
 * shorten the windows with net.inet.tcp.reuseport_lb.window_ms.  Every
 * case that changes a sysctl is exclusive and puts back the value it
 * found, in its body and in its cleanup (a body that fails early leaves
 * the cleanup to do it).
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/socket.h>
#include <sys/sysctl.h>

#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>

#ifndef SO_REUSEPORT_LB_CPU
/* Lets the program be built against headers that predate the option. */
#define	SO_REUSEPORT_LB_CPU	0x1030
#define	SO_REUSEPORT_LB_CPU_HASH	(-1)
#define	SO_REUSEPORT_LB_CPU_NONE	(-2)
#endif
#ifndef SO_REUSEPORT_LB_CPU_LEARNED
#define	SO_REUSEPORT_LB_CPU_LEARNED	0x40000000
#endif

#define	LEARN		"net.inet.tcp.reuseport_lb_learn"
#define	UNHASHED	"net.inet.tcp.reuseport_lb.learn_unhashed"
#define	WINDOW_MS	"net.inet.tcp.reuseport_lb.window_ms"
#define	GROUPS		"net.inet.tcp.reuseport_lb.groups"
#define	SAVED		"saved-sysctls"
#define	MAXMEMBERS	16

static const char *const knobs[] = { LEARN, UNHASHED, WINDOW_MS };

static int
knob_get(const char *name)
{
	size_t len;
	int val;

	len = sizeof(val);
	ATF_REQUIRE_MSG(sysctlbyname(name, &val, &len, NULL, 0) == 0,
	    "sysctl %s: %s", name, strerror(errno));
	return (val);
}

static void
knob_set(const char *name, int val)
{
	ATF_REQUIRE_MSG(sysctlbyname(name, NULL, NULL, &val,
	    sizeof(val)) == 0,
	    "setting sysctl %s to %d: %s", name, val, strerror(errno));
	ATF_REQUIRE_MSG(knob_get(name) == val, "%s reads back %d after set "
	    "to %d", name, knob_get(name), val);
}

static int saved[nitems(knobs)];
static bool saved_valid;

/*
 * Save the knobs' values, in memory for the body's own restore and in a
 * file of the work directory for the cleanup (which runs in another
 * process); a read-only work directory leaves the cleanup nothing.
 */
static void
knobs_save(void)
{
	FILE *f;
	size_t i;

	for (i = 0; i < nitems(knobs); i++)
		saved[i] = knob_get(knobs[i]);
	saved_valid = true;
	f = fopen(SAVED, "w");
	if (f == NULL)
		return;
	for (i = 0; i < nitems(knobs); i++)
		fprintf(f, "%d\n", saved[i]);
	fclose(f);
}

/* Put back what knobs_save() saved, if it did; never fails. */
static void
knobs_restore(void)
{
	FILE *f;
	size_t i;
	int val;

	if (saved_valid) {
		for (i = 0; i < nitems(knobs); i++)
			(void)sysctlbyname(knobs[i], NULL, NULL, &saved[i],
			    sizeof(saved[i]));
		saved_valid = false;
		(void)unlink(SAVED);
		return;
	}
	f = fopen(SAVED, "r");
	if (f == NULL)
		return;
	for (i = 0; i < nitems(knobs); i++) {
		if (fscanf(f, "%d", &val) != 1)
			break;
		(void)sysctlbyname(knobs[i], NULL, NULL, &val, sizeof(val));
	}
	fclose(f);
	(void)unlink(SAVED);
}

/* A case that changes sysctls: root, and exclusive. */
static void
learn_head(atf_tc_t *tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
	atf_tc_set_md_var(tc, "is.exclusive", "true");
}

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

/* Pin the calling thread to cpu, or to all of its root set if cpu is -1. */
static void
pin(int cpu)
{
	cpuset_t mask;

	if (cpu < 0) {
		ATF_REQUIRE(cpuset_getaffinity(CPU_LEVEL_ROOT, CPU_WHICH_PID,
		    -1, sizeof(mask), &mask) == 0);
	} else {
		CPU_ZERO(&mask);
		CPU_SET(cpu, &mask);
	}
	ATF_REQUIRE_MSG(cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_TID, -1,
	    sizeof(mask), &mask) == 0,
	    "pinning the thread to CPU %d failed: %s", cpu, strerror(errno));
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

/* n non-blocking listeners in one group on the loopback address. */
static void
lb_group(int *sds, int n, int domain, struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin;
	struct sockaddr_in6 *sin6;
	socklen_t len;
	int i, one;

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
	for (i = 0; i < n; i++) {
		sds[i] = socket(domain, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ATF_REQUIRE_MSG(sds[i] >= 0, "socket: %s", strerror(errno));
		one = 1;
		ATF_REQUIRE_MSG(setsockopt(sds[i], SOL_SOCKET, SO_REUSEPORT_LB,
		    &one, sizeof(one)) == 0,
		    "setsockopt(SO_REUSEPORT_LB): %s", strerror(errno));
		ATF_REQUIRE_MSG(bind(sds[i], (struct sockaddr *)ss,
		    ss->ss_len) == 0, "bind: %s", strerror(errno));
		if (i == 0) {
			len = sizeof(*ss);
			ATF_REQUIRE(getsockname(sds[0], (struct sockaddr *)ss,
			    &len) == 0);
		}
		ATF_REQUIRE_MSG(listen(sds[i], 16) == 0, "listen: %s",
		    strerror(errno));
	}
}

static void
lb_close(const int *sds, int n)
{
	int i;

	for (i = 0; i < n; i++)
		ATF_REQUIRE(close(sds[i]) == 0);
}

/* One connection, accepted by the calling thread; returns the member. */
static int
lb_connect(const int *sds, int n, const struct sockaddr_storage *ss)
{
	struct pollfd pfd[MAXMEMBERS];
	const struct linger lopt = { 1, 0 };
	int csd, i, idx, sd;

	csd = socket(ss->ss_family, SOCK_STREAM, 0);
	ATF_REQUIRE(csd >= 0);
	ATF_REQUIRE_MSG(connect(csd, (const struct sockaddr *)ss,
	    ss->ss_len) == 0, "connect: %s", strerror(errno));
	ATF_REQUIRE(setsockopt(csd, SOL_SOCKET, SO_LINGER, &lopt,
	    sizeof(lopt)) == 0);
	sd = idx = -1;
	while (sd < 0) {
		for (i = 0; i < n; i++) {
			pfd[i].fd = sds[i];
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		ATF_REQUIRE_MSG(poll(pfd, n, 10000) > 0,
		    "no member accepted a connection within 10 s");
		for (i = 0; i < n && sd < 0; i++) {
			if ((pfd[i].revents & POLLIN) == 0)
				continue;
			sd = accept(sds[i], NULL, NULL);
			if (sd >= 0)
				idx = i;
			else
				ATF_REQUIRE_MSG(errno == EAGAIN, "accept: %s",
				    strerror(errno));
		}
	}
	/* The server closes first; the client resets (zero linger). */
	ATF_REQUIRE_MSG(close(sd) == 0, "close of the accepted socket: %s",
	    strerror(errno));
	ATF_REQUIRE_MSG(close(csd) == 0, "close of the client socket: %s",
	    strerror(errno));
	return (idx);
}

/*
 * The group section of the groups view for the group on port, into buf
 * (empty if the view does not list the group).
 */
static void
lb_view(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	static char all[1 << 20];
	char key[64];
	const char *p, *end;
	size_t len;
	in_port_t port;

	port = ss->ss_family == AF_INET ?
	    ((const struct sockaddr_in *)ss)->sin_port :
	    ((const struct sockaddr_in6 *)ss)->sin6_port;
	len = sizeof(all) - 1;
	ATF_REQUIRE_MSG(sysctlbyname(GROUPS, all, &len, NULL, 0) == 0,
	    "sysctl %s: %s", GROUPS, strerror(errno));
	all[len] = '\0';
	snprintf(key, sizeof(key), "group port %u af %s ", ntohs(port),
	    ss->ss_family == AF_INET ? "inet" : "inet6");
	buf[0] = '\0';
	p = strstr(all, key);
	if (p == NULL)
		return;
	end = strstr(p + 1, "group port ");
	len = end != NULL ? (size_t)(end - p) : strlen(p);
	if (len >= size)
		len = size - 1;
	memcpy(buf, p, len);
	buf[len] = '\0';
}

/* Handshakes counted for the group, both windows, all CPUs. */
static unsigned
lb_counted(const struct sockaddr_storage *ss, unsigned *rolls)
{
	char buf[1 << 14];
	const char *p;
	unsigned cpu, cur, prev, total;

	lb_view(ss, buf, sizeof(buf));
	p = strstr(buf, "\nlearn ");
	ATF_REQUIRE_MSG(p != NULL, "no learning state in:\n%s", buf);
	ATF_REQUIRE(sscanf(p, "\nlearn window_ms %*d age_ms %*d rolls %u",
	    rolls) == 1);
	total = 0;
	for (p = strstr(buf, "\nrx "); p != NULL; p = strstr(p + 1, "\nrx ")) {
		ATF_REQUIRE(sscanf(p, "\nrx %u prev %u cur %u", &cpu, &prev,
		    &cur) == 3);
		total += prev + cur;
	}
	return (total);
}

/*
 * A thread pinned to one CPU accepts on an untagged member: the member
 * takes that CPU, read back as learned; a thread pinned elsewhere does
 * not move it within the window; the view shows the learned tag.
 */
static void
capture_body(int domain)
{
	struct sockaddr_storage ss;
	char buf[1 << 14], want[64];
	int cpus[2], ncpu, sds[1];

	ncpu = lb_cpus(cpus, 2);
	knobs_save();
	knob_set(LEARN, 1);
	knob_set(WINDOW_MS, 60000);
	lb_group(sds, 1, domain, &ss);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), SO_REUSEPORT_LB_CPU_NONE);
	pin(cpus[0]);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_MSG(lb_getcpu(sds[0]) ==
	    (cpus[0] | SO_REUSEPORT_LB_CPU_LEARNED),
	    "after a pinned accept on CPU %d the tag reads %#x", cpus[0],
	    lb_getcpu(sds[0]));
	pin(cpus[ncpu - 1]);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_MSG(lb_getcpu(sds[0]) ==
	    (cpus[0] | SO_REUSEPORT_LB_CPU_LEARNED),
	    "an accept in the same window moved the tag to %#x",
	    lb_getcpu(sds[0]));
	lb_view(&ss, buf, sizeof(buf));
	snprintf(want, sizeof(want), "member 0 tag %d learned ", cpus[0]);
	ATF_REQUIRE_MSG(strstr(buf, want) != NULL, "no \"%s\" in:\n%s",
	    want, buf);
	pin(-1);
	lb_close(sds, 1);
	knobs_restore();
}

ATF_TC_WITH_CLEANUP(capture);
ATF_TC_HEAD(capture, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(capture, tc)
{
	knobs_restore();
}
ATF_TC_BODY(capture, tc)
{
	capture_body(AF_INET);
}

ATF_TC_WITH_CLEANUP(capture_ipv6);
ATF_TC_HEAD(capture_ipv6, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(capture_ipv6, tc)
{
	knobs_restore();
}
ATF_TC_BODY(capture_ipv6, tc)
{
	capture_body(AF_INET6);
}

/*
 * Members set to hash (-1) or to a CPU are never retagged by a capture,
 * and an unpinned thread tags nothing.
 */
ATF_TC_WITH_CLEANUP(no_capture);
ATF_TC_HEAD(no_capture, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(no_capture, tc)
{
	knobs_restore();
}
ATF_TC_BODY(no_capture, tc)
{
	struct sockaddr_storage ss;
	int cpus[2], ncpu, sds[1];

	ncpu = lb_cpus(cpus, 2);
	knobs_save();
	knob_set(LEARN, 1);

	lb_group(sds, 1, AF_INET, &ss);
	lb_setcpu(sds[0], SO_REUSEPORT_LB_CPU_HASH);
	pin(cpus[0]);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), SO_REUSEPORT_LB_CPU_HASH);
	lb_close(sds, 1);

	lb_group(sds, 1, AF_INET, &ss);
	lb_setcpu(sds[0], cpus[ncpu - 1]);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), cpus[ncpu - 1]);
	lb_close(sds, 1);

	pin(-1);
	lb_group(sds, 1, AF_INET, &ss);
	(void)lb_connect(sds, 1, &ss);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), SO_REUSEPORT_LB_CPU_NONE);
	lb_close(sds, 1);
	knobs_restore();
}

/*
 * Learning off (the default): a pinned accept tags nothing, and the group,
 * which has no tag, no map and no learning state, is not in the view: it
 * paid for nothing.
 */
ATF_TC_WITH_CLEANUP(learning_off);
ATF_TC_HEAD(learning_off, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(learning_off, tc)
{
	knobs_restore();
}
ATF_TC_BODY(learning_off, tc)
{
	struct sockaddr_storage ss;
	char buf[1 << 14];
	int cpus[1], sds[2];

	(void)lb_cpus(cpus, 1);
	knobs_save();
	knob_set(LEARN, 0);
	knob_set(UNHASHED, 1);
	lb_group(sds, 2, AF_INET, &ss);
	pin(cpus[0]);
	(void)lb_connect(sds, 2, &ss);
	(void)lb_connect(sds, 2, &ss);
	pin(-1);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), SO_REUSEPORT_LB_CPU_NONE);
	ATF_REQUIRE_EQ(lb_getcpu(sds[1]), SO_REUSEPORT_LB_CPU_NONE);
	lb_view(&ss, buf, sizeof(buf));
	ATF_REQUIRE_MSG(buf[0] == '\0', "the view lists the group:\n%s", buf);
	lb_close(sds, 2);
	knobs_restore();
}

/*
 * Counting and window rolls.  With unhashed handshakes counted, every
 * handshake after the group's learning state exists (the first accept
 * allocates it) is counted on the CPU that completed it: the view's
 * counts add up to the connections made.  With 200 ms windows, a
 * handshake more than a window later rolls them (the view's roll count
 * goes up); after two more windows the old counts are gone, and only the
 * handshakes that triggered the rolls remain.
 */
static void
counting_body(int domain)
{
	struct sockaddr_storage ss;
	unsigned rolls, rolls0, total;
	int i, sds[2];

	knobs_save();
	knob_set(LEARN, 1);
	knob_set(UNHASHED, 1);
	knob_set(WINDOW_MS, 60000);
	lb_group(sds, 2, domain, &ss);
	(void)lb_connect(sds, 2, &ss);
	(void)lb_connect(sds, 2, &ss);
	total = lb_counted(&ss, &rolls0);
	for (i = 0; i < 40; i++)
		(void)lb_connect(sds, 2, &ss);
	ATF_REQUIRE_EQ_MSG(lb_counted(&ss, &rolls) - total, 40,
	    "40 handshakes, %u counted", lb_counted(&ss, &rolls) - total);
	ATF_REQUIRE_EQ(rolls, rolls0);

	/* A shorter window takes effect at once. */
	knob_set(WINDOW_MS, 200);
	for (i = 0; i < 3; i++) {
		usleep(450000);
		(void)lb_connect(sds, 2, &ss);
	}
	usleep(100000);
	total = lb_counted(&ss, &rolls);
	ATF_REQUIRE_MSG(rolls > rolls0, "no roll: rolls %u", rolls);
	ATF_REQUIRE_MSG(total <= 3,
	    "%u handshakes still counted after the windows rolled", total);
	lb_close(sds, 2);
	knobs_restore();
}

ATF_TC_WITH_CLEANUP(counting);
ATF_TC_HEAD(counting, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(counting, tc)
{
	knobs_restore();
}
ATF_TC_BODY(counting, tc)
{
	counting_body(AF_INET);
}

ATF_TC_WITH_CLEANUP(counting_ipv6);
ATF_TC_HEAD(counting_ipv6, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(counting_ipv6, tc)
{
	knobs_restore();
}
ATF_TC_BODY(counting_ipv6, tc)
{
	counting_body(AF_INET6);
}

/*
 * A worker that moves is learned again: once per window the member's
 * worker CPU is read afresh, so after a roll an accept from a thread
 * pinned to another CPU retags the member.
 */
ATF_TC_WITH_CLEANUP(relearn);
ATF_TC_HEAD(relearn, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(relearn, tc)
{
	knobs_restore();
}
ATF_TC_BODY(relearn, tc)
{
	struct sockaddr_storage ss;
	int cpus[2], i, ncpu, sds[1];

	ncpu = lb_cpus(cpus, 2);
	if (ncpu < 2)
		atf_tc_skip("needs two CPUs");
	knobs_save();
	knob_set(LEARN, 1);
	knob_set(WINDOW_MS, 200);
	lb_group(sds, 1, AF_INET, &ss);
	pin(cpus[0]);
	(void)lb_connect(sds, 1, &ss);
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]),
	    cpus[0] | SO_REUSEPORT_LB_CPU_LEARNED);
	pin(cpus[1]);
	for (i = 0; i < 20 && lb_getcpu(sds[0]) !=
	    (cpus[1] | SO_REUSEPORT_LB_CPU_LEARNED); i++) {
		usleep(150000);
		(void)lb_connect(sds, 1, &ss);
	}
	ATF_REQUIRE_MSG(lb_getcpu(sds[0]) ==
	    (cpus[1] | SO_REUSEPORT_LB_CPU_LEARNED),
	    "the member was not retagged with CPU %d after the worker "
	    "moved: tag %#x", cpus[1], lb_getcpu(sds[0]));
	pin(-1);
	lb_close(sds, 1);
	knobs_restore();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, capture);
	ATF_TP_ADD_TC(tp, capture_ipv6);
	ATF_TP_ADD_TC(tp, no_capture);
	ATF_TP_ADD_TC(tp, learning_off);
	ATF_TP_ADD_TC(tp, counting);
	ATF_TP_ADD_TC(tp, counting_ipv6);
	ATF_TP_ADD_TC(tp, relearn);

	return (atf_no_error());
}
