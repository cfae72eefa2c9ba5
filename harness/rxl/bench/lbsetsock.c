/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * lbsetsock: issue 10's setsockopt target, run inside the guest.
 *
 * A load-balancing group of N listeners (SO_REUSEPORT_LB on
 * 127.0.0.1:port), member i tagged with SO_REUSEPORT_LB_CPU = i % ncpu.
 * A child process then sets every member's tag again, unchanged, C times
 * in all (member k % N at call k), while the parent times a bystander:
 * connect(2) to a plain listener on another port plus the accept(2) that
 * returns it, over loopback.  The same bystander is timed before (idle)
 * and after the loop.  The series' rebuild counter
 * (net.inet.tcp.reuseport_lb.rebuilds) is read before and after the loop:
 * an unchanged tag must cause none.
 *
 * Output, sentinel lines on stdout (the guest's console):
 *
 *   ==RXL== LBSET GROUP members=<n> port=<p> ncpu=<c> tagerr=<n>
 *   ==RXL== LBSET SYSCTL <name> before=<v> after=<v>
 *   ==RXL== LBSET LAT <phase> n=<k> p50_ns=<ns> p90_ns=<ns> p99_ns=<ns>
 *   ==RXL== LBSET LOOP calls=<c> errors=<n> elapsed_ns=<ns>
 *   ==RXL== LBSET DONE
 *
 * The bystander and the loop are pinned to different CPUs (-b, -l), so
 * what the loop costs the bystander is lock and cache-line sharing, not
 * the loop's CPU time.  Every wait is bounded; errors go to stderr and the
 * exit status.
 */

#include <sys/types.h>
#include <sys/cpuset.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <arpa/inet.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_REUSEPORT_LB_CPU
#define	SO_REUSEPORT_LB_CPU	0x1030
#endif

#define	MARK		"==RXL== LBSET"
#define	MAXMEMBERS	256	/* INPCBLBGROUP_SIZMAX, sys/netinet/in_pcb.h */
#define	MAXLAT		200000

static const char *counters[] = {
	"net.inet.tcp.reuseport_lb.rebuilds",
	"net.inet.tcp.reuseport_lb.published",
	"net.inet.tcp.reuseport_lb.unchanged",
	"net.inet.tcp.reuseport_lb.noop",
};
#define	NCOUNTERS	(sizeof(counters) / sizeof(counters[0]))

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec);
}

static int
read_counter(const char *name, uint64_t *v)
{
	size_t len;

	len = sizeof(*v);
	*v = 0;
	return (sysctlbyname(name, v, &len, NULL, 0));
}

static void
pin(int cpu)
{
	cpuset_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_PID, -1,
	    sizeof(set), &set) != 0)
		fprintf(stderr, "lbsetsock: pin to CPU %d: %s\n", cpu,
		    strerror(errno));
}

static int
listener(in_port_t port, int lb)
{
	struct sockaddr_in sin;
	int one, s;

	s = socket(AF_INET, SOCK_STREAM, 0);
	if (s < 0)
		return (-1);
	one = 1;
	if (lb && setsockopt(s, SOL_SOCKET, SO_REUSEPORT_LB, &one,
	    sizeof(one)) != 0)
		goto fail;
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		goto fail;
	memset(&sin, 0, sizeof(sin));
	sin.sin_len = sizeof(sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(s, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    listen(s, 128) != 0)
		goto fail;
	return (s);
fail:
	close(s);
	return (-1);
}

/* One connect(2) to the bystander plus its accept(2), in ns; 0 on error. */
static uint64_t
bystander_once(int ls, in_port_t port)
{
	struct sockaddr_in sin;
	struct linger lg;
	uint64_t t0, t1;
	int a, c;

	memset(&sin, 0, sizeof(sin));
	sin.sin_len = sizeof(sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		return (0);
	/* Close with a RST, so no TIME_WAIT piles up over the rounds. */
	lg.l_onoff = 1;
	lg.l_linger = 0;
	(void)setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	t0 = now_ns();
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(c);
		return (0);
	}
	a = accept(ls, NULL, NULL);
	t1 = now_ns();
	close(c);
	if (a < 0)
		return (0);
	close(a);
	return (t1 - t0);
}

static int
cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

static void
report(const char *phase, uint64_t *lat, int n)
{
	if (n == 0) {
		printf("%s LAT %s n=0\n", MARK, phase);
		return;
	}
	qsort(lat, n, sizeof(lat[0]), cmp64);
	printf("%s LAT %s n=%d p50_ns=%ju p90_ns=%ju p99_ns=%ju\n", MARK,
	    phase, n, (uintmax_t)lat[n / 2], (uintmax_t)lat[n * 9 / 10],
	    (uintmax_t)lat[n * 99 / 100]);
}

/*
 * A phase with nothing else running: rounds bystander connections, and
 * the latencies of those that completed reported as phase.
 */
static void
quiet_phase(const char *phase, int ls, in_port_t port, uint64_t *lat,
    int rounds)
{
	int i, k;

	for (k = 0; k < rounds; k++)
		lat[k] = bystander_once(ls, port);
	for (i = k = 0; i < rounds; i++)
		if (lat[i] != 0)
			lat[k++] = lat[i];
	report(phase, lat, k);
}

static void
usage(void)
{
	fprintf(stderr, "usage: lbsetsock [-n members] [-c calls] [-r rounds] "
	    "[-p port] [-b bystander_cpu] [-l loop_cpu]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static uint64_t lat[MAXLAT];
	static int fds[MAXMEMBERS];
	uint64_t before[NCOUNTERS], after[NCOUNTERS], t0, t1, deadline;
	long calls, errs;
	int ch, i, n, rounds, ncpu, tagerr, bcpu, lcpu, bs, status, k;
	int pfd[2];
	in_port_t port;
	pid_t pid;
	size_t len;

	n = MAXMEMBERS;
	calls = 1000000;
	rounds = 2000;
	port = 9100;
	bcpu = 0;
	lcpu = 1;
	while ((ch = getopt(argc, argv, "n:c:r:p:b:l:")) != -1) {
		switch (ch) {
		case 'n': n = atoi(optarg); break;
		case 'c': calls = atol(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'p': port = (in_port_t)atoi(optarg); break;
		case 'b': bcpu = atoi(optarg); break;
		case 'l': lcpu = atoi(optarg); break;
		default: usage();
		}
	}
	if (n < 1 || n > MAXMEMBERS || calls < 1 || rounds < 1 ||
	    rounds > MAXLAT)
		usage();
	len = sizeof(ncpu);
	if (sysctlbyname("hw.ncpu", &ncpu, &len, NULL, 0) != 0 || ncpu < 1)
		ncpu = 1;

	tagerr = 0;
	for (i = 0; i < n; i++) {
		int tag = i % ncpu;

		fds[i] = listener(port, 1);
		if (fds[i] < 0) {
			fprintf(stderr, "lbsetsock: member %d: %s\n", i,
			    strerror(errno));
			return (1);
		}
		if (setsockopt(fds[i], SOL_SOCKET, SO_REUSEPORT_LB_CPU, &tag,
		    sizeof(tag)) != 0)
			tagerr++;
	}
	bs = listener(port + 1, 0);
	if (bs < 0) {
		fprintf(stderr, "lbsetsock: bystander: %s\n", strerror(errno));
		return (1);
	}
	printf("%s GROUP members=%d port=%u ncpu=%d tagerr=%d\n", MARK, n,
	    port, ncpu, tagerr);
	fflush(stdout);
	/* Let the rebuilds the tagging queued run (remap_min is 10 ms). */
	sleep(2);
	pin(bcpu);

	quiet_phase("idle", bs, port + 1, lat, rounds);

	for (i = 0; i < (int)NCOUNTERS; i++)
		read_counter(counters[i], &before[i]);
	if (pipe(pfd) != 0)
		return (1);
	t0 = now_ns();
	pid = fork();
	if (pid < 0)
		return (1);
	if (pid == 0) {
		long c;
		int e = 0;

		close(pfd[0]);
		pin(lcpu);
		for (c = 0; c < calls; c++) {
			int tag = (int)(c % n) % ncpu;

			if (setsockopt(fds[c % n], SOL_SOCKET,
			    SO_REUSEPORT_LB_CPU, &tag, sizeof(tag)) != 0)
				e++;
		}
		(void)write(pfd[1], &e, sizeof(e));
		_exit(0);
	}
	close(pfd[1]);
	/* Time the bystander for as long as the loop runs (at most 30 min). */
	deadline = t0 + 1800ULL * 1000000000;
	k = 0;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		uint64_t d;

		if (now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		d = bystander_once(bs, port + 1);
		if (d != 0 && k < MAXLAT)
			lat[k++] = d;
	}
	t1 = now_ns();
	errs = -1;
	{
		int e;

		if (read(pfd[0], &e, sizeof(e)) == sizeof(e))
			errs = e;
	}
	for (i = 0; i < (int)NCOUNTERS; i++)
		read_counter(counters[i], &after[i]);
	report("loop", lat, k);
	printf("%s LOOP calls=%ld errors=%ld elapsed_ns=%ju\n", MARK, calls,
	    errs, (uintmax_t)(t1 - t0));
	for (i = 0; i < (int)NCOUNTERS; i++)
		printf("%s SYSCTL %s before=%ju after=%ju\n", MARK, counters[i],
		    (uintmax_t)before[i], (uintmax_t)after[i]);

	quiet_phase("after", bs, port + 1, lat, rounds);
	printf("%s DONE\n", MARK);
	return (0);
}
