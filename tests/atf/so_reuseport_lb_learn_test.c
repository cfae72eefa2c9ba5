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
 * Tests for learning at accept(2) (net.inet.tcp.reuseport_lb_learn): an
 * untagged member of a load-balancing group takes the CPU of a thread that
 * accepts on it while pinned to one CPU.
 *
 * The accepting thread is the test itself, pinned with cpuset(2), so the
 * CPU to expect is chosen by the test and nothing depends on where the
 * loopback netisr thread processed the handshake.  Receive counts are not
 * exercised here: loopback handshakes carry no NIC hash and are never
 * counted.
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/socket.h>
#include <sys/sysctl.h>

#include <netinet/in.h>

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include <atf-c.h>

#ifndef SO_REUSEPORT_LB_CPU
/* Lets the program be built against headers that predate the option. */
#define	SO_REUSEPORT_LB_CPU	0x1030
#endif

#define	LEARN_SYSCTL	"net.inet.tcp.reuseport_lb_learn"
#define	MAXMEMBERS	16

static int
learn_get(void)
{
	size_t len;
	int val;

	len = sizeof(val);
	ATF_REQUIRE_MSG(sysctlbyname(LEARN_SYSCTL, &val, &len, NULL, 0) == 0,
	    "sysctl %s: %s", LEARN_SYSCTL, strerror(errno));
	return (val);
}

static void
learn_set(int val)
{
	ATF_REQUIRE_MSG(sysctlbyname(LEARN_SYSCTL, NULL, NULL, &val,
	    sizeof(val)) == 0,
	    "setting sysctl %s to %d: %s", LEARN_SYSCTL, val, strerror(errno));
	ATF_REQUIRE_MSG(learn_get() == val, "%s reads back %d after set to %d",
	    LEARN_SYSCTL, learn_get(), val);
}

static void
learn_restore(void)
{
	int val;

	val = 1;
	(void)sysctlbyname(LEARN_SYSCTL, NULL, NULL, &val, sizeof(val));
}

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

/* Pin the calling thread to cpu, or to every CPU if cpu is -1. */
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

/* n non-blocking listeners in one group on 127.0.0.1; returns the port. */
static void
lb_group(int *sds, int n, struct sockaddr_in *sin)
{
	socklen_t len;
	int i, one;

	memset(sin, 0, sizeof(*sin));
	sin->sin_len = sizeof(*sin);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < n; i++) {
		sds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ATF_REQUIRE_MSG(sds[i] >= 0, "socket: %s", strerror(errno));
		one = 1;
		ATF_REQUIRE_MSG(setsockopt(sds[i], SOL_SOCKET, SO_REUSEPORT_LB,
		    &one, sizeof(one)) == 0,
		    "setsockopt(SO_REUSEPORT_LB): %s", strerror(errno));
		ATF_REQUIRE_MSG(bind(sds[i], (struct sockaddr *)sin,
		    sizeof(*sin)) == 0, "bind: %s", strerror(errno));
		if (i == 0) {
			len = sizeof(*sin);
			ATF_REQUIRE(getsockname(sds[0], (struct sockaddr *)sin,
			    &len) == 0);
		}
		ATF_REQUIRE_MSG(listen(sds[i], 16) == 0, "listen: %s",
		    strerror(errno));
	}
}

/* One connection, accepted by the calling thread; returns the member. */
static int
lb_connect(const int *sds, int n, const struct sockaddr_in *sin)
{
	struct pollfd pfd[MAXMEMBERS];
	const struct linger lopt = { 1, 0 };
	int csd, i, idx, sd;

	csd = socket(AF_INET, SOCK_STREAM, 0);
	ATF_REQUIRE(csd >= 0);
	ATF_REQUIRE_MSG(connect(csd, (const struct sockaddr *)sin,
	    sizeof(*sin)) == 0, "connect: %s", strerror(errno));
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
 * A thread pinned to one CPU accepts on an untagged member: the member
 * takes that CPU, and keeps it when a thread pinned elsewhere accepts.
 */
ATF_TC_WITH_CLEANUP(capture);
ATF_TC_HEAD(capture, tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}
ATF_TC_BODY(capture, tc)
{
	struct sockaddr_in sin;
	int cpus[CPU_SETSIZE];
	int first, ncpu, other, sd;

	learn_set(1);
	ncpu = lb_cpus(cpus, CPU_SETSIZE);
	first = cpus[ncpu - 1];
	other = cpus[0];
	lb_group(&sd, 1, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == -1, "new member reads back %d",
	    lb_getcpu(sd));
	pin(first);
	(void)lb_connect(&sd, 1, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == first,
	    "accepted from a thread pinned to CPU %d, member reads back %d",
	    first, lb_getcpu(sd));
	pin(other);
	(void)lb_connect(&sd, 1, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == first,
	    "a second accept on CPU %d retagged the member from %d to %d",
	    other, first, lb_getcpu(sd));
	ATF_REQUIRE(close(sd) == 0);
}
ATF_TC_CLEANUP(capture, tc)
{
	learn_restore();
}

/* A member set to -1 refuses capture. */
ATF_TC_WITH_CLEANUP(hash_refuses_capture);
ATF_TC_HEAD(hash_refuses_capture, tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}
ATF_TC_BODY(hash_refuses_capture, tc)
{
	struct sockaddr_in sin;
	int cpus[CPU_SETSIZE];
	int ncpu, sd, val;

	learn_set(1);
	ncpu = lb_cpus(cpus, CPU_SETSIZE);
	lb_group(&sd, 1, &sin);
	val = -1;
	ATF_REQUIRE_MSG(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB_CPU, &val,
	    sizeof(val)) == 0, "setsockopt(SO_REUSEPORT_LB_CPU, -1): %s",
	    strerror(errno));
	pin(cpus[ncpu - 1]);
	(void)lb_connect(&sd, 1, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == -1,
	    "member set to -1 was captured: reads back %d", lb_getcpu(sd));
	ATF_REQUIRE(close(sd) == 0);
}
ATF_TC_CLEANUP(hash_refuses_capture, tc)
{
	learn_restore();
}

/* A thread that may run on several CPUs captures nothing. */
ATF_TC_WITH_CLEANUP(unpinned_no_capture);
ATF_TC_HEAD(unpinned_no_capture, tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}
ATF_TC_BODY(unpinned_no_capture, tc)
{
	struct sockaddr_in sin;
	int cpus[CPU_SETSIZE];
	int sd;

	if (lb_cpus(cpus, CPU_SETSIZE) < 2)
		atf_tc_skip("needs two CPUs");
	learn_set(1);
	lb_group(&sd, 1, &sin);
	pin(-1);
	(void)lb_connect(&sd, 1, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sd) == -1,
	    "accepted from an unpinned thread, member reads back %d",
	    lb_getcpu(sd));
	ATF_REQUIRE(close(sd) == 0);
}
ATF_TC_CLEANUP(unpinned_no_capture, tc)
{
	learn_restore();
}

/*
 * With the sysctl at 0 nothing is captured and the group keeps selecting
 * by the tuple hash: every member is fed.  Back at 1, capture resumes.
 * Only 0 and 1 are accepted.
 */
ATF_TC_WITH_CLEANUP(learning_off);
ATF_TC_HEAD(learning_off, tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
}
ATF_TC_BODY(learning_off, tc)
{
	struct sockaddr_in sin;
	int accepted[MAXMEMBERS], cpus[CPU_SETSIZE], sds[MAXMEMBERS];
	int cpu, fed, i, k, n, ncpu, val;

	val = 2;
	ATF_REQUIRE_MSG(sysctlbyname(LEARN_SYSCTL, NULL, NULL, &val,
	    sizeof(val)) == -1 && errno == EINVAL,
	    "setting %s to 2 did not fail with EINVAL", LEARN_SYSCTL);
	learn_set(0);
	ncpu = lb_cpus(cpus, CPU_SETSIZE);
	cpu = cpus[ncpu - 1];
	n = 4;
	lb_group(sds, n, &sin);
	memset(accepted, 0, sizeof(accepted));
	pin(cpu);
	for (k = 0, fed = 0; k < 2000 && fed < n; k++) {
		accepted[lb_connect(sds, n, &sin)]++;
		for (fed = 0, i = 0; i < n; i++)
			fed += accepted[i] > 0;
	}
	for (i = 0; i < n; i++) {
		ATF_REQUIRE_MSG(lb_getcpu(sds[i]) == -1,
		    "learning is off, yet member %d took CPU %d", i,
		    lb_getcpu(sds[i]));
		ATF_REQUIRE_MSG(accepted[i] > 0,
		    "member %d got no connection out of %d", i, k);
	}

	learn_set(1);
	i = lb_connect(sds, n, &sin);
	ATF_REQUIRE_MSG(lb_getcpu(sds[i]) == cpu,
	    "learning back on, member %d reads back %d, not CPU %d", i,
	    lb_getcpu(sds[i]), cpu);
	for (i = 0; i < n; i++)
		ATF_REQUIRE(close(sds[i]) == 0);
}
ATF_TC_CLEANUP(learning_off, tc)
{
	learn_restore();
}

ATF_TP_ADD_TCS(tp)
{
	ATF_TP_ADD_TC(tp, capture);
	ATF_TP_ADD_TC(tp, hash_refuses_capture);
	ATF_TP_ADD_TC(tp, unpinned_no_capture);
	ATF_TP_ADD_TC(tp, learning_off);

	return (atf_no_error());
}
