/* pin (tc egress): one source port per queue pair, chosen by the host's planner (Ethereal).
 *
 * The transport sends each QP with one fixed source port, as a NIC does; this program gives
 * every data packet of a pinned connection (destination IP, destination QP) the port the
 * rank's Ethereal planner wrote for it, so the fabric's ECMP hash keeps that QP (one sub-flow)
 * on the path the planner meant. Re-pinning after a timeout is one map update; a QP's packets
 * never spread over several ports.
 */
#include "roce.h"
#include "sport.h"

struct pin_key {
	__be32 dst_ip;
	__u32 dst_qp;
};

struct pin_val {
	__be16 sport;
	__u16 pad;
	__u32 generation; /* bumped by every re-pin: lets a reader tell pins apart */
};

struct pin_stats {
	__u64 pkts;
	__u64 bytes;
};

BPF_HASH(pins, struct pin_key, struct pin_val, 16384);
/* Entries are created by the loader next to the pin; the program only updates them. */
BPF_PERCPU_HASH(pin_stats, struct pin_key, struct pin_stats, 16384);

int pin_egress(struct __sk_buff *skb)
{
	struct roce_pkt p = {};
	struct pin_key key = {};
	struct pin_val *v;
	struct pin_stats *st;
	__u32 n;

	if (roce_parse(skb, &p) < 0 || !roce_is_data(&p))
		return PASS;
	key.dst_ip = p.daddr;
	key.dst_qp = p.dqpn;
	v = pins.lookup(&key);
	if (!v)
		return PASS;
	n = icrc_after_sport(&p);
	if (set_udp_sport(skb, &p, v->sport, icrc_shift.lookup(&n)) < 0)
		return PASS;
	st = pin_stats.lookup(&key);
	if (st) {
		st->pkts += 1;
		st->bytes += skb->len;
	}
	return PASS;
}
