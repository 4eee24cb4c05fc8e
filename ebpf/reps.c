/* reps (tc egress + ingress): REPS, recycled entropy packet spraying, for RoCEv2 senders.
 *
 * Egress: every data packet of a configured connection gets an entropy (UDP source port):
 * round-robin over the range for the first window, then the oldest entropy in the connection's
 * cache (removed from it), or a random one when the cache is empty. The entropy each PSN left
 * with is kept (`sent_ev`), so a timeout can evict the entropy of the packet that timed out.
 * Ingress: an ACK (BTH opcode 0x11, a standard one: BTH + AETH + ICRC) carries the entropy of
 * the data packet it acknowledges in its own UDP source port (scrambled by a multiplication
 * modulo 2^14, so that the ACK's ECMP path is not tied to the data's), and that packet's congestion
 * mark in the BTH BECN bit. The receiver ACKs every data packet, so every delivered packet's
 * entropy comes back. Without BECN the entropy goes back into the cache (the oldest entry
 * makes room when the cache is full); with BECN it is evicted, copies still cached included.
 */
#include "roce.h"
#include "sport.h"

#ifndef REPS_CACHE
#define REPS_CACHE 32 /* a power of two: ring indexes are masked */
#endif
#ifndef REPS_SENT
#define REPS_SENT 256 /* entropies remembered by PSN; a power of two >= the send window */
#endif

struct reps_key {
	__be32 peer_ip;
	__u32 qp; /* the remote (destination) QP of the data packets */
};

/* An ACK names the sender's local QP, which is unique only per host: the local address
 * belongs to the key when several hosts share one map. */
struct reps_ack_key {
	__be32 peer_ip;
	__be32 local_ip;
	__u32 qp;
};

struct reps_conn {
	struct bpf_spin_lock lock;
	__u16 ev_base;      /* entropies are ev_base .. ev_base + ev_count - 1 */
	__u16 head;         /* ring index of the oldest cached entropy */
	__u32 ev_count;
	__u32 first_window; /* data packets that explore round-robin */
	__u32 sent;         /* data packets so far, saturating at first_window */
	__u32 cached;       /* valid cache entries */
	__u16 cache[REPS_CACHE];
	__u64 n_explore;    /* data packets: round-robin entropies */
	__u64 n_recycled;   /*   cached entropies */
	__u64 n_random;     /*   random entropies */
	__u64 acks_good;    /* echoes returned to the cache */
	__u64 acks_ece;     /* congestion-marked echoes (evicted) */
	__u64 acks_foreign; /* echoes outside the entropy range (ignored) */
	__u64 overwritten;  /* cached entropies pushed out by a full cache */
	__u16 sent_ev[REPS_SENT]; /* entropy of the last packet sent with PSN i (mod REPS_SENT) */
};

BPF_HASH(reps_conns, struct reps_key, struct reps_conn, 4096);
BPF_HASH(reps_acks, struct reps_ack_key, struct reps_key, 4096);

int reps_egress(struct __sk_buff *skb)
{
	struct roce_pkt p = {};
	struct reps_key key = {};
	struct reps_conn *c;
	__u32 rnd, ev, n;

	if (roce_parse(skb, &p) < 0 || !roce_is_data(&p))
		return PASS;
	key.peer_ip = p.daddr;
	key.qp = p.dqpn;
	c = reps_conns.lookup(&key);
	if (!c)
		return PASS;
	rnd = bpf_get_prandom_u32(); /* no helper calls while the lock is held */
	bpf_spin_lock(&c->lock);
	if (c->ev_count == 0) {
		bpf_spin_unlock(&c->lock);
		return PASS;
	}
	if (c->sent < c->first_window) {
		ev = c->ev_base + c->sent % c->ev_count;
		c->sent++;
		c->n_explore++;
	} else if (c->cached) {
		ev = c->cache[c->head & (REPS_CACHE - 1)];
		c->head = (c->head + 1) & (REPS_CACHE - 1);
		c->cached--;
		c->n_recycled++;
	} else {
		ev = c->ev_base + rnd % c->ev_count;
		c->n_random++;
	}
	c->sent_ev[p.psn & (REPS_SENT - 1)] = ev;
	bpf_spin_unlock(&c->lock);
	n = icrc_after_sport(&p);
	set_udp_sport(skb, &p, bpf_htons((__u16)ev), icrc_shift.lookup(&n));
	return PASS;
}

static __always_inline void cache_push(struct reps_conn *c, __u16 ev)
{
	if (c->cached >= REPS_CACHE) {
		c->head = (c->head + 1) & (REPS_CACHE - 1);
		c->cached = REPS_CACHE - 1;
		c->overwritten++;
	}
	c->cache[(c->head + c->cached) & (REPS_CACHE - 1)] = ev;
	c->cached++;
	c->acks_good++;
}

/* Compacts the ring in place, dropping every copy of `ev`; the write index never passes the
 * read index, so no entry is overwritten before it is read. */
static __always_inline void cache_purge(struct reps_conn *c, __u16 ev)
{
	__u32 n = 0, i;

#pragma unroll
	for (i = 0; i < REPS_CACHE; i++) {
		__u16 v = c->cache[(c->head + i) & (REPS_CACHE - 1)];

		if (i < c->cached && v != ev) {
			c->cache[(c->head + n) & (REPS_CACHE - 1)] = v;
			n++;
		}
	}
	c->cached = n;
	c->acks_ece++;
}

int reps_ingress(struct __sk_buff *skb)
{
	struct roce_pkt p = {};
	struct reps_ack_key key = {};
	struct reps_key *conn_key;
	struct reps_conn *c;
	__u32 ev;

	if (roce_parse(skb, &p) < 0 || p.opcode != BTH_OP_ACK)
		return PASS;
	if (p.l4_room < sizeof(struct udphdr) + BTH_LEN + AETH_LEN + 4)
		return PASS; /* not an ACK: no AETH and ICRC */
	key.peer_ip = p.saddr;
	key.local_ip = p.daddr;
	key.qp = p.dqpn;
	conn_key = reps_acks.lookup(&key);
	if (!conn_key)
		return PASS;
	c = reps_conns.lookup(conn_key);
	if (!c)
		return PASS;
	/* the echo is scrambled by a multiplication modulo 2^14 (collectives/wire.py) */
	ev = SPORT_MIN | ((bpf_ntohs(p.sport) * ECHO_MUL_INV) & SPORT_MASK);
	bpf_spin_lock(&c->lock);
	if (ev - c->ev_base >= c->ev_count)
		c->acks_foreign++;
	else if (p.becn)
		cache_purge(c, ev);
	else
		cache_push(c, ev);
	bpf_spin_unlock(&c->lock);
	return PASS;
}
