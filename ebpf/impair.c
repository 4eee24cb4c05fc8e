/* impair (tc egress or ingress): a loss, duplication and corruption injector for tests, since
 * netem does not exist on these machines. Of the IPv4 packets that match the filter, a
 * configured fraction is dropped, another fraction duplicated (a clone goes through the same
 * hook direction of the same interface, marked so that it is not impaired again), and another
 * corrupted: one bit of its fifth-last byte flipped (for RoCEv2, the last payload byte before
 * the ICRC), no checksum updated, as a flipped bit on a wire would be.
 */
#include "roce.h"

#define IMPAIR_CLONE_MARK 0x1D0F1D0FU
#define SPLITMIX_GAMMA 0x9E3779B97F4A7C15ULL

struct impair_cfg {
	__u64 drop_below; /* drop when a 32-bit random draw is below this (fraction * 2^32) */
	__u64 dup_below;  /* duplicate when a second draw is below this */
	__u64 seed;       /* 0: kernel randomness; otherwise a splitmix64 stream per CPU */
	__u16 udp_dport;  /* 0: any; otherwise only UDP packets to this port match */
	__u8 ip_proto;    /* 0: any IPv4 protocol */
	__u8 pad[5];
	__u64 corrupt_below; /* corrupt when a third draw is below this (0: never drawn) */
};

struct impair_stats {
	__u64 matched;
	__u64 dropped;
	__u64 duplicated;
	__u64 corrupted;
};

struct impair_rng {
	__u64 seed; /* the seed this stream started from; a new seed restarts it */
	__u64 state;
};

BPF_ARRAY(impair_cfg, struct impair_cfg, 1);
BPF_PERCPU_ARRAY(impair_stats, struct impair_stats, 1);
BPF_PERCPU_ARRAY(impair_rng, struct impair_rng, 1);

static __always_inline __u32 draw(const struct impair_cfg *cfg, struct impair_rng *rng)
{
	__u64 z;

	if (cfg->seed == 0 || !rng)
		return bpf_get_prandom_u32();
	if (rng->seed != cfg->seed) {
		rng->seed = cfg->seed;
		rng->state = cfg->seed;
	}
	rng->state += SPLITMIX_GAMMA;
	z = rng->state;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return (__u32)((z ^ (z >> 31)) >> 32);
}

static __always_inline int matches(struct __sk_buff *skb, const struct impair_cfg *cfg)
{
	struct ethhdr eth;
	struct iphdr ip;
	struct udphdr udp;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) < 0 ||
	    eth.h_proto != bpf_htons(ETH_P_IP))
		return 0;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0 || ip.version != 4)
		return 0;
	if (cfg->ip_proto && ip.protocol != cfg->ip_proto)
		return 0;
	if (!cfg->udp_dport)
		return 1;
	if (ip.protocol != IPPROTO_UDP || ip.ihl < 5 || (bpf_ntohs(ip.frag_off) & IP_FRAG_BITS))
		return 0;
	if (bpf_skb_load_bytes(skb, ETH_HLEN + ip.ihl * 4, &udp, sizeof(udp)) < 0)
		return 0;
	return udp.dest == bpf_htons(cfg->udp_dport);
}

static __always_inline int impair(struct __sk_buff *skb, __u64 redirect_flags)
{
	struct impair_cfg *cfg;
	struct impair_stats *st;
	struct impair_rng *rng;
	__u32 zero = 0, mark;

	if (skb->mark == IMPAIR_CLONE_MARK) { /* our own duplicate coming round again */
		skb->mark = 0;
		return PASS;
	}
	cfg = impair_cfg.lookup(&zero);
	if (!cfg || !matches(skb, cfg))
		return PASS;
	st = impair_stats.lookup(&zero);
	rng = impair_rng.lookup(&zero);
	if (st)
		st->matched += 1;
	if (draw(cfg, rng) < cfg->drop_below) {
		if (st)
			st->dropped += 1;
		return TC_ACT_SHOT;
	}
	if (draw(cfg, rng) < cfg->dup_below) {
		mark = skb->mark;
		skb->mark = IMPAIR_CLONE_MARK;
		if (bpf_clone_redirect(skb, skb->ifindex, redirect_flags) == 0 && st)
			st->duplicated += 1;
		skb->mark = mark;
	}
	if (cfg->corrupt_below && draw(cfg, rng) < cfg->corrupt_below && skb->len > 5) {
		__u32 off = skb->len - 5;
		__u8 byte;

		if (bpf_skb_load_bytes(skb, off, &byte, 1) == 0) {
			byte ^= 0x01;
			if (bpf_skb_store_bytes(skb, off, &byte, 1, 0) == 0 && st)
				st->corrupted += 1;
		}
	}
	return PASS;
}

int impair_egress(struct __sk_buff *skb)
{
	return impair(skb, 0);
}

int impair_ingress(struct __sk_buff *skb)
{
	return impair(skb, BPF_F_INGRESS);
}
