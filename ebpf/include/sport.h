/* Rewriting the UDP source port (the ECMP entropy of a RoCEv2 packet), as a NIC would have
 * chosen it: the UDP checksum and the ICRC stay valid. */
#ifndef MLFABRIC_SPORT_H
#define MLFABRIC_SPORT_H

#include "roce.h"
#include "icrc.h"

#define UDP_CHECK_OFF offsetof(struct udphdr, check)
#define UDP_SOURCE_OFF offsetof(struct udphdr, source)

/* Writes `sport` (network order) into the packet's UDP header. The ICRC is updated first
 * (icrc.h; `icrc_shift_entry` is the program's lookup of icrc_shift): a packet whose ICRC
 * cannot be updated keeps its port. A non-zero UDP checksum is
 * updated incrementally; BPF_F_MARK_MANGLED_0 keeps a zero ("no checksum") checksum zero and
 * turns a computed zero into 0xFFFF, as RFC 768 requires. Returns 0 or a negative errno. */
static __always_inline int set_udp_sport(struct __sk_buff *skb, const struct roce_pkt *p,
					 __be16 sport, const struct icrc_nibbles *icrc_shift_entry)
{
	int err;

	if (sport == p->sport)
		return 0;
	err = icrc_update_sport(skb, p, p->sport, sport, icrc_shift_entry);
	if (err < 0)
		return err;
	err = bpf_l4_csum_replace(skb, p->udp_off + UDP_CHECK_OFF, p->sport, sport,
				  BPF_F_MARK_MANGLED_0 | sizeof(sport));
	if (err < 0)
		return err;
	return bpf_skb_store_bytes(skb, p->udp_off + UDP_SOURCE_OFF, &sport, sizeof(sport), 0);
}

/* Data packets: every BTH opcode but ACK and CNP (those answer a sender; their port is the
 * responder's, and the ACK's carries the entropy echo). */
static __always_inline int roce_is_data(const struct roce_pkt *p)
{
	return p->opcode != BTH_OP_ACK && p->opcode != BTH_OP_CNP;
}

#endif
