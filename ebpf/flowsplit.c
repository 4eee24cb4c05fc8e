/* flowsplit (tc egress): Ethereal's split-on-arrival for one RoCEv2 connection.
 *
 * The controller describes a split message of a connection (destination IP, destination QP):
 * starting at base_psn, every pkts_per_subflow consecutive PSNs form one sub-flow, and sub-flow
 * i leaves with UDP source port sports[i], so the fabric's ECMP hash (or a switch pin) keeps each
 * sub-flow on its own path. PSNs outside the n sub-flows keep the QP's own source port.
 */
#include "roce.h"
#include "sport.h"

#ifndef MAX_SUBFLOWS
#define MAX_SUBFLOWS 32 /* a power of two: indexes are masked for the verifier */
#endif
#define OUTSIDE MAX_SUBFLOWS /* counter slot of PSNs outside the split range */

struct split_key {
	__be32 dst_ip;
	__u32 dst_qp;
};

struct split_desc {
	__u32 base_psn;
	__u32 pkts_per_subflow;
	__u32 n_subflows;
	__be16 sports[MAX_SUBFLOWS];
};

struct split_stats {
	__u64 pkts[MAX_SUBFLOWS + 1];
	__u64 bytes[MAX_SUBFLOWS + 1];
};

BPF_HASH(splits, struct split_key, struct split_desc, 4096);
/* Entries are created by the loader next to the descriptor; the program only updates them. */
BPF_PERCPU_HASH(split_stats, struct split_key, struct split_stats, 4096);

static __always_inline void count(struct split_key *key, __u32 slot, __u32 len)
{
	struct split_stats *st = split_stats.lookup(key);

	if (!st || slot > OUTSIDE)
		return;
	st->pkts[slot] += 1;
	st->bytes[slot] += len;
}

int flowsplit_egress(struct __sk_buff *skb)
{
	struct roce_pkt p = {};
	struct split_key key = {};
	struct split_desc *d;
	__u32 idx;

	if (roce_parse(skb, &p) < 0)
		return PASS;
	key.dst_ip = p.daddr;
	key.dst_qp = p.dqpn;
	d = splits.lookup(&key);
	if (!d || d->pkts_per_subflow == 0)
		return PASS;
	/* 24-bit PSN arithmetic: a message may start just below 2^24 and wrap to 0. */
	idx = ((p.psn - d->base_psn) & PSN_MASK) / d->pkts_per_subflow;
	if (idx >= d->n_subflows || idx >= MAX_SUBFLOWS) {
		count(&key, OUTSIDE, skb->len);
		return PASS;
	}
	idx &= MAX_SUBFLOWS - 1;
	set_udp_sport(skb, &p, d->sports[idx]);
	count(&key, idx, skb->len);
	return PASS;
}
