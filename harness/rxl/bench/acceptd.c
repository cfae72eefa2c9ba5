/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * acceptd: an accept-distribution rig.
 *
 * N worker processes accept TCP connections on 127.0.0.1 and count, per
 * worker, the wakeups, the accepted connections, the wakeups that found
 * nothing to accept (EAGAIN) and, per accepted connection, the CPU the
 * worker ran on and the CPU that completed the handshake.  The parent
 * process is the client: it opens the connections one at a time, a fixed
 * spacing apart, and then prints one JSON object on stdout.
 *
 * Processes, not threads: the seed measurement (seeds/004, "The rig") forks
 * its workers, each with its own epoll instance, and the wait-queue effect
 * it shows needs one wait entry per worker.  Processes also make "kill the
 * first worker" a plain SIGKILL and give exact per-worker CPU time through
 * wait4(2).
 *
 * Everything is bounded: every wait has a timeout, the whole run has a
 * deadline (-d) after which workers exit on their own, and only loopback
 * is ever connected to.
 *
 * Portable parts are C99 + POSIX; epoll, SO_INCOMING_CPU and
 * SO_ATTACH_REUSEPORT_CBPF are Linux-only and kept under __linux__ so the
 * same file builds on FreeBSD, where the "lb" mode uses SO_REUSEPORT_LB.
 */

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
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
#define	ACCEPT_BATCH	64		/* accepts per wakeup, bounds a drain */
#define	WAIT_MS		100		/* worker wait slice: how fast stop is seen */
#define	REG_TIMEOUT_MS	5000		/* one worker's registration turn */
#define	CONNECT_TIMEOUT_MS 1000
#define	LISTEN_BACKLOG	1024

enum mode {
	M_NOFLAG,	/* shared listener, epoll, no flag */
	M_EXCLUSIVE,	/* shared listener, every worker EPOLLEXCLUSIVE */
	M_HALF,		/* shared listener, even ranks EPOLLEXCLUSIVE */
	M_REORDER,	/* EPOLLEXCLUSIVE, DEL+ADD every -r accepts */
	M_REUSEPORT,	/* one listener per worker, SO_REUSEPORT hash */
	M_INCOMING_CPU,	/* SO_REUSEPORT + SO_INCOMING_CPU, one untagged */
	M_CBPF_CPU,	/* SO_REUSEPORT + classic BPF returning the CPU */
	M_LB		/* FreeBSD SO_REUSEPORT_LB */
};

static const struct {
	const char	*name;
	enum mode	 mode;
	int		 shared;	/* one listener for all workers */
} modes[] = {
	{ "noflag",		M_NOFLAG,	1 },
	{ "exclusive",		M_EXCLUSIVE,	1 },
	{ "half",		M_HALF,		1 },
	{ "reorder16",		M_REORDER,	1 },
	{ "reuseport",		M_REUSEPORT,	0 },
	{ "incoming-cpu",	M_INCOMING_CPU,	0 },
	{ "cbpf-cpu",		M_CBPF_CPU,	0 },
	{ "lb",			M_LB,		0 },
};

/*
 * Counters live in a MAP_SHARED mapping so the parent can read them while
 * the run is going (to know when every connection has been accepted) and
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
	volatile long	acpu[MAXCPUS];	/* accepts by worker CPU */
	volatile long	hcpu[MAXCPUS];	/* accepts by handshake CPU */
	volatile int	hcpu_unknown;
	volatile int	regerr;		/* errno of a failed registration */
};

struct shared {
	volatile int	stop;
	volatile int	port;		/* set by the first registrant */
	volatile long	nrec;		/* -C records used so far (approx.) */
	struct wstat	w[MAXWORKERS];
};

struct rec {
	int	worker;			/* registration rank */
	int	cpu;
	int	hcpu;
};

struct opts {
	enum mode	 mode;
	const char	*mode_name;
	int		 shared;
	int		 workers;
	long		 conns;
	long		 spacing_us;
	long		 work_us;
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
};

static struct shared	*sh;
static struct rec	*recs;		/* MAP_SHARED too; -C only */
static long		 maxrec;

static void
usage(void)
{
	fprintf(stderr,
	    "usage: acceptd -m mode [-w workers] [-n connections] "
	    "[-s spacing_us]\n"
	    "               [-t work_us] [-d deadline_ms] [-k kill_at] "
	    "[-r reorder_every]\n"
	    "               [-o id,id,...] [-u untagged_rank] [-P port] "
	    "[-p] [-c] [-C]\n"
	    "modes: noflag exclusive half reorder16 reuseport incoming-cpu "
	    "cbpf-cpu lb\n");
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

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
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

static void
sleep_us(long us)
{
	struct timespec ts;

	if (us <= 0)
		return;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	/* EINTR just shortens the fake work; no loop needed. */
	(void)nanosleep(&ts, NULL);
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

#ifdef __linux__
static int
ep_add(int ep, int lfd, int excl)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN | (excl ? EPOLLEXCLUSIVE : 0);
	ev.data.fd = lfd;
	return (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev));
}
#endif

static int
is_excl(const struct opts *o, int rank)
{
	return (o->mode == M_EXCLUSIVE || o->mode == M_REORDER ||
	    (o->mode == M_HALF && rank % 2 == 0));
}

/*
 * One worker.  Waits for its registration turn on go_fd, registers (epoll
 * ADD on the shared listener, or bind+listen of its own), acknowledges on
 * ready_fd, then serves until the parent says stop or the deadline passes.
 */
static void
worker(const struct opts *o, int rank, int lfd, int go_fd, int ready_fd,
    long deadline)
{
	struct wstat *ws = &sh->w[rank];
	struct pollfd pfd;
	char c;
	int cpu, ep = -1, fd, got, n, b, hc, myc;
	long r;

	cpu = rank % o->ncpu;
	if (o->pin)
		(void)pin_self(cpu);

	pfd.fd = go_fd;
	pfd.events = POLLIN;
	/* A negative timeout would mean forever: clamp at the deadline. */
	if (poll(&pfd, 1, deadline > now_ms() ? (int)(deadline - now_ms()) :
	    0) != 1 ||
	    read(go_fd, &c, 1) != 1)
		_exit(3);
	c = 'r';

	if (o->shared) {
#ifdef __linux__
		if ((ep = epoll_create1(0)) == -1 ||
		    ep_add(ep, lfd, is_excl(o, rank)) != 0) {
			ws->regerr = errno;
			c = 'e';
		}
#else
		/* Without epoll the shared modes are poll(2): a plain herd. */
		(void)ep;
		if (o->mode != M_NOFLAG) {
			ws->regerr = EOPNOTSUPP;
			c = 'e';
		}
#endif
	} else if ((lfd = own_listener(o, rank, cpu)) == -1) {
		ws->regerr = errno;
		c = 'e';
	}
	if (write(ready_fd, &c, 1) != 1 || c != 'r')
		_exit(4);

	while (!sh->stop && now_ms() < deadline) {
#ifdef __linux__
		if (ep != -1) {
			struct epoll_event ev;

			n = epoll_wait(ep, &ev, 1, WAIT_MS);
		} else
#endif
		{
			pfd.fd = lfd;
			pfd.events = POLLIN;
			n = poll(&pfd, 1, WAIT_MS);
		}
		if (n <= 0)
			continue;
		ws->wakeups++;
		/*
		 * Drain: a wakeup may find several queued connections, the way
		 * the seed counted "wakeups that accepted two at once".
		 */
		for (got = 0, b = 0; b < ACCEPT_BATCH; b++) {
			fd = accept(lfd, NULL, NULL);
			if (fd == -1) {
				if (errno != EAGAIN && errno != EWOULDBLOCK &&
				    errno != ECONNABORTED && errno != EINTR)
					ws->errors++;
				break;
			}
			got++;
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
			if (recs != NULL && (r = sh->nrec++) < maxrec) {
				/* Racy index across workers: -C is a debug aid. */
				recs[r].worker = rank;
				recs[r].cpu = myc;
				recs[r].hcpu = hc;
			}
			ws->accepts++;
			/*
			 * Fake work sleeps rather than spins: what matters to
			 * the wakeup order is that the worker is outside its
			 * wait, and spinning on 2 cores would make CPU
			 * contention, not the queue, the variable measured.
			 */
			sleep_us(o->work_us);
			close(fd);
#ifdef __linux__
			/*
			 * nginx 1.21.6 re-adds the listener every 16 accepts
			 * (ngx_reorder_accept_events): the ADD puts this
			 * worker's exclusive entry at the tail of the wait
			 * queue and so hands the turn on.  MOD is refused for
			 * EPOLLEXCLUSIVE (epoll_ctl(2)), hence DEL+ADD.
			 */
			if (o->mode == M_REORDER && ep != -1 &&
			    ws->accepts % o->reorder == 0) {
				(void)epoll_ctl(ep, EPOLL_CTL_DEL, lfd, NULL);
				if (ep_add(ep, lfd, 1) != 0)
					ws->errors++;
			}
#endif
		}
		if (got == 0)
			ws->empty++;
	}
	_exit(0);
}

/* Open one loopback connection; bounded by CONNECT_TIMEOUT_MS. */
static int
client_connect(int port)
{
	struct sockaddr_in sin;
	struct pollfd pfd;
	socklen_t len;
	int fd, err;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	set_nonblock(fd);
	lo_addr(&sin, port);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		if (errno != EINPROGRESS)
			goto bad;
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) != 1)
			goto bad;
		len = sizeof(err);
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
		    err != 0)
			goto bad;
	}
	return (fd);
bad:
	close(fd);
	return (-1);
}

/*
 * Close the client ends the server has already closed.  The server closes
 * first so TIME_WAIT lands on its side and the client's ephemeral ports
 * stay free across repetitions; a reset instead would make FreeBSD drop
 * the connection from the accept queue before it is counted.
 */
static void
reap_clients(int *cfd, long *ncfd, int wait_ms)
{
	struct pollfd pfd;
	char buf[64];
	long i, j;

	for (i = 0, j = 0; i < *ncfd; i++) {
		pfd.fd = cfd[i];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, wait_ms) == 1 &&
		    read(cfd[i], buf, sizeof(buf)) <= 0) {
			close(cfd[i]);
			continue;
		}
		cfd[j++] = cfd[i];
	}
	*ncfd = j;
}

static long
total_accepts(const struct opts *o)
{
	long t = 0;
	int r;

	for (r = 0; r < o->workers; r++)
		t += sh->w[r].accepts;
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

int
main(int argc, char **argv)
{
	struct opts o;
	struct sockaddr_in sin;
	struct rusage ru[MAXWORKERS];
	struct rlimit rl;
	struct timespec next;
	pid_t pid[MAXWORKERS];
	int go[MAXWORKERS][2], ready[2];
	int exited[MAXWORKERS], killed[MAXWORKERS];
	int *cfd;
	char *order_arg = NULL, c;
	socklen_t len;
	long deadline, t0, i, ncfd = 0, ok = 0, failed = 0, last, lastn;
	long settle_ms;
	int ch, r, lfd = -1, st, deadline_hit = 0, killed_rank = -1;
	unsigned m;

	memset(&o, 0, sizeof(o));
	o.mode_name = NULL;
	o.workers = 8;
	o.conns = 500;
	o.spacing_us = 2000;
	o.deadline_ms = 30000;
	o.kill_at = -1;
	o.reorder = 16;
	o.untagged = -1;
	while ((ch = getopt(argc, argv, "m:w:n:s:t:d:k:r:o:u:P:pcC")) != -1) {
		switch (ch) {
		case 'm':
			o.mode_name = optarg;
			break;
		case 'w':
			o.workers = (int)num(optarg, 1, MAXWORKERS, "workers");
			break;
		case 'n':
			o.conns = num(optarg, 1, MAXCONNS, "connections");
			break;
		case 's':
			o.spacing_us = num(optarg, 0, 10000000, "spacing_us");
			break;
		case 't':
			o.work_us = num(optarg, 0, 10000000, "work_us");
			break;
		case 'd':
			o.deadline_ms = num(optarg, 100, 3600000, "deadline_ms");
			break;
		case 'k':
			o.kill_at = num(optarg, 0, MAXCONNS, "kill_at");
			break;
		case 'r':
			o.reorder = (int)num(optarg, 1, 1000000, "reorder");
			break;
		case 'o':
			order_arg = optarg;
			break;
		case 'u':
			o.untagged = (int)num(optarg, -1, MAXWORKERS - 1,
			    "untagged rank");
			break;
		case 'P':
			o.port = (int)num(optarg, 0, 65535, "port");
			break;
		case 'p':
			o.pin = 1;
			break;
		case 'c':
			o.rotate = 1;
			break;
		case 'C':
			o.records = 1;
			break;
		default:
			usage();
		}
	}
	if (optind != argc || o.mode_name == NULL)
		usage();
	for (m = 0; m < sizeof(modes) / sizeof(modes[0]); m++)
		if (strcmp(modes[m].name, o.mode_name) == 0)
			break;
	if (m == sizeof(modes) / sizeof(modes[0]))
		fail("unknown mode");
	o.mode = modes[m].mode;
	o.shared = modes[m].shared;
	for (r = 0; r < o.workers; r++)
		o.order[r] = r;
	if (order_arg != NULL)
		parse_order(&o, order_arg);
	if (o.kill_at >= o.conns)
		fail("-k must be below -n");
	if (o.untagged >= o.workers)
		fail("-u must be a rank below -w");
	if (o.mode == M_INCOMING_CPU && o.untagged < 0)
		o.untagged = o.workers - 1;
	o.ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (o.ncpu < 1)
		o.ncpu = 1;
	if (o.ncpu > MAXCPUS)
		o.ncpu = MAXCPUS;

	/* Every client socket may be open at once; ask for enough fds. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	if ((cfd = calloc((size_t)o.conns, sizeof(*cfd))) == NULL)
		die("calloc");
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANON, -1, 0);
	if (sh == MAP_FAILED)
		die("mmap");
	if (o.records) {
		maxrec = o.conns < MAXRECS ? o.conns : MAXRECS;
		recs = mmap(NULL, (size_t)maxrec * sizeof(*recs),
		    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANON, -1, 0);
		if (recs == MAP_FAILED)
			die("mmap");
	}

	t0 = now_ms();
	deadline = t0 + o.deadline_ms;
	if (o.shared) {
		lfd = socket(AF_INET, SOCK_STREAM, 0);
		if (lfd == -1)
			die("socket");
		lo_addr(&sin, o.port);
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
	}
	if (pipe(ready) != 0)
		die("pipe");
	for (r = 0; r < o.workers; r++) {
		if (pipe(go[r]) != 0)
			die("pipe");
		exited[r] = killed[r] = 0;
		memset(&ru[r], 0, sizeof(ru[r]));
	}
	fflush(stdout);
	/*
	 * Fork in worker id order, register in -o order: the seed's control
	 * reverses registration but not creation, and the parent holds every
	 * worker until its turn so the order is exact.  Everything else is
	 * indexed by rank: output and kill follow registration order.
	 */
	for (i = 0; i < o.workers; i++) {
		for (r = 0; o.order[r] != i; r++)
			;
		if ((pid[r] = fork()) == -1)
			die("fork");
		if (pid[r] == 0)
			worker(&o, r, lfd, go[r][0], ready[1], deadline);
	}
	for (r = 0; r < o.workers; r++) {
		struct pollfd pfd;

		c = 'g';
		if (write(go[r][1], &c, 1) != 1)
			die("write");
		pfd.fd = ready[0];
		pfd.events = POLLIN;
		if (poll(&pfd, 1, REG_TIMEOUT_MS) != 1 ||
		    read(ready[0], &c, 1) != 1 || c != 'r') {
			fprintf(stderr, "acceptd: rank %d failed to register: "
			    "%s\n", r, strerror(sh->w[r].regerr));
			sh->stop = 1;
			for (i = 0; i < o.workers; i++)
				(void)kill(pid[i], SIGKILL);
			while (wait(NULL) > 0)
				;
			return (1);
		}
	}

	/* The client: one connection at a time, on a fixed schedule. */
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (i = 0; i < o.conns && now_ms() < deadline; i++) {
		if (o.rotate)
			(void)pin_self((int)(i % o.ncpu));
		if ((cfd[ncfd] = client_connect(sh->port)) == -1)
			failed++;
		else {
			ncfd++;
			ok++;
		}
		reap_clients(cfd, &ncfd, 0);
		if (o.kill_at >= 0 && i + 1 == o.kill_at && pid[0] > 0) {
			/*
			 * Let the victim finish what it was handed, bounded,
			 * so "accepted before the kill" is a clean number.
			 */
			last = now_ms();
			while (total_accepts(&o) < ok && now_ms() - last < 200)
				sleep_us(1000);
			(void)kill(pid[0], SIGKILL);
			killed[0] = 1;
			killed_rank = 0;
		}
		next.tv_nsec += (o.spacing_us % 1000000) * 1000;
		next.tv_sec += o.spacing_us / 1000000 +
		    next.tv_nsec / 1000000000;
		next.tv_nsec %= 1000000000;
		(void)clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next,
		    NULL);
	}
	if (o.rotate)
		(void)pin_self(0);

	/*
	 * Settle: wait until every connected client was accepted, or nothing
	 * moved for a while (a killed listener's queue is lost on Linux
	 * unless tcp_migrate_req is set), or the deadline.
	 */
	settle_ms = 500 + 4 * o.work_us / 1000;
	last = now_ms();
	lastn = total_accepts(&o);
	while (total_accepts(&o) < ok && now_ms() < deadline) {
		reap_clients(cfd, &ncfd, 0);
		sleep_us(2000);
		if (total_accepts(&o) != lastn) {
			lastn = total_accepts(&o);
			last = now_ms();
		} else if (now_ms() - last > settle_ms)
			break;
	}
	if (now_ms() >= deadline)
		deadline_hit = 1;
	sh->stop = 1;

	/* Collect the workers; wait4 gives each one's CPU time, killed too. */
	last = now_ms();
	for (;;) {
		int left = 0;

		for (r = 0; r < o.workers; r++) {
			if (exited[r])
				continue;
			if (wait4(pid[r], &st, WNOHANG, &ru[r]) == pid[r])
				exited[r] = 1;
			else
				left++;
		}
		if (left == 0)
			break;
		if (now_ms() - last > 2000 + WAIT_MS * 4)
			for (r = 0; r < o.workers; r++)
				if (!exited[r])
					(void)kill(pid[r], SIGKILL);
		if (now_ms() - last > 10000)
			break;		/* give up rather than hang */
		sleep_us(5000);
	}
	reap_clients(cfd, &ncfd, 0);
	for (i = 0; i < ncfd; i++)
		close(cfd[i]);

	printf("{\"tool\": \"acceptd\", \"version\": 1, ");
#if defined(__linux__)
	printf("\"os\": \"Linux\", ");
#elif defined(__FreeBSD__)
	printf("\"os\": \"FreeBSD\", ");
#else
	printf("\"os\": \"other\", ");
#endif
	printf("\"setup\": \"%s\", \"workers\": %d, \"connections\": %ld, "
	    "\"spacing_us\": %ld, \"work_us\": %ld, \"ncpu\": %d, "
	    "\"pin\": %s, \"client_rotate\": %s, \"reorder_every\": %d, "
	    "\"kill_at\": %ld, \"killed_rank\": %d, \"untagged_rank\": %d, ",
	    o.mode_name, o.workers, o.conns, o.spacing_us, o.work_us, o.ncpu,
	    o.pin ? "true" : "false", o.rotate ? "true" : "false", o.reorder,
	    o.kill_at, killed_rank, o.untagged);
	printf("\"port\": %d, \"connect_ok\": %ld, \"connect_failed\": %ld, "
	    "\"accepted\": %ld, \"deadline_hit\": %s, \"elapsed_ms\": %ld, ",
	    sh->port, ok, failed, total_accepts(&o),
	    deadline_hit ? "true" : "false", now_ms() - t0);
	printf("\"order\": [");
	for (r = 0; r < o.workers; r++)
		printf("%s%d", r ? ", " : "", o.order[r]);
	printf("], \"per_worker\": [");
	for (r = 0; r < o.workers; r++) {
		struct wstat *ws = &sh->w[r];
		double cpu_ms;

		cpu_ms = ru[r].ru_utime.tv_sec * 1000.0 +
		    ru[r].ru_utime.tv_usec / 1000.0 +
		    ru[r].ru_stime.tv_sec * 1000.0 +
		    ru[r].ru_stime.tv_usec / 1000.0;
		printf("%s{\"rank\": %d, \"id\": %d, \"cpu\": %d, "
		    "\"exclusive\": %s, \"tagged\": %s, \"wakeups\": %ld, "
		    "\"accepts\": %ld, \"empty_wakeups\": %ld, \"errors\": %ld, "
		    "\"cpu_ms\": %.3f, \"vcsw\": %ld, \"ivcsw\": %ld, "
		    "\"local\": %ld, \"killed\": %s, "
		    "\"exited\": %s, \"hcpu_unknown\": %d, \"accept_cpus\": ",
		    r ? ", " : "", r, o.order[r], o.pin ? r % o.ncpu : -1,
		    o.shared && is_excl(&o, r) ? "true" : "false",
		    o.mode == M_INCOMING_CPU && r != o.untagged ? "true" :
		    "false",
		    ws->wakeups, ws->accepts, ws->empty, ws->errors, cpu_ms,
		    (long)ru[r].ru_nvcsw, (long)ru[r].ru_nivcsw, ws->local,
		    killed[r] ? "true" : "false",
		    exited[r] ? "true" : "false", ws->hcpu_unknown);
		print_longs(ws->acpu, o.ncpu);
		printf(", \"handshake_cpus\": ");
		print_longs(ws->hcpu, o.ncpu);
		putchar('}');
	}
	putchar(']');
	if (recs != NULL) {
		long n = sh->nrec < maxrec ? sh->nrec : maxrec;

		printf(", \"records\": [");
		for (i = 0; i < n; i++)
			printf("%s[%d, %d, %d]", i ? ", " : "", recs[i].worker,
			    recs[i].cpu, recs[i].hcpu);
		putchar(']');
	}
	printf("}\n");
	return (0);
}
