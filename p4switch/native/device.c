/* p4switch native backend: the switch's ports and traffic manager, native end to end.
 * One ingress thread (poll over the ports' AF_PACKET sockets, recvmmsg batches, parser +
 * ingress, cut-through egress for idle unpaced ports, sendmmsg batches), one egress thread
 * (per-port FIFOs with a depth and a pacing rate, round robin, egress with the queueing
 * metadata), as p4switch/device/device.py and traffic_manager.py do in Python. Both threads are
 * entered from Python threads through ctypes, which lets go of the GIL for the call. Frames for
 * the CPU port and the news that digests are waiting go to Python over a datagram socket. */
#include <poll.h>
#include <errno.h>
#include <stdio.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <linux/if_packet.h>
#include <unistd.h>

#define BATCH 64
#define MAXFRAME 9216
#define NPORTS 512
/* A paced queue's schedule keeps up to this much of the link's time that the egress thread
 * lost by waking late (timer slack, a busy CPU), sending those packets back to back: otherwise
 * every late wake-up is lost for good and a busy machine paces below the rate it was given
 * (measured on 2 cores at load 5: 1 KiB packets offered at 1.5x the rate left ports paced at
 * 16 / 64 / 256 Mbit/s at 0.87 / 0.66 / 0.35 of it, and at 0.99 / 1.00 / 0.97 with the
 * catch-up). A schedule further behind than this (an idle queue) restarts from now. */
#define PACE_CATCH_UP 0.002
/* The fidelity monitor (Mininet-HiFi's check that a link's packets leave when its rate says):
 * a packet of a paced queue is owed its departure at the later of the queue's schedule and its
 * arrival (the kernel's receive timestamp on the PACKET_MMAP rings, so that time the switch
 * spent not reading its ports counts too). A departure later than PACE_CATCH_UP, which the
 * schedule can no longer make up, is link time lost: the port owed a packet and sent none.
 * Each such episode is kept (when it ended, how long it was), the last EPISODES of each port,
 * so that a reader asks for the link time lost within its own window (a collective's tens of
 * ms, not the seconds its processes take to start and stop around it). */
#define EPISODES 1024
#ifndef PACKET_AUXDATA
#define PACKET_AUXDATA 8
#endif

typedef struct { state_t *S; uint64_t enq_ts; uint32_t enq_depth; double arrival; } qitem_t;
typedef struct { double end, len; } episode_t;    /* monotonic s it ended; s of link time lost */
typedef struct {
    qitem_t *items; uint32_t cap, head, n;
    uint32_t depth; double rate; int bps;
    double next_departure;     /* monotonic seconds */
    uint64_t enqueued, dropped; uint32_t in_flight;
    episode_t *episodes;       /* the monitor: a ring of the last EPISODES episodes ... */
    uint64_t lost_episodes;    /* ... and how many there were in all */
} queue_t;

static queue_t QUEUES[NPORTS];
static int PORT_FD[NPORTS];
static int CPU_PORT = -1, PUNT_FD = -1;
static volatile int STOPPING;
static pthread_mutex_t TM_LOCK = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t TM_CV = PTHREAD_COND_INITIALIZER;
static uint32_t DEFAULT_DEPTH = 64;
static double DEFAULT_RATE;
static int DEFAULT_BPS;
static uint64_t RX_FRAMES, TX_FRAMES, TX_ERRORS;
/* the frame in the pipeline came off a receive ring at this monotonic time (0: now); LOCK */
static double RX_ARRIVAL;

static double mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static queue_t *queue_of(uint32_t port) {
    queue_t *q = &QUEUES[port & (NPORTS - 1)];
    if (!q->items) {
        q->depth = q->depth ? q->depth : DEFAULT_DEPTH;
        q->cap = 64;
        q->items = calloc(q->cap, sizeof(qitem_t));
        q->episodes = calloc(EPISODES, sizeof(episode_t));
    }
    return q;
}

/* port -1: the default and every queue */
void dev_set_queue(int port, uint32_t depth, double rate, int bps, int set_depth, int set_rate) {
    pthread_mutex_lock(&TM_LOCK);
    for (int p = port < 0 ? 0 : port; p < (port < 0 ? NPORTS : port + 1); p++) {
        queue_t *q = &QUEUES[p];
        if (set_depth) q->depth = depth;
        if (set_rate) { q->rate = rate; q->bps = bps; }
    }
    if (port < 0) {
        if (set_depth) DEFAULT_DEPTH = depth;
        if (set_rate) { DEFAULT_RATE = rate; DEFAULT_BPS = bps; }
    }
    pthread_cond_signal(&TM_CV);
    pthread_mutex_unlock(&TM_LOCK);
}

static void queue_defaults(queue_t *q) {
    if (!q->items && !q->depth) { q->depth = DEFAULT_DEPTH; q->rate = DEFAULT_RATE; q->bps = DEFAULT_BPS; }
}

/* -> enq depth, or -1 when tail-dropped (the state is freed) */
static int enqueue(uint32_t port, state_t *S) {
    pthread_mutex_lock(&TM_LOCK);
    queue_t *q = &QUEUES[port & (NPORTS - 1)];
    queue_defaults(q);
    queue_of(port);
    if (q->n >= q->depth) {
        q->dropped++;
        pthread_mutex_unlock(&TM_LOCK);
        state_free(S);
        return -1;
    }
    if (q->n == q->cap) {
        qitem_t *bigger = calloc(q->cap * 2, sizeof(qitem_t));
        for (uint32_t i = 0; i < q->n; i++) bigger[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = bigger; q->head = 0; q->cap *= 2;
    }
    int depth = (int)q->n;
    q->items[(q->head + q->n) % q->cap] = (qitem_t){S, now_us(), (uint32_t)depth,
                                                    RX_ARRIVAL > 0 ? RX_ARRIVAL : mono()};
    q->n++;
    q->enqueued++;
    pthread_cond_signal(&TM_CV);
    pthread_mutex_unlock(&TM_LOCK);
    return depth;
}

static int cut_through(uint32_t port) {
    pthread_mutex_lock(&TM_LOCK);
    queue_t *q = &QUEUES[port & (NPORTS - 1)];
    queue_defaults(q);
    queue_of(port);
    int ok = !q->rate && !q->n && !q->in_flight;
    if (ok) q->enqueued++;
    pthread_mutex_unlock(&TM_LOCK);
    return ok;
}

/* ------------------------------------------------------------------ transmission */
typedef struct { struct mmsghdr m[BATCH]; struct iovec v[BATCH]; buf_t *b[BATCH]; int n; } txq_t;
static txq_t TXQ[NPORTS];

static void punt(char kind, const uint8_t *d, uint32_t n) {
    if (PUNT_FD < 0) return;
    uint8_t msg[MAXFRAME + 1];
    if (n > MAXFRAME) n = MAXFRAME;
    msg[0] = (uint8_t)kind;
    if (n) memcpy(msg + 1, d, n);
    send(PUNT_FD, msg, n + 1, MSG_DONTWAIT);
}

enum { IO_RECVMMSG, IO_MMAP_V2, IO_MMAP_V3, IO_AFXDP };
static int IO_MODE = IO_RECVMMSG;
static xsk_t *XSK[NPORTS];         /* --io afxdp: the port's AF_XDP socket */

static void tx_flush(uint32_t port) {
    txq_t *t = &TXQ[port];
    if (!t->n) return;
    if (IO_MODE == IO_AFXDP && XSK[port]) {
        int sent = 0;
        for (int i = 0; i < t->n; i++) {
            if (xsk_tx(XSK[port], t->b[i]->d, t->b[i]->len) == 0) sent++;
            buf_put(t->b[i]);
        }
        xsk_kick(XSK[port]);
        TX_FRAMES += sent; TX_ERRORS += t->n - sent;
        t->n = 0;
        return;
    }
    int fd = PORT_FD[port];
    int sent = 0;
    while (sent < t->n) {
        int r = sendmmsg(fd, t->m + sent, t->n - sent, MSG_DONTWAIT);
        if (r <= 0) { TX_ERRORS += t->n - sent; break; }   /* a full socket buffer loses frames, as a wire */
        sent += r;
    }
    TX_FRAMES += sent;
    for (int i = 0; i < t->n; i++) buf_put(t->b[i]);
    t->n = 0;
}

static void transmit(uint32_t port, buf_t *b, int batch) {
    if ((int)port == CPU_PORT) { punt('P', b->d, b->len); buf_put(b); return; }
    if (port >= NPORTS || PORT_FD[port] < 0) { buf_put(b); return; }
    txq_t *t = &TXQ[port];
    t->v[t->n] = (struct iovec){b->d, b->len};
    memset(&t->m[t->n], 0, sizeof(struct mmsghdr));
    t->m[t->n].msg_hdr.msg_iov = &t->v[t->n];
    t->m[t->n].msg_hdr.msg_iovlen = 1;
    t->b[t->n++] = b;
    if (!batch || t->n == BATCH) tx_flush(port);
}

static uint8_t TX_DIRTY[NPORTS];

/* egress of one job, then out with its results; the caller holds LOCK */
static void egress_and_send(item_t job, uint64_t enq_ts, uint32_t enq_depth, uint64_t deq_td,
                            uint32_t deq_depth, int batch) {
    items_t r = {0};
    egress_md(job, enq_ts, enq_depth, deq_td, deq_depth, &r);
    for (uint32_t i = 0; i < r.n; i++) {
        if (r.v[i].is_job) { enqueue(r.v[i].port, r.v[i].S); continue; }
        if (batch && r.v[i].port < NPORTS) TX_DIRTY[r.v[i].port] = 1;
        transmit(r.v[i].port, r.v[i].b, batch);
    }
    free(r.v);
}

/* a frame arrived on `port` (or a PacketOut): parser, ingress, queues; caller holds LOCK */
static void ingress_frame(uint32_t port, const uint8_t *d, uint32_t n, int batch) {
    jmp_buf aj;
    ASSERT_JMP = &aj;
    buf_t *b = buf_new(d, n);
    items_t jobs = {0};
    if (setjmp(aj)) { buf_put(b); free(jobs.v); return; }    /* assert(): the packet is dropped */
    ingress(port, b, NORMAL, NULL, -1, 0, &jobs);
    buf_put(b);
    for (uint32_t i = 0; i < jobs.n; i++) {
        if (cut_through(jobs.v[i].port)) egress_and_send(jobs.v[i], now_us(), 0, 0, 0, batch);
        else enqueue(jobs.v[i].port, jobs.v[i].S);
    }
    free(jobs.v);
    if (DIGQ_N && !DIGQ_SIGNALED) { DIGQ_SIGNALED = 1; punt('D', NULL, 0); }
}

int dev_inject(uint32_t port, const uint8_t *d, uint32_t n) {
    pthread_mutex_lock(&LOCK);
    tick();
    ingress_frame(port, d, n, 0);
    pthread_mutex_unlock(&LOCK);
    return 0;
}

/* ------------------------------------------------------------------ receive */
static uint8_t *complete_l4_checksum(uint8_t *f, uint32_t n) {
    uint32_t off = 12;
    if (n < 14) return f;
    uint32_t et = (uint32_t)f[off] << 8 | f[off + 1];
    while ((et == 0x8100 || et == 0x88A8) && n >= off + 6) { off += 4; et = (uint32_t)f[off] << 8 | f[off + 1]; }
    uint32_t l3 = off + 2, l4, end, proto;
    if (et == 0x0800 && n >= l3 + 20) {
        proto = f[l3 + 9]; l4 = l3 + (f[l3] & 0xF) * 4; end = l3 + ((uint32_t)f[l3 + 2] << 8 | f[l3 + 3]);
    } else if (et == 0x86DD && n >= l3 + 40) {
        proto = f[l3 + 6]; l4 = l3 + 40; end = l4 + ((uint32_t)f[l3 + 4] << 8 | f[l3 + 5]);
    } else return f;
    uint32_t field = proto == 6 ? 16 : proto == 17 ? 6 : 0;
    if (!field || end > n || l4 + field + 2 > end) return f;
    uint64_t s = 0;
    for (uint32_t i = l4; i < end; i += 2) s += ((uint32_t)f[i] << 8) | (i + 1 < end ? f[i + 1] : 0);
    while (s >> 16) s = (s & 0xFFFF) + (s >> 16);
    uint16_t c = (uint16_t)(~s & 0xFFFF);
    if (proto == 17 && c == 0) c = 0xFFFF;
    f[l4 + field] = (uint8_t)(c >> 8); f[l4 + field + 1] = (uint8_t)c;
    return f;
}

/* A frame the receive buffer cut short is dropped, never forwarded: counted per port and said
 * on stderr the first time and at every power of two of the count. */
static uint64_t RX_TRUNCATED[NPORTS];

static void rx_truncated(uint32_t port, const char *where, uint32_t len, uint32_t kept) {
    uint64_t n = ++RX_TRUNCATED[port & (NPORTS - 1)];
    if (n & (n - 1)) return;
    fprintf(stderr, "p4switch: port %u: dropped a %u-byte frame that the %s cut to %u bytes "
            "(%llu dropped so far on this port): a frame larger than the interface's MTU at start\n",
            port, len, where, kept, (unsigned long long)n);
    fflush(stderr);
}

/* one received frame: VLAN tag the kernel stripped put back, an offloaded checksum completed,
 * then the pipeline; the caller holds LOCK. f has 4 bytes of room in front of it. */
static void rx_frame(uint32_t port, uint8_t *f, uint32_t n, uint32_t status, uint16_t tci, uint16_t tpid) {
    if (status & TP_STATUS_VLAN_VALID && n >= 12) {
        memmove(f - 4, f, 12);
        f -= 4;
        if (!(status & TP_STATUS_VLAN_TPID_VALID)) tpid = 0x8100;
        f[12] = tpid >> 8; f[13] = (uint8_t)tpid; f[14] = tci >> 8; f[15] = (uint8_t)tci;
        n += 4;
    }
    if (status & TP_STATUS_CSUMNOTREADY) complete_l4_checksum(f, n);
    RX_FRAMES++;
    ingress_frame(port, f, n, 1);
}

static void flush_dirty(void) {
    for (int p = 0; p < NPORTS; p++) if (TX_DIRTY[p]) { tx_flush(p); TX_DIRTY[p] = 0; }
}

static uint8_t RXBUF[BATCH][MAXFRAME + 4];
static uint8_t RXCTL[BATCH][CMSG_SPACE(sizeof(struct tpacket_auxdata))];

/* The interface a port's socket is bound to still exists. A link that goes down leaves it
 * (the kernel reports ENETDOWN once and binds the socket again when the link is back up);
 * a deleted interface leaves the socket bound to no interface (index -1). */
static int port_present(int fd) {
    struct sockaddr_ll ll;
    socklen_t len = sizeof ll;
    char name[IF_NAMESIZE];
    return !getsockname(fd, (struct sockaddr *)&ll, &len) && ll.sll_ifindex > 0
        && if_indextoname((unsigned)ll.sll_ifindex, name) != NULL;
}

/* poll() said POLLERR: reads (clears) the socket's error; 1 when it only says that the link
 * went down, so the port stays (ports.RawPort.clear_error) */
static int link_down_only(int fd) {
    int err = 0;
    socklen_t len = sizeof err;
    if (IO_MODE == IO_AFXDP || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len)) return 0;
    return (err == 0 || err == ENETDOWN) && port_present(fd);
}

static int receive_batch(int fd, uint32_t port) {
    struct mmsghdr m[BATCH];
    struct iovec v[BATCH];
    struct sockaddr_ll from[BATCH];
    for (int i = 0; i < BATCH; i++) {
        v[i] = (struct iovec){RXBUF[i] + 4, MAXFRAME};
        memset(&m[i], 0, sizeof m[i]);
        m[i].msg_hdr.msg_iov = &v[i]; m[i].msg_hdr.msg_iovlen = 1;
        m[i].msg_hdr.msg_name = &from[i]; m[i].msg_hdr.msg_namelen = sizeof from[i];
        m[i].msg_hdr.msg_control = RXCTL[i]; m[i].msg_hdr.msg_controllen = sizeof RXCTL[i];
    }
    int got = recvmmsg(fd, m, BATCH, MSG_DONTWAIT | MSG_TRUNC, NULL);   /* msg_len: the frame's length */
    if (got < 0 && errno == ENETDOWN && port_present(fd)) return 0;   /* the link went down */
    if (got <= 0) return got < 0 && errno != EAGAIN && errno != EINTR ? -1 : 0;
    pthread_mutex_lock(&LOCK);
    tick();
    for (int i = 0; i < got; i++) {
        if (from[i].sll_pkttype == PACKET_OUTGOING) continue;
        if (m[i].msg_len > MAXFRAME) { rx_truncated(port, "recvmmsg buffer", m[i].msg_len, MAXFRAME); continue; }
        struct tpacket_auxdata aux = {0};
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&m[i].msg_hdr); c; c = CMSG_NXTHDR(&m[i].msg_hdr, c))
            if (c->cmsg_level == SOL_PACKET && c->cmsg_type == PACKET_AUXDATA) memcpy(&aux, CMSG_DATA(c), sizeof aux);
        rx_frame(port, RXBUF[i] + 4, m[i].msg_len, aux.tp_status, aux.tp_vlan_tci, aux.tp_vlan_tpid);
    }
    flush_dirty();
    pthread_mutex_unlock(&LOCK);
    return got;
}

/* ------------------------------------------------------------------ receive: PACKET_MMAP rings
 * The kernel copies each frame into a ring shared with this process: no system call and no
 * second copy per batch. TPACKET_V2 hands over each frame at once; TPACKET_V3 fills blocks and
 * hands over a block when it is full or RING_TOV_MS after its first frame (fewer wake-ups,
 * up to that much latency at low rates). PACKET_RESERVE leaves room in front of each frame for
 * a VLAN tag to be put back. */
#define RING_BLOCK (1u << 18)
#define RING_BLOCKS 16u             /* 4 MiB a port ... */
#define RING_MIN_SLOTS 256u         /* ... or more for a V2 ring of frames over ~16 KiB */
#define RING_TOV_MS 1
#define RING_RESERVE 4u             /* PACKET_RESERVE: room for a VLAN tag put back */
typedef struct { uint8_t *map; size_t len; uint32_t cur, nslots, slot, block; } ring_t;

/* A V2 slot holds the port's largest frame: the kernel puts a frame at macoff =
 * TPACKET_ALIGN(tp_hdrlen + max(16, L2 header)) + PACKET_RESERVE - L2 header and keeps
 * macoff + (L2 header + L3 length) bytes of it (net/packet/af_packet.c, tpacket_rcv), so a
 * slot of TPACKET_ALIGN(tp_hdrlen + 32) + RESERVE + MTU takes L2 headers of up to 32 bytes
 * (Ethernet, two VLAN tags) in front of MTU bytes whole. Rounded up to a cache line. A frame
 * the slot still cuts (the MTU raised after the ring was set up, an offloaded segment over the
 * MTU) is dropped and counted (rx_truncated). */
static uint32_t ring_slot(uint32_t mtu, int version) {
    uint32_t hdrlen = version == TPACKET_V3 ? TPACKET3_HDRLEN : TPACKET2_HDRLEN;
    uint32_t need = TPACKET_ALIGN(hdrlen + 32) + RING_RESERVE + mtu;
    return (need + 63) & ~63u;
}

static void ring_close(int fd, ring_t *r) {
    if (r->map) munmap(r->map, r->len);
    r->map = NULL;
    struct tpacket_req3 req;
    memset(&req, 0, sizeof req);
    setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, sizeof req);
    int v = TPACKET_V1, none = 0;            /* the socket as it was: recvmsg works again */
    setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v);
    setsockopt(fd, SOL_PACKET, PACKET_RESERVE, &none, sizeof none);
}

/* the MTU of the interface the port's socket is bound to, or 0 */
static uint32_t port_mtu(int fd) {
    struct sockaddr_ll ll;
    socklen_t len = sizeof ll;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    if (getsockname(fd, (struct sockaddr *)&ll, &len) || !if_indextoname((unsigned)ll.sll_ifindex, ifr.ifr_name)
        || ioctl(fd, SIOCGIFMTU, &ifr) < 0 || ifr.ifr_mtu <= 0) return 0;
    return (uint32_t)ifr.ifr_mtu;
}

/* a ring sized for the port's MTU: V2 slots that hold its largest frame (at least
 * RING_MIN_SLOTS of them), V3 blocks that do */
static int ring_open(int fd, ring_t *r, int mode) {
    int v = mode == IO_MMAP_V3 ? TPACKET_V3 : TPACKET_V2, reserve = RING_RESERVE;
    uint32_t mtu = port_mtu(fd);
    memset(r, 0, sizeof *r);
    if (!mtu) return -1;
    r->slot = ring_slot(mtu, v);
    r->block = RING_BLOCK;
    while (r->block < 2 * r->slot) r->block *= 2;        /* a block's own header beside a frame */
    uint32_t per_block = r->block / r->slot, blocks = RING_BLOCKS;
    if (mode == IO_MMAP_V2) while (blocks * per_block < RING_MIN_SLOTS) blocks++;
    struct tpacket_req3 req;
    memset(&req, 0, sizeof req);
    req.tp_block_size = r->block; req.tp_block_nr = blocks;
    req.tp_frame_size = r->slot; req.tp_frame_nr = per_block * blocks;
    if (mode == IO_MMAP_V3) req.tp_retire_blk_tov = RING_TOV_MS;
    if (setsockopt(fd, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_RESERVE, &reserve, sizeof reserve) < 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_RX_RING, &req, mode == IO_MMAP_V3 ? sizeof req : sizeof(struct tpacket_req)) < 0) {
        ring_close(fd, r);
        return -1;
    }
    r->len = (size_t)r->block * blocks;
    r->nslots = mode == IO_MMAP_V3 ? blocks : req.tp_frame_nr;
    r->map = mmap(NULL, r->len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r->map == MAP_FAILED) { r->map = NULL; ring_close(fd, r); return -1; }
    return 0;
}

/* a frame from a ring: through the pipeline unless the ring cut it (snaplen < len) */
static void ring_frame(uint32_t port, uint8_t *f, uint32_t snaplen, uint32_t len, uint32_t status,
                       uint16_t tci, uint16_t tpid) {
    if (snaplen < len) rx_truncated(port, "receive ring", len, snaplen);
    else rx_frame(port, f, snaplen, status, tci, tpid);
}

/* the realtime clock's lead over the monotonic one: ring timestamps are realtime */
static double realtime_lead(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9 - mono();
}

/* a ring frame's kernel timestamp as monotonic seconds; one that is not plausible (from
 * another clock, in the future, older than 10 s) counts as now */
static double ring_arrival(uint32_t sec, uint32_t nsec, double lead, double now) {
    double t = sec + nsec / 1e9 - lead;
    return t <= now && t > now - 10 ? t : now;
}

/* the frames the ring holds for user space (at most a batch of them), then back to the kernel */
static int ring_batch_v2(ring_t *r, uint32_t port) {
    int got = 0;
    pthread_mutex_lock(&LOCK);
    tick();
    double lead = realtime_lead(), now = mono();
    while (got < BATCH) {
        uint32_t per_block = r->block / r->slot;
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(r->map + (size_t)(r->cur / per_block) * r->block
                                                         + (size_t)(r->cur % per_block) * r->slot);
        if (!(__atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) break;
        struct sockaddr_ll *ll = (struct sockaddr_ll *)((uint8_t *)h + TPACKET_ALIGN(sizeof *h));
        RX_ARRIVAL = ring_arrival(h->tp_sec, h->tp_nsec, lead, now);
        if (ll->sll_pkttype != PACKET_OUTGOING)
            ring_frame(port, (uint8_t *)h + h->tp_mac, h->tp_snaplen, h->tp_len, h->tp_status, h->tp_vlan_tci, h->tp_vlan_tpid);
        RX_ARRIVAL = 0;
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        r->cur = (r->cur + 1) % r->nslots;
        got++;
    }
    flush_dirty();
    pthread_mutex_unlock(&LOCK);
    return got;
}

static int ring_batch_v3(ring_t *r, uint32_t port) {
    struct tpacket_block_desc *b = (struct tpacket_block_desc *)(r->map + (size_t)r->cur * r->block);
    if (!(__atomic_load_n(&b->hdr.bh1.block_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER)) return 0;
    uint32_t n = b->hdr.bh1.num_pkts;
    struct tpacket3_hdr *h = (struct tpacket3_hdr *)((uint8_t *)b + b->hdr.bh1.offset_to_first_pkt);
    pthread_mutex_lock(&LOCK);
    tick();
    double lead = realtime_lead(), now = mono();
    for (uint32_t i = 0; i < n; i++) {
        struct sockaddr_ll *ll = (struct sockaddr_ll *)((uint8_t *)h + TPACKET_ALIGN(sizeof *h));
        RX_ARRIVAL = ring_arrival(h->tp_sec, h->tp_nsec, lead, now);
        if (ll->sll_pkttype != PACKET_OUTGOING)
            ring_frame(port, (uint8_t *)h + h->tp_mac, h->tp_snaplen, h->tp_len, h->tp_status, h->hv1.tp_vlan_tci, h->hv1.tp_vlan_tpid);
        RX_ARRIVAL = 0;
        /* a block's frames go out in batches, as recvmmsg's do */
        if ((i + 1) % BATCH == 0) flush_dirty();
        h = (struct tpacket3_hdr *)((uint8_t *)h + h->tp_next_offset);
    }
    flush_dirty();
    pthread_mutex_unlock(&LOCK);
    __atomic_store_n(&b->hdr.bh1.block_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
    r->cur = (r->cur + 1) % r->nslots;
    return (int)n + 1;
}

/* ------------------------------------------------------------------ the two threads */
void dev_configure(int nports, const int *fds, const uint32_t *numbers, int cpu_port, int punt_fd, int io_mode) {
    for (int p = 0; p < NPORTS; p++) PORT_FD[p] = -1;
    for (int i = 0; i < nports; i++) PORT_FD[numbers[i] & (NPORTS - 1)] = fds[i];
    CPU_PORT = cpu_port; PUNT_FD = punt_fd; STOPPING = 0; IO_MODE = io_mode;
}

static ring_t RINGS[NPORTS];

/* --io afxdp: what the port's socket holds (a batch at most), through the pipeline */
static int xsk_batch(xsk_t *x, uint32_t port) {
    uint32_t idx, avail = xsk_rx_peek(x, XSK_RING, &idx), used = 0, frames = 0;
    if (!avail) return 0;
    pthread_mutex_lock(&LOCK);
    tick();
    while (used < avail && frames < BATCH) {
        uint32_t ndesc, len;
        uint8_t *f = xsk_rx_frame(x, idx + used, avail - used, &ndesc, &len);
        if (!ndesc) break;         /* the kernel hands over whole frames: not seen */
        used += ndesc; frames++;
        if (f) rx_frame(port, f, len, 0, 0, 0);
        else rx_truncated(port, "AF_XDP gather buffer", len, XSK_GATHER);
    }
    flush_dirty();
    pthread_mutex_unlock(&LOCK);
    xsk_rx_release(x, idx, used);
    return (int)frames;
}

/* the receive of port i: -1 when its socket failed */
static int port_receive(int fd, uint32_t number) {
    if (IO_MODE == IO_RECVMMSG) return receive_batch(fd, number);
    int n, total = 0;
    if (IO_MODE == IO_AFXDP) {
        for (int k = 0; k < 8 && (n = xsk_batch(XSK[number & (NPORTS - 1)], number)) > 0; k++) total += n;
        return total;
    }
    /* drain what the ring holds (a bounded number of batches, so that ports take turns) */
    ring_t *r = &RINGS[number & (NPORTS - 1)];
    for (int k = 0; k < 8 && (n = IO_MODE == IO_MMAP_V3 ? ring_batch_v3(r, number) : ring_batch_v2(r, number)) > 0; k++)
        total += n;
    return total;
}

/* -> 0, or -1 with nothing set up when a port's socket takes no ring (the caller falls back to
 * recvmmsg) */
int dev_rings_open(int nports, const int *fds, const uint32_t *numbers) {
    if (IO_MODE == IO_RECVMMSG) return 0;
    /* frames that came before the ring wait in the socket's queue, which setting up a ring
     * empties: they go through the pipeline first */
    for (int i = 0; i < nports; i++) while (receive_batch(fds[i], numbers[i]) > 0) {}
    if (IO_MODE == IO_AFXDP) {
        for (int i = 0; i < nports; i++) {
            struct sockaddr_ll ll;
            socklen_t len = sizeof ll;
            xsk_t *x = calloc(1, sizeof *x);
            uint32_t mtu = port_mtu(fds[i]);
            if (getsockname(fds[i], (struct sockaddr *)&ll, &len) || !mtu
                || (xsk_open(x, ll.sll_ifindex, mtu, 1) < 0 && xsk_open(x, ll.sll_ifindex, mtu, 0) < 0)) {
                if (mtu + 32 > XSK_RX_ROOM)
                    fprintf(stderr, "p4switch: port %u: no multi-buffer AF_XDP socket (Linux 6.6 and a veth or driver "
                            "that takes frags), and a plain one holds frames of %u bytes, less than the "
                            "interface's MTU %u\n", numbers[i], XSK_RX_ROOM, mtu);
                free(x);
                while (i-- > 0) { xsk_close(XSK[numbers[i] & (NPORTS - 1)]); free(XSK[numbers[i] & (NPORTS - 1)]); XSK[numbers[i] & (NPORTS - 1)] = NULL; }
                IO_MODE = IO_RECVMMSG;
                return -1;
            }
            XSK[numbers[i] & (NPORTS - 1)] = x;
        }
        return 0;
    }
    for (int i = 0; i < nports; i++) {
        if (ring_open(fds[i], &RINGS[numbers[i] & (NPORTS - 1)], IO_MODE) < 0) {
            while (i-- > 0) ring_close(fds[i], &RINGS[numbers[i] & (NPORTS - 1)]);
            IO_MODE = IO_RECVMMSG;
            return -1;
        }
    }
    return 0;
}

void dev_rings_close(int nports, const int *fds, const uint32_t *numbers) {
    if (IO_MODE == IO_RECVMMSG) return;
    if (IO_MODE == IO_AFXDP) {
        for (int i = 0; i < nports; i++) {
            xsk_t **x = &XSK[numbers[i] & (NPORTS - 1)];
            if (*x) { xsk_close(*x); free(*x); *x = NULL; }
        }
        return;
    }
    for (int i = 0; i < nports; i++) ring_close(fds[i], &RINGS[numbers[i] & (NPORTS - 1)]);
}

/* returns when dev_stop() is called; a port whose socket fails is reported in *gone */
int dev_ingress_loop(int nports, const int *fds, const uint32_t *numbers, int wake_fd, int *gone) {
    struct pollfd pf[NPORTS + 1];
    int live[NPORTS + 1];
    for (int i = 0; i < nports; i++) {
        int fd = IO_MODE == IO_AFXDP ? XSK[numbers[i] & (NPORTS - 1)]->fd : fds[i];
        pf[i] = (struct pollfd){fd, POLLIN, 0}; live[i] = 1;
    }
    pf[nports] = (struct pollfd){wake_fd, POLLIN, 0};
    *gone = -1;
    while (!STOPPING) {
        /* a TPACKET_V3 block retired by its timer wakes no poll() (seen on Linux 6.18): in that
         * mode the rings are also looked at every RING_TOV_MS */
        int r = poll(pf, nports + 1, IO_MODE == IO_MMAP_V3 ? RING_TOV_MS : 200);
        if (r < 0) continue;
        for (int i = 0; i < nports; i++) {
            if (IO_MODE == IO_MMAP_V3 && live[i] && !pf[i].revents) { port_receive(pf[i].fd, numbers[i]); continue; }
            if (!live[i] || !pf[i].revents) continue;
            int bad = pf[i].revents & (POLLNVAL | POLLHUP)
                || (pf[i].revents & POLLERR && !link_down_only(pf[i].fd));
            if (bad || (pf[i].revents & POLLIN && port_receive(pf[i].fd, numbers[i]) < 0)) {
                live[i] = 0; pf[i].fd = -1; *gone = (int)numbers[i];
                return 1;          /* Python reports it and calls again without the port */
            }
        }
    }
    return 0;
}

void dev_egress_loop(void) {
    uint32_t rr = 0;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);      /* wake at the departure time, not 50 us on */
    pthread_mutex_lock(&TM_LOCK);
    while (!STOPPING) {
        double now = mono(), wait = 0.5;
        int found = -1;
        for (uint32_t k = 0; k < NPORTS; k++) {
            uint32_t p = (rr + k) % NPORTS;
            queue_t *q = &QUEUES[p];
            if (!q->n) continue;
            if (q->rate && q->next_departure > now) {
                if (q->next_departure - now < wait) wait = q->next_departure - now;
                continue;
            }
            found = (int)p;
            break;
        }
        if (found < 0) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            long ns = ts.tv_nsec + (long)(wait * 1e9);
            ts.tv_sec += ns / 1000000000L; ts.tv_nsec = ns % 1000000000L;
            pthread_cond_timedwait(&TM_CV, &TM_LOCK, &ts);
            continue;
        }
        queue_t *q = &QUEUES[found];
        qitem_t it = q->items[q->head];
        q->head = (q->head + 1) % q->cap; q->n--;
        q->in_flight++;
        if (q->rate) {
            double cost = q->bps ? 8.0 * (it.S->plen ? it.S->plen : 64) : 1.0;
            int behind = q->next_departure > now - PACE_CATCH_UP;
            double owed = it.arrival > q->next_departure ? it.arrival : q->next_departure;
            double late = now - owed;
            if (!behind && late > PACE_CATCH_UP)
                q->episodes[q->lost_episodes++ % EPISODES] = (episode_t){now, late};
            q->next_departure = (behind ? q->next_departure : now) + cost / q->rate;
        }
        rr = (uint32_t)found + 1;
        uint32_t left = q->n;
        pthread_mutex_unlock(&TM_LOCK);
        pthread_mutex_lock(&LOCK);
        uint64_t t = tick();
        jmp_buf aj;
        ASSERT_JMP = &aj;
        if (!setjmp(aj))
            egress_and_send((item_t){1, (uint32_t)found, it.S, NULL}, it.enq_ts, it.enq_depth, t - it.enq_ts, left, 0);
        pthread_mutex_unlock(&LOCK);
        pthread_mutex_lock(&TM_LOCK);
        q->in_flight--;
    }
    pthread_mutex_unlock(&TM_LOCK);
}

void dev_stop(void) {
    pthread_mutex_lock(&TM_LOCK);
    STOPPING = 1;
    pthread_cond_broadcast(&TM_CV);
    pthread_mutex_unlock(&TM_LOCK);
}

/* Each port that has a queue: its number into ports, `width` values from fill() into vals;
 * returns the count (at most cap). Under the TM lock, so a row is one moment's. */
static uint32_t each_queue(uint32_t *ports, double *vals, uint32_t cap, uint32_t width,
                           void (*fill)(const queue_t *, double *, const double *), const double *arg) {
    uint32_t n = 0;
    pthread_mutex_lock(&TM_LOCK);
    for (uint32_t p = 0; p < NPORTS && n < cap; p++) {
        queue_t *q = &QUEUES[p];
        if (!q->items) continue;
        ports[n] = p;
        fill(q, vals + width * n, arg);
        n++;
    }
    pthread_mutex_unlock(&TM_LOCK);
    return n;
}

static void queue_row(const queue_t *q, double *v, const double *arg) {
    (void)arg;
    v[0] = q->depth; v[1] = q->rate; v[2] = q->bps; v[3] = q->n; v[4] = (double)q->enqueued; v[5] = (double)q->dropped;
}

/* the port's episodes that overlap the window [w[0], w[1]]: link time lost within it (each
 * episode clipped to it), the longest of them (whole), how many; v[3] = 1 when the ring has
 * forgotten older episodes that may overlap it too (the lost time is then a lower bound) */
static void fidelity_row(const queue_t *q, double *v, const double *w) {
    uint64_t kept = q->lost_episodes < EPISODES ? q->lost_episodes : EPISODES;
    double lost = 0, longest = 0, count = 0;
    for (uint64_t i = q->lost_episodes - kept; i < q->lost_episodes; i++) {
        episode_t e = q->episodes[i % EPISODES];
        double from = e.end - e.len > w[0] ? e.end - e.len : w[0], to = e.end < w[1] ? e.end : w[1];
        if (to <= from) continue;
        lost += to - from; count++;
        if (e.len > longest) longest = e.len;
    }
    v[0] = lost; v[1] = longest; v[2] = count;
    v[3] = q->lost_episodes > EPISODES && q->episodes[q->lost_episodes % EPISODES].end > w[0];
}

/* port -> depth, rate, bps, occupancy, enqueued, dropped (for show_queues); returns the count */
uint32_t dev_queues(uint32_t *ports, double *vals, uint32_t cap) {
    return each_queue(ports, vals, cap, 6, queue_row, NULL);
}

/* port -> link time lost (s), the longest episode (s), episodes, 1 if partial: within the
 * monotonic window [t0, t1] (fidelity_row) */
uint32_t dev_fidelity(double t0, double t1, uint32_t *ports, double *vals, uint32_t cap) {
    double w[2] = {t0, t1};
    return each_queue(ports, vals, cap, 4, fidelity_row, w);
}

void dev_counts(uint64_t *out) { out[0] = RX_FRAMES; out[1] = TX_FRAMES; out[2] = TX_ERRORS; }
