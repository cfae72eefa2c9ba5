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
 * shorten the windows with net.inet.tcp.reuseport_lb.window_ms.  The
 * sysctls are global, so the Makefile makes the program exclusive, and
 * every case that changes one puts back the value it found, in its body
 * and in its cleanup (a body that fails early leaves the cleanup to do
 * it).
 */

#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/malloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <netinet/in.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atf-c.h>

#define	LEARN		"net.inet.tcp.reuseport_lb_learn"
#define	UNHASHED	"net.inet.tcp.reuseport_lb.learn_unhashed"
#define	WINDOW_MS	"net.inet.tcp.reuseport_lb.window_ms"
#define	GROUPS		"net.inet.tcp.reuseport_lb.groups"
#define	REBUILDS	"net.inet.tcp.reuseport_lb.rebuilds"
#define	ALLOCFAIL	"net.inet.tcp.reuseport_lb.allocfail"
#define	LEARNFAIL	"net.inet.tcp.reuseport_lb.learnfail"
#define	SAVED		"saved-sysctls"
#define	MAXMEMBERS	256

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
	int error;

	error = sysctlbyname(name, NULL, NULL, &val, sizeof(val));
	/* The knobs are host-wide: a jail may read but not set them. */
	if (error != 0 && errno == EPERM)
		atf_tc_skip("cannot set %s here (a jail?)", name);
	ATF_REQUIRE_MSG(error == 0,
	    "setting sysctl %s to %d: %s", name, val, strerror(errno));
	ATF_REQUIRE_MSG(knob_get(name) == val, "%s reads back %d after set "
	    "to %d", name, knob_get(name), val);
}

static int saved[nitems(knobs)];
static bool saved_valid;
static pid_t saved_owner;

static void knobs_restore(void);

/* A body that fails exits: put the knobs back then too. */
static void
knobs_atexit(void)
{
	if (getpid() == saved_owner)
		knobs_restore();
}

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
	if (saved_owner == 0) {
		saved_owner = getpid();
		ATF_REQUIRE(atexit(knobs_atexit) == 0);
	}
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

/* A case that changes sysctls runs as root (the program is exclusive). */
static void
learn_head(atf_tc_t *tc)
{
	atf_tc_set_md_var(tc, "require.user", "root");
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

/* The loopback address of domain, port 0, in ss. */
static void
lb_loopback_addr(int domain, struct sockaddr_storage *ss)
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

/* The address sd is bound to, in ss. */
static void
lb_bound(int sd, struct sockaddr_storage *ss)
{
	socklen_t len;

	len = sizeof(*ss);
	ATF_REQUIRE_MSG(getsockname(sd, (struct sockaddr *)ss, &len) == 0,
	    "getsockname: %s", strerror(errno));
}

/* n non-blocking listeners in one group on the loopback address. */
static void
lb_group(int *sds, int n, int domain, struct sockaddr_storage *ss)
{
	int i, one;

	lb_loopback_addr(domain, ss);
	for (i = 0; i < n; i++) {
		sds[i] = socket(domain, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ATF_REQUIRE_MSG(sds[i] >= 0, "socket: %s", strerror(errno));
		one = 1;
		ATF_REQUIRE_MSG(setsockopt(sds[i], SOL_SOCKET, SO_REUSEPORT_LB,
		    &one, sizeof(one)) == 0,
		    "setsockopt(SO_REUSEPORT_LB): %s", strerror(errno));
		ATF_REQUIRE_MSG(bind(sds[i], (struct sockaddr *)ss,
		    ss->ss_len) == 0, "bind: %s", strerror(errno));
		if (i == 0)
			lb_bound(sds[0], ss);
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

/*
 * A thread pinned to one CPU accepts on an untagged member: the member
 * takes that CPU, read back as learned; a thread pinned elsewhere (with
 * two CPUs or more) does not move it within the window; the view shows
 * the learned tag.
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
	/* With one CPU there is no other CPU to move the tag to. */
	if (ncpu >= 2) {
		pin(cpus[1]);
		(void)lb_connect(sds, 1, &ss);
		ATF_REQUIRE_MSG(lb_getcpu(sds[0]) ==
		    (cpus[0] | SO_REUSEPORT_LB_CPU_LEARNED),
		    "an accept in the same window moved the tag to %#x",
		    lb_getcpu(sds[0]));
	}
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
 * and an unpinned thread tags nothing (skipped when the root cpuset has
 * one CPU: a thread there is always pinned to it).
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
	if (ncpu < 2) {
		/* Unpinned is then pinned to the one CPU of the root set. */
		knobs_restore();
		atf_tc_skip("the root cpuset has 1 CPU: an unpinned thread "
		    "cannot be told from a pinned one");
	}
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

/*
 * A number field of the group line of a view section ("map", "dirty",
 * "rebuilds", "allocfail"); fails if the section has none.
 */
static unsigned
lb_field(const char *buf, const char *field)
{
	char key[32];
	const char *p, *eol;
	unsigned val;

	snprintf(key, sizeof(key), " %s ", field);
	eol = strchr(buf, '\n');
	p = strstr(buf, key);
	ATF_REQUIRE_MSG(p != NULL && (eol == NULL || p < eol),
	    "no \"%s\" on the group line of:\n%s", field, buf);
	ATF_REQUIRE(sscanf(p + strlen(key), "%u", &val) == 1);
	return (val);
}

/*
 * Wait (at most 5 s) until the group on ss waits for no rebuild; returns
 * its view section in buf.
 */
static void
lb_settled(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	int i;

	for (i = 0; i < 500; i++) {
		lb_view(ss, buf, size);
		if (buf[0] == '\0' || lb_field(buf, "dirty") == 0)
			return;
		usleep(10000);
	}
	atf_tc_fail("the group's map was not rebuilt within 5 s:\n%s", buf);
}

/*
 * Per CPU, the handshakes counted in both windows (rx lines) and the
 * slots it supplies in the map (cpu lines) of a view section.
 */
static void
lb_rx_and_slots(const char *buf, unsigned *rx, unsigned *slots, int ncpu)
{
	const char *p;
	unsigned cpu, cur, n, off, prev;

	memset(rx, 0, ncpu * sizeof(*rx));
	memset(slots, 0, ncpu * sizeof(*slots));
	for (p = strstr(buf, "\nrx "); p != NULL; p = strstr(p + 1, "\nrx ")) {
		ATF_REQUIRE(sscanf(p, "\nrx %u prev %u cur %u", &cpu, &prev,
		    &cur) == 3);
		ATF_REQUIRE((int)cpu < ncpu);
		rx[cpu] = prev + cur;
	}
	for (p = strstr(buf, "\ncpu "); p != NULL;
	    p = strstr(p + 1, "\ncpu ")) {
		ATF_REQUIRE(sscanf(p, "\ncpu %u offset %u slots %u", &cpu, &off,
		    &n) == 3);
		ATF_REQUIRE((int)cpu < ncpu);
		slots[cpu] = n;
	}
}

/*
 * Learned counts drive the map.  Handshakes on an untagged group are
 * counted per CPU (learn_unhashed: loopback's are); then one member is
 * tagged with a CPU that counted none, if there is one.  The map that
 * the tag causes must take its supply from the counted CPUs, each CPU's
 * share of the 16 x 2 slots being its share of the handshakes rounded
 * down or up, and none from the tagged CPU: without counts, the tagged
 * CPU would stand in as the only receiving CPU and supply all 32.
 */
ATF_TC_WITH_CLEANUP(learned_map);
ATF_TC_HEAD(learned_map, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(learned_map, tc)
{
	knobs_restore();
}
ATF_TC_BODY(learned_map, tc)
{
	struct sockaddr_storage ss;
	static char buf[1 << 16];
	static int cpus[CPU_SETSIZE];
	static unsigned rx[CPU_SETSIZE], slots[CPU_SETSIZE];
	unsigned lo, total, nslots, sum;
	int c, i, ncpu, sds[2], tag;

	ncpu = lb_cpus(cpus, CPU_SETSIZE);
	knobs_save();
	knob_set(LEARN, 1);
	knob_set(UNHASHED, 1);
	knob_set(WINDOW_MS, 60000);
	lb_group(sds, 2, AF_INET, &ss);
	for (i = 0; i < 64; i++)
		(void)lb_connect(sds, 2, &ss);
	lb_view(&ss, buf, sizeof(buf));
	lb_rx_and_slots(buf, rx, slots, CPU_SETSIZE);
	tag = cpus[0];
	for (c = ncpu - 1; c >= 0; c--) {
		if (rx[cpus[c]] == 0) {
			tag = cpus[c];
			break;
		}
	}
	lb_setcpu(sds[0], tag);
	lb_settled(&ss, buf, sizeof(buf));
	lb_rx_and_slots(buf, rx, slots, CPU_SETSIZE);
	nslots = lb_field(buf, "map");
	ATF_REQUIRE_MSG(nslots == 32, "map of %u slots for 2 members:\n%s",
	    nslots, buf);
	for (total = 0, c = 0; c < CPU_SETSIZE; c++)
		total += rx[c];
	ATF_REQUIRE_MSG(total >= 60, "%u of 64 handshakes counted:\n%s",
	    total, buf);
	for (sum = 0, c = 0; c < CPU_SETSIZE; c++) {
		lo = nslots * rx[c] / total;
		ATF_REQUIRE_MSG(slots[c] == lo || (slots[c] == lo + 1 &&
		    nslots * rx[c] % total != 0),
		    "CPU %d counted %u of %u handshakes but supplies %u of %u "
		    "slots:\n%s", c, rx[c], total, slots[c], nslots, buf);
		sum += slots[c];
	}
	ATF_REQUIRE_EQ(sum, nslots);
	for (i = 0, c = 0; c < CPU_SETSIZE; c++)
		i += rx[c] != 0;
	fprintf(stderr, "learned_map: %u handshakes counted on %d CPUs; "
	    "member 0 tagged with CPU %d, which counted %u and supplies %u "
	    "of %u slots\n", total, i, tag, rx[tag], slots[tag], nslots);
	if (rx[tag] == 0)
		ATF_REQUIRE_MSG(slots[tag] == 0, "the tagged CPU %d counted "
		    "nothing but supplies %u slots:\n%s", tag, slots[tag], buf);
	lb_close(sds, 2);
	knobs_restore();
}

/*
 * Wait (at most 5 s) until the group on ss shows an allocation failure;
 * returns its view section in buf.
 */
static void
lb_allocfailed(const struct sockaddr_storage *ss, char *buf, size_t size)
{
	int i;

	for (i = 0; i < 500; i++) {
		lb_view(ss, buf, size);
		if (buf[0] != '\0' && lb_field(buf, "allocfail") > 0)
			return;
		usleep(10000);
	}
	atf_tc_fail("no allocation failure within 5 s:\n%s", buf);
}

/*
 * With an allocation of a map rebuild failing every time (fail point fp),
 * a group with every CPU tagged has no map and selects by the hash: the
 * view shows map 0, the failure and the group still dirty, the global
 * counter counts it, and every connection is accepted.  The task retries
 * it after a back-off of 1 s, not every 10 ms: over 2.5 s, 1 to 4 retries
 * (about 2; without the back-off, about 250).  Once the fail point is off,
 * a retry builds the map with no change to the group.
 */
static void
allocfail_body(const char *fp)
{
	struct sockaddr_storage ss;
	static char buf[1 << 20];
	static int cpus[MAXMEMBERS];
	static int sds[MAXMEMBERS];
	uint64_t fail0, rb1, rb2;
	int i, n;

	n = lb_cpus(cpus, MAXMEMBERS);
	fail0 = lb_counter(ALLOCFAIL);
	lb_fp_set(fp, "100%return");
	lb_group(sds, n, AF_INET, &ss);
	for (i = 0; i < n; i++)
		lb_setcpu(sds[i], cpus[i]);
	lb_allocfailed(&ss, buf, sizeof(buf));
	ATF_REQUIRE_MSG(lb_field(buf, "map") == 0 &&
	    lb_field(buf, "dirty") == 1,
	    "%s failing: the group has a map or is not dirty:\n%s", fp, buf);
	ATF_REQUIRE_MSG(lb_counter(ALLOCFAIL) > fail0,
	    "%s failing: " ALLOCFAIL " did not count it", fp);
	rb1 = lb_counter(REBUILDS);
	for (i = 0; i < 64; i++)
		(void)lb_connect(sds, n, &ss);
	usleep(2500000);
	rb2 = lb_counter(REBUILDS);
	fprintf(stderr, "%s failing: %ju retries in 2.5 s\n", fp,
	    (uintmax_t)(rb2 - rb1));
	ATF_REQUIRE_MSG(rb2 - rb1 >= 1 && rb2 - rb1 <= 4,
	    "%ju rebuilds in 2.5 s, expected 1 to 4 (one retry a second)",
	    (uintmax_t)(rb2 - rb1));
	lb_fp_restore();
	lb_settled(&ss, buf, sizeof(buf));
	ATF_REQUIRE_MSG(lb_field(buf, "map") == 16 * (unsigned)n,
	    "no map of %d slots once %s stopped failing:\n%s", 16 * n, fp, buf);
	lb_close(sds, n);
}

ATF_TC_WITH_CLEANUP(scratch_allocfail);
ATF_TC_HEAD(scratch_allocfail, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(scratch_allocfail, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(scratch_allocfail, tc)
{
	allocfail_body("in_pcblb_scratch_alloc");
}

ATF_TC_WITH_CLEANUP(map_allocfail);
ATF_TC_HEAD(map_allocfail, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(map_allocfail, tc)
{
	lb_fp_restore();
}
ATF_TC_BODY(map_allocfail, tc)
{
	allocfail_body("in_pcblb_map_alloc");
}

/*
 * With the learning state's allocation failing, the group does not
 * learn: a pinned accept captures nothing, the view shows no learning
 * state, and the failure is counted once for the group, not once per
 * accept.
 */
ATF_TC_WITH_CLEANUP(learn_allocfail);
ATF_TC_HEAD(learn_allocfail, tc)
{
	learn_head(tc);
}
ATF_TC_CLEANUP(learn_allocfail, tc)
{
	lb_fp_restore();
	knobs_restore();
}
ATF_TC_BODY(learn_allocfail, tc)
{
	struct sockaddr_storage ss;
	char buf[1 << 14];
	uint64_t lf0, lf1;
	int cpus[1], i, sds[2];

	(void)lb_cpus(cpus, 1);
	knobs_save();
	knob_set(LEARN, 1);
	knob_set(UNHASHED, 1);
	lf0 = lb_counter(LEARNFAIL);
	lb_fp_set("in_pcblb_learn_alloc", "100%return");
	lb_group(sds, 2, AF_INET, &ss);
	pin(cpus[0]);
	for (i = 0; i < 50; i++)
		(void)lb_connect(sds, 2, &ss);
	pin(-1);
	lf1 = lb_counter(LEARNFAIL);
	ATF_REQUIRE_MSG(lf1 - lf0 == 1, "50 accepts without learning state "
	    "counted %ju failures", (uintmax_t)(lf1 - lf0));
	ATF_REQUIRE_EQ(lb_getcpu(sds[0]), SO_REUSEPORT_LB_CPU_NONE);
	ATF_REQUIRE_EQ(lb_getcpu(sds[1]), SO_REUSEPORT_LB_CPU_NONE);
	lb_view(&ss, buf, sizeof(buf));
	ATF_REQUIRE_MSG(strstr(buf, "\nlearn ") == NULL,
	    "the group has learning state:\n%s", buf);
	lb_close(sds, 2);
	lb_fp_restore();
	knobs_restore();
}

/*
 * Bytes and allocations in use of the malloc(9) type name, summed over
 * the CPUs, from kern.malloc_stats (what vmstat -m reads).
 */
static void
lb_malloc_use(const char *name, int64_t *bytes, int64_t *allocs)
{
	const struct malloc_type_stream_header *h;
	const struct malloc_type_header *th;
	const struct malloc_type_stats *ts;
	char *buf, *p;
	size_t len;
	uint32_t c, i;

	ATF_REQUIRE(sysctlbyname("kern.malloc_stats", NULL, &len, NULL,
	    0) == 0);
	len += len / 4;
	buf = malloc(len);
	ATF_REQUIRE(buf != NULL);
	ATF_REQUIRE_MSG(sysctlbyname("kern.malloc_stats", buf, &len, NULL,
	    0) == 0, "sysctl kern.malloc_stats: %s", strerror(errno));
	h = (const struct malloc_type_stream_header *)buf;
	ATF_REQUIRE(len >= sizeof(*h) &&
	    h->mtsh_version == MALLOC_TYPE_STREAM_VERSION);
	p = buf + sizeof(*h);
	for (i = 0; i < h->mtsh_count; i++) {
		th = (const struct malloc_type_header *)p;
		ts = (const struct malloc_type_stats *)(p + sizeof(*th));
		p += sizeof(*th) + h->mtsh_maxcpus * sizeof(*ts);
		ATF_REQUIRE((size_t)(p - buf) <= len);
		if (strncmp(th->mth_name, name, sizeof(th->mth_name)) != 0)
			continue;
		*bytes = *allocs = 0;
		for (c = 0; c < h->mtsh_maxcpus; c++) {
			*bytes += ts[c].mts_memalloced - ts[c].mts_memfreed;
			*allocs += ts[c].mts_numallocs - ts[c].mts_numfrees;
		}
		free(buf);
		return;
	}
	atf_tc_fail("no malloc type %s in kern.malloc_stats", name);
}

/* Whether time a is before time b. */
static bool
lb_before(const struct timespec *a, const struct timespec *b)
{
	return (a->tv_sec < b->tv_sec ||
	    (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec));
}

/* Seconds the churn cases run unless -v churn_seconds=N says otherwise. */
#define	CHURN_SECONDS	20
#define	CHURN_CLIENTS	4
/* A client connects every CHURN_INTERVAL_US microseconds. */
#define	CHURN_INTERVAL_US 2000
/* The group changes every CHURN_OP_MS milliseconds. */
#define	CHURN_OP_MS	10

/*
 * Shared between the clients and the test (MAP_SHARED): per client and
 * connection, what the client saw (CHURN_*) and how many times a member
 * accepted it.
 */
#define	CHURN_ECHOED	1	/* The id came back. */
#define	CHURN_RESET	2	/* Reset or closed before the echo. */
#define	CHURN_REFUSED	3	/* connect(2) refused. */

struct churn_ids {
	int	cap;			/* Connections per client. */
	uint8_t	*acked[CHURN_CLIENTS];
	uint8_t	*seen[CHURN_CLIENTS];
};

struct churn_tally {
	int	done;		/* Echoed. */
	int	refused;	/* connect(2) refused. */
	int	reset;		/* Completed, then reset before the echo. */
	char	err[200];
};

static uint64_t churn_rng = 0x9e3779b97f4a7c15ull;

static uint32_t
churn_rand(uint32_t n)
{
	churn_rng ^= churn_rng << 13;
	churn_rng ^= churn_rng >> 7;
	churn_rng ^= churn_rng << 17;
	return ((uint32_t)(churn_rng >> 32) % n);
}

/*
 * One client connection carrying id, which the member that accepts it
 * echoes.  Reports only through t (see churn_client()).
 */
static void
churn_connect(const struct sockaddr_storage *ss, uint32_t id,
    struct churn_tally *t, uint8_t *acked)
{
	struct pollfd pfd;
	const struct linger lopt = { 1, 0 };
	socklen_t len;
	uint32_t echo;
	ssize_t n;
	int csd, err;

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
		pfd.fd = csd;
		pfd.events = POLLOUT;
		if (err == EINPROGRESS) {
			if (poll(&pfd, 1, 10000) != 1) {
				snprintf(t->err, sizeof(t->err), "connection "
				    "%#x neither completed nor refused in 10 s",
				    id);
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
		*acked = CHURN_REFUSED;
		goto out;
	}
	if (err == ECONNRESET) {
		t->reset++;
		*acked = CHURN_RESET;
		goto out;
	}
	if (err != 0) {
		snprintf(t->err, sizeof(t->err), "connect: %s", strerror(err));
		goto out;
	}
	if (send(csd, &id, sizeof(id), MSG_NOSIGNAL) != sizeof(id)) {
		if (errno == ECONNRESET || errno == EPIPE) {
			t->reset++;
			*acked = CHURN_RESET;
		} else
			snprintf(t->err, sizeof(t->err), "send: %s",
			    strerror(errno));
		goto out;
	}
	pfd.fd = csd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, 10000) != 1) {
		snprintf(t->err, sizeof(t->err), "connection %#x completed "
		    "but was neither accepted nor reset in 10 s", id);
		goto out;
	}
	n = recv(csd, &echo, sizeof(echo), MSG_WAITALL);
	if (n == sizeof(echo) && echo == id) {
		t->done++;
		*acked = CHURN_ECHOED;
	} else if (n == 0 || (n < 0 && errno == ECONNRESET)) {
		t->reset++;
		*acked = CHURN_RESET;
	} else
		snprintf(t->err, sizeof(t->err), "connection %#x: echo %zd "
		    "bytes, %#x", id, n, n == sizeof(echo) ? echo : 0);
out:
	close(csd);
}

/*
 * Client idx, pinned to cpu: a connection every CHURN_INTERVAL_US until
 * ms milliseconds have passed; its tally goes to fd.
 */
static void
churn_client(const struct sockaddr_storage *ss, struct churn_ids *ids,
    int idx, int cpu, long ms, int fd)
{
	struct churn_tally t;
	struct timespec end, next, now;
	cpuset_t mask;
	int seq;

	memset(&t, 0, sizeof(t));
	CPU_ZERO(&mask);
	CPU_SET(cpu, &mask);
	if (cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_PID, -1,
	    sizeof(mask), &mask) != 0)
		snprintf(t.err, sizeof(t.err), "pinning client %d to CPU %d: "
		    "%s", idx, cpu, strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &now);
	next = end = now;
	end.tv_sec += ms / 1000;
	end.tv_nsec += (ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	for (seq = 0; t.err[0] == '\0' && seq < ids->cap &&
	    lb_before(&now, &end); seq++) {
		churn_connect(ss, (uint32_t)idx << 24 | seq, &t,
		    &ids->acked[idx][seq]);
		next.tv_nsec += CHURN_INTERVAL_US * 1000L;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000L;
		}
		(void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
		    NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (lb_before(&next, &now))
			next = now;	/* Behind: no burst to catch up. */
	}
	(void)write(fd, &t, sizeof(t));
	_exit(0);
}

/* A member socket for the group at ss with tag (TAG_NONE: untagged). */
static int
churn_join(const struct sockaddr_storage *ss, int tag, bool early)
{
	int one, sd;

	sd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ATF_REQUIRE_MSG(sd >= 0, "socket: %s", strerror(errno));
	one = 1;
	ATF_REQUIRE(setsockopt(sd, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) == 0);
	if (early && tag != SO_REUSEPORT_LB_CPU_NONE)
		lb_setcpu(sd, tag);
	ATF_REQUIRE_MSG(bind(sd, (const struct sockaddr *)ss,
	    ss->ss_len) == 0, "bind: %s", strerror(errno));
	ATF_REQUIRE_MSG(listen(sd, 128) == 0, "listen: %s", strerror(errno));
	if (!early && tag != SO_REUSEPORT_LB_CPU_NONE)
		lb_setcpu(sd, tag);
	return (sd);
}

/*
 * Accept everything queued on a readable member, check each id and echo
 * it; returns how many connections were accepted.
 */
static int
churn_accept(int lsd, struct churn_ids *ids, int nclients)
{
	struct pollfd pfd;
	uint32_t id, seq;
	int n, sd, who;

	n = 0;
	while ((sd = accept4(lsd, NULL, NULL, 0)) >= 0) {
		n++;
		pfd.fd = sd;
		pfd.events = POLLIN;
		ATF_REQUIRE_MSG(poll(&pfd, 1, 10000) == 1,
		    "an accepted connection sent no id in 10 s");
		if (recv(sd, &id, sizeof(id), MSG_WAITALL) != sizeof(id)) {
			close(sd);	/* The client gave up: reset. */
			continue;
		}
		who = id >> 24;
		seq = id & 0xffffff;
		ATF_REQUIRE_MSG(who < nclients && (int)seq < ids->cap,
		    "accepted a connection with id %#x", id);
		ids->seen[who][seq]++;
		ATF_REQUIRE_MSG(ids->seen[who][seq] == 1,
		    "connection %#x accepted twice", id);
		(void)send(sd, &id, sizeof(id), MSG_NOSIGNAL);
		close(sd);
	}
	ATF_REQUIRE_MSG(errno == EAGAIN || errno == ECONNABORTED,
	    "accept: %s", strerror(errno));
	return (n);
}

static const char *const churn_fps[] = { "in_pcblb_scratch_alloc",
    "in_pcblb_map_alloc", "in_pcblb_learn_alloc" };

/*
 * Churn (issue 12, part 4): for churn_seconds, CHURN_CLIENTS clients
 * pinned to different CPUs connect at a steady rate while the group they
 * connect to changes every CHURN_OP_MS: members join (tagged with a CPU,
 * with -1, or not, before bind(2) or after listen(2)), leave, are
 * retagged, and the accepting process is pinned to a CPU (a pinned
 * accept on an untagged member captures its CPU) or unpinned; the group
 * grows to the limit of 256 members and shrinks back to one, over and
 * over.  Learning is on with 100 ms windows, loopback handshakes
 * counted.  If fpval is not NULL the three allocation fail points are
 * set to it.
 *
 * Asserted: every connection a client saw completed was either accepted
 * by exactly one member (which echoed its id) or reset (it was queued on
 * a member that left); no id is accepted twice; an id accepted without
 * its echo arriving was reset at its client; the members accepted as
 * many connections as the clients saw echoed plus those; no connection
 * hangs.  After the churn, while
 * nothing changes, no rebuild is retried.  Once every socket is closed,
 * the bytes and allocations of malloc type "pcb" (groups, maps and
 * learning state) are back at their values from before the churn.
 */
static void
churn_body(const atf_tc_t *tc, const char *fpval)
{
	static char buf[1 << 20];
	static int cpus[CPU_SETSIZE];
	static int sds[MAXMEMBERS];
	struct sockaddr_storage ss;
	struct churn_ids *ids;
	struct churn_tally sum, t;
	struct pollfd pfd[MAXMEMBERS + CHURN_CLIENTS];
	struct timespec lastop, now, t0;
	pid_t pids[CHURN_CLIENTS];
	int64_t b0, b1, a0, a1;
	uint64_t af0, lf0, rb0, rb1, rb2;
	size_t idsz;
	long secs;
	int accepted, c, fds[CHURN_CLIENTS], grow, i, j, left, maxn, n;
	int late, ncl, ncpu, op, ops, pinned, p[2], tag, wait;

	secs = atf_tc_get_config_var_as_long_wd(tc, "churn_seconds",
	    CHURN_SECONDS);
	ATF_REQUIRE_MSG(secs > 0 && secs <= 86400, "churn_seconds %ld", secs);
	ncpu = lb_cpus(cpus, CPU_SETSIZE);
	ncl = MIN(CHURN_CLIENTS, ncpu);
	knobs_save();
	/* Let frees deferred by an earlier case's closes finish first. */
	lb_malloc_use("pcb", &b0, &a0);
	for (wait = 0; wait < 40; wait++) {
		usleep(250000);
		lb_malloc_use("pcb", &b1, &a1);
		if (b1 == b0 && a1 == a0)
			break;
		b0 = b1;
		a0 = a1;
	}
	af0 = lb_counter(ALLOCFAIL);
	lf0 = lb_counter(LEARNFAIL);
	rb0 = lb_counter(REBUILDS);
	knob_set(LEARN, 1);
	knob_set(UNHASHED, 1);
	knob_set(WINDOW_MS, 100);
	for (i = 0; fpval != NULL && i < (int)nitems(churn_fps); i++)
		lb_fp_set(churn_fps[i], fpval);

	/* Room for every connection a client can make, and more. */
	ids = calloc(1, sizeof(*ids));
	ATF_REQUIRE(ids != NULL);
	ids->cap = secs * (1000000 / CHURN_INTERVAL_US) + 1000;
	ATF_REQUIRE(ids->cap < 1 << 24);
	idsz = (size_t)ids->cap * 2 * ncl;
	ids->acked[0] = mmap(NULL, idsz, PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANON, -1, 0);
	ATF_REQUIRE(ids->acked[0] != MAP_FAILED);
	for (c = 0; c < ncl; c++) {
		ids->acked[c] = ids->acked[0] + (size_t)ids->cap * 2 * c;
		ids->seen[c] = ids->acked[c] + ids->cap;
	}

	n = 0;
	lb_loopback_addr(AF_INET, &ss);
	sds[n++] = churn_join(&ss, SO_REUSEPORT_LB_CPU_NONE, false);
	lb_bound(sds[0], &ss);
	for (c = 0; c < ncl; c++) {
		ATF_REQUIRE(pipe(p) == 0);
		pids[c] = fork();
		ATF_REQUIRE(pids[c] >= 0);
		if (pids[c] == 0) {
			/*
			 * The first member must not stay open in a client:
			 * when the test closes it, it would stay in the group
			 * with nobody to accept its connections.
			 */
			close(sds[0]);
			close(p[0]);
			churn_client(&ss, ids, c, cpus[c * ncpu / ncl],
			    secs * 1000, p[1]);
		}
		close(p[1]);
		fds[c] = p[0];
	}

	memset(&sum, 0, sizeof(sum));
	accepted = maxn = ops = pinned = 0;
	grow = 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	lastop = t0;
	for (left = ncl; left > 0;) {
		for (i = 0; i < n; i++) {
			pfd[i].fd = sds[i];
			pfd[i].events = POLLIN;
			pfd[i].revents = 0;
		}
		for (c = 0; c < ncl; c++) {
			pfd[n + c].fd = fds[c];
			pfd[n + c].events = POLLIN;
			pfd[n + c].revents = 0;
		}
		ATF_REQUIRE(poll(pfd, n + ncl, CHURN_OP_MS) >= 0);
		for (i = 0; i < n; i++) {
			if ((pfd[i].revents & POLLIN) != 0)
				accepted += churn_accept(sds[i], ids, ncl);
		}
		for (c = 0; c < ncl; c++) {
			if (fds[c] < 0 || (pfd[n + c].revents &
			    (POLLIN | POLLHUP)) == 0)
				continue;
			ATF_REQUIRE_MSG(read(fds[c], &t, sizeof(t)) ==
			    sizeof(t), "client %d died without a report", c);
			ATF_REQUIRE(waitpid(pids[c], NULL, 0) == pids[c]);
			ATF_REQUIRE_MSG(t.err[0] == '\0', "client %d: %s", c,
			    t.err);
			sum.done += t.done;
			sum.refused += t.refused;
			sum.reset += t.reset;
			close(fds[c]);
			fds[c] = -1;
			left--;
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - lastop.tv_sec) * 1000 +
		    (now.tv_nsec - lastop.tv_nsec) / 1000000 < CHURN_OP_MS ||
		    left == 0)
			continue;
		lastop = now;
		ops++;
		op = churn_rand(10);
		if (op < 6) {
			/* Grow to 256 members, shrink to 1, and again. */
			if (grow && n == MAXMEMBERS)
				grow = 0;
			else if (!grow && n == 1)
				grow = 1;
			if (grow) {
				j = churn_rand(3);
				tag = j == 0 ? cpus[churn_rand(ncpu)] : j == 1 ?
				    SO_REUSEPORT_LB_CPU_HASH :
				    SO_REUSEPORT_LB_CPU_NONE;
				sds[n++] = churn_join(&ss, tag,
				    churn_rand(2) == 0);
				maxn = MAX(maxn, n);
			} else {
				/* What it had queued is reset. */
				j = churn_rand(n);
				ATF_REQUIRE(close(sds[j]) == 0);
				sds[j] = sds[--n];
			}
		} else if (op < 8) {
			j = churn_rand(3);
			lb_setcpu(sds[churn_rand(n)], j == 0 ?
			    cpus[churn_rand(ncpu)] : j == 1 ?
			    SO_REUSEPORT_LB_CPU_HASH :
			    SO_REUSEPORT_LB_CPU_NONE);
		} else {
			pinned = !pinned;
			pin(pinned ? cpus[churn_rand(ncpu)] : -1);
		}
	}
	pin(-1);

	if (fpval != NULL && strcmp(fpval, "100%return") == 0) {
		lb_view(&ss, buf, sizeof(buf));
		ATF_REQUIRE_MSG(buf[0] == '\0' || lb_field(buf, "map") == 0,
		    "a map with every allocation failing:\n%s", buf);
	}
	/*
	 * With allocations failing, a group stays dirty and is retried once
	 * a second; once they succeed again, and nothing changes, no
	 * rebuild may be retried.
	 */
	lb_fp_restore();
	for (i = 0; i < 500; i++) {
		lb_view(&ss, buf, sizeof(buf));
		if (buf[0] == '\0' || lb_field(buf, "dirty") == 0)
			break;
		usleep(10000);
	}
	rb1 = lb_counter(REBUILDS);
	usleep(500000);
	rb2 = lb_counter(REBUILDS);
	ATF_REQUIRE_MSG(rb2 == rb1, "%ju rebuilds while nothing changed",
	    (uintmax_t)(rb2 - rb1));

	/*
	 * Each connection a client saw echoed was accepted exactly once;
	 * none was accepted twice.  A member may accept a connection whose
	 * client was already reset: its handshake's last ACK met a member
	 * that was leaving (a reset, as in the base kernel) and a later
	 * segment of it completed the handshake on another member.  Such a
	 * connection was refused by nobody and must have been reset at the
	 * client.
	 */
	late = 0;
	for (c = 0; c < ncl; c++) {
		for (j = 0; j < ids->cap; j++) {
			ATF_REQUIRE_MSG(ids->seen[c][j] <= 1 &&
			    (ids->acked[c][j] != CHURN_ECHOED ||
			    ids->seen[c][j] == 1),
			    "connection %#x: client saw %d, accepted %d times",
			    c << 24 | j, ids->acked[c][j], ids->seen[c][j]);
			if (ids->seen[c][j] == 1 &&
			    ids->acked[c][j] != CHURN_ECHOED) {
				ATF_REQUIRE_MSG(ids->acked[c][j] ==
				    CHURN_RESET, "connection %#x accepted, "
				    "but the client saw %d", c << 24 | j,
				    ids->acked[c][j]);
				late++;
			}
		}
	}
	ATF_REQUIRE_MSG(accepted == sum.done + late, "%d accepted, the "
	    "clients saw %d echoed and %d reset after acceptance", accepted,
	    sum.done, late);
	ATF_REQUIRE_MSG(sum.done > 0, "no connection accepted");
	ATF_REQUIRE_MSG(maxn == MAXMEMBERS || secs < CHURN_SECONDS,
	    "the group never reached %d members (at most %d)", MAXMEMBERS,
	    maxn);

	for (i = 0; i < n; i++)
		ATF_REQUIRE(close(sds[i]) == 0);
	fprintf(stderr, "churn %s: %ld s, %d clients on %d CPUs, %d group "
	    "changes, up to %d members; connections: %d accepted and echoed, "
	    "%d reset (%d of them accepted later), %d refused; rebuilds %ju, "
	    "allocfail %ju, learnfail %ju\n", fpval != NULL ? fpval : "off",
	    secs, ncl, ncpu, ops, maxn, sum.done, sum.reset, late, sum.refused,
	    (uintmax_t)(lb_counter(REBUILDS) - rb0),
	    (uintmax_t)(lb_counter(ALLOCFAIL) - af0),
	    (uintmax_t)(lb_counter(LEARNFAIL) - lf0));
	if (fpval != NULL && strcmp(fpval, "100%return") == 0)
		ATF_REQUIRE_MSG(lb_counter(ALLOCFAIL) > af0 &&
		    lb_counter(LEARNFAIL) > lf0,
		    "allocations failing, but allocfail %ju and learnfail %ju",
		    (uintmax_t)(lb_counter(ALLOCFAIL) - af0),
		    (uintmax_t)(lb_counter(LEARNFAIL) - lf0));
	lb_fp_restore();
	knobs_restore();

	/* Groups, maps and learning state are freed after an epoch. */
	for (wait = 0; wait < 40; wait++) {
		lb_malloc_use("pcb", &b1, &a1);
		if (b1 == b0 && a1 == a0)
			break;
		usleep(250000);
	}
	fprintf(stderr, "churn %s: malloc type pcb before %jd bytes in %jd "
	    "allocations, after %jd bytes in %jd\n",
	    fpval != NULL ? fpval : "off", (intmax_t)b0, (intmax_t)a0,
	    (intmax_t)b1, (intmax_t)a1);
	ATF_REQUIRE_MSG(b1 == b0 && a1 == a0, "malloc type pcb: %jd bytes in "
	    "%jd allocations before, %jd in %jd 10 s after every socket "
	    "closed", (intmax_t)b0, (intmax_t)a0, (intmax_t)b1,
	    (intmax_t)a1);
	munmap(ids->acked[0], idsz);
	free(ids);
}

ATF_TC_WITH_CLEANUP(churn);
ATF_TC_HEAD(churn, tc)
{
	learn_head(tc);
	atf_tc_set_md_var(tc, "timeout", "3600");
}
ATF_TC_CLEANUP(churn, tc)
{
	knobs_restore();
}
ATF_TC_BODY(churn, tc)
{
	churn_body(tc, NULL);
}

ATF_TC_WITH_CLEANUP(churn_fail50);
ATF_TC_HEAD(churn_fail50, tc)
{
	learn_head(tc);
	atf_tc_set_md_var(tc, "timeout", "3600");
}
ATF_TC_CLEANUP(churn_fail50, tc)
{
	lb_fp_restore();
	knobs_restore();
}
ATF_TC_BODY(churn_fail50, tc)
{
	churn_body(tc, "50%return");
}

ATF_TC_WITH_CLEANUP(churn_fail100);
ATF_TC_HEAD(churn_fail100, tc)
{
	learn_head(tc);
	atf_tc_set_md_var(tc, "timeout", "3600");
}
ATF_TC_CLEANUP(churn_fail100, tc)
{
	lb_fp_restore();
	knobs_restore();
}
ATF_TC_BODY(churn_fail100, tc)
{
	churn_body(tc, "100%return");
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
	ATF_TP_ADD_TC(tp, learned_map);
	ATF_TP_ADD_TC(tp, scratch_allocfail);
	ATF_TP_ADD_TC(tp, map_allocfail);
	ATF_TP_ADD_TC(tp, learn_allocfail);
	ATF_TP_ADD_TC(tp, churn);
	ATF_TP_ADD_TC(tp, churn_fail50);
	ATF_TP_ADD_TC(tp, churn_fail100);

	return (atf_no_error());
}
