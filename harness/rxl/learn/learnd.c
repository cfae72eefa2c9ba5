/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * learnd: the accept server of rxl's learning runs.
 *
 * An unmodified SO_REUSEPORT_LB server: N worker processes, each with its
 * own listener on INADDR_ANY:port, each optionally pinned to one CPU, and
 * no TCP_REUSPORT_LB_CPU setsockopt anywhere, so whatever steering happens
 * is what the kernel learned by itself at accept(2).
 *
 * Connections come from outside the guest (the host, through QEMU's user
 * networking), so their SYNs arrive on the NIC with a hardware RSS hash.
 * The client writes one byte naming the phase of the run ('w' warm-up,
 * 'm' measured, 'q' quit); the server answers 'k' and closes.  Per
 * accepted connection a worker records the phase, its own CPU, the
 * handshake CPU (getsockopt TCP_REUSPORT_LB_CPU on the accepted socket:
 * the CPU that completed its handshake), the flow type the NIC reported
 * and the receive queue that the flow id selects on an 82574 or an 82576
 * (see rx_queue()).  At the end each worker reads its listener's tag back with
 * the same option (NOCPU -2 or the CPU set; a tag learning captured reads
 * as NOCPU, and the groups view shows it).
 *
 * With -G ms the parent reads the kernel's per-group view (the sysctl
 * net.inet.tcp.reuseport_lb.groups, root only) every ms milliseconds
 * from READY on, and once more when the quit byte arrives, before the
 * listeners close; with each copy it notes the phase ('-' before the
 * first connection) and the cumulative connections per (phase, handshake
 * CPU, worker CPU).  The copies are kept in memory and printed after the
 * run.
 *
 * Output: sentinel lines on stdout (the guest's console), counts only,
 * so the summary stays a few dozen lines however many connections ran:
 *
 *   ==RXL== LEARN READY <label> port=<p> workers=<n>
 *   ==RXL== LEARN RUN <label> workers=<n> port=<p> ncpu=<c> nq=<q> pin=<list|none> hcpu_opt=<hex> tag_opt=<hex>
 *   ==RXL== LEARN W <label> worker=<i> cpu=<pin|-1> accepts=<n> errors=<n> pinerr=<errno> tag=<v|unknown>
 *   ==RXL== LEARN C <label> phase=<w|m|q|x> worker=<i> wcpu=<c> hcpu=<c|-1> q=<q|-1> n=<count>
 *   ==RXL== LEARN FT <label> phase=<p> ftype=<M_HASHTYPE> n=<count>
 *   ==RXL== LEARN DONE <label> accepted=<n> elapsed_ms=<ms> stop=<quit|deadline>
 *
 * With -K, also every measured-phase connection's foreign port and
 * handshake CPU, kept in memory and printed after the run (so printing
 * does not slow the workers), up to MAXK per worker, 32 to a line:
 *
 *   ==RXL== LEARN K <label> worker=<i> <fport>:<hcpu> ...
 *
 * and with -G, per copy of the groups view, a header and its lines:
 *
 *   ==RXL== LEARN G <label> seq=<i> t_ms=<ms since READY> phase=<c> err=<errno> x=<p>:<hcpu>:<wcpu>:<n>,...
 *   ==RXL== LEARN GL <label> seq=<i> <one line of the sysctl's text>
 *
 * Requests (rxl learn --requests, docs/results/wakeups.md part 2): a
 * connection whose phase byte is 'M' is a measured connection that stays
 * open.  It is counted as phase 'm' above; the worker answers 'k', keeps
 * it in its kqueue (epoll on Linux) and answers every 8-byte request on it
 * with 8 bytes (its CPU, then the request's second word) until the client
 * closes.  The worker counts per request whether the connection's
 * handshake CPU (its receiving CPU: the NIC hashes a flow to one queue,
 * so every segment of it is processed on that queue's CPU) differs from
 * the CPU the worker runs on when it serves it ("xreqs"; "ureqs" when the
 * handshake CPU is unknown), and, per wait that found nothing at once
 * (a kevent with timeout 0 first) and then slept, whether the event that
 * ended it (the first one returned: kqueue and epoll return events in the
 * order they became ready) was a request on such a connection ("slept",
 * "xwakes").  A connection whose phase byte is 's' asks for a snapshot:
 * the worker that accepts it copies every worker's counts, their context
 * switches (kern.proc.pid's ki_rusage; /proc/<pid>/status on Linux), the
 * system's (vm.stats.sys.v_swtch) and hw.intrnames / hw.intrcnt, then
 * answers 'k'; the copies are printed after the run:
 *
 *   ==RXL== LEARN S <label> seq=<i> worker=<w> rconns=<n> reqs=<n> xreqs=<n> ureqs=<n> slept=<n> xwakes=<n> nvcsw=<n|-1> nivcsw=<n|-1>
 *   ==RXL== LEARN SS <label> seq=<i> t_ms=<ms since READY> swtch=<n|-1> intr_err=<errno>
 *   ==RXL== LEARN I <label> seq=<i> n=<count> <interrupt name, as hw.intrnames has it>
 *
 * With -T each worker tags its listener with the CPU it is pinned to
 * (setsockopt TCP_REUSPORT_LB_CPU, commit 3): the deal with explicit tags;
 * the W line then says tagerr=<errno>.
 *
 * Bounded: every wait has a timeout and the whole run has a deadline (-d).
 * Builds on FreeBSD (the guest) and on Linux (SO_REUSEPORT, SO_INCOMING_CPU)
 * so the protocol can be exercised on a build host over loopback.
 */

#ifdef __linux__
#define	_GNU_SOURCE	/* sched_getcpu, CPU_SET */
#endif

#include <sys/types.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef __FreeBSD__
#include <sys/param.h>
#include <sys/cpuset.h>
#include <sys/event.h>
#include <sys/sysctl.h>
#include <sys/user.h>
#include <netinet/tcp_var.h>
#endif
#ifdef __linux__
#include <sys/epoll.h>
#endif

/*
 * The series' option (commit 3, netinet/tcp.h), at level IPPROTO_TCP:
 * TCP_REUSPORT_LB_CPU, a listener's tag, and on an accepted socket the
 * CPU that completed its handshake.  The world's headers may predate it;
 * the harness passes -DLEARND_LB_CPU_OPT=<value> read from the tree.  On
 * a kernel without it getsockopt fails and the CPU or tag is unknown.
 */
#if defined(TCP_REUSPORT_LB_CPU)
#define	LB_CPU_OPT	TCP_REUSPORT_LB_CPU
#elif defined(LEARND_LB_CPU_OPT)
#define	LB_CPU_OPT	LEARND_LB_CPU_OPT
#endif

/* The series' per-group view (commit 3, tcp_usrreq.c), root only. */
#define	GROUPS_SYSCTL	"net.inet.tcp.reuseport_lb.groups"

#define	MAXW		32		/* workers */
#define	NCPU_MAX		64		/* CPUs counted; index NCPU_MAX = unknown */
#define	MAXQ		8		/* queues (igb's 8); index MAXQ = unknown */
#define	NPHASE		4		/* w m q x */
#define	WAIT_MS		100		/* worker poll slice */
#define	IO_MS		2000		/* per-connection byte wait */
#define	REG_MS		5000		/* one worker's start-up */
#define	MAXK		32768		/* -K records per worker */
#define	GBUF		(1 << 20)	/* -G text kept for printing */
#define	GVIEW		(64 << 10)	/* one read of the groups view */
#define	TAG_UNKNOWN	(-1000)		/* no tag read back */
#define	MAXFD		4096		/* kept connections: fds below this */
#define	NEV		64		/* events per wait */
#define	REQ_LEN		8		/* one request, one answer */
#define	SBUF		(1 << 20)	/* snapshot text kept for printing */
#define	SNAP_BYTE	's'
#define	KEEP_BYTE	'M'		/* measured, kept open for requests */

static const char phases[NPHASE] = { 'w', 'm', 'q', 'x' };

struct wstat {
	long	accepts;
	long	errors;
	int	pinerr;
	int	ready;
	int	tag;			/* listener's TCP_REUSPORT_LB_CPU at the end */
	int	tagerr;			/* -T: errno of the setsockopt */
	long	rconns;			/* 'M' connections kept */
	long	reqs;			/* requests answered */
	long	xreqs;			/* ... on a connection received elsewhere */
	long	ureqs;			/* ... on one with no known handshake CPU */
	long	slept;			/* waits that slept, ended by a request */
	long	xwakes;			/* ... on a connection received elsewhere */
	/* [phase][worker cpu][handshake cpu][queue] */
	long	c[NPHASE][NCPU_MAX + 1][NCPU_MAX + 1][MAXQ + 1];
	long	ft[NPHASE][256];
	long	nk;			/* -K records kept */
	struct {
		uint16_t port;		/* foreign port, host order */
		int16_t	 hcpu;
	}	k[MAXK];
};

struct shared {
	volatile int	stop;		/* 1 quit, 2 deadline */
	pid_t		pid[MAXW];	/* the workers, for the snapshots */
	int		nw;
	int		nsnap;		/* snapshots taken */
	long		tready;		/* READY, ms */
	size_t		slen;		/* snapshot text in sbuf */
	volatile int	quit;		/* quit byte seen; the parent stops */
	volatile char	phase;		/* last phase byte seen */
	struct wstat	w[MAXW];
};

static struct shared *sh;
static int keep;			/* -K: keep measured connections */
static int tagging;			/* -T: tag listeners with their CPU */
static const char *label = "run";
static char *sbuf;			/* shared: the snapshots' text */
static char *gbuf;			/* -G: copies of the groups view */
static size_t glen;
static int gseq;

static void
usage(void)
{
	fprintf(stderr, "usage: learnd -w workers [-c cpu,cpu,...] [-P port] "
	    "[-l label] [-d deadline_s] [-Q nqueues] [-K] [-G ms] [-T]\n");
	exit(2);
}

static long
num(const char *s, long lo, long hi, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *end != '\0' || end == s || v < lo || v > hi) {
		fprintf(stderr, "learnd: bad %s '%s' (want %ld..%ld)\n", what,
		    s, lo, hi);
		exit(2);
	}
	return (v);
}

static long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
}

static int
pin_self(int cpu)
{
#if defined(__FreeBSD__)
	cpuset_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* The calling thread: what the learning's capture looks at. */
	if (cpuset_setaffinity(CPU_LEVEL_WHICH, CPU_WHICH_TID, -1,
	    sizeof(set), &set) != 0)
		return (errno);
	return (0);
#elif defined(__linux__)
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return (sched_setaffinity(0, sizeof(set), &set) != 0 ? errno : 0);
#else
	(void)cpu;
	return (EOPNOTSUPP);
#endif
}

static int
cur_cpu(void)
{
#if defined(__FreeBSD__) || defined(__linux__)
	return (sched_getcpu());
#else
	return (-1);
#endif
}

static int
handshake_cpu(int fd)
{
	int cpu = -1;
	socklen_t len = sizeof(cpu);

#if defined(LB_CPU_OPT)
	/* NOCPU (-2): the handshake CPU is not known. */
	if (getsockopt(fd, IPPROTO_TCP, LB_CPU_OPT, &cpu, &len) != 0 ||
	    cpu < 0)
		cpu = -1;
#elif defined(__linux__) && defined(SO_INCOMING_CPU)
	if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_CPU, &cpu, &len) != 0)
		cpu = -1;
#else
	(void)fd;
	(void)len;
#endif
	return (cpu);
}

/* A listener's tag as TCP_REUSPORT_LB_CPU reads it back, or TAG_UNKNOWN. */
static int
listener_tag(int fd)
{
	int tag = TAG_UNKNOWN;
#if defined(LB_CPU_OPT)
	socklen_t len = sizeof(tag);

	if (getsockopt(fd, IPPROTO_TCP, LB_CPU_OPT, &tag, &len) != 0)
		tag = TAG_UNKNOWN;
#else
	(void)fd;
#endif
	return (tag);
}

/*
 * The flow type and id the syncache copied from the handshake's mbuf
 * (tcp_syncache.c: inp_flowid / inp_flowtype), -1 when unavailable.
 */
static void
flow_of(int fd, int *ftype, unsigned *fid)
{
#if defined(IP_FLOWID) && defined(IP_FLOWTYPE)
	int v;
	socklen_t len = sizeof(v);

	*ftype = -1;
	*fid = 0;
	if (getsockopt(fd, IPPROTO_IP, IP_FLOWTYPE, &v, &len) == 0)
		*ftype = v;
	len = sizeof(v);
	if (getsockopt(fd, IPPROTO_IP, IP_FLOWID, &v, &len) == 0)
		*fid = (unsigned)v;
#else
	(void)fd;
	*ftype = -1;
	*fid = 0;
#endif
}

/*
 * The receive queue an 82574 (em(4), e1000e) or an 82576 (igb(4), igb)
 * picks for a hash: the redirection table has 128 entries indexed by the
 * hash's low 7 bits, and em_initialize_rss_mapping() and
 * igb_initialize_rss_mapping() (sys/dev/e1000/if_em.c, without options RSS)
 * fill entry i with queue i % nqueues.  Only meaningful for a hardware hash
 * (M_HASHTYPE_HASHPROP).
 */
static int
rx_queue(int ftype, unsigned fid, int nq)
{
	if (nq <= 0 || nq > MAXQ || ftype < 0 || (ftype & 0x80) == 0)
		return (-1);
	return ((int)((fid & 0x7f) % (unsigned)nq));
}

static int
listener(int port)
{
	struct sockaddr_in sin;
	int fd, one = 1, fl;

	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) == -1)
		return (-1);
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
#if defined(SO_REUSEPORT_LB)
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT_LB, &one, sizeof(one)))
		goto bad;
#else
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)))
		goto bad;
#endif
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	sin.sin_addr.s_addr = htonl(INADDR_ANY);
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0 ||
	    listen(fd, 1024) != 0)
		goto bad;
	fl = fcntl(fd, F_GETFL);
	if (fl == -1 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1)
		goto bad;
	return (fd);
bad:
	close(fd);
	return (-1);
}

/*
 * TCP's drop counters (FreeBSD: net.inet.tcp.stats, struct tcpstat), printed
 * before and after the run: a listen queue that overflows loses connections
 * of the worker that falls behind.
 */
static void
print_tcpstat(const char *label, const char *when)
{
#ifdef __FreeBSD__
	struct tcpstat st;
	size_t len = sizeof(st);

	if (sysctlbyname("net.inet.tcp.stats", &st, &len, NULL, 0) != 0)
		return;
	printf("==RXL== LEARN SYSCTL %s %s.listendrop: %ju\n", label, when,
	    (uintmax_t)st.tcps_listendrop);
	printf("==RXL== LEARN SYSCTL %s %s.sc_dropped: %ju\n", label, when,
	    (uintmax_t)st.tcps_sc_dropped);
	printf("==RXL== LEARN SYSCTL %s %s.sc_bucketoverflow: %ju\n", label, when,
	    (uintmax_t)st.tcps_sc_bucketoverflow);
	fflush(stdout);
#else
	(void)label;
	(void)when;
#endif
}

static int
phase_index(char c)
{
	int i;

	for (i = 0; i < NPHASE - 1; i++)
		if (phases[i] == c)
			return (i);
	return (NPHASE - 1);
}

static void
sappend(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Append to the shared snapshot text; what does not fit is dropped. */
static void
sappend(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (sbuf == NULL || sh->slen >= SBUF - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(sbuf + sh->slen, SBUF - sh->slen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= SBUF - sh->slen)
		sh->slen = SBUF - 1;
	else
		sh->slen += (size_t)n;
}

/* Voluntary and involuntary context switches of process pid; -1 unknown. */
static void
ctx_switches(pid_t pid, long *vol, long *invol)
{
	*vol = *invol = -1;
#if defined(__FreeBSD__)
	struct kinfo_proc kp;
	size_t len = sizeof(kp);
	int mib[4] = { CTL_KERN, KERN_PROC, KERN_PROC_PID, (int)pid };

	if (sysctl(mib, 4, &kp, &len, NULL, 0) == 0 && len == sizeof(kp)) {
		*vol = kp.ki_rusage.ru_nvcsw;
		*invol = kp.ki_rusage.ru_nivcsw;
	}
#elif defined(__linux__)
	char path[64], line[128];
	FILE *f;
	long v;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((f = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
			*vol = v;
		else if (sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
			*invol = v;
	}
	fclose(f);
#else
	(void)pid;
#endif
}

/*
 * hw.intrnames and hw.intrcnt as I lines: entry i of intrnames is
 * INTRNAME_LEN bytes at i * INTRNAME_LEN (x86 intr_machdep.c:
 * intrcnt_setname pads the name with blanks), entry i of intrcnt its
 * u_long count; the stride is taken from the two sizes.  Unnamed
 * entries are skipped.  Returns an errno, 0 on success.
 */
static int
snap_intr(int seq)
{
#if defined(__FreeBSD__)
	size_t nlen = 0, clen = 0, n, stride, i, k;
	char *names, *nm;
	u_long *cnt;
	int err = 0;

	if (sysctlbyname("hw.intrnames", NULL, &nlen, NULL, 0) != 0 ||
	    sysctlbyname("hw.intrcnt", NULL, &clen, NULL, 0) != 0)
		return (errno);
	n = clen / sizeof(u_long);
	if (n == 0 || nlen < n)
		return (EINVAL);
	names = malloc(nlen + 1);
	cnt = malloc(clen);
	if (names == NULL || cnt == NULL) {
		err = ENOMEM;
		goto out;
	}
	if (sysctlbyname("hw.intrnames", names, &nlen, NULL, 0) != 0 ||
	    sysctlbyname("hw.intrcnt", cnt, &clen, NULL, 0) != 0) {
		err = errno;
		goto out;
	}
	names[nlen] = '\0';
	stride = nlen / n;
	n = clen / sizeof(u_long) < n ? clen / sizeof(u_long) : n;
	for (i = 0; i < n; i++) {
		nm = names + i * stride;
		for (k = 0; k < stride && nm[k] != '\0'; k++)
			;
		while (k > 0 && nm[k - 1] == ' ')
			k--;
		if (k == 0)
			continue;
		sappend("==RXL== LEARN I %s seq=%d n=%lu %.*s\n", label, seq,
		    cnt[i], (int)k, nm);
	}
out:
	free(names);
	free(cnt);
	return (err);
#else
	(void)seq;
	return (ENOENT);
#endif
}

/* A snapshot ('s' connection): every worker's counts, then the system's. */
static void
snapshot_counts(void)
{
	int seq = sh->nsnap++, w, err;
	long vol, invol, swtch = -1;

	for (w = 0; w < sh->nw; w++) {
		struct wstat *ws = &sh->w[w];

		ctx_switches(sh->pid[w], &vol, &invol);
		sappend("==RXL== LEARN S %s seq=%d worker=%d rconns=%ld reqs=%ld "
		    "xreqs=%ld ureqs=%ld slept=%ld xwakes=%ld nvcsw=%ld "
		    "nivcsw=%ld\n", label, seq, w, ws->rconns, ws->reqs,
		    ws->xreqs, ws->ureqs, ws->slept, ws->xwakes, vol, invol);
	}
#if defined(__FreeBSD__)
	{
		u_int v;
		size_t len = sizeof(v);

		if (sysctlbyname("vm.stats.sys.v_swtch", &v, &len, NULL, 0) == 0)
			swtch = v;
	}
#endif
	err = snap_intr(seq);
	sappend("==RXL== LEARN SS %s seq=%d t_ms=%ld swtch=%ld intr_err=%d\n",
	    label, seq, now_ms() - sh->tready, swtch, err);
}

/*
 * Serve one accepted connection: read the phase byte, answer, count.
 * Returns the handshake CPU (>= -1) of a connection to keep (phase byte
 * 'M'), left non-blocking; otherwise closes it and returns -2.
 */
static int
serve(struct wstat *ws, int fd, int nq, int fport)
{
	struct pollfd pfd;
	unsigned fid;
	int hc, wc, ft, q, p, fl;
	char c = 'x';

	wc = cur_cpu();
	hc = handshake_cpu(fd);
	flow_of(fd, &ft, &fid);
	q = rx_queue(ft, fid, nq);
	/* BSD accept(2) inherits O_NONBLOCK; be explicit either way. */
	fl = fcntl(fd, F_GETFL);
	if (fl != -1)
		(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	pfd.fd = fd;
	pfd.events = POLLIN;
	if (poll(&pfd, 1, IO_MS) != 1 || read(fd, &c, 1) != 1)
		c = 'x';
	if (c == SNAP_BYTE) {
		snapshot_counts();
		(void)write(fd, "k", 1);
		close(fd);
		return (-2);
	}
	p = phase_index(c == KEEP_BYTE ? 'm' : c);
	/*
	 * Count before answering: the client starts its next connection (the
	 * quit, say) only after the answer, so every connection it saw
	 * answered is in the counts the parent copies.
	 */
	ws->c[p][wc >= 0 && wc < NCPU_MAX ? wc : NCPU_MAX]
	    [hc >= 0 && hc < NCPU_MAX ? hc : NCPU_MAX]
	    [q >= 0 && q < MAXQ ? q : MAXQ]++;
	ws->ft[p][ft >= 0 && ft < 256 ? ft : 255]++;
	if (keep && phases[p] == 'm' && ws->nk < MAXK) {
		ws->k[ws->nk].port = (uint16_t)fport;
		ws->k[ws->nk].hcpu = (int16_t)hc;
		ws->nk++;
	}
	ws->accepts++;
	/* The phases only move forward (w, m, q: phases[] order). */
	if (p < NPHASE - 1 && (sh->phase == 0 || p > phase_index(sh->phase)))
		sh->phase = phases[p];
	(void)write(fd, "k", 1);
	if (c == KEEP_BYTE && fd < MAXFD) {
		int one = 1;

		/* One small answer per request: never wait for an ACK. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (fl != -1)
			(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		ws->rconns++;
		return (hc >= 0 ? hc : -1);
	}
	if (c == KEEP_BYTE)
		ws->errors++;
	close(fd);
	/* The parent copies the groups view once more, then stops. */
	if (c == 'q')
		sh->quit = 1;
	return (-2);
}

/* The worker's event set: kqueue on FreeBSD, epoll on Linux. */
static int
ev_open(void)
{
#if defined(__FreeBSD__)
	return (kqueue());
#elif defined(__linux__)
	return (epoll_create1(0));
#else
	errno = EOPNOTSUPP;
	return (-1);
#endif
}

/* Watch fd for input; its events carry fd + 1 (0: none). */
static int
ev_add(int eq, int fd)
{
#if defined(__FreeBSD__)
	struct kevent kev;

	EV_SET(&kev, fd, EVFILT_READ, EV_ADD, 0, 0, NULL);
	return (kevent(eq, &kev, 1, NULL, 0, NULL));
#elif defined(__linux__)
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	e.data.fd = fd;
	return (epoll_ctl(eq, EPOLL_CTL_ADD, fd, &e));
#else
	(void)eq;
	(void)fd;
	return (-1);
#endif
}

/* Wait up to ms for events; fills fds[] in the order they became ready. */
static int
ev_wait(int eq, int *fds, int ms)
{
	int n, i;
#if defined(__FreeBSD__)
	struct kevent ev[NEV];
	struct timespec ts;

	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (long)(ms % 1000) * 1000000;
	n = kevent(eq, NULL, 0, ev, NEV, &ts);
	for (i = 0; i < n; i++)
		fds[i] = (int)ev[i].ident;
#elif defined(__linux__)
	struct epoll_event ev[NEV];

	n = epoll_wait(eq, ev, NEV, ms);
	for (i = 0; i < n; i++)
		fds[i] = ev[i].data.fd;
#else
	(void)eq;
	(void)fds;
	(void)ms;
	(void)i;
	n = -1;
#endif
	return (n);
}

/*
 * Answer what a kept connection sent; returns the requests answered, or
 * -1 after closing it (end of file, an error).  part[]/plen: the start of
 * a request split across reads.
 */
static int
answer(struct wstat *ws, int fd, int hc, int wc, char *part, int *plen)
{
	char buf[512 + REQ_LEN], out[sizeof(buf)];
	ssize_t r;
	int n = 0, off, o = 0;
	int32_t cpu = wc;

	memcpy(buf, part, (size_t)*plen);
	r = read(fd, buf + *plen, sizeof(buf) - REQ_LEN);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
	    errno != EINTR)) {
		close(fd);
		return (-1);
	}
	if (r < 0)
		return (0);
	r += *plen;
	for (off = 0; off + REQ_LEN <= r; off += REQ_LEN, n++) {
		memcpy(out + o, &cpu, 4);
		memcpy(out + o + 4, buf + off + 4, 4);
		o += REQ_LEN;
		ws->reqs++;
		if (hc < 0)
			ws->ureqs++;
		else if (hc != wc)
			ws->xreqs++;
	}
	*plen = (int)(r - off);
	memcpy(part, buf + off, (size_t)*plen);
	/* Closed loop: the socket buffer has room for every answer. */
	if (o > 0 && write(fd, out, (size_t)o) != o) {
		close(fd);
		return (-1);
	}
	return (n);
}

static void
worker(int rank, int cpu, int port, int nq, long deadline)
{
	struct wstat *ws = &sh->w[rank];
	struct sockaddr_storage ss;
	static int16_t hcpu[MAXFD];	/* kept fd -> handshake CPU */
	static char part[MAXFD][REQ_LEN];
	static int plen[MAXFD];
	socklen_t sl;
	int lfd, eq, fd, b, fport, n, i, slept, wc, got, h;
	int fds[NEV];

	ws->tag = TAG_UNKNOWN;
	if (cpu >= 0)
		ws->pinerr = pin_self(cpu);
	if ((lfd = listener(port)) == -1 || (eq = ev_open()) == -1 ||
	    ev_add(eq, lfd) != 0) {
		ws->ready = -errno;
		_exit(3);
	}
	if (tagging) {
#if defined(LB_CPU_OPT)
		ws->tagerr = cpu < 0 ? EINVAL : setsockopt(lfd, IPPROTO_TCP,
		    LB_CPU_OPT, &cpu, sizeof(cpu)) != 0 ? errno : 0;
#else
		ws->tagerr = EOPNOTSUPP;
#endif
	}
	ws->ready = 1;
	while (!sh->stop && now_ms() < deadline) {
		/* Did the wait find something at once, or did it sleep? */
		slept = 0;
		if ((n = ev_wait(eq, fds, 0)) == 0) {
			n = ev_wait(eq, fds, WAIT_MS);
			slept = 1;
		}
		if (n <= 0)
			continue;
		wc = cur_cpu();
		for (i = 0; i < n; i++) {
			if (fds[i] != lfd) {
				fd = fds[i];
				h = fd >= 0 && fd < MAXFD ? hcpu[fd] : -1;
				got = answer(ws, fd, h, wc, part[fd], &plen[fd]);
				if (i == 0 && slept && got > 0) {
					ws->slept++;
					if (h >= 0 && h != wc)
						ws->xwakes++;
				}
				continue;
			}
			for (b = 0; b < 64; b++) {
				sl = sizeof(ss);
				fd = accept(lfd, (struct sockaddr *)&ss, &sl);
				if (fd == -1) {
					if (errno != EAGAIN && errno != EWOULDBLOCK &&
					    errno != ECONNABORTED && errno != EINTR)
						ws->errors++;
					break;
				}
				fport = -1;
				if (ss.ss_family == AF_INET)
					fport = ntohs(((struct sockaddr_in *)&ss)->sin_port);
				else if (ss.ss_family == AF_INET6)
					fport = ntohs(
					    ((struct sockaddr_in6 *)&ss)->sin6_port);
				h = serve(ws, fd, nq, fport);
				if (h == -2)
					continue;
				hcpu[fd] = (int16_t)h;
				plen[fd] = 0;
				if (ev_add(eq, fd) != 0) {
					ws->errors++;
					close(fd);
				}
			}
		}
	}
	ws->tag = listener_tag(lfd);
	close(lfd);
	_exit(0);
}

static void
gprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Append to the -G text; what does not fit is dropped (and counted). */
static void
gprintf(const char *fmt, ...)
{
	va_list ap;
	int n;

	if (gbuf == NULL || glen >= GBUF - 1)
		return;
	va_start(ap, fmt);
	n = vsnprintf(gbuf + glen, GBUF - glen, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= GBUF - glen)
		glen = GBUF - 1;
	else
		glen += (size_t)n;
}

/*
 * One copy of the groups view, with the connections counted so far per
 * (phase, handshake CPU, worker CPU) over all workers, for the warm-up
 * and measured phases.  The counts are read while the workers add to
 * them: each is a whole long, at worst one connection behind.
 */
static void
snapshot(const char *label, int nw, long t_ms)
{
	static char view[GVIEW];
	size_t len = sizeof(view) - 1;
	int err = 0, p, a, b, q, w, first = 1;
	char *line, *save = NULL;
	long n;

#ifdef __FreeBSD__
	if (sysctlbyname(GROUPS_SYSCTL, view, &len, NULL, 0) != 0) {
		err = errno;
		len = 0;
	}
#else
	err = ENOENT;
	len = 0;
#endif
	view[len] = '\0';
	gprintf("==RXL== LEARN G %s seq=%d t_ms=%ld phase=%c err=%d x=",
	    label, gseq, t_ms, sh->phase != 0 ? sh->phase : '-', err);
	for (p = 0; p < 2; p++)
		for (b = 0; b <= NCPU_MAX; b++)
			for (a = 0; a <= NCPU_MAX; a++) {
				for (w = 0, n = 0; w < nw; w++)
					for (q = 0; q <= MAXQ; q++)
						n += sh->w[w].c[p][a][b][q];
				if (n == 0)
					continue;
				gprintf("%s%c:%d:%d:%ld", first ? "" : ",",
				    phases[p], b == NCPU_MAX ? -1 : b,
				    a == NCPU_MAX ? -1 : a, n);
				first = 0;
			}
	gprintf("%s\n", first ? "-" : "");
	for (line = strtok_r(view, "\n", &save); line != NULL;
	    line = strtok_r(NULL, "\n", &save))
		gprintf("==RXL== LEARN GL %s seq=%d %s\n", label, gseq, line);
	gseq++;
}

static int
parse_cpus(char *s, int *cpus)
{
	char *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(s, ",", &save); tok != NULL;
	    tok = strtok_r(NULL, ",", &save)) {
		if (n >= MAXW) {
			fprintf(stderr, "learnd: more than %d CPUs in -c\n",
			    MAXW);
			exit(2);
		}
		cpus[n++] = (int)num(tok, 0, NCPU_MAX - 1, "cpu in -c");
	}
	return (n);
}

int
main(int argc, char **argv)
{
	pid_t pid[MAXW];
	int cpus[MAXW], ncpus = 0, nw = 0, port = 8080, nq = 0, ch, i, st;
	int exited[MAXW], left, p, w, a, b, q;
	char *cpu_arg = NULL;
	long deadline_s = 300, t0, deadline, total, gms = 0, tready, tnext;
	unsigned long opt = 0, tag_opt = 0;

	while ((ch = getopt(argc, argv, "w:c:P:l:d:Q:KG:T")) != -1) {
		switch (ch) {
		case 'w':
			nw = (int)num(optarg, 1, MAXW, "workers");
			break;
		case 'c':
			cpu_arg = optarg;
			break;
		case 'P':
			port = (int)num(optarg, 1, 65535, "port");
			break;
		case 'l':
			label = optarg;
			break;
		case 'd':
			deadline_s = num(optarg, 1, 86400, "deadline_s");
			break;
		case 'Q':
			nq = (int)num(optarg, 0, MAXQ, "nqueues");
			break;
		case 'K':
			keep = 1;
			break;
		case 'T':
			tagging = 1;
			break;
		case 'G':
			gms = num(optarg, 100, 3600000, "groups interval ms");
			break;
		default:
			usage();
		}
	}
	if (optind != argc || nw == 0)
		usage();
	if (cpu_arg != NULL && strcmp(cpu_arg, "none") != 0)
		ncpus = parse_cpus(cpu_arg, cpus);
#if defined(LB_CPU_OPT)
	/* One option gives both. */
	opt = tag_opt = (unsigned long)LB_CPU_OPT;
#endif
	if (gms > 0 && (gbuf = malloc(GBUF)) == NULL) {
		perror("learnd: malloc");
		return (1);
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
	    MAP_SHARED | MAP_ANON, -1, 0);
	sbuf = mmap(NULL, SBUF, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANON,
	    -1, 0);
	if (sh == MAP_FAILED || sbuf == MAP_FAILED) {
		perror("learnd: mmap");
		return (1);
	}
	sh->nw = nw;
	print_tcpstat(label, "before");
	t0 = now_ms();
	deadline = t0 + deadline_s * 1000;
	for (i = 0; i < nw; i++) {
		exited[i] = 0;
		fflush(stdout);
		if ((pid[i] = fork()) == -1) {
			perror("learnd: fork");
			sh->stop = 2;
			nw = sh->nw = i;
			break;
		}
		if (pid[i] == 0)
			worker(i, ncpus ? cpus[i % ncpus] : -1, port, nq,
			    deadline);
		sh->pid[i] = pid[i];
		/* Start workers one by one: member order = worker order. */
		while (sh->w[i].ready == 0 && now_ms() - t0 < REG_MS * (i + 1))
			usleep(2000);
		if (sh->w[i].ready != 1) {
			fprintf(stderr, "learnd: worker %d failed to listen: "
			    "%s\n", i, strerror(-sh->w[i].ready));
			sh->stop = 2;
		}
	}
	if (!sh->stop) {
		printf("==RXL== LEARN READY %s port=%d workers=%d\n", label,
		    port, nw);
		fflush(stdout);
	}
	tready = tnext = sh->tready = now_ms();
	while (!sh->stop && now_ms() < deadline) {
		if (gms > 0 && now_ms() >= tnext) {
			snapshot(label, nw, now_ms() - tready);
			tnext += gms;
		}
		if (sh->quit) {
			/* Before the listeners close and the group goes. */
			if (gms > 0)
				snapshot(label, nw, now_ms() - tready);
			sh->stop = 1;
			break;
		}
		usleep(50000);
	}
	if (!sh->stop)
		sh->stop = 2;
	for (t0 = now_ms();;) {
		for (i = 0, left = 0; i < nw; i++) {
			if (exited[i])
				continue;
			if (waitpid(pid[i], &st, WNOHANG) == pid[i])
				exited[i] = 1;
			else
				left++;
		}
		if (left == 0 || now_ms() - t0 > 5000)
			break;
		if (now_ms() - t0 > 2000)
			for (i = 0; i < nw; i++)
				if (!exited[i])
					(void)kill(pid[i], SIGKILL);
		usleep(10000);
	}

	printf("==RXL== LEARN RUN %s workers=%d port=%d ncpu=%ld nq=%d pin=",
	    label, nw, port, sysconf(_SC_NPROCESSORS_ONLN), nq);
	if (ncpus == 0)
		printf("none");
	for (i = 0; i < ncpus; i++)
		printf("%s%d", i ? "," : "", cpus[i]);
	printf(" hcpu_opt=0x%lx tag_opt=0x%lx\n", opt, tag_opt);
	for (w = 0, total = 0; w < nw; w++) {
		struct wstat *ws = &sh->w[w];

		total += ws->accepts;
		printf("==RXL== LEARN W %s worker=%d cpu=%d accepts=%ld "
		    "errors=%ld pinerr=%d tagerr=%d reqs=%ld tag=", label, w,
		    ncpus ? cpus[w % ncpus] : -1, ws->accepts, ws->errors,
		    ws->pinerr, ws->tagerr, ws->reqs);
		if (ws->tag == TAG_UNKNOWN)
			printf("unknown\n");
		else
			printf("%d\n", ws->tag);
		for (p = 0; p < NPHASE; p++)
			for (a = 0; a <= NCPU_MAX; a++)
				for (b = 0; b <= NCPU_MAX; b++)
					for (q = 0; q <= MAXQ; q++)
						if (ws->c[p][a][b][q])
							printf("==RXL== LEARN C %s "
							    "phase=%c worker=%d "
							    "wcpu=%d hcpu=%d q=%d "
							    "n=%ld\n", label,
							    phases[p], w,
							    a == NCPU_MAX ? -1 : a,
							    b == NCPU_MAX ? -1 : b,
							    q == MAXQ ? -1 : q,
							    ws->c[p][a][b][q]);
	}
	for (w = 0; w < nw; w++) {
		struct wstat *ws = &sh->w[w];
		long j;

		for (j = 0; j < ws->nk; j++) {
			if (j % 32 == 0)
				printf("%s==RXL== LEARN K %s worker=%d",
				    j ? "\n" : "", label, w);
			printf(" %u:%d", (unsigned)ws->k[j].port,
			    (int)ws->k[j].hcpu);
		}
		if (ws->nk)
			printf("\n");
	}
	for (p = 0; p < NPHASE; p++)
		for (a = 0; a < 256; a++) {
			long n = 0;

			for (w = 0; w < nw; w++)
				n += sh->w[w].ft[p][a];
			if (n)
				printf("==RXL== LEARN FT %s phase=%c ftype=%d "
				    "n=%ld\n", label, phases[p],
				    a == 255 ? -1 : a, n);
		}
	if (gbuf != NULL && glen > 0)
		fwrite(gbuf, 1, glen, stdout);
	if (sh->slen > 0)
		fwrite(sbuf, 1, sh->slen, stdout);
	print_tcpstat(label, "after");
	printf("==RXL== LEARN DONE %s accepted=%ld elapsed_ms=%ld stop=%s\n",
	    label, total, now_ms() - (deadline - deadline_s * 1000),
	    sh->stop == 1 ? "quit" : "deadline");
	fflush(stdout);
	return (0);
}
