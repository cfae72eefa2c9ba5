/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * acceptd: an accept-distribution rig.
 *
 * N worker processes accept TCP connections on 127.0.0.1 and count, per
 * worker, the wakeups, the accepted connections, the wakeups that found
 * nothing to accept (EAGAIN), the connections open, and per accepted
 * connection the CPU the worker ran on and the CPU that completed the
 * handshake.  The parent process is the client: either open-loop (one
 * connection at a time, a fixed spacing apart) or closed-loop (a number
 * of connections in flight, the next one started when one completes).  At
 * the end it prints one JSON object on stdout.
 *
 * Two server models (-M):
 *
 *   loop    each worker is an event loop: it waits on the listener and on
 *           every connection it holds, accepts up to -a connections per
 *           wakeup, then serves each (the work of -t, CPU-bound or sleep,
 *           then one response byte), keeps it open for the holding time
 *           (-H) or until the client closes, and goes back to its wait.
 *           A worker holding connections keeps competing for new ones, as
 *           event-loop servers (nginx, Envoy, node, asyncio) do.
 *   serial  accept, work, hold, close, one connection at a time: the worker
 *           is out of its wait for the whole work and holding time.  The
 *           model of the first version of this rig (seed 004's "fake work
 *           after each accept").
 *
 * Processes, not threads: the seed measurement (seeds/004, "The rig") forks
 * its workers, each with its own epoll instance, and the wait-queue effect
 * it shows needs one wait entry per worker.  Processes also make "kill the
 * first worker" a plain SIGKILL and give exact per-worker CPU time through
 * wait4(2).
 *
 * The request workload (-q, event-loop model only): instead of the parent's
 * connection schedule, one client process per receiving CPU (-R, default
 * every CPU), pinned there, opens its share of the -n connections and then
 * runs a closed loop over them: -F requests in flight, each request the
 * next connection's turn, -q requests per connection.  A request is 8
 * bytes (the CPU its send ran on, a sequence number); the worker answers
 * each with 8 bytes (its CPU, the sequence number).  Over loopback the
 * sender's CPU is the receiving CPU: the segment is processed in the
 * softirq its send raises on that CPU, which is where the SYN chose the
 * listener and where each request wakes the worker.  Both sides count
 * their wakeups (a wait that found nothing ready and then returned with an
 * event) by whether the first ready event came from their own CPU; the
 * parent snapshots the kernel's counters (/proc/interrupts, /proc/stat,
 * each worker's and client's /proc/<pid>/status and schedstat) around an
 * idle window (-I ms, the background) and around the requests.
 *
 * Everything is bounded: every wait has a timeout, the whole run has a
 * deadline (-d) after which workers exit on their own, and only loopback
 * is ever connected to.
 *
 * Portable parts are C99 + POSIX; epoll, SO_INCOMING_CPU and
 * SO_ATTACH_REUSEPORT_CBPF are Linux-only and kept under __linux__ so the
 * same file builds on FreeBSD, where the "lb" mode uses SO_REUSEPORT_LB and
 * the event loop waits with poll(2).
 */

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/epoll.h>
#include <linux/filter.h>
#endif
#ifdef __FreeBSD__
#include <sys/param.h>
#include <sys/cpuset.h>
#endif

#define	MAXWORKERS	256
#define	MAXCPUS		256
#define	MAXCONNS	100000
#define	MAXRECS		(1 << 20)	/* per-connection records, -C only */
#define	MAXBATCH	64		/* events per wait; bounds "unlimited" */
#define	WAIT_MS		100		/* worker wait slice: how fast stop is seen */
#define	REG_TIMEOUT_MS	5000		/* one worker's registration turn */
#define	CONNECT_TIMEOUT_MS 1000
#define	LISTEN_BACKLOG	1024
#define	NPORTS		65536
#define	HOLD_CLIENT	(-1L)		/* -H: hold until the client closes */
#define	UNTAGGED_LAST	(-2)		/* -u not given: the last rank */
#define	UNTAGGED_NONE	(-1)		/* -u none: every listener tagged */
#define	REQ_SIZE	8		/* request and response: cpu, seq */
#define	MAXINFLIGHT	1024

enum mode {
	M_NOFLAG,	/* shared listener, epoll, no flag */
	M_EXCLUSIVE,	/* shared listener, every worker EPOLLEXCLUSIVE */
	M_HALF,		/* shared listener, even ranks EPOLLEXCLUSIVE */
	M_REORDER,	/* EPOLLEXCLUSIVE, DEL+ADD every -r accepts */
	M_ET,		/* shared listener, EPOLLET */
	M_EXCL_ET,	/* shared listener, EPOLLEXCLUSIVE | EPOLLET */
	M_MUTEX,	/* shared listener, nginx accept_mutex */
	M_PREFORK,	/* SO_REUSEPORT on one listener shared before fork */
	M_HANDOFF_RR,	/* one acceptor process, round-robin to workers */
	M_HANDOFF_LC,	/* one acceptor, least connections, lagging counts */
	M_REUSEPORT,	/* one listener per worker, SO_REUSEPORT hash */
	M_INCOMING_CPU,	/* SO_REUSEPORT + SO_INCOMING_CPU */
	M_CBPF_CPU,	/* SO_REUSEPORT + classic BPF returning the CPU */
	M_LB,		/* FreeBSD SO_REUSEPORT_LB */
	M_EBPF		/* SO_REUSEPORT + an SK_REUSEPORT program (-B) */
};

/* How workers reach the listener. */
#define	L_SHARED	0	/* one listener, made before fork */
#define	L_OWN		1	/* one listener per worker */
#define	L_HANDOFF	2	/* one listener, an acceptor hands fds over */

static const struct {
	const char	*name;
	enum mode	 mode;
	int		 listener;
	int		 loop_only;	/* needs the event-loop model */
} modes[] = {
	{ "noflag",		M_NOFLAG,	L_SHARED,	0 },
	{ "exclusive",		M_EXCLUSIVE,	L_SHARED,	0 },
	{ "half",		M_HALF,		L_SHARED,	0 },
	{ "reorder",		M_REORDER,	L_SHARED,	0 },
	{ "reorder16",		M_REORDER,	L_SHARED,	0 },
	{ "et",			M_ET,		L_SHARED,	1 },
	{ "exclusive-et",	M_EXCL_ET,	L_SHARED,	1 },
	{ "accept-mutex",	M_MUTEX,	L_SHARED,	1 },
	{ "reuseport-prefork",	M_PREFORK,	L_SHARED,	0 },
	{ "handoff-rr",		M_HANDOFF_RR,	L_HANDOFF,	1 },
	{ "handoff-lc",		M_HANDOFF_LC,	L_HANDOFF,	1 },
	{ "reuseport",		M_REUSEPORT,	L_OWN,		0 },
	{ "incoming-cpu",	M_INCOMING_CPU,	L_OWN,		0 },
	{ "cbpf-cpu",		M_CBPF_CPU,	L_OWN,		0 },
	{ "lb",			M_LB,		L_OWN,		0 },
	{ "ebpf",		M_EBPF,		L_OWN,		0 },
};

/*
 * The eBPF selectors live in acceptd_ebpf.c, built in (with libbpf) only
 * when RXL_EBPF is defined, so the plain rig needs neither.
 */
#ifdef RXL_EBPF
int	ebpf_load(const char *obj, const char *prog, const char *mapfile);
int	ebpf_add(int rank, int fd);
int	ebpf_attach(int fd);
void	ebpf_print(FILE *out);
#endif

/*
 * Counters live in a MAP_SHARED mapping so the parent can read them while
 * the run is going (to know when every connection has been handled) and
 * after a worker was SIGKILLed, when it can no longer report anything.
 * Each slot is written by its worker only; volatile keeps the compiler
 * from caching a value the other process changes.
 */
struct wstat {
	volatile long	wakeups;
	volatile long	accepts;
	volatile long	empty;
	volatile long	errors;
	volatile long	local;		/* handshake CPU == worker CPU */
	volatile long	handled;	/* served, or dropped before serving */
	volatile long	resets;		/* peer reset (ECONNRESET/EPIPE) */
	volatile long	open;		/* connections open now */
	volatile long	open_max;
	volatile long	mutex_held;	/* accept-mutex acquisitions */
	volatile int	busy;		/* inside its work right now */
	volatile long	acpu[MAXCPUS];	/* accepts by worker CPU */
	volatile long	hcpu[MAXCPUS];	/* accepts by handshake CPU */
	volatile int	hcpu_unknown;
	volatile int	regerr;		/* errno of a failed registration */
	volatile int	pinfail;	/* it was pinning (-p) that failed */
	/* -q: requests served, by the CPU their send ran on; wakeups. */
	volatile long	rq;
	volatile long	rq_local;	/* sender CPU == worker CPU */
	volatile long	rq_bad;		/* malformed request */
	volatile long	wk;		/* waits that slept, then an event */
	volatile long	wk_local;	/* ... first event sent on our CPU */
	volatile long	wk_remote;	/* ... sent on another CPU */
	volatile long	wk_other;	/* ... the listener or a close */
	volatile long	rq_from[MAXCPUS];
};

/* One request-workload client (-q), written by that client only. */
struct cstat {
	volatile int	cpu;
	volatile int	ready;		/* its connections are established */
	volatile int	done;		/* every response came */
	volatile int	err;		/* errno of a failure, or 0 */
	volatile long	conns;
	volatile long	sent;
	volatile long	replies;
	volatile long	rp_remote;	/* answered by a worker on another CPU */
	volatile long	rp_bad;		/* malformed or unexpected response */
	volatile long	wk;
	volatile long	wk_local;
	volatile long	wk_remote;
	volatile long	wk_other;
	volatile long	by_cpu[MAXCPUS];	/* replies by worker CPU */
};

struct shared {
	volatile int	stop;
	volatile int	port;		/* set by the first registrant */
	volatile int	mutex;		/* accept-mutex: 0 free, rank+1 held */
	volatile long	nrec;		/* -C records used so far (approx.) */
	struct wstat	w[MAXWORKERS];
	struct wstat	acc;		/* the handoff acceptor */
	struct cstat	c[MAXCPUS];	/* -q clients, one per receiving CPU */
	/* Accept time (CLOCK_MONOTONIC ns) by the client's port. */
	volatile long long acc_ns[NPORTS];
};

struct rec {
	int	worker;			/* registration rank */
	int	cpu;
	int	hcpu;
	int	port;			/* the client's */
};

struct opts {
	enum mode	 mode;
	const char	*mode_name;
	const char	*bpf_obj;	/* -B object:program, ebpf mode */
	const char	*bpf_maps;	/* -b map contents file */
	int		 listener;
	int		 loop;		/* event-loop server model */
	int		 workers;
	long		 conns;
	long		 spacing_us;
	long		 work_us;
	int		 work_cpu;	/* spin instead of sleep */
	long		 hold_us;	/* HOLD_CLIENT: until the client closes */
	int		 batch;		/* accepts per wakeup, 0 unlimited */
	int		 closed;	/* closed-loop client */
	int		 concurrency;
	int		 abort_pm;	/* clients aborting, per mille */
	int		 abort_reset;	/* abort after the handshake (RST) */
	long		 lag_us;	/* handoff-lc count refresh */
	long		 mutex_delay_us;
	long		 deadline_ms;
	long		 kill_at;	/* -1: never */
	int		 reorder;	/* accepts between DEL+ADD */
	int		 pin;
	int		 rotate;	/* client moves over the CPUs */
	int		 untagged;	/* rank without SO_INCOMING_CPU */
	int		 records;
	int		 port;
	int		 order[MAXWORKERS];	/* rank -> worker id */
	int		 ncpu;
	long		 requests;	/* -q: per connection; 0: no requests */
	int		 inflight;	/* -F: per client */
	long		 think_us;	/* -Z: client pause after a reply */
	long		 idle_ms;	/* -I: background window */
	int		 nrx;		/* -R: client (receiving) CPUs */
	int		 rx[MAXCPUS];
};

static struct shared	*sh;
static struct rec	*recs;		/* MAP_SHARED too; -C only */
/*
 * The registration pipes and handoff socketpairs the parent makes for
 * every process before it forks; -1 when not made.  Each child closes all
 * but its own (close_inherited()): a worker's end of its socketpair must
 * have that worker as its only holder, so the acceptor's send to a worker
 * that died is refused rather than queued where no one reads it.
 */
static int		 go[MAXWORKERS][2], hfd[MAXWORKERS][2];
static long		 maxrec;

static void
usage(void)
{
	fprintf(stderr,
	    "usage: acceptd -m mode [-M loop|serial] [-w workers] "
	    "[-n connections]\n"
	    "               [-s spacing_us] [-t work_us] [-T cpu|sleep] "
	    "[-H hold_us|-1]\n"
	    "               [-a accepts_per_wakeup] [-l concurrency] "
	    "[-x abort_permille]\n"
	    "               [-X handshake|reset] [-L lag_us] "
	    "[-D mutex_delay_us]\n"
	    "               [-d deadline_ms] [-k kill_at] [-r reorder_every] "
	    "[-o id,id,...]\n"
	    "               [-u untagged_rank|none] [-P port] [-B obj:prog] "
	    "[-b mapfile]\n"
	    "               [-q requests -F in_flight -Z think_us -I idle_ms "
	    "-R cpu,...]\n"
	    "               [-p] [-c] [-C]\n"
	    "modes: noflag exclusive half reorder et exclusive-et "
	    "accept-mutex\n"
	    "       reuseport-prefork handoff-rr handoff-lc reuseport "
	    "incoming-cpu cbpf-cpu lb ebpf\n");
	exit(2);
}

static void
die(const char *what)
{
	fprintf(stderr, "acceptd: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
fail(const char *msg)
{
	fprintf(stderr, "acceptd: %s\n", msg);
	exit(2);
}

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

static long
now_ms(void)
{
	return ((long)(now_ns() / 1000000));
}

static long
num(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v < lo || v > hi) {
		fprintf(stderr, "acceptd: bad %s '%s' (want %ld..%ld)\n",
		    what, s, lo, hi);
		exit(2);
	}
	return (v);
}

/* 0 for the first word, 1 for the second; anything else is refused. */
static int
choice(const char *s, const char *w0, const char *w1, const char *opt)
{
	if (strcmp(s, w0) == 0)
		return (0);
	if (strcmp(s, w1) == 0)
		return (1);
	fprintf(stderr, "acceptd: %s must be %s or %s\n", opt, w0, w1);
	exit(2);
}

static void
sleep_us(long us)
{
	struct timespec ts;

	if (us <= 0)
		return;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	/* EINTR just shortens the wait; no loop needed. */
	(void)nanosleep(&ts, NULL);
}

/* The calling process's own CPU time in ns. */
static long long
cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
		return (now_ns());
	return ((long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
}

/*
 * The work of one connection.  Sleep: the worker is off the CPU and out
 * of its wait.  CPU: a busy loop until this process has used work_us of
 * CPU time (not wall time: on a shared CPU the spin takes longer but
 * costs exactly work_us), so CPU time follows load.
 */
static void
do_work(const struct opts *o, struct wstat *ws)
{
	long long end;
	volatile unsigned long spin = 0;

	if (o->work_us <= 0)
		return;
	ws->busy = 1;
	if (!o->work_cpu)
		sleep_us(o->work_us);
	else {
		end = cpu_ns() + (long long)o->work_us * 1000;
		while (cpu_ns() < end)
			spin++;
	}
	ws->busy = 0;
}

/* Pin the calling process to one CPU; best effort, returns 0 on success. */
static int
pin_self(int cpu)
{
#if defined(__linux__)
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return (sched_setaffinity(0, sizeof(set), &set));
#elif defined(__FreeBSD__)
	cpuset_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return (cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_PID, -1,
	    sizeof(set), &set));
#else
	(void)cpu;
	return (-1);
#endif
}

static int
cur_cpu(void)
{
#if defined(__linux__) || defined(__FreeBSD__)
	return (sched_getcpu());
#else
	return (-1);
#endif
}

/*
 * The CPU that completed the handshake of an accepted socket.
 *
 * Hook for the series: with SO_REUSEPORT_LB_CPU (the accept(2)-learning
 * commit) FreeBSD reports the CPU the syncache stamped when the handshake
 * completed; that is the fact the learning uses, so the rig reads it back
 * the same way.  Linux has the close equivalent SO_INCOMING_CPU, the CPU
 * that last ran the socket's receive path, which for a just-accepted
 * loopback socket is the CPU that processed the final ACK.  Elsewhere the
 * answer is unknown (-1).
 */
static int
handshake_cpu(int fd)
{
	int cpu = -1;
	socklen_t len = sizeof(cpu);

#if defined(SO_REUSEPORT_LB_CPU)
	if (getsockopt(fd, SOL_SOCKET, SO_REUSEPORT_LB_CPU, &cpu, &len) != 0)
		cpu = -1;
#elif defined(SO_INCOMING_CPU)
	if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0)
		cpu = -1;
#else
	(void)fd;
	(void)len;
#endif
	return (cpu);
}

static void
set_nonblock(int fd)
{
	int fl;

	fl = fcntl(fd, F_GETFL);
	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		die("fcntl");
}

static void
lo_addr(struct sockaddr_in *sin, int port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons((unsigned short)port);
	sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* Local (own == 1) or peer port of a socket, or -1. */
static int
sock_port(int fd, int own)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int rc;

	rc = own ? getsockname(fd, (struct sockaddr *)&sin, &len) :
	    getpeername(fd, (struct sockaddr *)&sin, &len);
	if (rc != 0 || sin.sin_family != AF_INET)
		return (-1);
	return (ntohs(sin.sin_port));
}

/* ------------------------------------------------------------ poller */

/*
 * The event loop's wait set: epoll on Linux (the flags are the point of
 * several setups), poll(2) elsewhere.  flags: PL_EXCL, PL_ET.
 */
#define	PL_EXCL	1
#define	PL_ET	2

struct poller {
	int		 ep;
	struct pollfd	*pfd;
	int		 n, cap;
};

struct pev {
	int	fd;
	int	err;		/* hang-up or error reported */
};

static int
pl_init(struct poller *pl, int cap)
{
	memset(pl, 0, sizeof(*pl));
	pl->ep = -1;
#ifdef __linux__
	(void)cap;
	pl->ep = epoll_create1(0);
	return (pl->ep == -1 ? -1 : 0);
#else
	pl->cap = cap;
	pl->pfd = calloc((size_t)cap, sizeof(*pl->pfd));
	return (pl->pfd == NULL ? -1 : 0);
#endif
}

static int
pl_add(struct poller *pl, int fd, int flags)
{
#ifdef __linux__
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | ((flags & PL_EXCL) ? EPOLLEXCLUSIVE : 0) |
	    ((flags & PL_ET) ? EPOLLET : 0);
	ev.data.fd = fd;
	return (epoll_ctl(pl->ep, EPOLL_CTL_ADD, fd, &ev));
#else
	if (flags != 0) {
		errno = EOPNOTSUPP;
		return (-1);
	}
	if (pl->n >= pl->cap) {
		errno = EMFILE;
		return (-1);
	}
	pl->pfd[pl->n].fd = fd;
	pl->pfd[pl->n].events = POLLIN;
	pl->n++;
	return (0);
#endif
}

static int
pl_del(struct poller *pl, int fd)
{
#ifdef __linux__
	return (epoll_ctl(pl->ep, EPOLL_CTL_DEL, fd, NULL));
#else
	int i;

	for (i = 0; i < pl->n; i++)
		if (pl->pfd[i].fd == fd) {
			pl->pfd[i] = pl->pfd[--pl->n];
			return (0);
		}
	errno = ENOENT;
	return (-1);
#endif
}

static int
pl_wait(struct poller *pl, struct pev *out, int max, int timeout)
{
#ifdef __linux__
	struct epoll_event ev[MAXBATCH];
	int i, n;

	if (max > MAXBATCH)
		max = MAXBATCH;
	n = epoll_wait(pl->ep, ev, max, timeout);
	for (i = 0; i < n; i++) {
		out[i].fd = ev[i].data.fd;
		out[i].err = (ev[i].events & (EPOLLERR | EPOLLHUP)) != 0;
	}
	return (n);
#else
	int i, n, k = 0;

	n = poll(pl->pfd, (nfds_t)pl->n, timeout);
	for (i = 0; n > 0 && i < pl->n && k < max; i++) {
		if (pl->pfd[i].revents == 0)
			continue;
		out[k].fd = pl->pfd[i].fd;
		out[k].err = (pl->pfd[i].revents & (POLLERR | POLLHUP)) != 0;
		k++;
	}
	return (n < 0 ? n : k);
#endif
}

#ifdef __linux__
/*
 * Classic BPF reuseport selector: index = cpu + ncpu * (rxhash % groups).
 *
 * With groups == 1 it is "return the CPU", the policy of Linux's
 * reuseport_bpf_cpu selftest, which has one socket per CPU.  With more
 * workers than CPUs that policy leaves every worker past index ncpu-1
 * idle, so the hash spreads over the workers of the same CPU: rank r is
 * pinned to CPU r % ncpu, so every index this returns is a worker on the
 * handshake CPU.  An index past the group makes the kernel fall back to
 * the plain hash (socket(7), SO_ATTACH_REUSEPORT_CBPF).
 */
static int
attach_cbpf(int fd, int ncpu, int groups)
{
	struct sock_filter code[] = {
		{ BPF_LD | BPF_W | BPF_ABS, 0, 0,
		    (unsigned)(SKF_AD_OFF + SKF_AD_CPU) },
		{ BPF_MISC | BPF_TAX, 0, 0, 0 },
		{ BPF_LD | BPF_W | BPF_ABS, 0, 0,
		    (unsigned)(SKF_AD_OFF + SKF_AD_RXHASH) },
		{ BPF_ALU | BPF_MOD | BPF_K, 0, 0, (unsigned)groups },
		{ BPF_ALU | BPF_MUL | BPF_K, 0, 0, (unsigned)ncpu },
		{ BPF_ALU | BPF_ADD | BPF_X, 0, 0, 0 },
		{ BPF_RET | BPF_A, 0, 0, 0 },
	};
	struct sock_fprog prog;

	prog.len = (unsigned short)(sizeof(code) / sizeof(code[0]));
	prog.filter = code;
	return (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog,
	    sizeof(prog)));
}
#endif

/* A listener of the worker at this rank, for the per-worker modes. */
static int
own_listener(const struct opts *o, int rank, int cpu)
{
	struct sockaddr_in sin;
	socklen_t len;
	int fd, one = 1;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	if (o->mode == M_LB) {
#ifdef SO_REUSEPORT_LB
		if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT_LB, &one,
		    sizeof(one)) != 0)
			return (-1);
#else
		errno = EOPNOTSUPP;
		return (-1);
#endif
	} else if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
	    sizeof(one)) != 0)
		return (-1);
	if (o->mode == M_INCOMING_CPU && rank != o->untagged) {
#ifdef SO_INCOMING_CPU
		if (setsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu,
		    sizeof(cpu)) != 0)
			return (-1);
#else
		errno = EOPNOTSUPP;
		return (-1);
#endif
	}
	(void)cpu;
	/* The first registrant picks the port; the rest join it. */
	lo_addr(&sin, rank == 0 ? o->port : sh->port);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		return (-1);
	if (listen(fd, LISTEN_BACKLOG) != 0)
		return (-1);
	if (rank == 0) {
		len = sizeof(sin);
		if (getsockname(fd, (struct sockaddr *)&sin, &len) != 0)
			return (-1);
		sh->port = ntohs(sin.sin_port);
	}
	if (o->mode == M_EBPF) {
#ifdef RXL_EBPF
		/* Slot = rank; attaching to one member programs the group. */
		if (ebpf_add(rank, fd) != 0 ||
		    (rank == 0 && ebpf_attach(fd) != 0))
			return (-1);
#else
		errno = EOPNOTSUPP;
		return (-1);
#endif
	}
	if (o->mode == M_CBPF_CPU && rank == 0) {
#ifdef __linux__
		int groups = o->workers / o->ncpu;

		/* Attaching to one member programs the whole group. */
		if (attach_cbpf(fd, o->ncpu, groups < 1 ? 1 : groups) != 0)
			return (-1);
#else
		errno = EOPNOTSUPP;
		return (-1);
#endif
	}
	set_nonblock(fd);
	return (fd);
}

static int
pl_flags(const struct opts *o, int rank)
{
	switch (o->mode) {
	case M_EXCLUSIVE:
	case M_REORDER:
		return (PL_EXCL);
	case M_HALF:
		return (rank % 2 == 0 ? PL_EXCL : 0);
	case M_ET:
		return (PL_ET);
	case M_EXCL_ET:
		return (PL_EXCL | PL_ET);
	default:
		return (0);
	}
}

/* --------------------------------------------------------- connections */

/*
 * Book-keeping of one accepted connection, common to both models and to
 * handed-over descriptors: the worker's CPU, the handshake CPU, the
 * accept time by the client's port (the client turns it into the time
 * the connection waited in the accept queue), the open count.
 */
static void
on_accepted(const struct opts *o, struct wstat *ws, int rank, int fd,
    long long t_acc)
{
	int myc, hc, port;
	long r;

	myc = cur_cpu();
	hc = handshake_cpu(fd);
	if (myc >= 0 && myc < MAXCPUS)
		ws->acpu[myc]++;
	if (hc >= 0 && hc < MAXCPUS)
		ws->hcpu[hc]++;
	else
		ws->hcpu_unknown++;
	if (hc >= 0 && hc == myc)
		ws->local++;
	port = sock_port(fd, 0);
	if (t_acc != 0 && port >= 0)
		sh->acc_ns[port] = t_acc;
	if (recs != NULL &&
	    (r = __sync_fetch_and_add(&sh->nrec, 1)) < maxrec) {
		recs[r].worker = rank;
		recs[r].cpu = myc;
		recs[r].hcpu = hc;
		recs[r].port = port;
	}
	ws->accepts++;
	ws->open++;
	if (ws->open > ws->open_max)
		ws->open_max = ws->open;
	(void)o;
}

/*
 * accept(2) on a non-blocking listener: the descriptor, or -1 when there
 * is nothing (EAGAIN), the connection went away (ECONNABORTED) or a
 * signal came; other failures are counted as errors.
 */
static int
accept_one(int lfd, struct wstat *ws)
{
	int fd;

	fd = accept(lfd, NULL, NULL);
	if (fd == -1 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != ECONNABORTED && errno != EINTR)
		ws->errors++;
	return (fd);
}

static int
is_reset(int err)
{
	return (err == ECONNRESET || err == EPIPE);
}

/* Per-descriptor state of the event loop's held connections. */
struct conn {
	long long	expire;		/* ns; 0: no expiry */
	char		open;
	unsigned char	rlen;		/* -q: bytes of a request so far */
	unsigned char	rbuf[REQ_SIZE];
};

struct loop {
	struct poller	 pl;
	struct conn	*tab;
	int		 ntab;
	int		*fifo;		/* fds in expiry order (fixed hold) */
	long long	*fexp;
	int		 fcap, fhead, fcount;
};

static void
conn_close(struct loop *lp, struct wstat *ws, int fd)
{
	if (fd >= 0 && fd < lp->ntab && lp->tab[fd].open) {
		lp->tab[fd].open = 0;
		(void)pl_del(&lp->pl, fd);
		ws->open--;
	}
	close(fd);
}

/*
 * Serve one accepted connection in the loop: the work, one response byte,
 * then close (hold 0), keep until the hold expires, or keep until the
 * client closes.  Counted as handled whatever the outcome.
 */
static void
loop_serve(const struct opts *o, struct loop *lp, struct wstat *ws, int fd)
{
	char c = 'x';
	int slot, one = 1;

	if (fd >= lp->ntab) {
		/* No room to hold it: serve and close. */
		do_work(o, ws);
		(void)send(fd, &c, 1, MSG_NOSIGNAL);
		ws->handled++;
		ws->open--;
		close(fd);
		return;
	}
	lp->tab[fd].open = 1;
	lp->tab[fd].expire = 0;
	lp->tab[fd].rlen = 0;
	if (o->requests > 0) {
		/* The requests come later; held until the client closes. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		if (pl_add(&lp->pl, fd, 0) != 0) {
			ws->errors++;
			ws->handled++;
			conn_close(lp, ws, fd);
		}
		return;
	}
	do_work(o, ws);
	if (send(fd, &c, 1, MSG_NOSIGNAL) != 1) {
		if (is_reset(errno))
			ws->resets++;
		else if (errno != EAGAIN && errno != EWOULDBLOCK)
			ws->errors++;
		ws->handled++;
		conn_close(lp, ws, fd);
		return;
	}
	ws->handled++;
	if (o->hold_us == 0) {
		conn_close(lp, ws, fd);
		return;
	}
	if (pl_add(&lp->pl, fd, 0) != 0) {
		ws->errors++;
		conn_close(lp, ws, fd);
		return;
	}
	if (o->hold_us > 0 && lp->fcount < lp->fcap) {
		lp->tab[fd].expire = now_ns() + (long long)o->hold_us * 1000;
		slot = (lp->fhead + lp->fcount) % lp->fcap;
		lp->fifo[slot] = fd;
		lp->fexp[slot] = lp->tab[fd].expire;
		lp->fcount++;
	}
}

/* Close held connections whose time is up; returns ms to the next one. */
static int
loop_expire(struct loop *lp, struct wstat *ws)
{
	long long t = now_ns(), e;
	int fd;

	while (lp->fcount > 0) {
		fd = lp->fifo[lp->fhead];
		e = lp->fexp[lp->fhead];
		if (e > t)
			return ((int)((e - t) / 1000000) + 1);
		lp->fhead = (lp->fhead + 1) % lp->fcap;
		lp->fcount--;
		/* Closed by the client already, or fd reused since. */
		if (lp->tab[fd].open && lp->tab[fd].expire == e)
			conn_close(lp, ws, fd);
	}
	return (WAIT_MS);
}

/* A held connection is readable: the client closed, reset, or sent. */
static void
loop_conn_event(struct loop *lp, struct wstat *ws, int fd)
{
	char buf[256];
	ssize_t n;

	n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n > 0 || (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
	    errno == EINTR)))
		return;
	if (n == -1) {
		if (is_reset(errno))
			ws->resets++;
		else
			ws->errors++;
	}
	conn_close(lp, ws, fd);
}

/* The 8 bytes of a request or response: a CPU and a sequence number. */
static void
req_pack(unsigned char *b, unsigned cpu, unsigned seq)
{
	memcpy(b, &cpu, 4);
	memcpy(b + 4, &seq, 4);
}

static void
req_unpack(const unsigned char *b, unsigned *cpu, unsigned *seq)
{
	memcpy(cpu, b, 4);
	memcpy(seq, b + 4, 4);
}

/*
 * -q: a held connection is readable.  Answer every whole request with
 * this CPU and the request's sequence number; count it by the CPU its
 * send ran on.  waker: this connection's event ended a wait that slept,
 * so its first request says from which CPU the worker was woken.  EOF or
 * an error closes the connection (the client closes after its last).
 */
static void
loop_requests(const struct opts *o, struct loop *lp, struct wstat *ws,
    int fd, int waker)
{
	struct conn *c = &lp->tab[fd];
	unsigned char out[REQ_SIZE];
	unsigned cpu, seq;
	ssize_t n;
	int me;

	for (;;) {
		n = recv(fd, c->rbuf + c->rlen, REQ_SIZE - c->rlen,
		    MSG_DONTWAIT);
		if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK ||
		    errno == EINTR))
			break;
		if (n <= 0) {
			if (n == -1 && is_reset(errno))
				ws->resets++;
			else if (n == -1)
				ws->errors++;
			if (waker)
				ws->wk_other++;
			ws->handled++;
			conn_close(lp, ws, fd);
			return;
		}
		c->rlen += (unsigned char)n;
		if (c->rlen < REQ_SIZE)
			continue;
		c->rlen = 0;
		req_unpack(c->rbuf, &cpu, &seq);
		me = cur_cpu();
		ws->rq++;
		if (cpu < MAXCPUS)
			ws->rq_from[cpu]++;
		else
			ws->rq_bad++;
		if ((int)cpu == me)
			ws->rq_local++;
		if (waker) {
			if ((int)cpu == me)
				ws->wk_local++;
			else
				ws->wk_remote++;
			waker = 0;
		}
		do_work(o, ws);
		req_pack(out, (unsigned)me, seq);
		if (send(fd, out, REQ_SIZE, MSG_NOSIGNAL) != REQ_SIZE) {
			if (is_reset(errno))
				ws->resets++;
			else
				ws->errors++;
			ws->handled++;
			conn_close(lp, ws, fd);
			return;
		}
	}
}

/*
 * -q: wait like pl_wait, and say whether the wait slept.  A first look
 * with timeout 0 that finds nothing means the wait that follows blocks,
 * so an event it returns woke the process (a race in between, an event
 * arriving after the look, is counted as a wakeup too).  epoll returns
 * events in the order they became ready, so ev[0] is the one that woke
 * it; poll(2) returns them in descriptor order.
 */
static int
pl_wait_woken(struct poller *pl, struct pev *out, int max, int timeout,
    int *slept)
{
	int n;

	*slept = 0;
	n = pl_wait(pl, out, max, 0);
	if (n != 0)
		return (n);
	n = pl_wait(pl, out, max, timeout);
	*slept = n > 0;
	return (n);
}

/*
 * A handoff message: the accept time as data, one descriptor as
 * SCM_RIGHTS.  fdmsg_init points msg at *t and at u's control buffer.
 */
union fdmsg {
	char		buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr	align;
};

static void
fdmsg_init(struct msghdr *msg, struct iovec *iov, union fdmsg *u,
    long long *t)
{
	memset(msg, 0, sizeof(*msg));
	memset(u, 0, sizeof(*u));
	iov->iov_base = t;
	iov->iov_len = sizeof(*t);
	msg->msg_iov = iov;
	msg->msg_iovlen = 1;
	msg->msg_control = u->buf;
	msg->msg_controllen = sizeof(u->buf);
}

/* Receive one handed-over descriptor, or -1 (errno EAGAIN when none). */
static int
recv_fd(int sock, long long *t_acc)
{
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *cm;
	union fdmsg u;
	int fd = -1;

	fdmsg_init(&msg, &iov, &u, t_acc);
	if (recvmsg(sock, &msg, MSG_DONTWAIT) <= 0)
		return (-1);
	cm = CMSG_FIRSTHDR(&msg);
	if (cm == NULL || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_RIGHTS) {
		errno = EPROTO;
		return (-1);
	}
	memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	return (fd);
}

static int
send_fd(int sock, int fd, long long t_acc)
{
	struct msghdr msg;
	struct iovec iov;
	struct cmsghdr *cm;
	union fdmsg u;

	fdmsg_init(&msg, &iov, &u, &t_acc);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	return (sendmsg(sock, &msg, MSG_DONTWAIT) == (ssize_t)sizeof(t_acc) ?
	    0 : -1);
}

/* Take the accept mutex (nginx ngx_trylock_accept_mutex); 1 if held. */
static int
mutex_try(int rank)
{
	return (__sync_bool_compare_and_swap(&sh->mutex, 0, rank + 1));
}

static void
mutex_unlock(int rank)
{
	(void)__sync_bool_compare_and_swap(&sh->mutex, rank + 1, 0);
}

/*
 * The event-loop worker.  src is the listener (shared or own) or, for the
 * handoff setups, the worker's end of its socketpair with the acceptor.
 */
static void
loop_worker(const struct opts *o, int rank, int src, struct loop *lp,
    long deadline)
{
	struct wstat *ws = &sh->w[rank];
	struct pev ev[MAXBATCH];
	int pend[MAXBATCH], npend, i, n, fd, timeout, held = 0, registered;
	int slept;
	int limit, handoff = o->listener == L_HANDOFF;
	long long t_acc;
	long before;

	registered = o->mode != M_MUTEX;
	limit = o->batch > 0 && o->batch < MAXBATCH ? o->batch : MAXBATCH;
	while (!sh->stop && now_ms() < deadline) {
		timeout = loop_expire(lp, ws);
		if (o->mode == M_MUTEX) {
			/*
			 * nginx (ngx_process_events_and_timers): try the
			 * mutex; the holder has the listener in its wait set,
			 * the others drop it and wait at most
			 * accept_mutex_delay before trying again.
			 */
			held = mutex_try(rank);
			if (held) {
				ws->mutex_held++;
				if (!registered && pl_add(&lp->pl, src, 0) == 0)
					registered = 1;
			} else {
				if (registered) {
					(void)pl_del(&lp->pl, src);
					registered = 0;
				}
				if (timeout > o->mutex_delay_us / 1000)
					timeout = (int)(o->mutex_delay_us /
					    1000);
			}
		}
		slept = 0;
		if (o->requests > 0)
			n = pl_wait_woken(&lp->pl, ev, MAXBATCH, timeout,
			    &slept);
		else
			n = pl_wait(&lp->pl, ev, MAXBATCH, timeout);
		if (slept) {
			ws->wk++;
			if (ev[0].fd == src)
				ws->wk_other++;
		}
		npend = 0;
		for (i = 0; i < n; i++) {
			if (ev[i].fd != src && o->requests > 0) {
				loop_requests(o, lp, ws, ev[i].fd,
				    slept && i == 0);
				continue;
			}
			if (ev[i].fd != src) {
				loop_conn_event(lp, ws, ev[i].fd);
				continue;
			}
			ws->wakeups++;
			before = ws->accepts;
			while (npend < limit) {
				t_acc = 0;
				if (handoff)
					fd = recv_fd(src, &t_acc);
				else {
					fd = accept_one(src, ws);
					t_acc = now_ns();
				}
				if (fd == -1) {
					if (handoff && errno != EAGAIN &&
					    errno != EWOULDBLOCK)
						ws->errors++;
					break;
				}
				set_nonblock(fd);
				on_accepted(o, ws, rank, fd, t_acc);
				pend[npend++] = fd;
			}
			if (ws->accepts == before)
				ws->empty++;
#ifdef __linux__
			/*
			 * nginx 1.21.6 re-adds the listener every 16 accepts
			 * (ngx_reorder_accept_events): the ADD puts this
			 * worker's exclusive entry at the tail of the wait
			 * queue and so hands the turn on.  MOD is refused for
			 * EPOLLEXCLUSIVE (epoll_ctl(2)), hence DEL+ADD.
			 */
			if (o->mode == M_REORDER &&
			    before / o->reorder != ws->accepts / o->reorder) {
				(void)pl_del(&lp->pl, src);
				if (pl_add(&lp->pl, src, PL_EXCL) != 0)
					ws->errors++;
			}
#endif
		}
		/* nginx unlocks after the accept events, before the rest. */
		if (held)
			mutex_unlock(rank);
		held = 0;
		for (i = 0; i < npend; i++)
			loop_serve(o, lp, ws, pend[i]);
	}
	if (held)
		mutex_unlock(rank);
}

/* The serial worker: accept, work, hold, close, one at a time. */
static void
serial_worker(const struct opts *o, int rank, int lfd, struct loop *lp,
    long deadline)
{
	struct wstat *ws = &sh->w[rank];
	struct pev ev[1];
	struct pollfd pfd;
	char c;
	int fd, b, n, limit;
	long before;

	limit = o->batch > 0 ? o->batch : MAXBATCH;
	while (!sh->stop && now_ms() < deadline) {
		n = pl_wait(&lp->pl, ev, 1, WAIT_MS);
		if (n <= 0)
			continue;
		ws->wakeups++;
		before = ws->accepts;
		/*
		 * Drain: a wakeup may find several queued connections, the way
		 * the seed counted "wakeups that accepted two at once".
		 */
		for (b = 0; b < limit; b++) {
			if ((fd = accept_one(lfd, ws)) == -1)
				break;
			on_accepted(o, ws, rank, fd, now_ns());
			do_work(o, ws);
			ws->handled++;
			c = 'x';
			if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 &&
			    is_reset(errno))
				ws->resets++;
			if (o->hold_us > 0) {
				ws->busy = 1;
				sleep_us(o->hold_us);
				ws->busy = 0;
			} else if (o->hold_us == HOLD_CLIENT) {
				/* Until the client closes; bounded. */
				ws->busy = 1;
				pfd.fd = fd;
				pfd.events = POLLIN;
				while (!sh->stop && now_ms() < deadline &&
				    poll(&pfd, 1, WAIT_MS) == 0)
					;
				ws->busy = 0;
			}
			close(fd);
			ws->open--;
#ifdef __linux__
			if (o->mode == M_REORDER &&
			    (ws->accepts % o->reorder) == 0) {
				(void)pl_del(&lp->pl, lfd);
				if (pl_add(&lp->pl, lfd, PL_EXCL) != 0)
					ws->errors++;
			}
#endif
		}
		if (ws->accepts == before)
			ws->empty++;
	}
}

/* Close a descriptor the parent made, once. */
static void
close_made(int *fd)
{
	if (*fd != -1) {
		(void)close(*fd);
		*fd = -1;
	}
}

/*
 * In a child: close the registration pipes and handoff ends made for the
 * other processes.  rank is the worker's, or -1 for the acceptor, which
 * keeps the acceptor end of every socketpair.
 */
static void
close_inherited(const struct opts *o, int rank)
{
	int r;

	for (r = 0; r < o->workers; r++) {
		if (r != rank)
			close_made(&go[r][0]);
		close_made(&go[r][1]);
		if (rank >= 0)
			close_made(&hfd[r][0]);
		if (r != rank)
			close_made(&hfd[r][1]);
	}
}

/*
 * One worker.  Waits for its registration turn on go_fd, registers (epoll
 * ADD on the shared listener, bind+listen of its own, or its end of the
 * handoff socketpair), acknowledges on ready_fd, then serves until the
 * parent says stop or the deadline passes.
 */
static void
worker(const struct opts *o, int rank, int lfd, int go_fd, int ready_fd,
    long deadline)
{
	struct wstat *ws = &sh->w[rank];
	struct pollfd pfd;
	struct loop lp;
	struct rlimit rl;
	char c;
	int cpu, src, pinerr = 0;

	close_inherited(o, rank);
	cpu = rank % o->ncpu;
	/*
	 * The output and the eBPF map say rank r runs on CPU r mod ncpu:
	 * a pin that fails (a cpuset without that CPU) fails registration.
	 */
	if (o->pin && pin_self(cpu) != 0)
		pinerr = errno != 0 ? errno : EINVAL;

	pfd.fd = go_fd;
	pfd.events = POLLIN;
	/* A negative timeout would mean forever: clamp at the deadline. */
	if (poll(&pfd, 1, deadline > now_ms() ? (int)(deadline - now_ms()) :
	    0) != 1 ||
	    read(go_fd, &c, 1) != 1)
		_exit(3);
	c = 'r';

	memset(&lp, 0, sizeof(lp));
	lp.ntab = (int)(o->conns + 2 * MAXWORKERS + 64);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)lp.ntab)
		lp.ntab = (int)rl.rlim_cur;
	lp.fcap = lp.ntab;
	lp.tab = calloc((size_t)lp.ntab, sizeof(*lp.tab));
	lp.fifo = calloc((size_t)lp.fcap, sizeof(*lp.fifo));
	lp.fexp = calloc((size_t)lp.fcap, sizeof(*lp.fexp));
	src = lfd;
	if (pinerr != 0) {
		ws->regerr = pinerr;
		ws->pinfail = 1;
		c = 'e';
	} else if (lp.tab == NULL || lp.fifo == NULL || lp.fexp == NULL ||
	    pl_init(&lp.pl, lp.ntab) != 0) {
		ws->regerr = errno;
		c = 'e';
	} else if (o->listener == L_OWN) {
		if ((src = own_listener(o, rank, cpu)) == -1 ||
		    pl_add(&lp.pl, src, 0) != 0) {
			ws->regerr = errno;
			c = 'e';
		}
	} else if (o->mode != M_MUTEX &&
	    pl_add(&lp.pl, src, pl_flags(o, rank)) != 0) {
		/* Shared listener or handoff socket. */
		ws->regerr = errno;
		c = 'e';
	}
	if (write(ready_fd, &c, 1) != 1 || c != 'r')
		_exit(4);
	if (o->loop)
		loop_worker(o, rank, src, &lp, deadline);
	else
		serial_worker(o, rank, src, &lp, deadline);
	_exit(0);
}

/*
 * The handoff acceptor: one process accepts every connection and passes
 * the descriptor to a worker over a datagram socketpair (SCM_RIGHTS), the
 * model of servers with one acceptor thread and a worker pool.  Round
 * robin, or least connections by the workers' open counts as last read,
 * re-read only every lag_us (a balancer's view of its backends lags).
 */
/*
 * The worker the acceptor hands the next connection to: round robin, or
 * the fewest open connections in snap (ties: round robin from *next).
 * Workers marked dead are skipped; -1 when every worker is dead.
 */
static int
pick_worker(const struct opts *o, const long *snap, const char *dead,
    int *next)
{
	int best = -1, k, r;

	for (k = 0; k < o->workers; k++) {
		r = (*next + k) % o->workers;
		if (dead[r])
			continue;
		if (best == -1 || (o->mode == M_HANDOFF_LC &&
		    snap[r] < snap[best]))
			best = r;
		if (o->mode == M_HANDOFF_RR)
			break;
	}
	if (best != -1)
		*next = (best + 1) % o->workers;
	return (best);
}

/*
 * The handoff acceptor: one process accepts every connection and passes
 * the descriptor to a worker over a datagram socketpair (SCM_RIGHTS), the
 * model of servers with one acceptor thread and a worker pool.  Round
 * robin, or least connections by the workers' open counts as last read,
 * re-read only every lag_us (a balancer's view of its backends lags).
 * A worker whose end is gone (it died: the send is refused) is dropped
 * from the rotation, as a pool drops a dead thread.
 */
static void
acceptor(const struct opts *o, int lfd, const int *afd, long deadline)
{
	struct wstat *ws = &sh->acc;
	struct pollfd pfd;
	long snap[MAXWORKERS];
	long long snap_t = 0, t_acc;
	char dead[MAXWORKERS];
	int fd, r, best, next = 0, b, limit, got, k;

	close_inherited(o, -1);
	limit = o->batch > 0 ? o->batch : MAXBATCH;
	memset(snap, 0, sizeof(snap));
	memset(dead, 0, sizeof(dead));
	while (!sh->stop && now_ms() < deadline) {
		pfd.fd = lfd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, WAIT_MS) <= 0)
			continue;
		ws->wakeups++;
		for (got = 0, b = 0; b < limit; b++) {
			if ((fd = accept_one(lfd, ws)) == -1)
				break;
			t_acc = now_ns();
			got++;
			ws->accepts++;
			if (o->mode == M_HANDOFF_LC && now_ns() - snap_t >=
			    (long long)o->lag_us * 1000) {
				for (r = 0; r < o->workers; r++)
					snap[r] = sh->w[r].open;
				snap_t = now_ns();
			}
			/* A full worker queue: wait for room, bounded. */
			k = 0;
			while ((best = pick_worker(o, snap, dead, &next)) != -1 &&
			    send_fd(afd[best], fd, t_acc) != 0) {
				if (errno == ECONNREFUSED || errno == ENOTCONN ||
				    errno == EPIPE || errno == ECONNRESET) {
					dead[best] = 1;
					continue;
				}
				next = best;	/* retry the same worker */
				if (k++ < 50 && (errno == EAGAIN ||
				    errno == ENOBUFS || errno == EWOULDBLOCK)) {
					sleep_us(2000);
					continue;
				}
				ws->errors++;
				next = (best + 1) % o->workers;
				break;
			}
			if (best == -1)
				ws->errors++;
			close(fd);
		}
		if (got == 0)
			ws->empty++;
	}
	_exit(0);
}

/* ------------------------------------------------------------- client */

/* One client connection. */
struct cconn {
	int		fd;
	int		port;
	int		replied;	/* response byte seen */
	long long	t_start;	/* connect() called */
	long long	t_est;		/* established */
};

struct lat {
	long	*v;
	long	 n;
};

static void
lat_add(struct lat *l, long long ns)
{
	if (ns < 0)
		ns = 0;
	l->v[l->n++] = (long)(ns / 1000);
}

static int
cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x < y ? -1 : x > y);
}

static void
print_lat(const char *name, struct lat *l)
{
	long p50, p90, p99, mx;

	printf("\"%s\": ", name);
	if (l->n == 0) {
		printf("null, ");
		return;
	}
	qsort(l->v, (size_t)l->n, sizeof(long), cmp_long);
	p50 = l->v[(l->n - 1) * 50 / 100];
	p90 = l->v[(l->n - 1) * 90 / 100];
	p99 = l->v[(l->n - 1) * 99 / 100];
	mx = l->v[l->n - 1];
	printf("{\"n\": %ld, \"p50\": %ld, \"p90\": %ld, \"p99\": %ld, "
	    "\"max\": %ld}, ", l->n, p50, p90, p99, mx);
}

struct client {
	struct cconn	*c;
	long		 n;		/* open client connections */
	struct lat	 connect, response, qwait;
	long		 completed;	/* connections with a response/EOF */
	long		 abort_late;	/* handshake aborts already established */
	long long	 t_done;	/* when the last one completed, ns */
};

/*
 * Start one connection.  wait: block (bounded by CONNECT_TIMEOUT_MS) until
 * it is established, as the open-loop client does.  abort: close at once
 * with SO_LINGER 0, before (handshake) or after (reset) establishment.
 * Returns 1 when a connection was added, 0 when aborted, -1 on failure.
 */
static int
client_start(struct client *cl, int port, int wait, int abort, int reset)
{
	struct sockaddr_in sin;
	struct pollfd pfd;
	struct linger lg;
	struct cconn *cc = &cl->c[cl->n];
	socklen_t len;
	int fd, err;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	set_nonblock(fd);
	lo_addr(&sin, port);
	memset(cc, 0, sizeof(*cc));
	cc->fd = fd;
	cc->t_start = now_ns();
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0)
		cc->t_est = now_ns();
	else if (errno != EINPROGRESS)
		goto bad;
	cc->port = sock_port(fd, 1);
	if (abort && !reset) {
		/*
		 * Over loopback the handshake usually completes inside
		 * connect(2): count the aborts that came too late to stop it
		 * (writable already), which are resets after the handshake.
		 */
		pfd.fd = fd;
		pfd.events = POLLOUT;
		len = sizeof(err);
		if (cc->t_est != 0 || (poll(&pfd, 1, 0) == 1 &&
		    (pfd.revents & POLLOUT) != 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
		    err == 0))
			cl->abort_late++;
		lg.l_onoff = 1;
		lg.l_linger = 0;
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
		return (0);
	}
	if (cc->t_est == 0 && (wait || abort)) {
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) != 1)
			goto bad;
		len = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
		    err != 0)
			goto bad;
		cc->t_est = now_ns();
	}
	if (cc->t_est != 0)
		lat_add(&cl->connect, cc->t_est - cc->t_start);
	if (abort) {
		lg.l_onoff = 1;
		lg.l_linger = 0;
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(fd);
		return (0);
	}
	cl->n++;
	return (1);
bad:
	close(fd);
	return (-1);
}

/*
 * The accept-queue wait of a connection the server accepted: accept time
 * (written by the worker or acceptor, by port) minus establishment.  The
 * slot holds this connection's time only if it is after connect() began.
 */
static void
client_qwait(struct client *cl, struct cconn *cc)
{
	long long a;

	if (cc->port < 0 || cc->t_est == 0)
		return;
	a = sh->acc_ns[cc->port];
	if (a >= cc->t_start)
		lat_add(&cl->qwait, a - cc->t_est);
}

/*
 * Look at every open client connection once (timeout_ms for the first
 * event).  A connection being established gets its connect time; the
 * response byte gives the response time; EOF or a reset closes it.
 * close_on_reply: close as soon as the response came (closed loop, or the
 * client holds nothing).  Returns the number of connections closed.
 */
static long
client_poll(struct client *cl, int timeout_ms, int close_on_reply)
{
	struct pollfd *pfd;
	struct cconn *cc;
	char buf[64];
	long i, j, done = 0;
	int err;
	socklen_t len;
	ssize_t r;

	if (cl->n == 0) {
		if (timeout_ms > 0)
			sleep_us((long)timeout_ms * 1000);
		return (0);
	}
	pfd = calloc((size_t)cl->n, sizeof(*pfd));
	if (pfd == NULL)
		die("calloc");
	for (i = 0; i < cl->n; i++) {
		pfd[i].fd = cl->c[i].fd;
		pfd[i].events = cl->c[i].t_est ? POLLIN : POLLOUT;
	}
	if (poll(pfd, (nfds_t)cl->n, timeout_ms) <= 0) {
		free(pfd);
		return (0);
	}
	for (i = 0, j = 0; i < cl->n; i++) {
		cc = &cl->c[i];
		if (pfd[i].revents != 0 && cc->t_est == 0) {
			len = sizeof(err);
			if (getsockopt(cc->fd, SOL_SOCKET, SO_ERROR, &err,
			    &len) == 0 && err == 0) {
				cc->t_est = now_ns();
				lat_add(&cl->connect, cc->t_est - cc->t_start);
				cl->c[j++] = *cc;
				continue;
			}
			close(cc->fd);
			done++;
			continue;
		}
		if (pfd[i].revents != 0) {
			r = read(cc->fd, buf, sizeof(buf));
			if (r > 0 && !cc->replied) {
				cc->replied = 1;
				cl->completed++;
				cl->t_done = now_ns();
				lat_add(&cl->response, now_ns() - cc->t_start);
				client_qwait(cl, cc);
			}
			if (r <= 0 || close_on_reply) {
				if (!cc->replied) {
					/* serial model: EOF is the answer */
					cl->completed++;
					cl->t_done = now_ns();
					lat_add(&cl->response,
					    now_ns() - cc->t_start);
					client_qwait(cl, cc);
				}
				close(cc->fd);
				done++;
				continue;
			}
		}
		cl->c[j++] = *cc;
	}
	cl->n = j;
	free(pfd);
	return (done);
}

static void
client_close_all(struct client *cl)
{
	long i;

	for (i = 0; i < cl->n; i++) {
		if (!cl->c[i].replied)
			client_qwait(cl, &cl->c[i]);
		close(cl->c[i].fd);
	}
	cl->n = 0;
}

/* ---------------------------------------------------------- snapshots */

/*
 * The kernel's counters at one moment, as the text the kernel gives (the
 * harness does the arithmetic, rxl.bench.wakeups): /proc/interrupts
 * whole, the cpu lines of /proc/stat, and per worker and client process
 * the context-switch lines of /proc/<pid>/status and its
 * /proc/<pid>/schedstat (run time ns, wait time ns, timeslices).  Linux
 * only; elsewhere the texts are absent (null in the JSON).
 */
#define	NSNAPS		4	/* idle0, idle1, before, after */
#define	SNAP_IDLE0	0
#define	SNAP_IDLE1	1
#define	SNAP_BEFORE	2
#define	SNAP_AFTER	3
#define	MAXSNAPPROCS	(MAXWORKERS + MAXCPUS)

static const char *const snap_names[NSNAPS] = {
	"idle0", "idle1", "before", "after"
};

struct psnap {
	int	 role;		/* 'w' worker, 'c' client */
	int	 index;		/* rank, or client index */
	pid_t	 pid;
	char	*text;
};

struct snap {
	long long	 t_ns;
	char		*intr;
	char		*stat;
	int		 nproc;
	struct psnap	 p[MAXSNAPPROCS];
};

/*
 * A file's lines starting with one of prefixes (NULL: every line), as one
 * malloc'd string; NULL when the file cannot be read.
 */
static char *
read_lines(const char *path, const char *const *prefixes)
{
	FILE *f;
	char line[65536], *out = NULL, *nout;
	size_t len = 0, l;
	int k, keep;

	if ((f = fopen(path, "r")) == NULL)
		return (NULL);
	while (fgets(line, sizeof(line), f) != NULL) {
		keep = prefixes == NULL;
		for (k = 0; !keep && prefixes[k] != NULL; k++)
			keep = strncmp(line, prefixes[k],
			    strlen(prefixes[k])) == 0;
		if (!keep)
			continue;
		l = strlen(line);
		if ((nout = realloc(out, len + l + 1)) == NULL)
			die("realloc");
		out = nout;
		memcpy(out + len, line, l + 1);
		len += l;
	}
	fclose(f);
	if (out == NULL && (out = strdup("")) == NULL)
		die("strdup");
	return (out);
}

static void
snap_proc(struct snap *sn, int role, int index, pid_t pid)
{
#ifdef __linux__
	static const char *const ctxt[] = { "voluntary_ctxt_switches",
	    "nonvoluntary_ctxt_switches", NULL };
	char path[64], *st, *ss, *t;
	size_t n;

	if (pid <= 0 || sn->nproc >= MAXSNAPPROCS)
		return;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	st = read_lines(path, ctxt);
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	ss = read_lines(path, NULL);
	n = (st ? strlen(st) : 0) + (ss ? strlen(ss) : 0) + 16;
	if ((t = malloc(n)) == NULL)
		die("malloc");
	snprintf(t, n, "%sschedstat: %s", st ? st : "", ss ? ss : "\n");
	free(st);
	free(ss);
	sn->p[sn->nproc].role = role;
	sn->p[sn->nproc].index = index;
	sn->p[sn->nproc].pid = pid;
	sn->p[sn->nproc].text = t;
	sn->nproc++;
#else
	(void)sn;
	(void)role;
	(void)index;
	(void)pid;
#endif
}

static struct snap *
snapshot(const struct opts *o, const pid_t *wpid, const pid_t *cpid)
{
	static const char *const cpu[] = { "cpu", NULL };
	struct snap *sn;
	int r;

	if ((sn = calloc(1, sizeof(*sn))) == NULL)
		die("calloc");
	sn->t_ns = now_ns();
#ifdef __linux__
	sn->intr = read_lines("/proc/interrupts", NULL);
	sn->stat = read_lines("/proc/stat", cpu);
#endif
	for (r = 0; r < o->workers; r++)
		snap_proc(sn, 'w', r, wpid[r]);
	for (r = 0; r < o->nrx; r++)
		snap_proc(sn, 'c', r, cpid[r]);
	return (sn);
}

/* A JSON string, or null. */
static void
print_jstr(const char *s)
{
	const unsigned char *p;

	if (s == NULL) {
		printf("null");
		return;
	}
	putchar('"');
	for (p = (const unsigned char *)s; *p != '\0'; p++) {
		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p == '\n')
			printf("\\n");
		else if (*p == '\t')
			printf("\\t");
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else
			putchar(*p);
	}
	putchar('"');
}

static void
print_snap(const struct snap *sn)
{
	int i;

	if (sn == NULL) {
		printf("null");
		return;
	}
	printf("{\"t_ns\": %lld, \"interrupts\": ", sn->t_ns);
	print_jstr(sn->intr);
	printf(", \"stat\": ");
	print_jstr(sn->stat);
	printf(", \"procs\": [");
	for (i = 0; i < sn->nproc; i++) {
		printf("%s{\"role\": \"%s\", \"index\": %d, \"pid\": %d, "
		    "\"text\": ", i ? ", " : "",
		    sn->p[i].role == 'w' ? "worker" : "client", sn->p[i].index,
		    (int)sn->p[i].pid);
		print_jstr(sn->p[i].text);
		putchar('}');
	}
	printf("]}");
}

/* ------------------------------------------------------------- parent */

static long
sum_field(const struct opts *o, size_t off)
{
	long t = 0;
	int r;

	for (r = 0; r < o->workers; r++)
		t += *(volatile long *)((char *)&sh->w[r] + off);
	return (t);
}

#define	SUM(o, f)	sum_field((o), offsetof(struct wstat, f))

/* Open connections of the workers still alive (not killed by -k). */
static long
open_alive(const struct opts *o, const int *killed)
{
	long t = 0;
	int r;

	for (r = 0; r < o->workers; r++)
		if (!killed[r])
			t += sh->w[r].open;
	return (t);
}

static void
print_longs(const volatile long *v, int n)
{
	int i;

	putchar('[');
	for (i = 0; i < n; i++)
		printf("%s%ld", i ? ", " : "", v[i]);
	putchar(']');
}

static void
parse_order(struct opts *o, char *s)
{
	char *tok, *save = NULL;
	int seen[MAXWORKERS], n = 0, id;

	memset(seen, 0, sizeof(seen));
	for (tok = strtok_r(s, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		id = (int)num(tok, 0, MAXWORKERS - 1, "worker id in -o");
		if (n >= MAXWORKERS || seen[id])
			fail("-o must list each worker id once");
		seen[id] = 1;
		o->order[n++] = id;
	}
	if (n != o->workers)
		fail("-o must list exactly -w worker ids");
	for (id = 0; id < n; id++)
		if (!seen[id])
			fail("-o must be a permutation of 0..workers-1");
}

/* -R: the receiving (client) CPUs, each once, each online. */
static void
parse_rx(struct opts *o, char *s)
{
	char *tok, *save = NULL;
	int seen[MAXCPUS], cpu;

	memset(seen, 0, sizeof(seen));
	o->nrx = 0;
	for (tok = strtok_r(s, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		cpu = (int)num(tok, 0, o->ncpu - 1, "CPU in -R");
		if (seen[cpu])
			fail("-R must list each CPU once");
		seen[cpu] = 1;
		o->rx[o->nrx++] = cpu;
	}
	if (o->nrx == 0)
		fail("-R needs a CPU");
}

/* Abort connection i?  Spread evenly: per mille, Bresenham style. */
static int
aborts(const struct opts *o, long i)
{
	return ((i + 1) * o->abort_pm / 1000 > i * o->abort_pm / 1000);
}

static double
ru_ms(const struct rusage *ru)
{
	return (ru->ru_utime.tv_sec * 1000.0 + ru->ru_utime.tv_usec / 1000.0 +
	    ru->ru_stime.tv_sec * 1000.0 + ru->ru_stime.tv_usec / 1000.0);
}

/*
 * One run's state in the parent, from the workers' start to the JSON: the
 * processes (ranks 0..workers-1, the handoff acceptor after them), their
 * rusage, who was killed and why, the client's counts and times.
 */
struct run {
	pid_t		 pid[MAXWORKERS + 1];
	struct rusage	 ru[MAXWORKERS + 1];
	int		 exited[MAXWORKERS + 1];
	int		 endkill[MAXWORKERS + 1];	/* killed after the grace */
	int		 killed[MAXWORKERS];		/* killed by -k */
	int		 busy_at_stop[MAXWORKERS];
	int		 nproc;
	int		 lfd;		/* the shared listener, or -1 */
	int		 cor;		/* the client closes on the response */
	int		 killed_rank;
	int		 deadline_hit;
	long		 t0, deadline, tc0, tc1;
	long		 ok, failed, aborted, started;
	/* -q: the client processes, one per receiving CPU, and snapshots. */
	pid_t		 cpid[MAXCPUS];
	struct rusage	 cru[MAXCPUS];
	int		 cexited[MAXCPUS];
	struct snap	*snaps[NSNAPS];
};

/* The options: getopt, then the checks that need all of them. */
static void
parse_opts(struct opts *o, int argc, char **argv)
{
	char *order_arg = NULL, *rx_arg = NULL;
	unsigned m;
	int ch, r;

	memset(o, 0, sizeof(*o));
	o->mode_name = NULL;
	o->loop = 1;
	o->workers = 8;
	o->conns = 500;
	o->spacing_us = 2000;
	o->deadline_ms = 30000;
	o->kill_at = -1;
	o->reorder = 16;
	o->untagged = UNTAGGED_LAST;
	o->concurrency = 0;
	o->lag_us = 10000;
	o->mutex_delay_us = 500000;	/* nginx accept_mutex_delay default */
	while ((ch = getopt(argc, argv,
	    "m:M:w:n:s:t:T:H:a:l:x:X:L:D:d:k:r:o:u:P:B:b:q:F:I:R:Z:pcC")) != -1) {
		switch (ch) {
		case 'm':
			o->mode_name = optarg;
			break;
		case 'M':
			o->loop = !choice(optarg, "loop", "serial", "-M");
			break;
		case 'w':
			o->workers = (int)num(optarg, 1, MAXWORKERS, "workers");
			break;
		case 'n':
			o->conns = num(optarg, 1, MAXCONNS, "connections");
			break;
		case 's':
			o->spacing_us = num(optarg, 0, 10000000, "spacing_us");
			break;
		case 't':
			o->work_us = num(optarg, 0, 10000000, "work_us");
			break;
		case 'T':
			o->work_cpu = choice(optarg, "sleep", "cpu", "-T");
			break;
		case 'H':
			o->hold_us = num(optarg, -1, 3600000000L, "hold_us");
			break;
		case 'a':
			o->batch = (int)num(optarg, 0, MAXBATCH,
			    "accepts per wakeup");
			break;
		case 'l':
			o->concurrency = (int)num(optarg, 1, 10000,
			    "concurrency");
			o->closed = 1;
			break;
		case 'x':
			o->abort_pm = (int)num(optarg, 0, 1000,
			    "abort per mille");
			break;
		case 'X':
			o->abort_reset = choice(optarg, "handshake", "reset",
			    "-X");
			break;
		case 'L':
			o->lag_us = num(optarg, 0, 60000000, "lag_us");
			break;
		case 'D':
			o->mutex_delay_us = num(optarg, 1000, 10000000,
			    "mutex_delay_us");
			break;
		case 'd':
			o->deadline_ms = num(optarg, 100, 3600000, "deadline_ms");
			break;
		case 'k':
			o->kill_at = num(optarg, 0, MAXCONNS, "kill_at");
			break;
		case 'r':
			o->reorder = (int)num(optarg, 1, 1000000, "reorder");
			break;
		case 'o':
			order_arg = optarg;
			break;
		case 'u':
			if (strcmp(optarg, "none") == 0)
				o->untagged = UNTAGGED_NONE;
			else
				o->untagged = (int)num(optarg, 0,
				    MAXWORKERS - 1, "untagged rank");
			break;
		case 'B':
			o->bpf_obj = optarg;
			break;
		case 'b':
			o->bpf_maps = optarg;
			break;
		case 'P':
			o->port = (int)num(optarg, 0, 65535, "port");
			break;
		case 'q':
			o->requests = num(optarg, 1, 1000000,
			    "requests per connection");
			break;
		case 'F':
			o->inflight = (int)num(optarg, 1, MAXINFLIGHT,
			    "requests in flight");
			break;
		case 'I':
			o->idle_ms = num(optarg, 0, 60000, "idle_ms");
			break;
		case 'Z':
			o->think_us = num(optarg, 0, 10000000, "think_us");
			break;
		case 'R':
			rx_arg = optarg;
			break;
		case 'p':
			o->pin = 1;
			break;
		case 'c':
			o->rotate = 1;
			break;
		case 'C':
			o->records = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || o->mode_name == NULL)
		usage();
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		if (strcmp(modes[m].name, o->mode_name) == 0)
			break;
	if (m == sizeof(modes) / sizeof(modes[0]))
		fail("unknown mode");
	o->mode = modes[m].mode;
	o->listener = modes[m].listener;
	if (modes[m].loop_only && !o->loop)
		fail("this mode needs the event-loop model (-M loop)");
	for (r = 0; r < o->workers; r++)
		o->order[r] = r;
	if (order_arg != NULL)
		parse_order(o, order_arg);
	if (o->kill_at >= o->conns)
		fail("-k must be below -n");
	if ((o->mode == M_EBPF) != (o->bpf_obj != NULL))
		fail("-B goes with -m ebpf, and -m ebpf needs -B obj:prog");
	if (o->untagged >= o->workers)
		fail("-u must be a rank below -w");
	if (o->untagged == UNTAGGED_LAST)
		o->untagged = o->mode == M_INCOMING_CPU ? o->workers - 1 :
		    UNTAGGED_NONE;
	o->ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (o->ncpu < 1)
		o->ncpu = 1;
	if (o->ncpu > MAXCPUS)
		o->ncpu = MAXCPUS;
	if (o->inflight == 0)
		o->inflight = 1;
	if (rx_arg != NULL)
		parse_rx(o, rx_arg);
	else
		for (o->nrx = 0; o->nrx < o->ncpu; o->nrx++)
			o->rx[o->nrx] = o->nrx;
	if (o->requests > 0 && !o->loop)
		fail("-q needs the event-loop model (-M loop)");
	if (o->requests > 0 && (o->closed || o->abort_pm > 0 ||
	    o->kill_at >= 0 || o->hold_us != 0))
		fail("-q is its own client: no -l, -x, -k or -H");
	if (o->requests == 0 && (rx_arg != NULL || o->think_us > 0))
		fail("-R and -Z go with -q");
	if (o->requests > 0 && o->conns < o->nrx)
		fail("-q needs at least one connection per -R CPU");
}

/*
 * What the run needs before any process starts: enough fds for every
 * client socket, the client's arrays, the shared counters (and records),
 * the eBPF selector.  Returns 0, or the exit status 5 ("cannot load", the
 * rig skips the setup) when the BPF program does not load.
 */
static int
setup(const struct opts *o, struct client *cl)
{
	struct rlimit rl;

	/* Every client socket may be open at once; ask for enough fds. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	memset(cl, 0, sizeof(*cl));
	cl->c = calloc((size_t)o->conns, sizeof(*cl->c));
	cl->connect.v = calloc((size_t)o->conns, sizeof(long));
	cl->response.v = calloc((size_t)o->conns, sizeof(long));
	cl->qwait.v = calloc((size_t)o->conns, sizeof(long));
	if (cl->c == NULL || cl->connect.v == NULL || cl->response.v == NULL ||
	    cl->qwait.v == NULL)
		die("calloc");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANON, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	if (o->records) {
		maxrec = o->conns < MAXRECS ? o->conns : MAXRECS;
		recs = mmap(NULL, (size_t)maxrec * sizeof(*recs),
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANON, -1, 0);
		if (recs == MAP_FAILED)
			die("mmap");
	}
	if (o->mode == M_EBPF) {
#ifdef RXL_EBPF
		char obj[4096], *colon;

		snprintf(obj, sizeof(obj), "%s", o->bpf_obj);
		if ((colon = strrchr(obj, ':')) == NULL)
			fail("-B wants object:program");
		*colon = '\0';
		if (ebpf_load(obj, colon + 1, o->bpf_maps) != 0)
			return (5);
#else
		fprintf(stderr, "acceptd: cannot load BPF: built without "
		    "RXL_EBPF (libbpf)\n");
		return (5);
#endif
	}
	return (0);
}

/* The listener the workers (or the acceptor) share, bound on loopback. */
static int
shared_listener(const struct opts *o)
{
	struct sockaddr_in sin;
	socklen_t len;
	int lfd, one = 1;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd == -1)
		die("socket");
	/*
	 * reuseport-prefork: the flag on a listener that is then shared by
	 * fork.  SO_REUSEPORT only matters to bind(2) of further sockets;
	 * one socket shared by N processes is one wait queue, so this
	 * behaves exactly as noflag.
	 */
	if (o->mode == M_PREFORK && setsockopt(lfd, SOL_SOCKET,
	    SO_REUSEPORT, &one, sizeof(one)) != 0)
		die("setsockopt SO_REUSEPORT");
	lo_addr(&sin, o->port);
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		die("bind");
	if (listen(lfd, LISTEN_BACKLOG) != 0)
		die("listen");
	len = sizeof(sin);
	if (getsockname(lfd, (struct sockaddr *)&sin, &len) != 0)
		die("getsockname");
	sh->port = ntohs(sin.sin_port);
	/* Non-blocking: losing the accept race must not block. */
	set_nonblock(lfd);
	return (lfd);
}

/*
 * Start the workers and, for the handoff modes, the acceptor.  Fork in
 * worker id order, register in -o order: the seed's control reverses
 * registration but not creation, and the parent holds every worker until
 * its turn so the order is exact.  Everything else is indexed by rank:
 * output and kill follow registration order.  Returns 0, or 1 when a
 * worker failed to register (every worker is then killed and reaped).
 */
static int
start_workers(const struct opts *o, struct run *run)
{
	int ready[2], r;
	long i;
	char c;

	if (pipe(ready) != 0)
		die("pipe");
	for (r = 0; r < o->workers; r++)
		go[r][0] = go[r][1] = hfd[r][0] = hfd[r][1] = -1;
	for (r = 0; r < o->workers; r++) {
		if (pipe(go[r]) != 0)
			die("pipe");
		if (o->listener == L_HANDOFF) {
			if (socketpair(AF_UNIX, SOCK_DGRAM, 0, hfd[r]) != 0)
				die("socketpair");
			set_nonblock(hfd[r][1]);
		}
	}
	fflush(stdout);
	for (i = 0; i < o->workers; i++) {
		for (r = 0; o->order[r] != i; r++)
			;
		if ((run->pid[r] = fork()) == -1)
			die("fork");
		if (run->pid[r] == 0)
			worker(o, r, o->listener == L_HANDOFF ? hfd[r][1] :
			    run->lfd, go[r][0], ready[1], run->deadline);
	}
	for (r = 0; r < o->workers; r++) {
		struct pollfd pfd;

		c = 'g';
		if (write(go[r][1], &c, 1) != 1)
			die("write");
		pfd.fd = ready[0];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, REG_TIMEOUT_MS) != 1 ||
		    read(ready[0], &c, 1) != 1 || c != 'r') {
			if (sh->w[r].pinfail)
				fprintf(stderr, "acceptd: rank %d cannot be "
				    "pinned to CPU %d: %s\n", r, r % o->ncpu,
				    strerror(sh->w[r].regerr));
			else
				fprintf(stderr, "acceptd: rank %d failed to "
				    "register: %s\n", r,
				    strerror(sh->w[r].regerr));
			sh->stop = 1;
			for (i = 0; i < o->workers; i++)
				(void)kill(run->pid[i], SIGKILL);
			while (wait(NULL) > 0)
				;
			return (1);
		}
	}
	if (o->listener == L_HANDOFF) {
		int afd[MAXWORKERS];

		/* The workers' ends are theirs alone now (close_inherited). */
		for (r = 0; r < o->workers; r++) {
			close_made(&hfd[r][1]);
			afd[r] = hfd[r][0];
		}
		if ((run->pid[o->workers] = fork()) == -1)
			die("fork");
		if (run->pid[o->workers] == 0)
			acceptor(o, run->lfd, afd, run->deadline);
		for (r = 0; r < o->workers; r++)
			close_made(&hfd[r][0]);
	}
	return (0);
}

/*
 * The client.  Open loop: one connection at a time on a fixed schedule,
 * each waited for until established.  Closed loop: up to -l connections in
 * flight; a slot is free again when its response (or, serial model, EOF)
 * came, or after the server's close when the server holds for a fixed
 * time.  With -k, rank 0 is killed once -k connections were started.
 */
static void
run_client(const struct opts *o, struct client *cl, struct run *run)
{
	struct timespec next;
	long last;

	clock_gettime(CLOCK_MONOTONIC, &next);
	run->tc0 = now_ms();
	while (run->started < o->conns && now_ms() < run->deadline) {
		int ab, rc;

		if (o->closed && cl->n >= o->concurrency) {
			(void)client_poll(cl, 10, run->cor);
			continue;
		}
		if (o->rotate)
			(void)pin_self((int)(run->started % o->ncpu));
		ab = o->abort_pm > 0 && aborts(o, run->started);
		rc = client_start(cl, sh->port, !o->closed, ab, o->abort_reset);
		if (rc == 1)
			run->ok++;
		else if (rc == 0)
			run->aborted++;
		else
			run->failed++;
		run->started++;
		(void)client_poll(cl, 0, run->cor);
		if (o->kill_at >= 0 && run->started == o->kill_at &&
		    run->pid[0] > 0) {
			/*
			 * Let the victim finish what it was handed, bounded,
			 * so "accepted before the kill" is a clean number.
			 */
			last = now_ms();
			while (SUM(o, accepts) < run->ok && now_ms() - last < 200)
				(void)client_poll(cl, 1, run->cor);
			(void)kill(run->pid[0], SIGKILL);
			run->killed[0] = 1;
			run->killed_rank = 0;
		}
		if (o->closed)
			continue;
		next.tv_nsec += (o->spacing_us % 1000000) * 1000;
		next.tv_sec += o->spacing_us / 1000000 +
		    next.tv_nsec / 1000000000;
		next.tv_nsec %= 1000000000;
		/*
		 * Until the next connection is due, watch the open ones, so a
		 * response is timed when it comes, not at the next tick.
		 */
		for (;;) {
			long long left = (long long)next.tv_sec * 1000000000LL +
			    next.tv_nsec - now_ns();

			if (left < 1000000 || cl->n == 0)
				break;
			(void)client_poll(cl, (int)(left / 1000000), run->cor);
		}
		(void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
		    NULL);
	}
	if (o->rotate)
		(void)pin_self(0);
}

/*
 * Settle: wait until every established client was accepted and handled
 * (served, or dropped on a reset), or nothing moved for a while (a killed
 * listener's queue is lost on Linux unless tcp_migrate_req is set), or the
 * deadline.  Aborted clients may or may not have reached the accept queue,
 * so they are not waited for.  Then the client ends its long-lived
 * connections, and the workers are told to stop.
 */
static void
settle(const struct opts *o, struct client *cl, struct run *run)
{
	long settle_ms, last, lastn, want;
	int r;

	settle_ms = 500 + 4 * o->work_us / 1000;
	last = now_ms();
	lastn = SUM(o, handled);
	for (;;) {
		want = SUM(o, handled) >= run->ok && SUM(o, accepts) >= run->ok;
		if (o->closed)
			want = want && cl->n == 0;
		else if (o->hold_us > 0)
			want = want && open_alive(o, run->killed) == 0;
		if (want || now_ms() >= run->deadline)
			break;
		(void)client_poll(cl, 2, run->cor);
		if (SUM(o, handled) + open_alive(o, run->killed) + cl->n !=
		    lastn) {
			lastn = SUM(o, handled) + open_alive(o, run->killed) +
			    cl->n;
			last = now_ms();
		} else if (now_ms() - last > settle_ms &&
		    !(o->hold_us > 0 && open_alive(o, run->killed) > 0))
			break;
	}
	(void)client_poll(cl, 0, run->cor);	/* responses already sent */
	run->tc1 = now_ms();
	/* Long-lived connections: the client ends them; the workers see EOF. */
	client_close_all(cl);
	last = now_ms();
	while (open_alive(o, run->killed) > 0 && now_ms() - last < 1000 &&
	    now_ms() < run->deadline)
		sleep_us(2000);
	if (now_ms() >= run->deadline)
		run->deadline_hit = 1;
	for (r = 0; r < o->workers; r++)
		run->busy_at_stop[r] = sh->w[r].busy;
	sh->stop = 1;
}

/*
 * Collect the workers; wait4 gives each one's CPU time, killed too.  A
 * worker inside its work finishes it first: wait that long, and report
 * any worker that had to be killed.
 */
static void
collect(const struct opts *o, struct run *run)
{
	long grace_ms, last;
	int r, st;

	grace_ms = 2000 + WAIT_MS * 4 + 2 * o->work_us / 1000;
	last = now_ms();
	for (;;) {
		int left = 0;

		for (r = 0; r < run->nproc; r++) {
			if (run->exited[r] || run->pid[r] <= 0)
				continue;
			if (wait4(run->pid[r], &st, WNOHANG, &run->ru[r]) ==
			    run->pid[r])
				run->exited[r] = 1;
			else
				left++;
		}
		if (left == 0)
			break;
		if (now_ms() - last > grace_ms)
			for (r = 0; r < run->nproc; r++)
				if (!run->exited[r] && run->pid[r] > 0) {
					(void)kill(run->pid[r], SIGKILL);
					if (r >= o->workers || !run->killed[r])
						run->endkill[r] = 1;
				}
		if (now_ms() - last > grace_ms + 10000)
			break;		/* give up rather than hang */
		sleep_us(5000);
	}
}

/* ------------------------------------------------------- request load */

static int	cgo[MAXCPUS][2];	/* -q: parent -> client k: go */
static int	cnote[2];		/* -q: clients -> parent: 'r', 'd' */

/* A client's failure: its errno (or EPROTO) once, and stop. */
static void
rq_fail(struct cstat *cs, int err)
{
	if (cs->err == 0)
		cs->err = err != 0 ? err : EPROTO;
}

/*
 * One -q client, pinned to receiving CPU o->rx[k]: connects its share of
 * the connections (connection i is client i mod nrx's), says ready, waits
 * for go, then keeps o->inflight requests outstanding, each to the next
 * connection in turn, until every connection carried o->requests; closes
 * them and says done.
 */
static void
rq_client(const struct opts *o, int k, int lfd, long deadline)
{
	struct cstat *cs = &sh->c[k];
	struct sockaddr_in sin;
	struct pollfd pfd;
	struct poller pl;
	struct pev ev[MAXBATCH];
	unsigned char b[REQ_SIZE], (*rb)[REQ_SIZE];
	unsigned char *rl;
	long nconn, i, total, next = 0, *sent, *got;
	int *fds, *cidx = NULL, maxfd = 0, fd, n, j, slept, me, waker;
	int one = 1, r;
	unsigned cpu, seq;
	ssize_t m;
	char c;

	close_inherited(o, -1);
	for (r = 0; r < o->workers; r++)
		close_made(&hfd[r][0]);
	if (lfd != -1)
		close(lfd);
	for (r = 0; r < o->nrx; r++) {
		close_made(&cgo[r][1]);
		if (r != k)
			close_made(&cgo[r][0]);
	}
	close_made(&cnote[0]);
	cs->cpu = o->rx[k];
	nconn = o->conns / o->nrx + (k < o->conns % o->nrx);
	cs->conns = nconn;
	total = nconn * o->requests;
	fds = calloc((size_t)nconn + 1, sizeof(*fds));
	sent = calloc((size_t)nconn + 1, sizeof(*sent));
	got = calloc((size_t)nconn + 1, sizeof(*got));
	rb = calloc((size_t)nconn + 1, sizeof(*rb));
	rl = calloc((size_t)nconn + 1, 1);
	if (fds == NULL || sent == NULL || got == NULL || rb == NULL ||
	    rl == NULL || pl_init(&pl, (int)nconn + 1) != 0) {
		rq_fail(cs, errno);
		goto out;
	}
	if (pin_self(o->rx[k]) != 0) {
		rq_fail(cs, errno);
		goto out;
	}
	lo_addr(&sin, sh->port);
	for (i = 0; i < nconn; i++) {
		if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1 ||
		    connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
			rq_fail(cs, errno);
			goto out;
		}
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
		    sizeof(one));
		set_nonblock(fd);
		fds[i] = fd;
		if (fd > maxfd)
			maxfd = fd;
		if (pl_add(&pl, fd, 0) != 0) {
			rq_fail(cs, errno);
			goto out;
		}
	}
	if ((cidx = calloc((size_t)maxfd + 1, sizeof(*cidx))) == NULL) {
		rq_fail(cs, errno);
		goto out;
	}
	for (i = 0; i < nconn; i++)
		cidx[fds[i]] = (int)i;
	cs->ready = 1;
	c = 'r';
	(void)write(cnote[1], &c, 1);
	pfd.fd = cgo[k][0];
	pfd.events = POLLIN;
	if (poll(&pfd, 1, deadline > now_ms() ? (int)(deadline - now_ms()) :
	    0) != 1 || read(cgo[k][0], &c, 1) != 1 || c != 'g')
		goto out;
	me = cur_cpu();
	for (j = 0; j < o->inflight && cs->sent < total; j++) {
		i = next++ % nconn;
		req_pack(b, (unsigned)cur_cpu(), (unsigned)sent[i]++);
		if (send(fds[i], b, REQ_SIZE, MSG_NOSIGNAL) != REQ_SIZE) {
			rq_fail(cs, errno);
			goto out;
		}
		cs->sent++;
	}
	while (cs->replies < total && cs->err == 0 && !sh->stop &&
	    now_ms() < deadline) {
		n = pl_wait_woken(&pl, ev, MAXBATCH, WAIT_MS, &slept);
		if (slept)
			cs->wk++;
		for (j = 0; j < n && cs->err == 0; j++) {
			fd = ev[j].fd;
			i = cidx[fd];
			waker = slept && j == 0;
			for (;;) {
				m = recv(fd, rb[i] + rl[i], REQ_SIZE - rl[i],
				    MSG_DONTWAIT);
				if (m == -1 && (errno == EAGAIN ||
				    errno == EWOULDBLOCK || errno == EINTR))
					break;
				if (m <= 0) {
					/* The worker closed before the last. */
					rq_fail(cs, m == 0 ? ECONNRESET :
					    errno);
					break;
				}
				rl[i] += (unsigned char)m;
				if (rl[i] < REQ_SIZE)
					continue;
				rl[i] = 0;
				req_unpack(rb[i], &cpu, &seq);
				if (seq != (unsigned)got[i] || got[i] >=
				    sent[i]) {
					cs->rp_bad++;
					rq_fail(cs, EPROTO);
					break;
				}
				got[i]++;
				cs->replies++;
				if (cpu < MAXCPUS)
					cs->by_cpu[cpu]++;
				if ((int)cpu != me)
					cs->rp_remote++;
				if (waker) {
					if ((int)cpu == me)
						cs->wk_local++;
					else
						cs->wk_remote++;
					waker = 0;
				}
				if (cs->sent >= total)
					continue;
				/*
				 * Think time: the client sleeps (its CPU may
				 * idle) before the next request, so each
				 * request finds its worker asleep.
				 */
				sleep_us(o->think_us);
				i = next++ % nconn;
				req_pack(b, (unsigned)cur_cpu(),
				    (unsigned)sent[i]++);
				if (send(fds[i], b, REQ_SIZE, MSG_NOSIGNAL) !=
				    REQ_SIZE) {
					rq_fail(cs, errno);
					break;
				}
				cs->sent++;
				i = cidx[fd];
			}
			if (waker)
				cs->wk_other++;
		}
	}
	if (cs->replies < total)
		rq_fail(cs, ETIMEDOUT);
out:
	if (fds != NULL)
		for (i = 0; i < nconn; i++)
			if (fds[i] > 0)
				close(fds[i]);
	cs->done = 1;
	c = 'd';
	(void)write(cnote[1], &c, 1);
	_exit(0);
}

/* Read the clients' notes until `want` of kind c came; 0, or -1 at the deadline. */
static int
rq_await(char kind, int want, long deadline)
{
	struct pollfd pfd;
	char c;
	int got = 0;

	while (got < want) {
		pfd.fd = cnote[0];
		pfd.events = POLLIN;
		if (now_ms() >= deadline ||
		    poll(&pfd, 1, (int)(deadline - now_ms())) != 1 ||
		    read(cnote[0], &c, 1) != 1)
			return (-1);
		if (c == kind)
			got++;
		else if (c == 'd')
			return (-1);	/* a client gave up */
	}
	return (0);
}

/*
 * The -q run: fork the clients, wait until every connection is accepted,
 * snapshot an idle window (the background) and the requests.  The
 * counters go into the JSON; a client that failed says why there.
 */
static void
run_requests(const struct opts *o, struct run *run)
{
	long last, n;
	int k, st;
	char c = 'g';

	if (pipe(cnote) != 0)
		die("pipe");
	for (k = 0; k < o->nrx; k++) {
		if (pipe(cgo[k]) != 0)
			die("pipe");
	}
	fflush(stdout);
	for (k = 0; k < o->nrx; k++) {
		if ((run->cpid[k] = fork()) == -1)
			die("fork");
		if (run->cpid[k] == 0)
			rq_client(o, k, run->lfd, run->deadline);
		close_made(&cgo[k][0]);
	}
	close_made(&cnote[1]);
	run->tc0 = now_ms();
	if (rq_await('r', o->nrx, run->deadline) == 0) {
		/* Every connection established; wait for their accepts. */
		last = now_ms();
		n = SUM(o, accepts);
		while (SUM(o, accepts) < o->conns && now_ms() < run->deadline &&
		    now_ms() - last < 2000) {
			sleep_us(1000);
			if (SUM(o, accepts) != n) {
				n = SUM(o, accepts);
				last = now_ms();
			}
		}
		if (o->idle_ms > 0) {
			run->snaps[SNAP_IDLE0] = snapshot(o, run->pid,
			    run->cpid);
			sleep_us(o->idle_ms * 1000);
			run->snaps[SNAP_IDLE1] = snapshot(o, run->pid,
			    run->cpid);
		}
		run->snaps[SNAP_BEFORE] = snapshot(o, run->pid, run->cpid);
		for (k = 0; k < o->nrx; k++)
			(void)write(cgo[k][1], &c, 1);
		if (rq_await('d', o->nrx, run->deadline) == 0)
			run->snaps[SNAP_AFTER] = snapshot(o, run->pid,
			    run->cpid);
	}
	run->tc1 = now_ms();
	for (k = 0; k < o->nrx; k++)
		close_made(&cgo[k][1]);
	for (k = 0; k < o->nrx; k++)
		run->ok += sh->c[k].ready ? sh->c[k].conns : 0;
	/* The clients exit right after their note; reap them, bounded. */
	last = now_ms();
	for (;;) {
		int left = 0;

		for (k = 0; k < o->nrx; k++) {
			if (run->cexited[k])
				continue;
			if (wait4(run->cpid[k], &st, WNOHANG, &run->cru[k]) ==
			    run->cpid[k])
				run->cexited[k] = 1;
			else
				left++;
		}
		if (left == 0 || now_ms() - last > 3000)
			break;
		if (now_ms() - last > 2000)
			for (k = 0; k < o->nrx; k++)
				if (!run->cexited[k])
					(void)kill(run->cpid[k], SIGKILL);
		sleep_us(2000);
	}
	close_made(&cnote[0]);
}

static void
print_requests(const struct opts *o, const struct run *run)
{
	int k, r;

	printf(", \"requests\": {\"per_connection\": %ld, \"in_flight\": %d, "
	    "\"think_us\": %ld, \"idle_ms\": %ld, \"clk_tck\": %ld, "
	    "\"rx_cpus\": [", o->requests, o->inflight, o->think_us,
	    o->idle_ms, sysconf(_SC_CLK_TCK));
	for (k = 0; k < o->nrx; k++)
		printf("%s%d", k ? ", " : "", o->rx[k]);
	printf("], \"clients\": [");
	for (k = 0; k < o->nrx; k++) {
		const struct cstat *cs = &sh->c[k];

		printf("%s{\"index\": %d, \"cpu\": %d, \"pid\": %d, "
		    "\"conns\": %ld, \"sent\": %ld, \"replies\": %ld, "
		    "\"rp_remote\": %ld, \"rp_bad\": %ld, \"wk\": %ld, "
		    "\"wk_local\": %ld, \"wk_remote\": %ld, \"wk_other\": %ld, "
		    "\"ready\": %s, \"done\": %s, \"error\": ",
		    k ? ", " : "", k, o->rx[k], (int)run->cpid[k], cs->conns,
		    cs->sent, cs->replies, cs->rp_remote, cs->rp_bad, cs->wk,
		    cs->wk_local, cs->wk_remote, cs->wk_other,
		    cs->ready ? "true" : "false", cs->done ? "true" : "false");
		print_jstr(cs->err ? strerror(cs->err) : NULL);
		printf(", \"cpu_ms\": %.3f, \"by_cpu\": ", ru_ms(&run->cru[k]));
		print_longs(cs->by_cpu, o->ncpu);
		putchar('}');
	}
	printf("], \"workers\": [");
	for (r = 0; r < o->workers; r++) {
		const struct wstat *ws = &sh->w[r];

		printf("%s{\"rank\": %d, \"pid\": %d, \"rq\": %ld, "
		    "\"rq_local\": %ld, \"rq_bad\": %ld, \"wk\": %ld, "
		    "\"wk_local\": %ld, \"wk_remote\": %ld, \"wk_other\": %ld, "
		    "\"rq_from\": ", r ? ", " : "", r, (int)run->pid[r], ws->rq,
		    ws->rq_local, ws->rq_bad, ws->wk, ws->wk_local,
		    ws->wk_remote, ws->wk_other);
		print_longs(ws->rq_from, o->ncpu);
		putchar('}');
	}
	printf("], \"snapshots\": {");
	for (k = 0; k < NSNAPS; k++) {
		printf("%s\"%s\": ", k ? ", " : "", snap_names[k]);
		print_snap(run->snaps[k]);
	}
	printf("}}");
}

/* The run as one JSON object on stdout (print_lat sorts the client's latencies). */
static void
print_json(const struct opts *o, struct client *cl, const struct run *run)
{
	long i;
	int r;

	printf("{\"tool\": \"acceptd\", \"version\": 2, ");
#if defined(__linux__)
	printf("\"os\": \"Linux\", ");
#elif defined(__FreeBSD__)
	printf("\"os\": \"FreeBSD\", ");
#else
	printf("\"os\": \"other\", ");
#endif
	printf("\"setup\": \"%s\", \"server\": \"%s\", \"workers\": %d, "
	    "\"connections\": %ld, \"spacing_us\": %ld, \"work_us\": %ld, "
	    "\"work_kind\": \"%s\", \"hold_us\": %ld, "
	    "\"accepts_per_wakeup\": %d, \"client\": \"%s\", "
	    "\"concurrency\": %d, \"abort_permille\": %d, "
	    "\"abort_kind\": \"%s\", \"lag_us\": %ld, "
	    "\"mutex_delay_us\": %ld, \"ncpu\": %d, ",
	    o->mode_name, o->loop ? "loop" : "serial", o->workers, o->conns,
	    o->spacing_us, o->work_us, o->work_cpu ? "cpu" : "sleep",
	    o->hold_us, o->batch, o->closed ? "closed" : "open",
	    o->concurrency, o->abort_pm,
	    o->abort_reset ? "reset" : "handshake", o->lag_us,
	    o->mutex_delay_us, o->ncpu);
	printf("\"pin\": %s, \"client_rotate\": %s, \"reorder_every\": %d, "
	    "\"kill_at\": %ld, \"killed_rank\": %d, \"untagged_rank\": %d, ",
	    o->pin ? "true" : "false", o->rotate ? "true" : "false",
	    o->reorder, o->kill_at, run->killed_rank, o->untagged);
	printf("\"port\": %d, \"connect_ok\": %ld, \"connect_failed\": %ld, "
	    "\"aborted\": %ld, \"aborted_established\": %ld, "
	    "\"accepted\": %ld, \"resets\": %ld, "
	    "\"completed\": %ld, \"deadline_hit\": %s, \"elapsed_ms\": %ld, "
	    "\"client_ms\": %ld, \"conn_per_s\": %.1f, ",
	    sh->port, run->ok, run->failed, run->aborted, cl->abort_late,
	    SUM(o, accepts), SUM(o, resets),
	    cl->completed, run->deadline_hit ? "true" : "false",
	    now_ms() - run->t0, run->tc1 - run->tc0,
	    cl->t_done > run->tc0 * 1000000LL ? cl->completed * 1e9 /
	    (double)(cl->t_done - run->tc0 * 1000000LL) : 0.0);
	print_lat("connect_us", &cl->connect);
	print_lat("response_us", &cl->response);
	print_lat("queue_wait_us", &cl->qwait);
	if (o->listener == L_HANDOFF)
		printf("\"acceptor\": {\"wakeups\": %ld, \"accepts\": %ld, "
		    "\"empty_wakeups\": %ld, \"errors\": %ld, "
		    "\"cpu_ms\": %.3f, \"killed_at_end\": %s}, ",
		    sh->acc.wakeups, sh->acc.accepts, sh->acc.empty,
		    sh->acc.errors, ru_ms(&run->ru[o->workers]),
		    run->endkill[o->workers] ? "true" : "false");
	printf("\"order\": [");
	for (r = 0; r < o->workers; r++)
		printf("%s%d", r ? ", " : "", o->order[r]);
	printf("], \"per_worker\": [");
	for (r = 0; r < o->workers; r++) {
		struct wstat *ws = &sh->w[r];

		printf("%s{\"rank\": %d, \"id\": %d, \"cpu\": %d, "
		    "\"exclusive\": %s, \"tagged\": %s, \"wakeups\": %ld, "
		    "\"accepts\": %ld, \"empty_wakeups\": %ld, \"errors\": %ld, "
		    "\"handled\": %ld, \"resets\": %ld, \"open_max\": %ld, "
		    "\"open_end\": %ld, \"mutex_held\": %ld, "
		    "\"cpu_ms\": %.3f, \"vcsw\": %ld, \"ivcsw\": %ld, "
		    "\"local\": %ld, \"killed\": %s, \"killed_at_end\": %s, "
		    "\"busy_at_stop\": %s, "
		    "\"exited\": %s, \"hcpu_unknown\": %d, \"accept_cpus\": ",
		    r ? ", " : "", r, o->order[r], o->pin ? r % o->ncpu : -1,
		    o->listener == L_SHARED && (pl_flags(o, r) & PL_EXCL) ?
		    "true" : "false",
		    o->mode == M_INCOMING_CPU && r != o->untagged ? "true" :
		    "false",
		    ws->wakeups, ws->accepts, ws->empty, ws->errors,
		    ws->handled, ws->resets, ws->open_max, ws->open,
		    ws->mutex_held, ru_ms(&run->ru[r]),
		    (long)run->ru[r].ru_nvcsw, (long)run->ru[r].ru_nivcsw,
		    ws->local, run->killed[r] ? "true" : "false",
		    run->endkill[r] ? "true" : "false",
		    run->busy_at_stop[r] ? "true" : "false",
		    run->exited[r] ? "true" : "false", ws->hcpu_unknown);
		print_longs(ws->acpu, o->ncpu);
		printf(", \"handshake_cpus\": ");
		print_longs(ws->hcpu, o->ncpu);
		putchar('}');
	}
	putchar(']');
	if (o->requests > 0)
		print_requests(o, run);
#ifdef RXL_EBPF
	if (o->mode == M_EBPF)
		ebpf_print(stdout);
#endif
	if (recs != NULL) {
		long n = sh->nrec < maxrec ? sh->nrec : maxrec;

		printf(", \"records\": [");
		for (i = 0; i < n; i++)
			printf("%s[%d, %d, %d, %d]", i ? ", " : "",
			    recs[i].worker, recs[i].cpu, recs[i].hcpu,
			    recs[i].port);
		putchar(']');
	}
	printf("}\n");
}

int
main(int argc, char **argv)
{
	static struct run run;
	struct opts o;
	struct client cl;
	int rc, r;

	parse_opts(&o, argc, argv);
	memset(&run, 0, sizeof(run));
	run.nproc = o.workers + (o.listener == L_HANDOFF);
	run.lfd = -1;
	run.killed_rank = -1;
	/*
	 * The client closes on the response only in a closed loop against a
	 * server that holds until the client closes; otherwise it waits for
	 * the server's close, so TIME_WAIT lands on the server and the
	 * client's ephemeral ports stay free across repetitions.
	 */
	run.cor = o.closed && o.hold_us == HOLD_CLIENT;
	for (r = 0; r < run.nproc; r++)
		run.pid[r] = -1;
	if ((rc = setup(&o, &cl)) != 0)
		return (rc);
	run.t0 = now_ms();
	run.deadline = run.t0 + o.deadline_ms;
	if (o.listener != L_OWN)
		run.lfd = shared_listener(&o);
	if (start_workers(&o, &run) != 0)
		return (1);
	if (o.requests > 0)
		run_requests(&o, &run);
	else
		run_client(&o, &cl, &run);
	settle(&o, &cl, &run);
	collect(&o, &run);
	print_json(&o, &cl, &run);
	return (0);
}
