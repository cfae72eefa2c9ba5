/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * acceptd's eBPF part: load reuseport_sel.bpf.o with libbpf,
 * fill its maps from a file the harness wrote (the dealt map from the
 * cores under sys/, or the NUMA ranges), let each worker put its listener
 * into the sockarray at its rank, attach the program through rank 0, and
 * print the program's counters and selection log as JSON at the end.
 *
 * Built into acceptd only with -DRXL_EBPF and -lbpf.  Linux only.
 *
 * Map file: one entry per line, "<map> <key> <value...>" with map one of
 * cpuent (key cpu, value entry), slots (key slot, value member),
 * cpu_node (key cpu, value node), ranges (key node, values start count),
 * tickets (key node, value), or the pseudo-map layout (key rank, value
 * the rank's index in the sockarray; default the rank itself).
 */

#include <sys/types.h>
#include <sys/socket.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* Must match reuseport_sel.bpf.c. */
#define	MAX_MEMBERS	256
#define	C_NO_SLOTS	(MAX_MEMBERS + 0)
#define	C_SELECT_ERR	(MAX_MEMBERS + 1)
#define	C_GLOBAL	(MAX_MEMBERS + 2)
#define	C_NO_META	(MAX_MEMBERS + 3)
#define	C_LOG_NEXT	(MAX_MEMBERS + 4)
#define	LOG_ENTRIES	8192

struct selrec {
	uint32_t	port;
	uint32_t	cpu;
	uint32_t	hash;
	uint32_t	member;
};

int	ebpf_load(const char *obj, const char *prog, const char *mapfile);
int	ebpf_add(int rank, int fd);
int	ebpf_attach(int fd);
void	ebpf_print(FILE *out);

static struct bpf_object	*bobj;
static int			 prog_fd = -1, socks_fd = -1, counts_fd = -1;
static int			 log_fd = -1;
static const char		*prog_name;
static int			 layout[MAX_MEMBERS];

static int
map_fd(const char *name)
{
	struct bpf_map *m;

	m = bpf_object__find_map_by_name(bobj, name);
	return (m == NULL ? -1 : bpf_map__fd(m));
}

static int
say(const char *what, int err)
{
	if (err < 0)
		err = -err;
	fprintf(stderr, "acceptd: cannot load BPF: %s: %s%s\n", what,
	    strerror(err), err == EPERM || err == EACCES ?
	    " (needs root, or CAP_BPF and CAP_NET_ADMIN)" :
	    err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP ?
	    " (kernel before 5.12, without BPF atomics that fetch, or "
	    "without BPF_PROG_TYPE_SK_REUSEPORT?)" : "");
	return (-1);
}

static int
fill(const char *mapfile)
{
	char line[256], name[32];
	uint32_t k, v[2];
	FILE *f;
	int n, fd, lineno = 0;

	if (mapfile == NULL)
		return (0);
	if ((f = fopen(mapfile, "r")) == NULL)
		return (say(mapfile, errno));
	while (fgets(line, sizeof(line), f) != NULL) {
		lineno++;
		v[1] = 0;
		n = sscanf(line, "%31s %u %u %u", name, &k, &v[0], &v[1]);
		if (n >= 3 && strcmp(name, "layout") == 0 &&
		    k < MAX_MEMBERS && v[0] < MAX_MEMBERS) {
			layout[k] = (int)v[0];
			continue;
		}
		if (n < 3 || (fd = map_fd(name)) == -1) {
			fprintf(stderr, "acceptd: %s:%d: bad map line\n",
			    mapfile, lineno);
			fclose(f);
			return (-1);
		}
		if (bpf_map_update_elem(fd, &k, v, BPF_ANY) != 0) {
			fclose(f);
			return (say(name, errno));
		}
	}
	fclose(f);
	return (0);
}

int
ebpf_load(const char *obj, const char *prog, const char *mapfile)
{
	struct bpf_program *p;
	int err;

	int i;

	for (i = 0; i < MAX_MEMBERS; i++)
		layout[i] = i;
	libbpf_set_print(NULL);
	/* The caller's buffer does not outlive its block: keep a copy. */
	if ((prog_name = strdup(prog)) == NULL)
		return (say("strdup", errno));
	bobj = bpf_object__open_file(obj, NULL);
	if (bobj == NULL || libbpf_get_error(bobj) != 0)
		return (say(obj, errno ? errno : ENOENT));
	if ((err = bpf_object__load(bobj)) != 0)
		return (say("loading the object", err));
	p = bpf_object__find_program_by_name(bobj, prog);
	if (p == NULL)
		return (say(prog, ENOENT));
	prog_fd = bpf_program__fd(p);
	socks_fd = map_fd("socks");
	counts_fd = map_fd("counts");
	log_fd = map_fd("sellog");
	if (prog_fd < 0 || socks_fd < 0 || counts_fd < 0 || log_fd < 0)
		return (say("maps", ENOENT));
	return (fill(mapfile));
}

int
ebpf_add(int rank, int fd)
{
	uint32_t k;
	uint64_t v = (uint64_t)fd;

	if (rank < 0 || rank >= MAX_MEMBERS) {
		errno = EINVAL;
		return (-1);
	}
	k = (uint32_t)layout[rank];
	return (bpf_map_update_elem(socks_fd, &k, &v, BPF_ANY));
}

int
ebpf_attach(int fd)
{
	return (setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_EBPF, &prog_fd,
	    sizeof(prog_fd)));
}

static uint64_t
count(uint32_t k)
{
	uint64_t v = 0;

	(void)bpf_map_lookup_elem(counts_fd, &k, &v);
	return (v);
}

/* ", \"ebpf\": {...}": counters and the selection log. */
void
ebpf_print(FILE *out)
{
	struct selrec r;
	uint64_t n;
	uint32_t i;

	fprintf(out, ", \"ebpf\": {\"program\": \"%s\", \"selections\": [",
	    prog_name);
	for (i = 0; i < MAX_MEMBERS; i++)
		fprintf(out, "%s%llu", i ? ", " : "",
		    (unsigned long long)count(i));
	fprintf(out, "], \"fallbacks\": {\"no_slots\": %llu, "
	    "\"select_error\": %llu, \"global\": %llu, \"no_metadata\": %llu}"
	    ", \"log\": [",
	    (unsigned long long)count(C_NO_SLOTS),
	    (unsigned long long)count(C_SELECT_ERR),
	    (unsigned long long)count(C_GLOBAL),
	    (unsigned long long)count(C_NO_META));
	n = count(C_LOG_NEXT);
	if (n > LOG_ENTRIES)
		n = LOG_ENTRIES;
	for (i = 0; i < n; i++) {
		memset(&r, 0, sizeof(r));
		(void)bpf_map_lookup_elem(log_fd, &i, &r);
		fprintf(out, "%s[%u, %u, %u, %u]", i ? ", " : "", r.port,
		    r.cpu, r.hash, r.member);
	}
	fprintf(out, "], \"logged\": %llu}",
	    (unsigned long long)count(C_LOG_NEXT));
}
