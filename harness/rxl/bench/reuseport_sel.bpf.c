/*-
 * SPDX-License-Identifier: BSD-2-Clause
 *
 * Two BPF_PROG_TYPE_SK_REUSEPORT selectors for the accept rig.
 *
 * deal     the project's dealt map on Linux.  The receiving CPU's entry
 *          packs (offset << 16) | count, as LBDEAL_ENTRY in
 *          sys/netinet/in_pcblb_deal.h; the slot is
 *          offset + ((hash * count) >> 32), LBDEAL_SLOT's arithmetic, and
 *          the slot array holds member indices into the sockarray.  A CPU
 *          with no slots selects nothing: SK_PASS, the kernel's hash.
 * numa_rr  the NUMA design note's policy (seeds/003, section 4): a
 *          CPU -> node map, a range of the sockarray per node, an atomic
 *          ticket per range, the whole group round-robin when the node
 *          has no listener, SK_PASS without a selection when even that
 *          range is empty (missing metadata).
 *
 * Both count selections per member and fallbacks by reason in "counts",
 * and log (client port, CPU, hash, member) of the first LOG_ENTRIES
 * decisions in "sellog" so the rig can recompute every choice with the
 * model; a decision to leave the choice to the kernel's hash (SK_PASS
 * without a selection) is logged with member NO_MEMBER.  The user-space
 * side fills every map before any connection.
 */

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define	MAX_MEMBERS	256
#define	MAX_CPUS	256
#define	MAX_SLOTS	(16 * MAX_MEMBERS)	/* LBDEAL_SLOTS x members */
#define	MAX_NODES	64
#define	GLOBAL_RANGE	MAX_NODES		/* ranges[] index: all */
#define	LOG_ENTRIES	8192
#define	NO_MEMBER	0xffffffffu		/* sellog: kernel's hash */

/* counts[] beyond the per-member selections. */
#define	C_NO_SLOTS	(MAX_MEMBERS + 0)	/* deal: CPU supplies none */
#define	C_SELECT_ERR	(MAX_MEMBERS + 1)	/* bpf_sk_select_reuseport */
#define	C_GLOBAL	(MAX_MEMBERS + 2)	/* numa_rr: node had none */
#define	C_NO_META	(MAX_MEMBERS + 3)	/* numa_rr: no range at all */
#define	C_LOG_NEXT	(MAX_MEMBERS + 4)	/* next sellog index */
#define	C_N		(MAX_MEMBERS + 8)

struct range {
	__u32	start;
	__u32	count;
};

struct selrec {
	__u32	port;		/* client port, host order */
	__u32	cpu;
	__u32	hash;
	__u32	member;
};

struct {
	__uint(type, BPF_MAP_TYPE_REUSEPORT_SOCKARRAY);
	__uint(max_entries, MAX_MEMBERS);
	__type(key, __u32);
	__type(value, __u64);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} cpuent SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u32);
} cpu_node SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES + 1);
	__type(key, __u32);
	__type(value, struct range);
} ranges SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_NODES + 1);
	__type(key, __u32);
	__type(value, __u32);
} tickets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, C_N);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LOG_ENTRIES);
	__type(key, __u32);
	__type(value, struct selrec);
} sellog SEC(".maps");

static __always_inline void
bump(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&counts, &key);

	if (v != NULL)
		__sync_fetch_and_add(v, 1);
}

/* Log one decision: member, or NO_MEMBER when the kernel's hash picks. */
static __always_inline void
note(struct sk_reuseport_md *md, __u32 cpu, __u32 member)
{
	__u32 key = C_LOG_NEXT, idx;
	__u64 *next;
	struct selrec *rec;
	__u8 ports[2];

	next = bpf_map_lookup_elem(&counts, &key);
	if (next == NULL)
		return;
	idx = (__u32)__sync_fetch_and_add(next, 1);
	rec = bpf_map_lookup_elem(&sellog, &idx);
	if (rec == NULL)
		return;		/* log full: counters still count */
	/* md->data is the TCP header here; the source port comes first. */
	if (bpf_skb_load_bytes(md, 0, ports, sizeof(ports)) == 0)
		rec->port = ((__u32)ports[0] << 8) | ports[1];
	rec->cpu = cpu;
	rec->hash = md->hash;
	rec->member = member;
}

SEC("sk_reuseport")
int
deal(struct sk_reuseport_md *md)
{
	__u32 cpu = bpf_get_smp_processor_id(), off, cnt, slot, member;
	__u32 *e, *m;

	e = bpf_map_lookup_elem(&cpuent, &cpu);
	if (e == NULL || *e == 0) {
		bump(C_NO_SLOTS);
		note(md, cpu, NO_MEMBER);
		return (SK_PASS);
	}
	off = *e >> 16;
	cnt = *e & 0xffff;
	slot = off + (__u32)(((__u64)md->hash * cnt) >> 32);
	m = bpf_map_lookup_elem(&slots, &slot);
	if (m == NULL) {
		bump(C_SELECT_ERR);
		note(md, cpu, NO_MEMBER);
		return (SK_PASS);
	}
	member = *m;
	if (bpf_sk_select_reuseport(md, &socks, &member, 0) != 0) {
		bump(C_SELECT_ERR);
		note(md, cpu, NO_MEMBER);
		return (SK_PASS);
	}
	bump(member);
	note(md, cpu, member);
	return (SK_PASS);
}

SEC("sk_reuseport")
int
numa_rr(struct sk_reuseport_md *md)
{
	__u32 cpu = bpf_get_smp_processor_id(), node = 0, key, ticket;
	__u32 *np, *t;
	struct range *r;

	np = bpf_map_lookup_elem(&cpu_node, &cpu);
	if (np != NULL)
		node = *np;
	r = bpf_map_lookup_elem(&ranges, &node);
	if (r == NULL || r->count == 0) {
		bump(C_GLOBAL);
		node = GLOBAL_RANGE;
		r = bpf_map_lookup_elem(&ranges, &node);
	}
	if (r == NULL || r->count == 0) {
		bump(C_NO_META);
		return (SK_PASS);
	}
	t = bpf_map_lookup_elem(&tickets, &node);
	if (t == NULL) {
		bump(C_NO_META);
		return (SK_PASS);
	}
	ticket = __sync_fetch_and_add(t, 1);
	key = r->start + ticket % r->count;
	if (bpf_sk_select_reuseport(md, &socks, &key, 0) != 0) {
		bump(C_SELECT_ERR);
		return (SK_PASS);
	}
	bump(key);
	note(md, cpu, key);
	return (SK_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
