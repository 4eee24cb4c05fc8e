/* RoCEv2 header parsing for tc programs: Ethernet / IPv4 / UDP (RoCEv2 port) / BTH.
 *
 * Every read goes through bpf_skb_load_bytes, so a short, fragmented or non-linear packet
 * simply fails to parse and the caller leaves it alone: these programs never drop a packet
 * because they could not read it.
 */
#ifndef MLFABRIC_ROCE_H
#define MLFABRIC_ROCE_H

#include <uapi/linux/bpf.h>
#include <uapi/linux/if_ether.h>
#include <uapi/linux/in.h>
#include <uapi/linux/ip.h>
#include <uapi/linux/udp.h>
#include <uapi/linux/pkt_cls.h>

#include "rocev2.h" /* the port, opcodes, sizes and masks, generated out of fabricmodel/ */

#define BTH_BECN 0x40 /* in the byte before the destination QP (FECN 0x80, BECN 0x40) */

/* The pass verdict for every program: TC_ACT_UNSPEC lets the next filter on the same hook
 * run (and, with none left, passes the packet), so the programs stack on one interface. */
#define PASS TC_ACT_UNSPEC


struct roce_pkt {
	__u32 udp_off;  /* offset of the UDP header from the start of the frame */
	__u32 bth_off;
	__be32 saddr;
	__be32 daddr;
	__be16 sport;
	__be16 udp_check;
	__u8 opcode;
	__u8 becn;      /* BTH BECN: on an ACK, the acknowledged packet was congestion-marked */
	__u32 dqpn;     /* host order, 24 bits */
	__u32 psn;      /* host order, 24 bits */
	__u32 l4_room;  /* bytes from the UDP header to the end of the IP datagram */
};

struct bth {
	__u8 opcode;
	__u8 flags;
	__be16 pkey;
	__u8 resv8;
	__u8 dqpn[3];
	__u8 ack_req;
	__u8 psn[3];
};

static __always_inline __u32 be24(const __u8 b[3])
{
	return ((__u32)b[0] << 16) | ((__u32)b[1] << 8) | b[2];
}

/* The IPv4/UDP part: 0 when the frame is an unfragmented IPv4 UDP datagram whose headers are
 * consistent with its length, -1 otherwise. */
static __always_inline int udp_parse(struct __sk_buff *skb, struct roce_pkt *p,
				     struct udphdr *udp)
{
	struct ethhdr eth;
	struct iphdr ip;
	__u32 ihl_bytes, tot_len;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)) < 0)
		return -1;
	if (eth.h_proto != bpf_htons(ETH_P_IP))
		return -1;
	if (bpf_skb_load_bytes(skb, ETH_HLEN, &ip, sizeof(ip)) < 0)
		return -1;
	if (ip.version != 4 || ip.ihl < 5 || ip.protocol != IPPROTO_UDP)
		return -1;
	if (bpf_ntohs(ip.frag_off) & IP_FRAG_BITS)
		return -1;
	ihl_bytes = ip.ihl * 4;
	tot_len = bpf_ntohs(ip.tot_len);
	if (tot_len < ihl_bytes + sizeof(*udp) || ETH_HLEN + tot_len > skb->len)
		return -1;
	p->udp_off = ETH_HLEN + ihl_bytes;
	if (bpf_skb_load_bytes(skb, p->udp_off, udp, sizeof(*udp)) < 0)
		return -1;
	if (bpf_ntohs(udp->len) < sizeof(*udp) || bpf_ntohs(udp->len) > tot_len - ihl_bytes)
		return -1;
	p->l4_room = bpf_ntohs(udp->len);
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->sport = udp->source;
	p->udp_check = udp->check;
	return 0;
}

/* 0 when the frame is a well-formed RoCEv2 packet (UDP to ROCE_UDP_PORT, a complete BTH). */
static __always_inline int roce_parse(struct __sk_buff *skb, struct roce_pkt *p)
{
	struct udphdr udp;
	struct bth bth;

	if (udp_parse(skb, p, &udp) < 0)
		return -1;
	if (udp.dest != bpf_htons(ROCE_UDP_PORT))
		return -1;
	if (p->l4_room < sizeof(udp) + BTH_LEN)
		return -1;
	p->bth_off = p->udp_off + sizeof(udp);
	if (bpf_skb_load_bytes(skb, p->bth_off, &bth, sizeof(bth)) < 0)
		return -1;
	p->opcode = bth.opcode;
	p->becn = !!(bth.resv8 & BTH_BECN);
	p->dqpn = be24(bth.dqpn);
	p->psn = be24(bth.psn);
	return 0;
}

#endif
