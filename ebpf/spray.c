/* spray (tc egress): per-packet spraying, a fresh pseudo-random UDP source port for every
 * RoCEv2 data packet, drawn uniformly from [base, base + count). ACKs and CNPs keep theirs. */
#include "roce.h"
#include "sport.h"

struct spray_cfg {
	__u16 base;
	__u16 pad;
	__u32 count; /* 0 disables spraying */
};

struct spray_stats {
	__u64 pkts;
	__u64 bytes;
};

BPF_ARRAY(spray_cfg, struct spray_cfg, 1);
BPF_PERCPU_ARRAY(spray_stats, struct spray_stats, 1);

int spray_egress(struct __sk_buff *skb)
{
	struct roce_pkt p = {};
	struct spray_cfg *cfg;
	struct spray_stats *st;
	__u32 zero = 0, port, n;

	cfg = spray_cfg.lookup(&zero);
	if (!cfg || cfg->count == 0 || roce_parse(skb, &p) < 0 || !roce_is_data(&p))
		return PASS;
	port = cfg->base + bpf_get_prandom_u32() % cfg->count;
	n = icrc_after_sport(&p);
	if (set_udp_sport(skb, &p, bpf_htons((__u16)port), icrc_shift.lookup(&n)) < 0)
		return PASS;
	st = spray_stats.lookup(&zero);
	if (st) {
		st->pkts += 1;
		st->bytes += skb->len;
	}
	return PASS;
}
