/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * lbsetsock: the setsockopt cost target, run inside the guest.
 *
 * A load-balancing group of N listeners (SO_REUSEPORT_LB on
 * 127.0.0.1:port), member i tagged with SO_REUSEPORT_LB_CPU = i % ncpu.
 * A child process then sets every member's tag again, unchanged, C times
 * in all (member k % N at call k), while the parent times a bystander:
 * connect(2) to a plain listener on another port plus the accept(2) that
 * returns it, over loopback.  The series' rebuild counter
 * (net.inet.tcp.reuseport_lb.rebuilds) is read before and after: an
 * unchanged tag must cause none.
 *
 * The bystander is timed in three conditions: idle, beside the loop, and
 * beside a control loop that makes as many setsockopt(2) calls of another
 * option (SO_SNDBUF, set to the value it has: the same syscall path and a
 * per-socket lock, but nothing of the series).  In a TCG guest every busy
 * vCPU takes host CPU from the others, so the control says how much of the
 * loop's effect any syscall loop has.  The run is cut into P blocks, each
 * timing the three conditions once (in the order idle, control, loop, then
 * reversed in the next block), so a drift of the host's load over the run
 * falls on all three alike.
 *
 * Output, sentinel lines on stdout (the guest's console):
 *
 *   ==RXL== LBSET GROUP members=<n> port=<p> ncpu=<c> tagerr=<n> blocks=<P>
 *   ==RXL== LBSET SYSCTL <name> before=<v> after=<v>
 *   ==RXL== LBSET LAT <idle|control|loop> n=<k> p50_ns=<ns> p90_ns=<ns>
 *       p99_ns=<ns>
 *   ==RXL== LBSET LOOP calls=<c> errors=<n> elapsed_ns=<ns>
 *   ==RXL== LBSET CONTROL calls=<c> errors=<n> elapsed_ns=<ns>
 *   ==RXL== LBSET DONE
 *
 * The bystander and the loops are pinned to different CPUs (-b, -l), so
 * on real hardware what a loop costs the bystander is lock and cache-line
 * sharing, not the loop's CPU time (in TCG, see the control).  Every wait
 * is bounded; errors go to stderr and the exit status.
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

/* Latencies of one condition, over all blocks. */
struct pool {
	const char	*name;
	uint64_t	*lat;
	int		 n;
	long		 calls;		/* setsockopt calls beside it */
	long		 errors;
	uint64_t	 elapsed;	/* ns the loop ran */
};

static void
pool_add(struct pool *p, uint64_t d)
{
	if (d != 0 && p->n < MAXLAT)
		p->lat[p->n++] = d;
}

/*
 * A loop of calls setsockopt(2) calls on the members, run in a child
 * pinned to lcpu: the tag (SO_REUSEPORT_LB_CPU, unchanged) when lb, else
 * SO_SNDBUF set to sndbuf, its value.  The parent times the bystander
 * until the child exits (at most 30 min) into p.
 */
static int
loop_slice(struct pool *p, int lb, const int *fds, int n, int ncpu,
    long calls, int sndbuf, int lcpu, int bs, in_port_t bport)
{
	uint64_t t0, deadline;
	int pfd[2], e, status;
	pid_t pid;

	if (pipe(pfd) != 0)
		return (-1);
	t0 = now_ns();
	pid = fork();
	if (pid < 0)
		return (-1);
	if (pid == 0) {
		long c;

		close(pfd[0]);
		pin(lcpu);
		e = 0;
		for (c = 0; c < calls; c++) {
			int tag = (int)(c % n) % ncpu;

			if (lb ? setsockopt(fds[c % n], SOL_SOCKET,
			    SO_REUSEPORT_LB_CPU, &tag, sizeof(tag)) != 0 :
			    setsockopt(fds[c % n], SOL_SOCKET, SO_SNDBUF,
			    &sndbuf, sizeof(sndbuf)) != 0)
				e++;
		}
		(void)write(pfd[1], &e, sizeof(e));
		_exit(0);
	}
	close(pfd[1]);
	deadline = t0 + 1800ULL * 1000000000;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (now_ns() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		pool_add(p, bystander_once(bs, bport));
	}
	p->elapsed += now_ns() - t0;
	p->calls += calls;
	if (read(pfd[0], &e, sizeof(e)) == sizeof(e))
		p->errors += e;
	else
		p->errors++;
	close(pfd[0]);
	return (0);
}

static void
usage(void)
{
	fprintf(stderr, "usage: lbsetsock [-n members] [-c calls] [-r rounds] "
	    "[-P blocks] [-p port] [-b bystander_cpu] [-l loop_cpu]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static uint64_t lat[3][MAXLAT];
	static int fds[MAXMEMBERS];
	struct pool pools[3] = {
		{ "idle", lat[0], 0, 0, 0, 0 },
		{ "control", lat[1], 0, 0, 0, 0 },
		{ "loop", lat[2], 0, 0, 0, 0 },
	};
	uint64_t before[NCOUNTERS], after[NCOUNTERS];
	long calls;
	int b, blocks, ch, i, j, k, n, rounds, ncpu, tagerr, bcpu, lcpu, bs;
	int sndbuf;
	in_port_t port;
	socklen_t slen;
	size_t len;

	n = MAXMEMBERS;
	calls = 1000000;
	rounds = 2000;
	blocks = 10;
	port = 9100;
	bcpu = 0;
	lcpu = 1;
	while ((ch = getopt(argc, argv, "n:c:r:P:p:b:l:")) != -1) {
		switch (ch) {
		case 'n': n = atoi(optarg); break;
		case 'c': calls = atol(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'P': blocks = atoi(optarg); break;
		case 'p': port = (in_port_t)atoi(optarg); break;
		case 'b': bcpu = atoi(optarg); break;
		case 'l': lcpu = atoi(optarg); break;
		default: usage();
		}
	}
	if (n < 1 || n > MAXMEMBERS || calls < 1 || rounds < 1 ||
	    rounds > MAXLAT || blocks < 1 || blocks > rounds ||
	    calls < blocks)
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
	slen = sizeof(sndbuf);
	if (getsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &slen) != 0) {
		fprintf(stderr, "lbsetsock: SO_SNDBUF: %s\n", strerror(errno));
		return (1);
	}
	bs = listener(port + 1, 0);
	if (bs < 0) {
		fprintf(stderr, "lbsetsock: bystander: %s\n", strerror(errno));
		return (1);
	}
	printf("%s GROUP members=%d port=%u ncpu=%d tagerr=%d blocks=%d\n",
	    MARK, n, port, ncpu, tagerr, blocks);
	fflush(stdout);
	/* Let the rebuilds the tagging queued run (remap_min is 10 ms). */
	sleep(2);
	pin(bcpu);

	for (i = 0; i < (int)NCOUNTERS; i++)
		read_counter(counters[i], &before[i]);
	for (b = 0; b < blocks; b++) {
		for (j = 0; j < 3; j++) {
			/* idle, control, loop; reversed in odd blocks. */
			k = (b % 2 == 0) ? j : 2 - j;
			if (k == 0) {
				for (i = 0; i < rounds / blocks +
				    (b < rounds % blocks); i++)
					pool_add(&pools[0],
					    bystander_once(bs, port + 1));
			} else if (loop_slice(&pools[k], k == 2, fds, n, ncpu,
			    calls / blocks + (b < calls % blocks), sndbuf, lcpu,
			    bs, port + 1) != 0) {
				fprintf(stderr, "lbsetsock: fork: %s\n",
				    strerror(errno));
				return (1);
			}
		}
	}
	for (i = 0; i < (int)NCOUNTERS; i++)
		read_counter(counters[i], &after[i]);
	for (k = 0; k < 3; k++)
		report(pools[k].name, pools[k].lat, pools[k].n);
	printf("%s LOOP calls=%ld errors=%ld elapsed_ns=%ju\n", MARK,
	    pools[2].calls, pools[2].errors, (uintmax_t)pools[2].elapsed);
	printf("%s CONTROL calls=%ld errors=%ld elapsed_ns=%ju\n", MARK,
	    pools[1].calls, pools[1].errors, (uintmax_t)pools[1].elapsed);
	for (i = 0; i < (int)NCOUNTERS; i++)
		printf("%s SYSCTL %s before=%ju after=%ju\n", MARK, counters[i],
		    (uintmax_t)before[i], (uintmax_t)after[i]);
	printf("%s DONE\n", MARK);
	return (0);
}
