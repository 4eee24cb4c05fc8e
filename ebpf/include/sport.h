/* Rewriting the UDP source port (the ECMP entropy of a RoCEv2 packet). */
#ifndef MLFABRIC_SPORT_H
#define MLFABRIC_SPORT_H

#include "roce.h"

#define UDP_CHECK_OFF offsetof(struct udphdr, check)
#define UDP_SOURCE_OFF offsetof(struct udphdr, source)

/* Writes `sport` (network order) into the packet's UDP header. A non-zero UDP checksum is
 * updated incrementally; BPF_F_MARK_MANGLED_0 keeps a zero ("no checksum") checksum zero and
 * turns a computed zero into 0xFFFF, as RFC 768 requires. The RoCE ICRC is not touched: the
 * emulated receivers do not check it (see CONTRACTS.md). Returns 0 or a negative errno. */
static __always_inline int set_udp_sport(struct __sk_buff *skb, const struct roce_pkt *p,
					 __be16 sport)
{
	int err;

	if (sport == p->sport)
		return 0;
	err = bpf_l4_csum_replace(skb, p->udp_off + UDP_CHECK_OFF, p->sport, sport,
				  BPF_F_MARK_MANGLED_0 | sizeof(sport));
	if (err < 0)
		return err;
	return bpf_skb_store_bytes(skb, p->udp_off + UDP_SOURCE_OFF, &sport, sizeof(sport), 0);
}

#endif
