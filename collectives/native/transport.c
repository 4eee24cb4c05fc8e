/* The per-packet work of collectives/transport.py in C: framing and ICRC, send and receive
 * loops (recvmmsg / sendmmsg batches), PSN tracking, placement by offset, ACK/NAK and CNP
 * generation, the three receivers (go-back-N, selective repeat, reorder-tolerant),
 * retransmission timers, pacing and the DCQCN-like reaction. transport.py is the reference:
 * every function here mirrors the method named in its comment, so that both put the same
 * packets on the wire for the same inputs (tests/collectives/test_native_transport.py).
 * Every number shared with Python comes from the generated header in front of this file
 * (collectives/native/build.py), never typed here. */
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_arp.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/virtio_net.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { CB_PACKET = 1, CB_PLACE, CB_CONTROL, CB_TIMEOUT, CB_NEWRQP };
enum { ERR_CALLBACK = -1, ERR_UNREACHABLE = -2 };
enum { REL_GBN = 0, REL_SR = 1, REL_OOO = 2 };

typedef int64_t (*nt_cb)(int kind, uint64_t a, uint64_t b, uint64_t c, const uint8_t *p,
                         uint32_t len);

/* ---- shared with Python through ctypes (collectives/native/loader.py) -------------------- */
/* nt_stats (transport.Stats, field for field) comes with the generated header */
typedef struct {
    uint32_t mtu, window, reliability, ack_every, gap_threshold, retry_limit, ecn, dport;
    uint32_t local, ip_id, connected, rank;
    int32_t rx_fd, tx_fd;
    double min_rto, max_rto, rate, line_rate;   /* rates in bytes per second */
} nt_config;

typedef struct {                    /* the head of a send QP that Python reads and writes */
    uint32_t window, mtu, dst, next_psn;
    double srtt, rate;
} nt_sqp_pub;

/* ---- CRC-32 (zlib's), slicing by 8 ------------------------------------------------------- */
static uint32_t crc_tab[8][256];
/* how the CPU multiplies carry-less (x86-64): 0 not at all, 1 PCLMULQDQ on 128 bits, 2 also
 * VPCLMULQDQ on 512 bits (AVX-512) */
static int clmul_level __attribute__((unused));

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = crc_tab[0][crc_tab[t - 1][i] & 0xFF] ^ (crc_tab[t - 1][i] >> 8);
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
        clmul_level = __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx512f") &&
                      __builtin_cpu_supports("avx512bw") ? 2 : 1;
#endif
}

static uint32_t crc32_table(uint32_t crc, const uint8_t *p, size_t n) {   /* crc inverted */
    while (n && ((uintptr_t)p & 7)) { crc = crc_tab[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8); n--; }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^
              crc_tab[5][(lo >> 16) & 0xFF] ^ crc_tab[4][lo >> 24] ^
              crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
              crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = crc_tab[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

/* Carry-less multiplication folding (Gopal et al., Intel, "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ", 2009) for the bit-reflected CRC-32 of zlib: a 128-bit
 * accumulator folded forward over 16-byte blocks, then Barrett reduction. A pair of
 * constants folds by D bits: x^(D+32) and x^(D-32) mod P, bit-reflected and shifted left by
 * one; P = 0x104C11DB7 and mu for the reduction. */
#if defined(__x86_64__)
#include <immintrin.h>
#define K128 _mm_set_epi64x(0x00ccaa009eLL, 0x01751997d0LL)
#define K256 _mm_set_epi64x(0x015a546366LL, 0x00f1da05aaLL)
#define K384 _mm_set_epi64x(0x0174359406LL, 0x003db1ecdcLL)
#define K512 _mm_set_epi64x(0x01c6e41596LL, 0x0154442bd4LL)
#define K2048 _mm_set_epi64x(0x01322d1430LL, 0x011542778aLL)

__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold_by(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse4.1")))
static inline __m128i fold(__m128i x, __m128i k, const uint8_t *p) {
    return _mm_xor_si128(fold_by(x, k), _mm_loadu_si128((const __m128i *)p));
}

/* 64 bytes per step in four 512-bit lanes of 4 x 128 bits; x (the data before p) is folded
 * onto p's first block. n >= 256, n % 64 == 0 left for the caller's 128-bit tail. */
__attribute__((target("avx512f,avx512bw,vpclmulqdq,pclmul,sse4.1")))
static __m128i fold_512(__m128i x, const uint8_t **pp, size_t *pn) {
    const uint8_t *p = *pp;
    size_t n = *pn;
    const __m512i k2048 = _mm512_broadcast_i32x4(K2048), k512 = _mm512_broadcast_i32x4(K512);
#define FOLD512(acc, k, data) _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(acc, k, 0x00), \
        _mm512_clmulepi64_epi128(acc, k, 0x11), data, 0x96)
    __m512i x0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_zextsi128_si512(fold_by(x, K128)));
    __m512i x1 = _mm512_loadu_si512(p + 64), x2 = _mm512_loadu_si512(p + 128);
    __m512i x3 = _mm512_loadu_si512(p + 192);
    for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
        x0 = FOLD512(x0, k2048, _mm512_loadu_si512(p));
        x1 = FOLD512(x1, k2048, _mm512_loadu_si512(p + 64));
        x2 = FOLD512(x2, k2048, _mm512_loadu_si512(p + 128));
        x3 = FOLD512(x3, k2048, _mm512_loadu_si512(p + 192));
    }
    x1 = FOLD512(x0, k512, x1);
    x2 = FOLD512(x1, k512, x2);
    x3 = FOLD512(x2, k512, x3);
    for (; n >= 64; p += 64, n -= 64) x3 = FOLD512(x3, k512, _mm512_loadu_si512(p));
#undef FOLD512
    /* four lanes to one: lane i is 48 - 16 i bytes before lane 3 */
    const __m512i kl = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(K256, K384)),
                                          _mm256_set_m128i(_mm_setzero_si128(), K128), 1);
    __m512i t = _mm512_xor_si512(_mm512_clmulepi64_epi128(x3, kl, 0x00),
                                 _mm512_clmulepi64_epi128(x3, kl, 0x11));
    *pp = p;
    *pn = n;
    return _mm_xor_si128(_mm_xor_si128(_mm512_extracti32x4_epi32(t, 0), _mm512_extracti32x4_epi32(t, 1)),
                         _mm_xor_si128(_mm512_extracti32x4_epi32(t, 2), _mm512_extracti32x4_epi32(x3, 3)));
}

/* x, the data so far, folded over n more bytes (n % 16 == 0) */
__attribute__((target("pclmul,sse4.1")))
static __m128i fold_more(__m128i x, const uint8_t *p, size_t n, int level) {
    if (level >= 2 && n >= 256) x = fold_512(x, &p, &n);
    if (n >= 64) {                  /* four accumulators hide the multiplier's latency */
        __m128i x0 = fold(x, K128, p);
        __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
        __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
        __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
        for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
            x0 = fold(x0, K512, p);
            x1 = fold(x1, K512, p + 16);
            x2 = fold(x2, K512, p + 32);
            x3 = fold(x3, K512, p + 48);
        }
        x = _mm_xor_si128(_mm_xor_si128(fold_by(x0, K384), fold_by(x1, K256)),
                          _mm_xor_si128(fold_by(x2, K128), x3));
    }
    for (; n; p += 16, n -= 16) x = fold(x, K128, p);
    return x;
}

/* the accumulator reduced to the (inverted) CRC-32 */
__attribute__((target("pclmul,sse4.1")))
static uint32_t reduce(__m128i x) {
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x01f7011641LL, 0x01db710641LL);
    const __m128i low32 = _mm_setr_epi32(~0, 0, ~0, 0);
    /* 128 -> 64 bits */
    __m128i t = _mm_clmulepi64_si128(x, K128, 0x10);
    x = _mm_xor_si128(_mm_srli_si128(x, 8), t);
    t = _mm_srli_si128(x, 4);
    x = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x, low32), k5, 0x00), t);
    /* Barrett: 64 -> 32 bits */
    t = _mm_clmulepi64_si128(_mm_and_si128(x, low32), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x, t), 1);
}

/* zlib.crc32 of a (na % 16 == 0, na >= 16) followed by b, as one stream */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32_clmul(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, int level) {
    __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)a), _mm_cvtsi32_si128(~0));
    x = fold_more(x, a + 16, na - 16, level);
    size_t m = nb & ~(size_t)15;
    x = fold_more(x, b, m, level);
    return ~crc32_table(reduce(x), b + m, nb - m);
}
#endif

/* zlib.crc32(a + b) where a is a whole number of 16-byte blocks */
static uint32_t crc32_two(const uint8_t *a, size_t na, const uint8_t *b, size_t nb, int level) {
#if defined(__x86_64__)
    if (level) return crc32_clmul(a, na, b, nb, level);
#endif
    return ~crc32_table(crc32_table(~0u, a, na), b, nb);
}

/* wire.icrc: the variant fields masked to ones, behind 8 bytes of ones (the LRH). The first
 * 48 bytes (LRH, IP/UDP, the BTH with its masked byte) go through one buffer, so that the
 * CRC runs over whole 16-byte blocks, and on over the rest of the packet in one pass. */
#define ICRC_HEAD (8 + IP_UDP_BYTES + BTH_BYTES)
static uint32_t icrc_at(const uint8_t *pkt, uint32_t roce_len, int level) {
    uint8_t head[ICRC_HEAD];
    memset(head, 0xFF, 8);
    memcpy(head + 8, pkt, IP_UDP_BYTES + BTH_BYTES);
    head[8 + 1] = 0xFF;
    head[8 + 8] = 0xFF;
    head[8 + 10] = head[8 + 11] = 0xFF;
    head[8 + 26] = head[8 + 27] = 0xFF;
    head[8 + IP_UDP_BYTES + 4] = 0xFF;
    return crc32_two(head, ICRC_HEAD, pkt + IP_UDP_BYTES + BTH_BYTES, roce_len - BTH_BYTES, level);
}

static inline uint32_t icrc(const uint8_t *pkt, uint32_t roce_len) {
    return icrc_at(pkt, roce_len, clmul_level);
}

static inline void put16(uint8_t *p, uint32_t v) { p[0] = v >> 8; p[1] = v; }
static inline void put32(uint8_t *p, uint32_t v) { p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v; }
static inline void put64(uint8_t *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, (uint32_t)v); }
static inline uint32_t get16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

static inline uint32_t psn_add(uint32_t psn, int64_t n) { return (uint32_t)((int64_t)psn + n) & PSN_MASK; }
static inline int32_t psn_diff(uint32_t a, uint32_t b) {
    int32_t d = (int32_t)((a - b) & PSN_MASK);
    return d >= PSN_HALF ? d - (PSN_MASK + 1) : d;
}
static inline int is_write(int op) {
    return op == WRITE_FIRST || op == WRITE_MIDDLE || op == WRITE_LAST || op == WRITE_ONLY;
}
static inline int is_send(int op) {
    return op == SEND_FIRST || op == SEND_MIDDLE || op == SEND_LAST || op == SEND_ONLY;
}
static inline int is_last(int op) {
    return op == SEND_LAST || op == SEND_ONLY || op == WRITE_LAST || op == WRITE_ONLY;
}
static inline uint32_t echo_sport(uint32_t entropy) { return SPORT_MIN | ((entropy * ECHO_MUL) & SPORT_MASK); }
static inline uint32_t ack_sport(uint32_t qpn) {
    return SPORT_MIN | (uint32_t)(((uint64_t)qpn * ACK_SPORT_MUL >> 7) & SPORT_MASK);
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- state --------------------------------------------------------------------------------- */
typedef struct {                    /* transport._Pkt */
    const uint8_t *data;
    uint64_t va, wr_id;
    double sent_at, sr_at;          /* sr_at: SendQP.sr_retx[psn], -1 when absent */
    uint32_t psn, len, rkey, rlen, sends;
    uint8_t op, ackreq, has_reth, done;
} pkt_t;

typedef struct {                    /* an item of SendQP.queue */
    const uint8_t *data;
    uint64_t offset, wr_id;
    uint32_t len, pos, msg_id;
    uint8_t write;
} wr_t;

typedef struct sqp {
    nt_sqp_pub pub;
    double rto, target_rate, alpha, last_cnp, next_tx;
    double ready_at;                /* since when it could send (0: it cannot): stalls */
    uint32_t peer, idx, dqpn, sport, handle;
    uint32_t backoff, retries, resend, count;
    pkt_t *ring;                    /* inflight */
    uint32_t cap, head, n;
    wr_t *q;                        /* queue */
    uint32_t qcap, qhead, qn;
    int active;
} sqp_t;

typedef struct {                    /* RecvQP.ooo / seen / pending, by PSN */
    uint8_t *ooo_buf, *pend_buf;
    uint32_t ooo_len, pend_len, ooo_cap, pend_cap;
    uint32_t psn_ooo, psn_seen, psn_pend;
    uint8_t has_ooo, has_seen, has_pend, ooo_op, seen_op;
} slot_t;

typedef struct { uint32_t first, msg, length, mtu; uint64_t va; } part_t;

typedef struct {
    uint32_t peer, idx, ack_qpn, expected, max_seen, msn, nak_sent;
    int64_t naked;
    double last_cnp;
    slot_t *slots;
    uint32_t mask, n_ooo, n_seen, n_pend;
    part_t *parts;
    uint32_t n_parts, parts_cap;
    int part_active;                /* RecvQP.part: [msg id, offset] of the WRITE in progress */
    uint32_t part_msg;
    uint64_t part_va;
    uint8_t *send_buf;
    uint32_t send_len, send_cap;
} rqp_t;

typedef struct { uint8_t *buf; uint64_t len, received; uint32_t msg_id, used; } msg_t;
typedef struct { msg_t *tab; uint32_t mask; } msgtab_t;

#define BATCH 64
#define FRAME_MAX 9216
#define MAX_GROUPS 64
/* The receive ring: 1 MiB blocks (frames never straddle one), 16 MiB in all as the raw
 * socket's buffer was, of frames that hold the largest packet of the endpoint's MTU (a WRITE
 * FIRST with its RETH) behind TPACKET_V2's header: the kernel writes a datagram socket's
 * packet at RING_NET_OFF (TPACKET_ALIGN(TPACKET2_HDRLEN) + 16, tpacket_rcv). A larger packet
 * (the collectives' own opcodes may carry more than the MTU, e.g. SwitchML's 1 KiB at an MTU
 * of 256) arrives whole through the socket's queue (PACKET_COPY_THRESH). Frames for 9 KiB
 * packets spread 1 KiB ones over 16 MiB, a page each: sized by the MTU, the ring's frames of
 * 1 KiB packets are 7x denser (less of the cache and TLB for the kernel's copy and the
 * first read of each frame). */
#define RING_BLOCK (1024u * 1024u)
#define RING_BLOCKS 16
#define RING_NET_OFF (TPACKET_ALIGN(TPACKET2_HDRLEN) + 16)

typedef struct {
    nt_config cfg;
    nt_stats stats;
    nt_cb cb;
    uint32_t peers[MAX_PEERS], npeers;
    sqp_t **sqps;                   /* by peer * MAX_QPS + idx */
    rqp_t **rqps;
    msgtab_t msgs[MAX_PEERS];
    sqp_t **active;
    uint32_t nactive, active_cap;
    uint64_t *done;                 /* completed work requests, for Python */
    uint32_t ndone, done_cap;
    int notify;                     /* something Python waits for happened */
    int error;
    uint32_t err_handle, err_psn, err_retries;
    /* transmit batch */
    uint8_t *txbuf;
    struct mmsghdr txm[BATCH];
    struct iovec txv[BATCH];
    struct sockaddr_in txa[BATCH];
    uint32_t ntx;
    /* receive batch */
    uint8_t *rxbuf;
    struct mmsghdr rxm[BATCH];
    struct iovec rxv[BATCH];
    /* or the packet ring the kernel copies received packets into (nt_rx_ring) */
    uint8_t *ring;
    size_t ring_bytes;
    uint32_t ring_frames, ring_head, ring_frame, ring_per_block;
    uint32_t groups[MAX_GROUPS], ngroups;  /* multicast groups joined */
    /* the TX ring (nt_tx_ring) and the next hops it sends to */
    int txr_fd, nl_fd;
    uint8_t *txr;
    uint32_t txr_cur, txr_pending, nl_seq;
    int txr_ifindex;
    uint8_t txr_mac[6];
    struct hop *hops;
    struct hop *slot_hop;           /* the frame tx_slot handed out goes by the ring to it */
    uint8_t *slot;                  /* ... and its IP header is here */
} ep_t;

/* ---- transmit ---------------------------------------------------------------------------- */
/* Frames leave by one of two paths. The TX ring (nt_tx_ring): a PACKET_TX_RING on the
 * interface that holds the rank's address, where a frame is written in place behind an
 * Ethernet header to the next hop's MAC and a batch leaves with one send(2), with no route
 * lookup, no dst and no neighbour output per packet. Each frame starts with a virtio-net
 * header whose hdr_len covers it all, so that the kernel copies it into a linear skb as the
 * raw socket did: left in the ring's pages (zero-copy fragments), a frame was copied again into
 * fresh pages by the veth (skb_copy_ubufs, to leave its namespace) and every filter and
 * program read it through the slow helpers. The qdisc and tc egress still see every frame (no PACKET_QDISC_BYPASS), so the
 * policies' programs write every source port as before. The raw IP socket (sendmmsg) takes
 * the frames for a destination whose next hop is not known: not resolved yet (the raw path's
 * own packets make the kernel resolve it by ARP), reached through another interface, local
 * (ranks of one host), or for a while after a retransmission timeout that found its neighbour
 * entry unconfirmed (hop_recheck). */
#define TXR_DATA (TPACKET2_HDRLEN - sizeof(struct sockaddr_ll))   /* where a frame's bytes start */
#define TXR_HEAD (sizeof(struct virtio_net_hdr) + ETH_HLEN)        /* what goes before the IP header */
#define TXR_FRAME ((TXR_DATA + TXR_HEAD + FRAME_MAX + 15) & ~15u)
#define TXR_BLOCK (1024u * 1024u)
#define TXR_BLOCKS 8
#define TXR_PER_BLOCK (TXR_BLOCK / TXR_FRAME)
#define TXR_FRAMES (TXR_PER_BLOCK * TXR_BLOCKS)
#define HOPS 1024                   /* destinations a TX ring endpoint remembers (power of 2) */
#define HOP_RETRY_S 0.01            /* how soon an unknown next hop is asked for again */
/* a neighbour entry with a usable MAC (the kernel's NUD_VALID, which uapi does not export) */
#define NUD_KNOWN (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY)
/* one the kernel has confirmed or is checking already (DELAY, PROBE): not a stale one */
#define NUD_CHECKED (NUD_KNOWN & ~NUD_STALE)

typedef struct hop {                /* a destination's next hop, as the kernel's tables say */
    uint32_t addr;
    uint8_t used, ring, mac[6];
    double retry_at;
} hop_t;

static inline struct tpacket2_hdr *txr_hdr(ep_t *ep, uint32_t i) {
    return (struct tpacket2_hdr *)(ep->txr + (size_t)(i / TXR_PER_BLOCK) * TXR_BLOCK +
                                   (size_t)(i % TXR_PER_BLOCK) * TXR_FRAME);
}

static void raw_flush(ep_t *ep) {
    uint32_t off = 0;
    while (off < ep->ntx) {
        int r = sendmmsg(ep->cfg.tx_fd, ep->txm + off, ep->ntx - off, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            off++;                  /* a frame the kernel refuses is lost on the wire */
            continue;
        }
        off += r;
    }
    ep->ntx = 0;
}

/* Hands the queued ring frames to the kernel. A frame the device refused (a full backlog)
 * stays queued and goes with the next send. */
static void txr_flush(ep_t *ep) {
    if (!ep->txr_pending) return;
    struct tpacket2_hdr *last = txr_hdr(ep, (ep->txr_cur + TXR_FRAMES - 1) % TXR_FRAMES);
    for (int tries = 0; tries < 16; tries++) {
        ssize_t r = send(ep->txr_fd, NULL, 0, MSG_DONTWAIT);
        if (!(__atomic_load_n(&last->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_SEND_REQUEST))
            break;
        if (r < 0 && errno != EINTR && errno != EAGAIN && errno != ENOBUFS) break;
    }
    ep->txr_pending = 0;
}

static void tx_flush(ep_t *ep) {
    txr_flush(ep);
    raw_flush(ep);
}

/* ---- next hops, from the kernel's route and neighbour tables (rtnetlink) ------------------ */
static int nl_ask(ep_t *ep, struct nlmsghdr *req, uint8_t *buf, size_t cap) {
    req->nlmsg_flags = NLM_F_REQUEST;
    req->nlmsg_seq = ++ep->nl_seq;
    if (send(ep->nl_fd, req, req->nlmsg_len, 0) < 0) return -1;
    for (;;) {
        ssize_t n = recv(ep->nl_fd, buf, cap, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < (ssize_t)sizeof(struct nlmsghdr)) return -1;
        struct nlmsghdr *h = (struct nlmsghdr *)buf;
        if (!NLMSG_OK(h, (size_t)n)) return -1;
        if (h->nlmsg_seq != ep->nl_seq) continue;       /* a late answer to an earlier question */
        return h->nlmsg_type == NLMSG_ERROR ? -1 : (int)h->nlmsg_len;
    }
}

/* The gateway (or the destination itself) through which `dst` is reached by a unicast route
 * out of the ring's interface; -1 for any other route (local, multipath, another device). */
static int route_via(ep_t *ep, uint32_t dst, uint32_t *nexthop) {
    struct { struct nlmsghdr h; struct rtmsg r; struct rtattr a; uint32_t dst; } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = sizeof req;
    req.h.nlmsg_type = RTM_GETROUTE;
    req.r.rtm_family = AF_INET;
    req.r.rtm_dst_len = 32;
    req.a.rta_type = RTA_DST;
    req.a.rta_len = RTA_LENGTH(4);
    req.dst = dst;
    uint8_t buf[1024];
    int n = nl_ask(ep, &req.h, buf, sizeof buf);
    if (n < (int)NLMSG_LENGTH(sizeof(struct rtmsg))) return -1;
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct rtmsg *r = NLMSG_DATA(h);
    if (h->nlmsg_type != RTM_NEWROUTE || r->rtm_type != RTN_UNICAST) return -1;
    int oif = 0, len = (int)RTM_PAYLOAD(h);
    *nexthop = dst;
    for (struct rtattr *a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == RTA_OIF && RTA_PAYLOAD(a) == 4) memcpy(&oif, RTA_DATA(a), 4);
        else if (a->rta_type == RTA_GATEWAY && RTA_PAYLOAD(a) == 4) memcpy(nexthop, RTA_DATA(a), 4);
        else if (a->rta_type == RTA_MULTIPATH) return -1;
    }
    return oif == ep->txr_ifindex ? 0 : -1;
}

/* The MAC of a neighbour on the ring's interface in one of the `states`; -1 otherwise */
static int neigh_mac(ep_t *ep, uint32_t addr, uint8_t *mac, uint16_t states) {
    struct { struct nlmsghdr h; struct ndmsg n; struct rtattr a; uint32_t dst; } req;
    memset(&req, 0, sizeof req);
    req.h.nlmsg_len = sizeof req;
    req.h.nlmsg_type = RTM_GETNEIGH;
    req.n.ndm_family = AF_INET;
    req.n.ndm_ifindex = ep->txr_ifindex;
    req.a.rta_type = NDA_DST;
    req.a.rta_len = RTA_LENGTH(4);
    req.dst = addr;
    uint8_t buf[1024];
    int n = nl_ask(ep, &req.h, buf, sizeof buf);
    if (n < (int)NLMSG_LENGTH(sizeof(struct ndmsg))) return -1;
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct ndmsg *nd = NLMSG_DATA(h);
    if (h->nlmsg_type != RTM_NEWNEIGH || !(nd->ndm_state & states)) return -1;
    int len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *nd));
    for (struct rtattr *a = (struct rtattr *)((uint8_t *)nd + NLMSG_ALIGN(sizeof *nd));
         RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == NDA_LLADDR && RTA_PAYLOAD(a) == ETH_ALEN) {
            memcpy(mac, RTA_DATA(a), ETH_ALEN);
            return 0;
        }
    return -1;
}

static void resolve(ep_t *ep, hop_t *e, double now, uint16_t states) {
    const uint8_t *a = (const uint8_t *)&e->addr;
    e->retry_at = now + HOP_RETRY_S;
    if (a[0] >= 224 && a[0] <= 239) {           /* a group: its MAC is its address's (RFC 1112) */
        const uint8_t mac[6] = {0x01, 0x00, 0x5E, a[1] & 0x7F, a[2], a[3]};
        memcpy(e->mac, mac, 6);
        e->ring = 1;
        return;
    }
    uint32_t nexthop;
    e->ring = route_via(ep, e->addr, &nexthop) == 0 && neigh_mac(ep, nexthop, e->mac, states) == 0;
}

static hop_t *hop_of(ep_t *ep, uint32_t addr) {
    uint32_t h = (addr * 2654435761u) >> 22;
    for (uint32_t i = 0; i < HOPS; i++) {
        hop_t *e = &ep->hops[(h + i) & (HOPS - 1)];
        if (!e->used) {
            e->used = 1;
            e->addr = addr;
            return e;
        }
        if (e->addr == addr) return e;
    }
    return NULL;
}

/* After a retransmission timeout the tables are asked again at once (the route or the
 * neighbour may have changed). The ring goes on with a neighbour entry the kernel has
 * confirmed or is checking already (DELAY, PROBE); a stale or gone one sends through the raw
 * socket for a while, whose packets make the kernel check or resolve it, as before the first
 * resolution. (An entry learned from the peer's ARP request stays in DELAY for seconds while
 * the raw path's packets keep it there: requiring REACHABLE sent one rank's frames the raw
 * way after every timeout.) Before,
 * every timeout meant the raw path for HOP_RETRY_S: under 1 % loss that was a third of the
 * native transport's CPU (a route lookup and an uncached dst per frame, for the retransmitted
 * window and what followed it). */
static void hop_recheck(ep_t *ep, uint32_t addr) {
    hop_t *e = ep->txr ? hop_of(ep, addr) : NULL;
    if (e) resolve(ep, e, mono_now(), NUD_CHECKED);
}

/* The ring frame at txr_cur once the kernel has let go of it (the device took the frame it
 * held); NULL while it still holds it (a shaped link's qdisc keeps frames queued), and the
 * raw path takes the frame, blocking as its socket does when its buffer is full */
static struct tpacket2_hdr *txr_free(ep_t *ep) {
    struct tpacket2_hdr *h = txr_hdr(ep, ep->txr_cur);
    for (int tries = 0; tries < 2; tries++) {
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) &
              (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)))
            return h;
        txr_flush(ep);
    }
    return NULL;
}

/* A frame slot for `dst`: IP + UDP in front of `roce_len` bytes the caller writes after them.
 * Frames leave in the order they are made, whichever path each takes. */
static uint8_t *tx_slot(ep_t *ep, uint32_t dst) {
    hop_t *e = ep->txr ? hop_of(ep, dst) : NULL;
    if (e && !e->ring) {
        double now = mono_now();
        if (now >= e->retry_at) resolve(ep, e, now, NUD_KNOWN);
    }
    if (e && e->ring) {
        raw_flush(ep);
        struct tpacket2_hdr *h = txr_free(ep);
        if (h) {
            ep->slot_hop = e;
            return ep->slot = (uint8_t *)h + TXR_DATA + TXR_HEAD;
        }
    }
    txr_flush(ep);
    if (ep->ntx == BATCH) raw_flush(ep);
    ep->slot_hop = NULL;
    return ep->slot = ep->txbuf + (size_t)ep->ntx * FRAME_MAX;
}

static uint16_t ip_checksum(const uint8_t *h) {
    uint32_t sum = 0;
    for (int i = 0; i < 20; i += 2) sum += (uint32_t)h[i] << 8 | h[i + 1];
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)~sum;
}

/* Endpoint.send_frame on the slot tx_slot returned, whose RoCE part (without ICRC) is filled */
static uint32_t tx_commit(ep_t *ep, uint32_t dst, uint32_t sport, uint32_t roce_len, uint32_t tos) {
    uint8_t *f = ep->slot;
    uint32_t total = IP_UDP_BYTES + roce_len + ICRC_BYTES;
    ep->cfg.ip_id = ep->cfg.ip_id % 0xFFFF + 1;
    f[0] = 0x45; f[1] = tos; put16(f + 2, total); put16(f + 4, ep->cfg.ip_id);
    put16(f + 6, 0x4000); f[8] = 64; f[9] = IPPROTO_UDP_NUM; f[10] = f[11] = 0;
    memcpy(f + 12, &ep->cfg.local, 4);
    memcpy(f + 16, &dst, 4);
    put16(f + 20, sport); put16(f + 22, ep->cfg.dport);
    put16(f + 24, UDP_BYTES + roce_len + ICRC_BYTES); put16(f + 26, 0);
    uint32_t crc = icrc(f, roce_len);
    memcpy(f + IP_UDP_BYTES + roce_len, &crc, 4);   /* little-endian, as wire.icrc */
    ep->stats.packets_sent++;
    ep->stats.bytes_injected += total;
    if (ep->slot_hop) {             /* the ring: what the raw socket's kernel would have added */
        uint8_t *eth = f - ETH_HLEN;
        memcpy(eth, ep->slot_hop->mac, ETH_ALEN);
        memcpy(eth + ETH_ALEN, ep->txr_mac, ETH_ALEN);
        put16(eth + 12, ETH_P_IP);
        put16(f + 10, ip_checksum(f));
        struct virtio_net_hdr vnet = {.hdr_len = (uint16_t)(ETH_HLEN + total)};  /* all linear */
        memcpy(f - TXR_HEAD, &vnet, sizeof vnet);
        struct tpacket2_hdr *h = txr_hdr(ep, ep->txr_cur);
        h->tp_len = TXR_HEAD + total;
        __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
        ep->txr_cur = (ep->txr_cur + 1) % TXR_FRAMES;
        if (++ep->txr_pending == BATCH) txr_flush(ep);
        return total;
    }
    uint32_t i = ep->ntx++;
    ep->txv[i].iov_base = f;
    ep->txv[i].iov_len = total;
    memset(&ep->txm[i], 0, sizeof ep->txm[i]);
    ep->txm[i].msg_hdr.msg_iov = &ep->txv[i];
    ep->txm[i].msg_hdr.msg_iovlen = 1;
    if (!ep->cfg.connected) {
        ep->txa[i].sin_family = AF_INET;
        ep->txa[i].sin_port = 0;
        ep->txa[i].sin_addr.s_addr = dst;
        ep->txm[i].msg_hdr.msg_name = &ep->txa[i];
        ep->txm[i].msg_hdr.msg_namelen = sizeof ep->txa[i];
    }
    return total;
}

static inline void put_bth(uint8_t *b, int op, uint32_t qpn, uint32_t psn, int ackreq, int becn,
                           int pad) {
    b[0] = op; b[1] = pad << 4; b[2] = b[3] = 0xFF;
    put32(b + 4, (becn ? 0x40u : 0) << 24 | qpn);
    put32(b + 8, (ackreq ? 0x80000000u : 0) | psn);
}

uint32_t nt_send_frame(ep_t *ep, uint32_t dst, uint32_t sport, const uint8_t *roce, uint32_t len,
                       uint32_t tos) {
    if (len + IP_UDP_BYTES + ICRC_BYTES > FRAME_MAX) return 0;
    uint8_t *f = tx_slot(ep, dst);
    memcpy(f + IP_UDP_BYTES, roce, len);
    uint32_t size = tx_commit(ep, dst, sport, len, tos);
    tx_flush(ep);
    return size;
}

/* Endpoint.send_cnp */
static void send_cnp(ep_t *ep, uint32_t dst, uint32_t qpn) {
    ep->stats.cnps_sent++;
    uint8_t *f = tx_slot(ep, dst) + IP_UDP_BYTES;
    put_bth(f, CNP, qpn, 0, 0, 1, 0);
    memset(f + BTH_BYTES, 0, CNP_PAD_BYTES);
    tx_commit(ep, dst, ack_sport(qpn), BTH_BYTES + CNP_PAD_BYTES, 0);
}

/* ---- send QPs ---------------------------------------------------------------------------- */
static void wr_complete(ep_t *ep, uint64_t wr_id) {
    if (ep->ndone == ep->done_cap) {
        ep->done_cap = ep->done_cap ? 2 * ep->done_cap : 256;
        ep->done = realloc(ep->done, ep->done_cap * sizeof *ep->done);
    }
    ep->done[ep->ndone++] = wr_id;
    ep->notify = 1;
}

static inline pkt_t *inflight(sqp_t *qp, uint32_t i) { return &qp->ring[(qp->head + i) & (qp->cap - 1)]; }

static void ring_reserve(sqp_t *qp, uint32_t need) {
    if (need <= qp->cap) return;
    uint32_t cap = qp->cap ? qp->cap : 64;
    while (cap < need) cap *= 2;
    pkt_t *r = malloc(cap * sizeof *r);
    for (uint32_t i = 0; i < qp->n; i++) r[i] = *inflight(qp, i);
    free(qp->ring);
    qp->ring = r;
    qp->cap = cap;
    qp->head = 0;
}

/* SendQP.post */
int nt_post(ep_t *ep, sqp_t *qp, int write, const uint8_t *data, uint32_t len, uint32_t msg_id,
            uint64_t offset, uint64_t wr_id) {
    if (qp->qn == qp->qcap) {
        uint32_t cap = qp->qcap ? 2 * qp->qcap : 16;
        wr_t *q = malloc(cap * sizeof *q);
        for (uint32_t i = 0; i < qp->qn; i++) q[i] = qp->q[(qp->qhead + i) % qp->qcap];
        free(qp->q);
        qp->q = q;
        qp->qcap = cap;
        qp->qhead = 0;
    }
    wr_t *w = &qp->q[(qp->qhead + qp->qn++) % qp->qcap];
    w->data = data; w->len = len; w->pos = 0; w->write = write; w->msg_id = msg_id;
    w->offset = offset; w->wr_id = wr_id;
    if (!qp->active) {              /* Endpoint.post_write: `if qp not in self.active` */
        if (ep->nactive == ep->active_cap) {
            ep->active_cap = ep->active_cap ? 2 * ep->active_cap : 64;
            ep->active = realloc(ep->active, ep->active_cap * sizeof *ep->active);
        }
        ep->active[ep->nactive++] = qp;
        qp->active = 1;
    }
    return 0;
}

/* SendQP._segment: the next packet of the queue's first item, appended to inflight */
static pkt_t *segment(ep_t *ep, sqp_t *qp) {
    if (!qp->qn) return NULL;
    wr_t *w = &qp->q[qp->qhead];
    uint32_t mtu = qp->pub.mtu, pos = w->pos;
    uint32_t end = pos + mtu < w->len ? pos + mtu : w->len;
    int first = pos == 0, last = end >= w->len;
    ring_reserve(qp, qp->n + 1);
    pkt_t *p = inflight(qp, qp->n);
    if (w->write)
        p->op = first ? (last ? WRITE_ONLY : WRITE_FIRST) : (last ? WRITE_LAST : WRITE_MIDDLE);
    else
        p->op = first ? (last ? SEND_ONLY : SEND_FIRST) : (last ? SEND_LAST : SEND_MIDDLE);
    p->has_reth = w->write && first;
    p->va = w->offset; p->rkey = w->msg_id; p->rlen = w->len;
    qp->count++;
    uint32_t every = (uint32_t)((uint64_t)ep->cfg.ack_every * qp->pub.window / ep->cfg.window);
    if (every < 1) every = 1;
    p->ackreq = last || qp->count % every == 0 || qp->n + 1 >= qp->pub.window;
    p->psn = qp->pub.next_psn;
    p->data = w->data + pos;
    p->len = end - pos;
    p->done = last;
    p->wr_id = w->wr_id;
    p->sent_at = 0; p->sr_at = -1.0; p->sends = 0;
    qp->pub.next_psn = psn_add(qp->pub.next_psn, 1);
    if (last) { qp->qhead = (qp->qhead + 1) % qp->qcap; qp->qn--; }
    else w->pos = end;
    qp->n++;
    return p;
}

/* SendQP._transmit */
static void transmit(ep_t *ep, sqp_t *qp, pkt_t *p, double now) {
    int retx = p->sends > 0;
    uint32_t pad = -p->len & 3;
    uint8_t *f = tx_slot(ep, qp->pub.dst) + IP_UDP_BYTES;
    put_bth(f, p->op, qp->dqpn, p->psn, p->ackreq || retx, 0, pad);
    uint32_t n = BTH_BYTES;
    if (p->has_reth) {
        put64(f + n, p->va); put32(f + n + 8, p->rkey); put32(f + n + 12, p->rlen);
        n += RETH_BYTES;
    }
    memcpy(f + n, p->data, p->len);
    n += p->len;
    memset(f + n, 0, pad);
    n += pad;
    uint32_t size = tx_commit(ep, qp->pub.dst, qp->sport, n, ep->cfg.ecn ? ECN_ECT0 : 0);
    ep->stats.data_packets++;
    if (retx) {
        ep->stats.retransmitted++;
        ep->stats.last_retx_at = wall_now();
    }
    p->sends++;
    p->sent_at = now;
    if (qp->pub.rate) {             /* a token bucket of PACING_BURST packets */
        double gap = size / qp->pub.rate;
        double start = now - PACING_BURST * gap;
        qp->next_tx = (qp->next_tx > start ? qp->next_tx : start) + gap;
    }
}

/* SendQP._note_ready */
static void note_ready(sqp_t *qp, double now) {
    int ready = qp->resend < qp->n || (qp->qn && qp->n < qp->pub.window);
    qp->ready_at = !ready ? 0 : qp->pub.rate && qp->next_tx > now ? qp->next_tx : now;
}

/* SendQP.pump */
static int pump(ep_t *ep, sqp_t *qp, double now, int budget) {
    if (qp->ready_at && now - qp->ready_at > STALL_FLOOR_S) {
        double stall = now - qp->ready_at;
        ep->stats.stall_s += stall;
        if (stall > ep->stats.stall_max_s) ep->stats.stall_max_s = stall;
    }
    int sent = 0;
    while (sent < budget) {
        pkt_t *p;
        if (qp->pub.rate && now < qp->next_tx) break;
        if (qp->resend < qp->n) {
            p = inflight(qp, qp->resend++);
        } else if (qp->n < qp->pub.window) {
            p = segment(ep, qp);
            if (!p) break;
            qp->resend = qp->n;
        } else break;
        transmit(ep, qp, p, now);
        sent++;
    }
    note_ready(qp, now);
    return sent;
}

/* SendQP._retransmit_first */
static void retransmit_first(ep_t *ep, sqp_t *qp, double now, double holdoff) {
    pkt_t *p = inflight(qp, 0);
    double at = p->sr_at;
    if (now - at >= holdoff) {
        p->sr_at = now;
        transmit(ep, qp, p, now);
    }
}

/* SendQP.on_ack */
static void on_ack(ep_t *ep, sqp_t *qp, uint32_t psn, uint32_t syndrome, double now) {
    int nak = (syndrome & 0xE0) == AETH_NAK_PSN;
    uint32_t covered = nak ? psn_add(psn, -1) : psn;
    if (qp->n) {
        int64_t k = (int64_t)psn_diff(covered, inflight(qp, 0)->psn) + 1;
        if (k > 0 && k <= qp->n) {
            pkt_t *last = inflight(qp, k - 1);
            if (last->sends == 1) {
                double sample = now - last->sent_at;
                qp->pub.srtt = !qp->pub.srtt ? sample
                    : (1 - RTT_GAIN) * qp->pub.srtt + RTT_GAIN * sample;
                double rto = RTO_SRTT_MULT * qp->pub.srtt;
                if (rto > ep->cfg.max_rto) rto = ep->cfg.max_rto;
                qp->rto = rto > ep->cfg.min_rto ? rto : ep->cfg.min_rto;
            }
            for (int64_t i = 0; i < k; i++) {
                pkt_t *p = inflight(qp, 0);
                if (p->done) wr_complete(ep, p->wr_id);
                qp->head = (qp->head + 1) & (qp->cap - 1);
                qp->n--;
            }
            qp->resend = qp->resend > k ? qp->resend - (uint32_t)k : 0;
            qp->backoff = qp->retries = 0;
        }
    }
    if (nak) {
        ep->stats.naks_received++;
        if (!qp->n || inflight(qp, 0)->psn != psn) return;
        if (ep->cfg.reliability == REL_GBN) qp->resend = 0;
        else retransmit_first(ep, qp, now, qp->rto / 2);
    }
}

/* SendQP.on_cnp */
static void on_cnp(ep_t *ep, sqp_t *qp, double now) {
    ep->stats.cnps_received++;
    if (!qp->pub.rate) qp->pub.rate = ep->cfg.line_rate;
    qp->target_rate = qp->pub.rate;
    qp->alpha = (1 - DCQCN_G) * qp->alpha + DCQCN_G;
    double r = qp->pub.rate * (1 - qp->alpha / 2);
    qp->pub.rate = r > RATE_FLOOR ? r : RATE_FLOOR;
    qp->last_cnp = now;
}

/* SendQP.on_timer; <0 when the round must stop (the peer is unreachable, a hook failed) */
/* When on_timer next fires the QP's retransmission timeout; never while nothing is armed */
static double rto_due(const ep_t *ep, sqp_t *qp) {
    if (!qp->n || (qp->resend == 0 && ep->cfg.reliability != REL_SR)) return 1e300;
    double backed = qp->rto * (double)(1u << qp->backoff);
    if (backed > ep->cfg.max_rto) backed = ep->cfg.max_rto;
    return inflight(qp, 0)->sent_at + (qp->rto > backed ? qp->rto : backed);
}

static int on_timer(ep_t *ep, sqp_t *qp, double now) {
    if (qp->pub.rate && qp->last_cnp && now - qp->last_cnp > RECOVERY_S) {
        qp->pub.rate = (qp->pub.rate + qp->target_rate) / 2;
        qp->alpha *= 1 - DCQCN_G;
        qp->last_cnp = now;
        if (!ep->cfg.rate && qp->pub.rate >= RECOVERED * qp->target_rate) {
            qp->pub.rate = 0;
            qp->last_cnp = 0;
        }
    }
    if (!qp->n || (qp->resend == 0 && ep->cfg.reliability != REL_SR)) return 0;
    pkt_t *first = inflight(qp, 0);
    double backed = qp->rto * (double)(1u << qp->backoff);
    if (backed > ep->cfg.max_rto) backed = ep->cfg.max_rto;
    if (now - first->sent_at < (qp->rto > backed ? qp->rto : backed)) return 0;
    ep->stats.timeouts++;
    qp->retries++;
    if (qp->retries > ep->cfg.retry_limit) {
        ep->error = ERR_UNREACHABLE;
        ep->err_handle = qp->handle;
        ep->err_psn = first->psn;
        ep->err_retries = qp->retries - 1;
        return ERR_UNREACHABLE;
    }
    qp->backoff = qp->retries < MAX_BACKOFF ? qp->retries : MAX_BACKOFF;
    ep->notify = 1;
    hop_recheck(ep, qp->pub.dst);
    if (ep->cb(CB_TIMEOUT, qp->handle, first->psn, 0, NULL, 0) < 0) {   /* the policy's hooks */
        ep->error = ERR_CALLBACK;
        return ERR_CALLBACK;
    }
    if (ep->cfg.reliability == REL_SR) retransmit_first(ep, qp, now, 0.0);
    else qp->resend = 0;
    return 0;
}

/* ---- receive side: messages -------------------------------------------------------------- */
static msg_t *msg_find(ep_t *ep, uint32_t peer, uint32_t msg_id) {
    msgtab_t *t = &ep->msgs[peer];
    if (!t->tab) return NULL;
    msg_t *m = &t->tab[msg_id & t->mask];
    return m->used && m->msg_id == msg_id ? m : NULL;
}

/* Message.post: Python's buffer, written in place from now on */
int nt_msg_register(ep_t *ep, uint32_t peer, uint32_t msg_id, uint8_t *buf, uint64_t len,
                    uint64_t received) {
    if (peer >= MAX_PEERS) return -1;
    msgtab_t *t = &ep->msgs[peer];
    if (!t->tab) {
        t->mask = 255;
        t->tab = calloc(t->mask + 1, sizeof *t->tab);
    }
    while (t->tab[msg_id & t->mask].used && t->tab[msg_id & t->mask].msg_id != msg_id) {
        uint32_t mask = t->mask * 2 + 1;       /* grow until the ids do not collide */
        msg_t *tab = calloc(mask + 1, sizeof *tab);
        for (uint32_t i = 0; i <= t->mask; i++)
            if (t->tab[i].used) tab[t->tab[i].msg_id & mask] = t->tab[i];
        free(t->tab);
        t->tab = tab;
        t->mask = mask;
    }
    msg_t *m = &t->tab[msg_id & t->mask];
    m->used = 1; m->msg_id = msg_id; m->buf = buf; m->len = len; m->received = received;
    return 0;
}

uint64_t nt_msg_received(ep_t *ep, uint32_t peer, uint32_t msg_id) {
    msg_t *m = peer < MAX_PEERS ? msg_find(ep, peer, msg_id) : NULL;
    return m ? m->received : 0;
}

void nt_msg_forget(ep_t *ep, uint32_t peer, uint32_t msg_id) {
    msg_t *m = peer < MAX_PEERS ? msg_find(ep, peer, msg_id) : NULL;
    if (m) m->used = 0;
}

/* Endpoint.place: in place when Python posted the buffer, else handed to Python */
static int place(ep_t *ep, uint32_t peer, uint32_t msg_id, uint64_t offset, const uint8_t *p,
                 uint32_t len) {
    msg_t *m = msg_find(ep, peer, msg_id);
    if (!m) {
        ep->notify = 1;
        return ep->cb(CB_PLACE, peer, msg_id, offset, p, len) < 0 ? ERR_CALLBACK : 0;
    }
    if (offset > m->len || len > m->len - offset) {
        ep->stats.bad_packets++;    /* past the posted message's end */
        return 0;
    }
    memcpy(m->buf + offset, p, len);
    m->received += len;
    if (m->received >= m->len) ep->notify = 1;
    return 0;
}

/* ---- receive QPs ------------------------------------------------------------------------- */
static void set_bytes(uint8_t **buf, uint32_t *cap, uint32_t *len, const uint8_t *p, uint32_t n) {
    if (n > *cap) {
        free(*buf);
        *buf = malloc(n);
        *cap = n;
    }
    memcpy(*buf, p, n);
    *len = n;
}

static inline slot_t *slot(rqp_t *q, uint32_t psn) { return &q->slots[psn & q->mask]; }

/* RecvQP._ack */
static void send_ack(ep_t *ep, rqp_t *q, uint32_t syndrome, uint32_t psn, uint32_t sport, int ce) {
    ep->stats.acks_sent++;
    if (syndrome != AETH_ACK) ep->stats.naks_sent++;
    uint8_t *f = tx_slot(ep, ep->peers[q->peer]) + IP_UDP_BYTES;
    put_bth(f, ACKNOWLEDGE, q->ack_qpn, psn, 0, ce, 0);
    put32(f + BTH_BYTES, syndrome << 24 | (q->msn & PSN_MASK));
    tx_commit(ep, ep->peers[q->peer], echo_sport(sport), BTH_BYTES + AETH_BYTES, 0);
}

/* RecvQP._deliver; ERR_* on a callback failure, 1 on a malformed packet */
static int deliver(ep_t *ep, rqp_t *q, int op, const uint8_t *body, uint32_t len) {
    if (is_write(op)) {
        if (op == WRITE_FIRST || op == WRITE_ONLY) {
            if (len < RETH_BYTES) return 1;
            q->part_active = 1;
            q->part_va = get64(body);
            q->part_msg = get32(body + 8);
            body += RETH_BYTES;
            len -= RETH_BYTES;
        }
        if (!q->part_active) return 1;     /* MIDDLE/LAST without a preceding FIRST */
        int r = place(ep, q->peer, q->part_msg, q->part_va, body, len);
        if (r) return r;
        q->part_va += len;
        if (is_last(op)) { q->part_active = 0; q->msn++; }
        return 0;
    }
    if (q->send_len + len > q->send_cap) {
        q->send_cap = 2 * (q->send_len + len);
        q->send_buf = realloc(q->send_buf, q->send_cap);
    }
    memcpy(q->send_buf + q->send_len, body, len);
    q->send_len += len;
    if (is_last(op)) {
        uint32_t n = q->send_len;
        q->send_len = 0;
        q->msn++;
        ep->notify = 1;
        if (ep->cb(CB_CONTROL, q->peer, 0, 0, q->send_buf, n) < 0) return ERR_CALLBACK;
    }
    return 0;
}

/* RecvQP._place (ooo) */
static int ooo_place(ep_t *ep, rqp_t *q, int op, uint32_t psn, const uint8_t *body, uint32_t len) {
    if (op == WRITE_FIRST || op == WRITE_ONLY) {
        if (len < RETH_BYTES) return 1;
        uint64_t va = get64(body);
        uint32_t msg = get32(body + 8), length = get32(body + 12);
        const uint8_t *data = body + RETH_BYTES;
        uint32_t n = len - RETH_BYTES;
        int r = place(ep, q->peer, msg, va, data, n);
        if (r) return r;
        if (op == WRITE_FIRST && n) {
            part_t *pt = NULL;
            for (uint32_t i = 0; i < q->n_parts; i++)
                if (q->parts[i].first == psn) pt = &q->parts[i];
            if (!pt) {
                if (q->n_parts == q->parts_cap) {
                    q->parts_cap = q->parts_cap ? 2 * q->parts_cap : 16;
                    q->parts = realloc(q->parts, q->parts_cap * sizeof *q->parts);
                }
                pt = &q->parts[q->n_parts++];
            }
            pt->first = psn; pt->msg = msg; pt->va = va; pt->length = length; pt->mtu = n;
            uint64_t pkts = ((uint64_t)length + n - 1) / n;
            for (uint32_t i = 0; q->n_pend && i <= q->mask; i++) {
                slot_t *s = &q->slots[i];
                int64_t k = psn_diff(s->psn_pend, psn);
                if (s->has_pend && k > 0 && (uint64_t)k < pkts) {
                    s->has_pend = 0;
                    q->n_pend--;
                    r = place(ep, q->peer, msg, va + (uint64_t)k * n, s->pend_buf, s->pend_len);
                    if (r) return r;
                }
            }
        }
        return 0;
    }
    for (uint32_t i = 0; i < q->n_parts; i++) {
        part_t *pt = &q->parts[i];
        int64_t k = psn_diff(psn, pt->first);
        if (k > 0 && (uint64_t)k < ((uint64_t)pt->length + pt->mtu - 1) / pt->mtu)
            return place(ep, q->peer, pt->msg, pt->va + (uint64_t)k * pt->mtu, body, len);
    }
    slot_t *s = slot(q, psn);
    if (s->has_pend && s->psn_pend != psn) q->n_pend--;   /* a stale one a window behind */
    if (!s->has_pend || s->psn_pend != psn) q->n_pend++;
    s->has_pend = 1;
    s->psn_pend = psn;
    set_bytes(&s->pend_buf, &s->pend_cap, &s->pend_len, body, len);
    return 0;
}

/* RecvQP._passed (ooo) */
static void passed(rqp_t *q, int op) {
    if (!is_last(op)) return;
    q->msn++;
    if (q->n_parts > 8) {
        uint32_t keep = 0;
        for (uint32_t i = 0; i < q->n_parts; i++) {
            part_t *pt = &q->parts[i];
            if (psn_diff(q->expected, pt->first) < ((int64_t)pt->length + pt->mtu - 1) / pt->mtu)
                q->parts[keep++] = *pt;
        }
        q->n_parts = keep;
    }
}

/* RecvQP._on_data_ooo */
static int on_data_ooo(ep_t *ep, rqp_t *q, int op, uint32_t psn, int32_t d, int ackreq,
                       const uint8_t *body, uint32_t len, uint32_t sport, int ce) {
    int write = is_write(op), r;
    if (d > 0) {
        slot_t *s = slot(q, psn);
        if (s->has_seen && s->psn_seen == psn) {
            ep->stats.duplicates++;
            if (ackreq) send_ack(ep, q, AETH_ACK, psn_add(q->expected, -1), sport, ce);
            return 0;
        }
        if (d >= REORDER_SPAN * (int64_t)ep->cfg.window) return 0;
        ep->stats.out_of_order++;
        s->has_seen = 1; s->psn_seen = psn; s->seen_op = op;
        q->n_seen++;
        if (write) {
            if ((r = ooo_place(ep, q, op, psn, body, len))) return r;
        } else {
            s->has_ooo = 1; s->psn_ooo = psn; s->ooo_op = op;
            q->n_ooo++;
            set_bytes(&s->ooo_buf, &s->ooo_cap, &s->ooo_len, body, len);
        }
        if (psn_diff(psn, q->max_seen) > 0) q->max_seen = psn;
    } else {
        r = write ? ooo_place(ep, q, op, psn, body, len) : deliver(ep, q, op, body, len);
        if (r) return r;
        passed(q, op);
        q->expected = psn_add(q->expected, 1);
        for (;;) {
            slot_t *s = slot(q, q->expected);
            if (!(s->has_seen && s->psn_seen == q->expected)) break;
            s->has_seen = 0;
            q->n_seen--;
            int passed_op = s->seen_op;
            if (s->has_ooo && s->psn_ooo == q->expected) {
                s->has_ooo = 0;
                q->n_ooo--;
                if ((r = deliver(ep, q, s->ooo_op, s->ooo_buf, s->ooo_len))) return r;
            }
            passed(q, passed_op);
            q->expected = psn_add(q->expected, 1);
            ackreq = 1;             /* a filled gap: the sender learns at once what it covers */
        }
        if (psn_diff(q->expected, q->max_seen) > 0) q->max_seen = psn_add(q->expected, -1);
    }
    if (q->n_seen && q->naked != q->expected &&
        psn_diff(q->max_seen, q->expected) >= (int32_t)ep->cfg.gap_threshold) {
        q->naked = q->expected;
        send_ack(ep, q, AETH_NAK_PSN, q->expected, sport, ce);
    } else if (ackreq)
        send_ack(ep, q, AETH_ACK, psn_add(q->expected, -1), sport, ce);
    return 0;
}

/* RecvQP.on_data */
static int on_data(ep_t *ep, rqp_t *q, int op, uint32_t psn, int ackreq, const uint8_t *body,
                   uint32_t len, uint32_t sport, int ce, double now) {
    int r;
    if (ce) {
        ep->stats.ecn_marked++;
        if (now - q->last_cnp > CNP_GAP_S) {
            q->last_cnp = now;
            send_cnp(ep, ep->peers[q->peer], q->ack_qpn);
        }
    }
    int32_t d = psn_diff(psn, q->expected);
    if (d < 0) {
        ep->stats.duplicates++;
        if (ackreq) send_ack(ep, q, AETH_ACK, psn_add(q->expected, -1), sport, ce);
        return 0;
    }
    if (ep->cfg.reliability == REL_OOO)
        return on_data_ooo(ep, q, op, psn, d, ackreq, body, len, sport, ce);
    int sr = ep->cfg.reliability == REL_SR;
    if (d > 0) {
        ep->stats.out_of_order++;
        if (sr) {
            slot_t *s = slot(q, psn);
            if (s->has_ooo && s->psn_ooo == psn) ep->stats.duplicates++;
            else if (d < REORDER_SPAN * (int64_t)ep->cfg.window) {
                s->has_ooo = 1; s->psn_ooo = psn; s->ooo_op = op;
                q->n_ooo++;
                set_bytes(&s->ooo_buf, &s->ooo_cap, &s->ooo_len, body, len);
            }
            send_ack(ep, q, AETH_NAK_PSN, q->expected, sport, ce);
        } else if (!q->nak_sent) {
            q->nak_sent = 1;
            send_ack(ep, q, AETH_NAK_PSN, q->expected, sport, ce);
        }
        return 0;
    }
    q->nak_sent = 0;
    if ((r = deliver(ep, q, op, body, len))) return r;
    q->expected = psn_add(q->expected, 1);
    while (q->n_ooo) {
        slot_t *s = slot(q, q->expected);
        if (!(s->has_ooo && s->psn_ooo == q->expected)) break;
        s->has_ooo = 0;
        q->n_ooo--;
        if ((r = deliver(ep, q, s->ooo_op, s->ooo_buf, s->ooo_len))) return r;
        q->expected = psn_add(q->expected, 1);
        ackreq = 1;
    }
    if (sr && q->n_ooo) send_ack(ep, q, AETH_NAK_PSN, q->expected, sport, ce);
    else if (ackreq) send_ack(ep, q, AETH_ACK, psn_add(q->expected, -1), sport, ce);
    return 0;
}

static rqp_t *rqp_new(ep_t *ep, uint32_t peer, uint32_t idx, uint32_t expected) {
    rqp_t *q = calloc(1, sizeof *q);
    q->peer = peer; q->idx = idx;
    q->ack_qpn = QPN(KIND_ACK, ep->cfg.rank, idx);
    q->expected = expected;
    q->max_seen = psn_add(expected, -1);
    q->naked = -1;
    q->last_cnp = -1e300;
    uint32_t cap = 1;
    while (cap < REORDER_SPAN * ep->cfg.window) cap *= 2;
    q->slots = calloc(cap, sizeof *q->slots);
    q->mask = cap - 1;
    ep->rqps[peer * MAX_QPS + idx] = q;
    return q;
}

/* ---- dispatch ---------------------------------------------------------------------------- */
static int peer_of(ep_t *ep, uint32_t addr) {
    for (uint32_t i = 0; i < ep->npeers; i++)
        if (ep->peers[i] == addr) return (int)i;
    return -1;
}

static inline int rc_op(int op) { return is_write(op) || is_send(op) || op == ACKNOWLEDGE || op == CNP; }

/* Endpoint._dispatch: `data` is the UDP payload (BTH onwards, ICRC included) */
static int dispatch(ep_t *ep, const uint8_t *data, uint32_t len, uint32_t src, uint32_t sport,
                    uint32_t tos, double now) {
    if (len < BTH_BYTES + ICRC_BYTES || data[1] & 0x0F) {    /* wire.parse_bth */
        ep->stats.bad_packets++;
        return 0;
    }
    int op = data[0], pad = data[1] >> 4 & 3;
    uint32_t qpn = get32(data + 4) & PSN_MASK, apsn = get32(data + 8);
    uint32_t psn = apsn & PSN_MASK;
    int ackreq = apsn >> 31;
    int from = peer_of(ep, src);
    uint32_t kind = qpn >> QPN_KIND_SHIFT, peer = qpn >> QPN_PEER_SHIFT & QPN_PEER_MASK,
             idx = qpn & QPN_INDEX_MASK;
    if (from < 0 || peer != (uint32_t)from || peer >= ep->npeers) {
        ep->stats.bad_packets++;
        return 0;
    }
    if ((is_write(op) || is_send(op)) && kind == KIND_DATA) {
        /* wire.payload, and a first WRITE packet's RETH: before any state changes */
        if (len < BTH_BYTES + ICRC_BYTES + pad ||
            ((op == WRITE_FIRST || op == WRITE_ONLY) &&
             len - BTH_BYTES - ICRC_BYTES - pad < RETH_BYTES)) {
            ep->stats.bad_packets++;
            return 0;
        }
        rqp_t *q = ep->rqps[peer * MAX_QPS + idx];
        if (!q) {
            int64_t expected = ep->cb(CB_NEWRQP, peer, idx, 0, NULL, 0);
            if (expected < 0) return ERR_CALLBACK;
            q = rqp_new(ep, peer, idx, (uint32_t)expected);
        }
        int r = on_data(ep, q, op, psn, ackreq, data + BTH_BYTES,
                        len - BTH_BYTES - ICRC_BYTES - pad, sport,
                        (tos & ECN_MASK) == ECN_CE, now);
        if (r == 1) ep->stats.bad_packets++;
        return r < 0 ? r : 0;
    }
    if (op == ACKNOWLEDGE && kind == KIND_ACK) {
        if (len != BTH_BYTES + AETH_BYTES + ICRC_BYTES) {
            ep->stats.bad_packets++;
            return 0;
        }
        sqp_t *qp = ep->sqps[peer * MAX_QPS + idx];
        if (qp) on_ack(ep, qp, psn, data[BTH_BYTES], now);
        return 0;
    }
    if (op == CNP && kind == KIND_ACK) {
        sqp_t *qp = ep->sqps[peer * MAX_QPS + idx];
        if (qp) on_cnp(ep, qp, now);
        return 0;
    }
    ep->stats.bad_packets++;        /* an opcode this QP does not take */
    return 0;
}

/* Endpoint.receive: one IP packet as the raw socket delivers it (the socket filter passed only
 * IPv4 with a 20-byte header, UDP to our port, no fragments). Every length is checked before a
 * header is read; a malformed packet is counted and dropped. Opcodes no RC QP takes (the
 * collectives' own) go to Python's Endpoint.receive whole, which checks them itself. */
static int receive(ep_t *ep, const uint8_t *pkt, uint32_t size, double now) {
    if (size >= 20 && memcmp(pkt + 16, &ep->cfg.local, 4) && !(pkt[16] >= 224 && pkt[16] <= 239))
        return 0;                   /* another address on this host */
    if (size < MIN_PACKET || get16(pkt + 2) != size || get16(pkt + 24) != size - 20) {
        ep->stats.bad_packets++;    /* wire.check_packet */
        return 0;
    }
    const uint8_t *data = pkt + IP_UDP_BYTES;
    uint32_t len = size - IP_UDP_BYTES;
    if (!rc_op(data[0])) {
        ep->notify = 1;
        return ep->cb(CB_PACKET, 0, 0, 0, pkt, size) < 0 ? ERR_CALLBACK : 0;
    }
    uint32_t crc = icrc(pkt, len - ICRC_BYTES);
    if (memcmp(&crc, pkt + size - ICRC_BYTES, 4)) {
        ep->stats.icrc_errors++;    /* a NIC drops it */
        return 0;
    }
    uint32_t src;
    memcpy(&src, pkt + 12, 4);
    return dispatch(ep, data, len, src, get16(pkt + 20), pkt[1], now);
}

/* Endpoint.receive from Python (tests feed packets this way) */
int nt_receive(ep_t *ep, const uint8_t *pkt, uint32_t size, double now) {
    ep->error = 0;
    int r = receive(ep, pkt, size, now);
    tx_flush(ep);
    return r < 0 ? r : 0;
}

/* A multicast packet of a group this endpoint joined (what IP_ADD_MEMBERSHIP filtered for
 * the raw socket); any other packet passes to receive() */
static int joined(const ep_t *ep, const uint8_t *pkt, uint32_t size) {
    if (size < 20 || pkt[16] < 224 || pkt[16] > 239) return 1;
    uint32_t group;
    memcpy(&group, pkt + 16, 4);
    for (uint32_t g = 0; g < ep->ngroups; g++)
        if (ep->groups[g] == group) return 1;
    return 0;
}

/* Endpoint._drain from the packet ring: every frame the kernel has filled, in order, handed
 * back once receive() has copied what it keeps */
static int ring_drain(ep_t *ep, double now, int budget) {
    int n = 0;
    while (n < budget) {
        uint32_t i = ep->ring_head;
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(ep->ring +
            (size_t)(i / ep->ring_per_block) * RING_BLOCK + (size_t)(i % ep->ring_per_block) * ep->ring_frame);
        uint32_t status = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
        if (!(status & TP_STATUS_USER)) break;
        const uint8_t *pkt = (const uint8_t *)h + h->tp_net;
        uint32_t size = h->tp_snaplen;
        if (status & TP_STATUS_COPY) {          /* larger than a frame: whole in the queue */
            ssize_t got = recv(ep->cfg.rx_fd, ep->rxbuf, FRAME_MAX, MSG_DONTWAIT);
            pkt = ep->rxbuf;
            size = got > 0 ? (uint32_t)got : 0;
        } else if (size < h->tp_len) {
            size = 0;                           /* cut, the queue full: lost as on a wire */
        }
        int r = size && joined(ep, pkt, size) ? receive(ep, pkt, size, now) : 0;
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        ep->ring_head = i + 1 == ep->ring_frames ? 0 : i + 1;
        if (r < 0) {
            ep->error = r;
            return r;
        }
        n++;
    }
    return n;
}

/* Endpoint._drain */
static int drain(ep_t *ep, double now, int budget) {
    if (ep->ring) return ring_drain(ep, now, budget);
    int n = 0;
    while (n < budget) {
        int want = budget - n < BATCH ? budget - n : BATCH;
        for (int i = 0; i < want; i++) {
            ep->rxv[i].iov_base = ep->rxbuf + (size_t)i * FRAME_MAX;
            ep->rxv[i].iov_len = FRAME_MAX;
            memset(&ep->rxm[i].msg_hdr, 0, sizeof ep->rxm[i].msg_hdr);
            ep->rxm[i].msg_hdr.msg_iov = &ep->rxv[i];
            ep->rxm[i].msg_hdr.msg_iovlen = 1;
        }
        int got = recvmmsg(ep->cfg.rx_fd, ep->rxm, want, MSG_DONTWAIT, NULL);
        if (got <= 0) break;
        for (int i = 0; i < got; i++) {
            int r = receive(ep, ep->rxbuf + (size_t)i * FRAME_MAX, ep->rxm[i].msg_len, now);
            if (r < 0) {
                ep->error = r;
                return r;
            }
        }
        n += got;
    }
    return n;
}

/* ---- the progress engine ----------------------------------------------------------------- */
/* Endpoint._round: receive what is there, send what windows allow, run timers */
int nt_round(ep_t *ep, double now) {
    ep->error = 0;
    int work = drain(ep, now, DRAIN_BUDGET);
    if (work < 0) { tx_flush(ep); return work; }
    for (uint32_t i = 0; i < ep->nactive; i++) {
        sqp_t *qp = ep->active[i];
        work += pump(ep, qp, now, PUMP_BUDGET);
        int r = on_timer(ep, qp, now);
        if (r < 0) { tx_flush(ep); return r; }
    }
    uint32_t keep = 0;
    for (uint32_t i = 0; i < ep->nactive; i++) {
        sqp_t *qp = ep->active[i];
        if (qp->qn || qp->n) ep->active[keep++] = qp;
        else { qp->active = 0; ep->notify = 1; }
    }
    ep->nactive = keep;
    tx_flush(ep);
    return work;
}

/* Endpoint.progress: rounds until something Python waits for happened (a completion, a
 * message complete, a callback, a QP idle) or `wait` seconds passed; sleeps in poll(2) while
 * there is nothing to do. Returns whether anything happened, or ERR_*. */
int nt_progress(ep_t *ep, double wait) {
    double deadline = mono_now() + wait;
    int any = 0;
    for (;;) {
        double now = mono_now();
        ep->notify = 0;
        int w = nt_round(ep, now);
        if (w < 0) return w;
        any |= w > 0 || ep->notify;
        if (ep->notify || now >= deadline) return any;
        if (w > 0) continue;
        double delay = deadline - now;
        /* Asleep until a packet comes or the next timer is due: a paced QP's next packet,
         * a retransmission timeout; DCQCN's recovery runs on the reference's tick (each
         * round of it raises the rate). Waking every TIMER_TICK_S while a QP waited out
         * an RTO (20 ms and more) was a tenth of the native transport's CPU under 1 %
         * loss, where the QPs spend most of their time so. */
        for (uint32_t i = 0; i < ep->nactive; i++) {
            sqp_t *qp = ep->active[i];
            if (qp->pub.rate && qp->last_cnp && delay > TIMER_TICK_S) delay = TIMER_TICK_S;
            if (qp->pub.rate && qp->next_tx > now && qp->next_tx - now < delay)
                delay = qp->next_tx - now;
            double due = rto_due(ep, qp) - now;
            if (due < delay) delay = due > 0 ? due : 0;
        }
        struct pollfd pfd = {.fd = ep->cfg.rx_fd, .events = POLLIN};
        struct timespec ts = {(time_t)delay, (long)((delay - (time_t)delay) * 1e9)};
        ppoll(&pfd, 1, &ts, NULL);
    }
}

/* ---- construction and the rest of Python's interface ------------------------------------- */
ep_t *nt_new(const nt_config *cfg, nt_cb cb) {
    static int crc_ready;
    if (!crc_ready) { crc_init(); crc_ready = 1; }
    ep_t *ep = calloc(1, sizeof *ep);
    ep->cfg = *cfg;
    ep->cb = cb;
    ep->sqps = calloc((size_t)MAX_PEERS * MAX_QPS, sizeof *ep->sqps);
    ep->rqps = calloc((size_t)MAX_PEERS * MAX_QPS, sizeof *ep->rqps);
    ep->txbuf = malloc((size_t)BATCH * FRAME_MAX);
    ep->rxbuf = malloc((size_t)BATCH * FRAME_MAX);
    return ep;
}

/* Receives from `fd`, an AF_PACKET datagram socket (its filter already attached), through a
 * TPACKET_V2 ring instead of recvmmsg: the kernel copies each IPv4 packet of every interface
 * into the ring as it arrives, and no system call is made while packets keep coming. The
 * socket sees packets after tc ingress (bound to ETH_P_IP, not a tap), so what impair drops
 * there never arrives. Returns 0 or -errno. */
int nt_rx_ring(ep_t *ep, int fd) {
    int version = TPACKET_V2, copy = 1;
    uint32_t frame = TPACKET_ALIGN(RING_NET_OFF + IP_UDP_BYTES + BTH_BYTES + RETH_BYTES +
                                   ep->cfg.mtu + ICRC_BYTES);
    struct tpacket_req req = {.tp_block_size = RING_BLOCK, .tp_block_nr = RING_BLOCKS,
                              .tp_frame_size = frame,
                              .tp_frame_nr = RING_BLOCK / frame * RING_BLOCKS};
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) ||
        setsockopt(fd, SOL_PACKET, PACKET_COPY_THRESH, &copy, sizeof copy) ||
        setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req))
        return -errno;
    size_t bytes = (size_t)RING_BLOCK * RING_BLOCKS;
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) return -errno;
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_IP)};
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll)) {
        int err = errno;
        munmap(map, bytes);
        return -err;
    }
    ep->ring = map;
    ep->ring_bytes = bytes;
    ep->ring_frames = req.tp_frame_nr;
    ep->ring_frame = frame;
    ep->ring_per_block = RING_BLOCK / frame;
    ep->ring_head = 0;
    return 0;
}

/* Sends through a TX ring on `fd`, an AF_PACKET raw socket of protocol 0 (it receives
 * nothing), bound here to the Ethernet interface that holds the rank's address; the raw IP
 * socket stays for what the ring cannot reach (see tx_slot). Returns 0 or -errno (-ENODEV:
 * the address is on no Ethernet interface, e.g. lo). */
int nt_tx_ring(ep_t *ep, int fd) {
    struct ifaddrs *ifs, *i;
    char name[IFNAMSIZ] = "";
    int ifindex = 0;
    uint8_t mac[ETH_ALEN];
    if (getifaddrs(&ifs)) return -errno;
    for (i = ifs; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
            ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == ep->cfg.local)
            snprintf(name, sizeof name, "%s", i->ifa_name);
    for (i = ifs; i && name[0]; i = i->ifa_next) {
        struct sockaddr_ll *ll = (struct sockaddr_ll *)i->ifa_addr;
        if (ll && ll->sll_family == AF_PACKET && !strcmp(i->ifa_name, name) &&
            ll->sll_hatype == ARPHRD_ETHER && ll->sll_halen == ETH_ALEN) {
            ifindex = ll->sll_ifindex;
            memcpy(mac, ll->sll_addr, ETH_ALEN);
        }
    }
    freeifaddrs(ifs);
    if (!ifindex) return -ENODEV;
    int version = TPACKET_V2, loss = 1, vnet = 1, sndbuf = 4 * TXR_BLOCK * TXR_BLOCKS;
    struct tpacket_req req = {.tp_block_size = TXR_BLOCK, .tp_block_nr = TXR_BLOCKS,
                              .tp_frame_size = TXR_FRAME, .tp_frame_nr = TXR_FRAMES};
    /* PACKET_LOSS: a frame the kernel finds malformed is dropped, not left to stop the ring */
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &version, sizeof version) ||
        setsockopt(fd, SOL_PACKET, PACKET_LOSS, &loss, sizeof loss) ||
        setsockopt(fd, SOL_PACKET, PACKET_VNET_HDR, &vnet, sizeof vnet) ||
        setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof sndbuf) ||
        setsockopt(fd, SOL_PACKET, PACKET_TX_RING, &req, sizeof req))
        return -errno;
    size_t bytes = (size_t)TXR_BLOCK * TXR_BLOCKS;
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED) return -errno;
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_ifindex = ifindex};
    struct timeval tv = {.tv_usec = 100000};     /* the kernel answers at once; never hang */
    int nl = -1, err = 0;
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) ||
        (nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE)) < 0 ||
        setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv))
        err = -errno;
    if (err) {
        if (nl >= 0) close(nl);
        munmap(map, bytes);
        return err;
    }
    ep->hops = calloc(HOPS, sizeof *ep->hops);
    ep->txr = map;
    ep->txr_fd = fd;
    ep->nl_fd = nl;
    ep->txr_ifindex = ifindex;
    memcpy(ep->txr_mac, mac, ETH_ALEN);
    return 0;
}

/* Endpoint.join: the ring sees every group's packets; receive() keeps the joined ones */
int nt_join(ep_t *ep, uint32_t group) {
    for (uint32_t g = 0; g < ep->ngroups; g++)
        if (ep->groups[g] == group) return 0;
    if (ep->ngroups == MAX_GROUPS) return -1;
    ep->groups[ep->ngroups++] = group;
    return 0;
}

static void rqp_free(rqp_t *q) {
    for (uint32_t i = 0; i <= q->mask; i++) {
        free(q->slots[i].ooo_buf);
        free(q->slots[i].pend_buf);
    }
    free(q->slots);
    free(q->parts);
    free(q->send_buf);
    free(q);
}

void nt_free(ep_t *ep) {
    for (size_t i = 0; i < (size_t)MAX_PEERS * MAX_QPS; i++) {
        if (ep->sqps[i]) { free(ep->sqps[i]->ring); free(ep->sqps[i]->q); free(ep->sqps[i]); }
        if (ep->rqps[i]) rqp_free(ep->rqps[i]);
    }
    for (int i = 0; i < MAX_PEERS; i++) free(ep->msgs[i].tab);
    free(ep->sqps); free(ep->rqps); free(ep->active); free(ep->done);
    free(ep->txbuf); free(ep->rxbuf);
    if (ep->ring) munmap(ep->ring, ep->ring_bytes);
    if (ep->txr) {
        txr_flush(ep);
        munmap(ep->txr, (size_t)TXR_BLOCK * TXR_BLOCKS);
        close(ep->nl_fd);
        free(ep->hops);
    }
    free(ep);
}

nt_stats *nt_stats_of(ep_t *ep) { return &ep->stats; }

int nt_set_peer(ep_t *ep, uint32_t idx, uint32_t addr) {
    if (idx >= MAX_PEERS) return -1;
    ep->peers[idx] = addr;
    if (idx >= ep->npeers) ep->npeers = idx + 1;
    for (uint32_t i = 0; i < MAX_QPS; i++)
        if (ep->sqps[idx * MAX_QPS + i]) ep->sqps[idx * MAX_QPS + i]->pub.dst = addr;
    return 0;
}

sqp_t *nt_sqp_new(ep_t *ep, uint32_t peer, uint32_t idx, uint32_t dqpn, uint32_t sport,
                  uint32_t psn, uint32_t handle) {
    if (peer >= MAX_PEERS || idx >= MAX_QPS) return NULL;
    sqp_t *qp = calloc(1, sizeof *qp);
    qp->peer = peer; qp->idx = idx; qp->dqpn = dqpn; qp->sport = sport; qp->handle = handle;
    qp->pub.window = ep->cfg.window;
    qp->pub.mtu = ep->cfg.mtu;
    qp->pub.dst = ep->peers[peer];
    qp->pub.next_psn = psn;
    qp->pub.rate = ep->cfg.rate;
    qp->target_rate = ep->cfg.rate;
    qp->rto = ep->cfg.min_rto;
    qp->alpha = 1.0;
    ep->sqps[peer * MAX_QPS + idx] = qp;
    return qp;
}

int nt_sqp_busy(sqp_t *qp) { return qp->qn || qp->n; }

int nt_rqp_new(ep_t *ep, uint32_t peer, uint32_t idx, uint32_t expected) {
    if (peer >= MAX_PEERS || idx >= MAX_QPS) return -1;
    if (!ep->rqps[peer * MAX_QPS + idx]) rqp_new(ep, peer, idx, expected);
    return 0;
}

uint32_t nt_active(ep_t *ep, uint32_t *handles, uint32_t cap) {
    for (uint32_t i = 0; i < ep->nactive && i < cap; i++) handles[i] = ep->active[i]->handle;
    return ep->nactive;
}

/* the work requests completed since the last call (valid until the next call into here) */
uint32_t nt_take_done(ep_t *ep, uint64_t **out) {
    uint32_t n = ep->ndone;
    *out = ep->done;
    ep->ndone = 0;
    return n;
}

void nt_error(ep_t *ep, uint32_t *info) {
    info[0] = ep->err_handle;
    info[1] = ep->err_psn;
    info[2] = ep->err_retries;
}

/* the ICRC of a frame whose RoCE part (without ICRC) is `roce_len` long by the table
 * (`level` 0), 128-bit (1) or 512-bit (2) carry-less multiplication, or the best the CPU has
 * below `level` (tests compare each with zlib's) */
uint32_t nt_icrc(const uint8_t *pkt, uint32_t roce_len, int level) {
    static int ready;
    if (!ready) { crc_init(); ready = 1; }
    return icrc_at(pkt, roce_len, level < clmul_level ? level : clmul_level);
}
