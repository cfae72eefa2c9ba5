/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * lbsetsock: the tagging cost targets of the series, run inside the guest.
 *
 * First, creation: one process makes a load-balancing group of N
 * listeners on 127.0.0.1:port (socket, SO_REUSEPORT_LB, the tag
 * TCP_REUSPORT_LB_CPU = i % ncpu unless -u, bind, listen), K times over,
 * closing the group between repetitions.  It reports the median time of
 * one group's creation and the voluntary context switches the process
 * made meanwhile (getrusage ru_nvcsw: a syscall that slept shows there).
 * After each creation it also times the group's first connection over
 * loopback, connect(2) to the accept(2) that returns it (first_ns): the
 * series deals a changed group's map at that accept(2), so the creation
 * alone would leave the deal out.  A pristine kernel, untagged (-u),
 * gives the baseline.  With -s (untagged only) each member makes, where
 * the tag would be, one setsockopt(TCP_NODELAY) instead: an IPPROTO_TCP
 * option on the same path (tcp_ctloutput under the inpcb lock) with
 * nothing of the series, so that a pristine run with -s against one
 * without gives what the one more syscall per member costs by itself.
 *
 * Then, with -c C > 0, a child process sets member tags C times in all
 * (member k % N at call k), as an unprivileged user (-U uid, default
 * 65534), while the parent times a bystander: connect(2) to a plain
 * listener on another port plus the accept(2) that returns it, over
 * loopback.  Without -a every call sets the tag the member has (no
 * change: the kernel must not rebuild); with -a each call changes it,
 * member k alternating between k % ncpu and (k + 1) % ncpu, so every
 * call changes the group's deal inputs (the series drops the map then,
 * and deals it at the group's next accept(2)).  The group's rebuild
 * count (the `rebuilds` of its line in net.inet.tcp.reuseport_lb.groups,
 * read by the parent, which is root) is read before and after, where the
 * view has one (-1 where it does not).
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
 *   ==RXL== LBSET CREATE members=<n> tagged=<0|1> reps=<k> p50_ns=<ns>
 *       min_ns=<ns> nvcsw=<n> tagerr=<n> first_p50_ns=<ns> total_p50_ns=<ns>
 *       control=<0|1>
 *   ==RXL== LBSET GROUP members=<n> port=<p> ncpu=<c> tagerr=<n>
 *       blocks=<P> change=<0|1> uid=<uid> accept=<0|1>
 *   ==RXL== LBSET REBUILDS before=<r> after=<r>   (-1 without the count)
 *   ==RXL== LBSET LAT <idle|control|loop> n=<k> p50_ns=<ns> p90_ns=<ns>
 *       p99_ns=<ns>
 *   ==RXL== LBSET LOOP calls=<c> errors=<n> elapsed_ns=<ns>
 *       [accepted=<k>]                           (with -A)
 *   ==RXL== LBSET CONTROL calls=<c> errors=<n> elapsed_ns=<ns>
 *       [accepted=<k>]                           (with -A)
 *   ==RXL== LBSET DEALS checks=<k> marked=<m> dealt=<d> errors=<n>
 *                                                (with -A)
 *   ==RXL== LBSET DONE
 *
 * With -A (only with -c), each call of the loop and of the control is
 * followed by one connection to the group over loopback: the child
 * connects to 127.0.0.1:port, polls the member fds it holds (at most
 * 5 s), accepts the connection from the member that has it, and closes
 * both (the connecting end with a RST).  With -a every such accept(2)
 * deals the group's map under the VNET's hash lock (the tag change
 * marked the group), so the loop is "change a tag, connect, accept", the
 * worst an unprivileged member owner can make; without -a the tags stay
 * and the accepts deal nothing.  The control makes the same connections,
 * so loop and control differ only by the tag call and the deal it causes.
 * A failed connect(2), a wait that ends without a connection, or a failed
 * accept(2) counts as an error of its loop; the LOOP and CONTROL lines
 * then also give the connections accepted.  After the blocks, the parent
 * (root) checks the deals in the groups view, untimed: DEALCHECKS more
 * calls of the loop, each followed by the group's `deal` flag of the
 * view, one connection as above, and the flag again.  marked counts the
 * checks whose flag was 1 after the call, dealt those whose flag then
 * went to 0 with the accept(2) (-1 for both where the view has no flag);
 * with -a both should be DEALCHECKS, without it 0.
 *
 * The bystander and the loops are pinned to different CPUs (-b, -l), so
 * on real hardware what a loop costs the bystander is lock and cache-line
 * sharing, not the loop's CPU time (in TCG, see the control).  Every wait
 * is bounded; errors go to stderr and the exit status.
 */

#include <sys/types.h>
#include <sys/cpuset.h>
#include <sys/poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/sysctl.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The series' option (commit 3, netinet/tcp.h), for a world without it. */
#ifndef TCP_REUSPORT_LB_CPU
#define	TCP_REUSPORT_LB_CPU	1027
#endif

#define	MARK		"==RXL== LBSET"
#define	MAXMEMBERS	256	/* INPCBLBGROUP_SIZMAX, sys/netinet/in_pcb_var.h */
#define	MAXLAT		200000
#define	MAXREPS		1000
#define	GROUPS		"net.inet.tcp.reuseport_lb.groups"
#define	GVIEW		(1 << 20)
#define	DEALCHECKS	16	/* -A: deals checked in the view after the loop */
#define	CONNWAIT_MS	5000	/* -A: the longest wait for a loop's connection */

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec);
}

/*
 * The number after key (" rebuilds ", " deal ") on the line of the group
 * on port in the groups view ("group port <p> af inet members <n> map <s>
 * rebuilds <r> ...", the series': "... map <s> deal <0|1>"); -1 without
 * the view, the group or the key.
 */
static long
group_field(in_port_t port, const char *key)
{
	static char view[GVIEW];
	char *line, *next, *r;
	size_t len;
	unsigned p;

	len = sizeof(view) - 1;
	if (sysctlbyname(GROUPS, view, &len, NULL, 0) != 0)
		return (-1);
	view[len] = '\0';
	for (line = view; line != NULL && *line != '\0'; line = next) {
		next = strchr(line, '\n');
		if (next != NULL)
			*next++ = '\0';
		if (sscanf(line, "group port %u ", &p) == 1 && p == port &&
		    (r = strstr(line, key)) != NULL)
			return (strtol(r + strlen(key), NULL, 10));
	}
	return (-1);
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

/*
 * A listener on 127.0.0.1:port, in the port's load-balancing group when
 * lb; tagged with *tag unless tag is NULL (a failed tag counts in
 * *tagerr, the listener is made anyway).
 */
static int
listener(in_port_t port, int lb, const int *tag, int control, int *tagerr)
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
	if (tag != NULL && setsockopt(s, IPPROTO_TCP, TCP_REUSPORT_LB_CPU,
	    tag, sizeof(*tag)) != 0)
		(*tagerr)++;
	if (control && setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one,
	    sizeof(one)) != 0)
		(*tagerr)++;
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

/*
 * A socket connected to 127.0.0.1:port, closing with a RST (so no
 * TIME_WAIT piles up over the rounds), and in *t0 the time just before
 * connect(2); -1 on error.
 */
static int
connect_rst(in_port_t port, uint64_t *t0)
{
	struct sockaddr_in sin;
	struct linger lg;
	int c;

	memset(&sin, 0, sizeof(sin));
	sin.sin_len = sizeof(sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		return (-1);
	lg.l_onoff = 1;
	lg.l_linger = 0;
	(void)setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	*t0 = now_ns();
	if (connect(c, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(c);
		return (-1);
	}
	return (c);
}

/*
 * The end of a timed connection: the time since t0 in ns (taken before the
 * closes), or 0 when the accept(2) gave no socket a; closes c and a.
 */
static uint64_t
conn_done(int c, int a, uint64_t t0)
{
	uint64_t t1;

	t1 = now_ns();
	close(c);
	if (a < 0)
		return (0);
	close(a);
	return (t1 - t0);
}

/* One connect(2) to the bystander plus its accept(2), in ns; 0 on error. */
static uint64_t
bystander_once(int ls, in_port_t port)
{
	uint64_t t0;
	int c;

	if ((c = connect_rst(port, &t0)) < 0)
		return (0);
	return (conn_done(c, accept(ls, NULL, NULL), t0));
}

/*
 * One connection to the group fds[0..n-1] on port (its first after a
 * creation, or a loop's with -A): connect(2) and the accept(2), on
 * whichever member the kernel selected, in ns; 0 on error or after
 * wait_ms.
 */
static uint64_t
group_conn(const int *fds, int n, in_port_t port, int wait_ms)
{
	struct pollfd pfd[MAXMEMBERS];
	uint64_t t0;
	int a, c, i;

	if ((c = connect_rst(port, &t0)) < 0)
		return (0);
	for (i = 0; i < n; i++) {
		pfd[i].fd = fds[i];
		pfd[i].events = POLLIN;
		pfd[i].revents = 0;
	}
	a = -1;
	if (poll(pfd, n, wait_ms) > 0)
		for (i = 0; i < n && a < 0; i++)
			if (pfd[i].revents & POLLIN)
				a = accept(fds[i], NULL, NULL);
	return (conn_done(c, a, t0));
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
	long		 accepted;	/* -A: connections accepted */
	uint64_t	 elapsed;	/* ns the loop ran */
};

static void
pool_add(struct pool *p, uint64_t d)
{
	if (d != 0 && p->n < MAXLAT)
		p->lat[p->n++] = d;
}

/* What a loop does: which members, which option, as whom. */
struct loop {
	const int	*fds;
	int		 n;
	int		 ncpu;
	int		 change;	/* -a: alternate each member's tag */
	int		 sndbuf;	/* the control's SO_SNDBUF value */
	int		 lcpu;
	uid_t		 uid;		/* the loop runs unprivileged */
	int		 accept;	/* -A: a connection after each call */
	in_port_t	 port;		/* the group's */
};

/* The tag member c % n gets at call c. */
static int
loop_tag(const struct loop *lp, long c)
{
	int k;

	k = (int)(c % lp->n);
	if (lp->change && (c / lp->n) % 2 == 0)
		return ((k + 1) % lp->ncpu);
	return (k % lp->ncpu);
}

/*
 * A loop of calls setsockopt(2) calls on the members, run in a child
 * pinned to lp->lcpu as lp->uid: the tag (TCP_REUSPORT_LB_CPU) when lb,
 * else SO_SNDBUF set to its value; with lp->accept each call is followed
 * by one connection to the group (group_conn()).  The parent times the
 * bystander until the child exits (at most 30 min) into p.
 */
static int
loop_slice(struct pool *p, int lb, const struct loop *lp, long first,
    long calls, int bs, in_port_t bport)
{
	uint64_t t0, deadline;
	int pfd[2], e, status, res[2];
	pid_t pid;

	if (pipe(pfd) != 0)
		return (-1);
	t0 = now_ns();
	pid = fork();
	if (pid < 0)
		return (-1);
	if (pid == 0) {
		long c;
		int acc, tag;

		close(pfd[0]);
		pin(lp->lcpu);
		e = acc = 0;
		if (setgid(lp->uid) != 0 || setuid(lp->uid) != 0)
			e = -1;
		for (c = first; e >= 0 && c < first + calls; c++) {
			tag = loop_tag(lp, c);
			if (lb ? setsockopt(lp->fds[c % lp->n], IPPROTO_TCP,
			    TCP_REUSPORT_LB_CPU, &tag, sizeof(tag)) != 0 :
			    setsockopt(lp->fds[c % lp->n], SOL_SOCKET,
			    SO_SNDBUF, &lp->sndbuf, sizeof(lp->sndbuf)) != 0)
				e++;
			if (!lp->accept)
				continue;
			if (group_conn(lp->fds, lp->n, lp->port,
			    CONNWAIT_MS) != 0)
				acc++;
			else
				e++;
		}
		if (e < 0)
			e = (int)calls;
		res[0] = e;
		res[1] = acc;
		(void)write(pfd[1], res, sizeof(res));
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
	if (read(pfd[0], res, sizeof(res)) == sizeof(res)) {
		p->errors += res[0];
		p->accepted += res[1];
	} else
		p->errors++;
	close(pfd[0]);
	return (0);
}

/*
 * With -A, after the blocks (root, untimed): DEALCHECKS more calls of the
 * loop from call first on, each followed by the group's deal flag in the
 * view, one connection to the group, and the flag again; prints the
 * DEALS line (-1 for marked and dealt where the view has no flag).
 */
static void
deal_check(const struct loop *lp, long first)
{
	long c, d0, d1;
	int dealt, err, marked, noview, tag;

	dealt = err = marked = noview = 0;
	for (c = first; c < first + DEALCHECKS; c++) {
		tag = loop_tag(lp, c);
		if (setsockopt(lp->fds[c % lp->n], IPPROTO_TCP,
		    TCP_REUSPORT_LB_CPU, &tag, sizeof(tag)) != 0)
			err++;
		d0 = group_field(lp->port, " deal ");
		if (group_conn(lp->fds, lp->n, lp->port, CONNWAIT_MS) == 0)
			err++;
		d1 = group_field(lp->port, " deal ");
		if (d0 < 0 || d1 < 0)
			noview = 1;
		marked += d0 == 1;
		dealt += d0 == 1 && d1 == 0;
	}
	if (noview)
		marked = dealt = -1;
	printf("%s DEALS checks=%d marked=%d dealt=%d errors=%d\n", MARK,
	    DEALCHECKS, marked, dealt, err);
}

/*
 * Make the group: n listeners on port, tagged i % ncpu unless untagged.
 * Returns 0 and the time it took in *ns, or -1.
 */
static int
make_group(int *fds, int n, in_port_t port, int ncpu, int untagged,
    int control, int *tagerr, uint64_t *ns)
{
	uint64_t t0;
	int i, tag;

	*tagerr = 0;
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		tag = i % ncpu;
		fds[i] = listener(port, 1, untagged ? NULL : &tag, control,
		    tagerr);
		if (fds[i] < 0) {
			fprintf(stderr, "lbsetsock: member %d: %s\n", i,
			    strerror(errno));
			while (i-- > 0)
				close(fds[i]);
			return (-1);
		}
	}
	*ns = now_ns() - t0;
	return (0);
}

static void
usage(void)
{
	fprintf(stderr, "usage: lbsetsock [-Aasu] [-n members] [-k reps] "
	    "[-c calls] [-r rounds] [-P blocks] [-p port] [-b bystander_cpu] "
	    "[-l loop_cpu] [-U uid]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static uint64_t lat[3][MAXLAT];
	static uint64_t made[MAXREPS], firsts[MAXREPS], totals[MAXREPS];
	static int fds[MAXMEMBERS];
	struct pool pools[3] = {
		{ "idle", lat[0], 0, 0, 0, 0, 0 },
		{ "control", lat[1], 0, 0, 0, 0, 0 },
		{ "loop", lat[2], 0, 0, 0, 0, 0 },
	};
	struct loop lp;
	struct rusage ru0, ru1;
	long calls, done, before, after, nvcsw, slice;
	int b, blocks, ch, i, j, k, n, reps, rounds, ncpu, tagerr, bcpu, bs;
	int control, untagged;
	in_port_t port;
	socklen_t slen;
	size_t len;

	memset(&lp, 0, sizeof(lp));
	n = MAXMEMBERS;
	reps = 20;
	calls = 1000000;
	rounds = 2000;
	blocks = 10;
	port = 9100;
	bcpu = 0;
	lp.lcpu = 1;
	lp.uid = 65534;
	untagged = control = 0;
	while ((ch = getopt(argc, argv, "Aan:k:c:r:P:p:b:l:suU:")) != -1) {
		switch (ch) {
		case 'A': lp.accept = 1; break;
		case 'a': lp.change = 1; break;
		case 'n': n = atoi(optarg); break;
		case 'k': reps = atoi(optarg); break;
		case 'c': calls = atol(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'P': blocks = atoi(optarg); break;
		case 'p': port = (in_port_t)atoi(optarg); break;
		case 'b': bcpu = atoi(optarg); break;
		case 'l': lp.lcpu = atoi(optarg); break;
		case 's': control = 1; break;
		case 'u': untagged = 1; break;
		case 'U': lp.uid = (uid_t)atoi(optarg); break;
		default: usage();
		}
	}
	if (n < 1 || n > MAXMEMBERS || reps < 1 || reps > MAXREPS ||
	    calls < 0 || rounds < 1 || rounds > MAXLAT || blocks < 1 ||
	    blocks > rounds || (calls > 0 && calls < blocks) ||
	    (calls > 0 && untagged) || (control && !untagged) ||
	    (lp.accept && calls == 0))
		usage();
	len = sizeof(ncpu);
	if (sysctlbyname("hw.ncpu", &ncpu, &len, NULL, 0) != 0 || ncpu < 1)
		ncpu = 1;
	if (lp.change && ncpu < 2) {
		fprintf(stderr, "lbsetsock: -a needs two CPUs to alternate\n");
		return (1);
	}
	pin(bcpu);

	/*
	 * Creation, reps times, each followed by the group's first
	 * connection (outside the context switch count: its accept(2)
	 * waits for the handshake); the last group stays for the loop.
	 */
	nvcsw = 0;
	for (i = 0; i < reps; i++) {
		getrusage(RUSAGE_SELF, &ru0);
		if (make_group(fds, n, port, ncpu, untagged, control, &tagerr,
		    &made[i]) != 0)
			return (1);
		getrusage(RUSAGE_SELF, &ru1);
		nvcsw += ru1.ru_nvcsw - ru0.ru_nvcsw;
		if ((firsts[i] = group_conn(fds, n, port, 30 * 1000)) == 0) {
			fprintf(stderr, "lbsetsock: first connection: %s\n",
			    strerror(errno));
			return (1);
		}
		totals[i] = made[i] + firsts[i];
		if (i + 1 < reps)
			for (j = 0; j < n; j++)
				close(fds[j]);
	}
	qsort(made, reps, sizeof(made[0]), cmp64);
	qsort(firsts, reps, sizeof(firsts[0]), cmp64);
	qsort(totals, reps, sizeof(totals[0]), cmp64);
	printf("%s CREATE members=%d tagged=%d reps=%d p50_ns=%ju min_ns=%ju "
	    "nvcsw=%ld tagerr=%d first_p50_ns=%ju total_p50_ns=%ju "
	    "control=%d\n", MARK, n, !untagged, reps,
	    (uintmax_t)made[reps / 2], (uintmax_t)made[0], nvcsw, tagerr,
	    (uintmax_t)firsts[reps / 2], (uintmax_t)totals[reps / 2], control);
	if (calls == 0) {
		printf("%s DONE\n", MARK);
		return (0);
	}

	lp.fds = fds;
	lp.n = n;
	lp.ncpu = ncpu;
	lp.port = port;
	slen = sizeof(lp.sndbuf);
	if (getsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &lp.sndbuf, &slen) !=
	    0) {
		fprintf(stderr, "lbsetsock: SO_SNDBUF: %s\n", strerror(errno));
		return (1);
	}
	bs = listener(port + 1, 0, NULL, 0, NULL);
	if (bs < 0) {
		fprintf(stderr, "lbsetsock: bystander: %s\n", strerror(errno));
		return (1);
	}
	printf("%s GROUP members=%d port=%u ncpu=%d tagerr=%d blocks=%d "
	    "change=%d uid=%u accept=%d\n", MARK, n, port, ncpu, tagerr,
	    blocks, lp.change, (unsigned)lp.uid, lp.accept);
	fflush(stdout);

	before = group_field(port, " rebuilds ");
	done = 0;
	for (b = 0; b < blocks; b++) {
		for (j = 0; j < 3; j++) {
			/* idle, control, loop; reversed in odd blocks. */
			k = (b % 2 == 0) ? j : 2 - j;
			if (k == 0) {
				for (i = 0; i < rounds / blocks +
				    (b < rounds % blocks); i++)
					pool_add(&pools[0],
					    bystander_once(bs, port + 1));
				continue;
			}
			slice = calls / blocks + (b < calls % blocks);
			if (loop_slice(&pools[k], k == 2, &lp, done, slice, bs,
			    port + 1) != 0) {
				fprintf(stderr, "lbsetsock: fork: %s\n",
				    strerror(errno));
				return (1);
			}
			if (k == 2)
				done += slice;
		}
	}
	after = group_field(port, " rebuilds ");
	for (k = 0; k < 3; k++)
		report(pools[k].name, pools[k].lat, pools[k].n);
	for (k = 2; k >= 1; k--) {
		printf("%s %s calls=%ld errors=%ld elapsed_ns=%ju", MARK,
		    k == 2 ? "LOOP" : "CONTROL", pools[k].calls,
		    pools[k].errors, (uintmax_t)pools[k].elapsed);
		if (lp.accept)
			printf(" accepted=%ld", pools[k].accepted);
		printf("\n");
	}
	printf("%s REBUILDS before=%ld after=%ld\n", MARK, before, after);
	if (lp.accept)
		deal_check(&lp, done);
	printf("%s DONE\n", MARK);
	return (0);
}
