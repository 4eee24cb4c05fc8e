/* Keeping a RoCEv2 packet's ICRC valid when a tc program rewrites its UDP source port.
 *
 * The ICRC is a CRC-32 (zlib's, reflected, polynomial 0xEDB88320) over 8 bytes of ones, the
 * IP and UDP headers with their variant fields masked, the BTH and the payload. A CRC is
 * linear: for two messages of equal length, crc(a) ^ crc(b) = crc0(a ^ b), where crc0 has no
 * initial value and no final xor. Changing the two source-port bytes by d therefore changes
 * the ICRC by crc0(d followed by n zero bytes), n being the number of covered bytes after the
 * port, and that is linear in d again: the xor of one table value per nibble of d.
 * `icrc_shift[n]` holds those 4 x 16 values (filled by the loader, ebpf/icrc.py), so an
 * update reads 4 bytes of the packet and never its payload, without a data-dependent branch.
 * bcc rewrites map lookups only in a program's own file, so each program looks the entry up
 * itself:
 *     __u32 n = icrc_after_sport(&p);
 *     set_udp_sport(skb, &p, port, icrc_shift.lookup(&n));
 */
#ifndef MLFABRIC_ICRC_H
#define MLFABRIC_ICRC_H

#include "roce.h"

#ifndef ICRC_SHIFTS
#define ICRC_SHIFTS 9216 /* entries of icrc_shift: IP datagrams of up to 9216 bytes */
#endif

struct icrc_nibbles {
	__u32 v[64]; /* v[16 * k + x]: crc0 of nibble k (0 = lowest) of d set to x, then n zeros */
};

BPF_ARRAY(icrc_shift, struct icrc_nibbles, ICRC_SHIFTS);

/* ICRC-covered bytes after the source port: dport, length, checksum, BTH.. up to the ICRC. */
static __always_inline __u32 icrc_after_sport(const struct roce_pkt *p)
{
	return p->l4_room - 6;
}

/* Updates the ICRC of a RoCEv2 packet whose source port changes from old to new (network
 * order); `t` = icrc_shift[icrc_after_sport(p)]. The UDP checksum covers the ICRC too: it is
 * updated for the ICRC's change (a zero one stays zero). 0 on success; -1 (packet left
 * untouched) when the ICRC cannot be reached. */
static __always_inline int icrc_update_sport(struct __sk_buff *skb, const struct roce_pkt *p,
					     __be16 old, __be16 new,
					     const struct icrc_nibbles *t)
{
	__u32 off, crc, fixed, d;
	int err;

	/* RoCE pads every packet to 4 bytes (BTH padcount): anything else is not RoCE */
	if (!t || p->l4_room < sizeof(struct udphdr) + BTH_LEN + 4 || (p->l4_room & 3))
		return -1;
	off = p->udp_off + p->l4_room - 4;
	if (bpf_skb_load_bytes(skb, off, &crc, sizeof(crc)) < 0)
		return -1;
	d = bpf_ntohs(old ^ new);
	fixed = crc ^ t->v[d & 15] ^ t->v[16 + ((d >> 4) & 15)] ^ t->v[32 + ((d >> 8) & 15)] ^
		t->v[48 + ((d >> 12) & 15)];
	err = bpf_l4_csum_replace(skb, p->udp_off + offsetof(struct udphdr, check), crc, fixed,
				  BPF_F_MARK_MANGLED_0 | sizeof(crc));
	if (err < 0)
		return err;
	return bpf_skb_store_bytes(skb, off, &fixed, sizeof(fixed), 0);
}

#endif
