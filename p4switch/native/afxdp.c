/* p4switch native backend: AF_XDP sockets in copy mode, one per port (`p4switch run --io
 * afxdp`). A four-instruction XDP program on the port's interface redirects every frame to the
 * port's socket (XSK map entry 0; with no socket there the frame passes on to the kernel); the
 * kernel copies it into this process's UMEM, whose first half feeds the receive side and whose
 * second half holds frames being sent. Raw bpf() and socket calls: no libbpf/libxdp.
 * A frame larger than a UMEM frame (jumbo frames, up to the interface's MTU) spans several,
 * in both directions (multi-buffer AF_XDP, Linux 6.6: XDP_USE_SG, descriptors marked
 * XDP_PKT_CONTD but the last, an XDP program loaded with BPF_F_XDP_HAS_FRAGS, which veth also
 * asks for above an MTU of about 3.5 KiB); a received one is gathered into one buffer. */
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <linux/if_xdp.h>

#ifndef AF_XDP
#define AF_XDP 44
#endif
#ifndef SOL_XDP
#define SOL_XDP 283
#endif
#ifndef XDP_USE_SG
#define XDP_USE_SG (1 << 4)
#endif
#ifndef XDP_PKT_CONTD
#define XDP_PKT_CONTD (1 << 0)
#endif
#define XSK_FRAME 2048u
#define XSK_NFRAMES 4096u              /* half receive, half send */
#define XSK_RING 2048u
#define XSK_RX_ROOM (XSK_FRAME - XDP_PACKET_HEADROOM)   /* a received frame's bytes per UMEM frame */
#define XSK_GATHER 65536u              /* the largest frame gathered from several */

typedef struct { uint32_t *producer, *consumer; void *ring; uint32_t mask; void *map; size_t maplen; } xq_t;
typedef struct {
    int fd, map_fd, prog_fd, link_fd;
    uint8_t *umem;
    xq_t rx, tx, fill, comp;
    uint64_t free_tx[XSK_NFRAMES / 2]; uint32_t nfree;
    uint32_t tx_pending;
    int sg;                            /* frames may span several UMEM frames */
    uint8_t *gather;                   /* XSK_GATHER bytes, with sg */
} xsk_t;

static long bpf_call(int cmd, union bpf_attr *attr) { return syscall(__NR_bpf, cmd, attr, sizeof *attr); }

static int xdp_redirect_prog(int map_fd, int frags) {
    struct bpf_insn prog[] = {
        {BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd}, {0, 0, 0, 0, 0},  /* r1 = map */
        {BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 0},                                   /* r2 = key 0 */
        {BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, XDP_PASS},                            /* no socket: pass */
        {BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_redirect_map},
        {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
    };
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_XDP;
    a.insns = (uint64_t)(uintptr_t)prog; a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = (uint64_t)(uintptr_t)"GPL";
    if (frags) a.prog_flags = BPF_F_XDP_HAS_FRAGS;
    return (int)bpf_call(BPF_PROG_LOAD, &a);
}

static int xq_map(int fd, xq_t *q, struct xdp_ring_offset *off, uint64_t pgoff, size_t entry) {
    q->maplen = off->desc + XSK_RING * entry;
    q->map = mmap(NULL, q->maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, (off_t)pgoff);
    if (q->map == MAP_FAILED) { q->map = NULL; return -1; }
    q->producer = (uint32_t *)((uint8_t *)q->map + off->producer);
    q->consumer = (uint32_t *)((uint8_t *)q->map + off->consumer);
    q->ring = (uint8_t *)q->map + off->desc;
    q->mask = XSK_RING - 1;
    return 0;
}

static void xsk_close(xsk_t *x) {
    if (x->link_fd > 0) close(x->link_fd);         /* detaches the XDP program */
    xq_t *qs[] = {&x->rx, &x->tx, &x->fill, &x->comp};
    for (int i = 0; i < 4; i++) if (qs[i]->map) munmap(qs[i]->map, qs[i]->maplen);
    if (x->fd > 0) close(x->fd);
    if (x->prog_fd > 0) close(x->prog_fd);
    if (x->map_fd > 0) close(x->map_fd);
    free(x->umem);
    free(x->gather);
    memset(x, 0, sizeof *x);
}

/* 0, or -1 with nothing left behind; frames of up to mtu (plus L2 headers) must fit, in several
 * UMEM frames where the kernel can (sg) */
static int xsk_open(xsk_t *x, int ifindex, uint32_t mtu, int sg) {
    memset(x, 0, sizeof *x);
    if (!sg && mtu + 32 > XSK_RX_ROOM) return -1;       /* the kernel would drop larger frames */
    x->sg = sg;
    if (sg && !(x->gather = malloc(XSK_GATHER))) return -1;
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_XSKMAP; a.key_size = 4; a.value_size = 4; a.max_entries = 1;
    if ((x->map_fd = (int)bpf_call(BPF_MAP_CREATE, &a)) < 0) goto fail;
    if ((x->prog_fd = xdp_redirect_prog(x->map_fd, sg)) < 0) goto fail;
    if ((x->fd = socket(AF_XDP, SOCK_RAW, 0)) < 0) goto fail;
    if (posix_memalign((void **)&x->umem, 4096, (size_t)XSK_FRAME * XSK_NFRAMES)) { x->umem = NULL; goto fail; }
    struct xdp_umem_reg reg = {(uint64_t)(uintptr_t)x->umem, (uint64_t)XSK_FRAME * XSK_NFRAMES, XSK_FRAME, 0, 0};
    int n = XSK_RING;
    if (setsockopt(x->fd, SOL_XDP, XDP_UMEM_REG, &reg, sizeof reg) ||
        setsockopt(x->fd, SOL_XDP, XDP_UMEM_FILL_RING, &n, sizeof n) ||
        setsockopt(x->fd, SOL_XDP, XDP_UMEM_COMPLETION_RING, &n, sizeof n) ||
        setsockopt(x->fd, SOL_XDP, XDP_RX_RING, &n, sizeof n) ||
        setsockopt(x->fd, SOL_XDP, XDP_TX_RING, &n, sizeof n)) goto fail;
    struct xdp_mmap_offsets off;
    socklen_t len = sizeof off;
    if (getsockopt(x->fd, SOL_XDP, XDP_MMAP_OFFSETS, &off, &len)) goto fail;
    if (xq_map(x->fd, &x->rx, &off.rx, XDP_PGOFF_RX_RING, sizeof(struct xdp_desc)) ||
        xq_map(x->fd, &x->tx, &off.tx, XDP_PGOFF_TX_RING, sizeof(struct xdp_desc)) ||
        xq_map(x->fd, &x->fill, &off.fr, XDP_UMEM_PGOFF_FILL_RING, sizeof(uint64_t)) ||
        xq_map(x->fd, &x->comp, &off.cr, XDP_UMEM_PGOFF_COMPLETION_RING, sizeof(uint64_t))) goto fail;
    uint64_t *fill = x->fill.ring;                  /* the receive half, all to the kernel */
    for (uint32_t i = 0; i < XSK_NFRAMES / 2; i++) fill[i & x->fill.mask] = (uint64_t)i * XSK_FRAME;
    __atomic_store_n(x->fill.producer, XSK_NFRAMES / 2, __ATOMIC_RELEASE);
    for (uint32_t i = 0; i < XSK_NFRAMES / 2; i++) x->free_tx[i] = (uint64_t)(XSK_NFRAMES / 2 + i) * XSK_FRAME;
    x->nfree = XSK_NFRAMES / 2;
    struct sockaddr_xdp sa = {.sxdp_family = AF_XDP, .sxdp_flags = XDP_COPY | (sg ? XDP_USE_SG : 0), .sxdp_ifindex = (uint32_t)ifindex, .sxdp_queue_id = 0};
    if (bind(x->fd, (struct sockaddr *)&sa, sizeof sa)) goto fail;
    uint32_t key = 0, value = (uint32_t)x->fd;
    memset(&a, 0, sizeof a);
    a.map_fd = (uint32_t)x->map_fd; a.key = (uint64_t)(uintptr_t)&key; a.value = (uint64_t)(uintptr_t)&value;
    if (bpf_call(BPF_MAP_UPDATE_ELEM, &a)) goto fail;
    memset(&a, 0, sizeof a);
    a.link_create.prog_fd = (uint32_t)x->prog_fd; a.link_create.target_ifindex = (uint32_t)ifindex;
    a.link_create.attach_type = BPF_XDP;
    if ((x->link_fd = (int)bpf_call(BPF_LINK_CREATE, &a)) < 0) goto fail;
    return 0;
fail:
    xsk_close(x);
    return -1;
}

/* received descriptors waiting: up to max, from *idx on */
static uint32_t xsk_rx_peek(xsk_t *x, uint32_t max, uint32_t *idx) {
    uint32_t cons = *x->rx.consumer, prod = __atomic_load_n(x->rx.producer, __ATOMIC_ACQUIRE);
    uint32_t n = prod - cons;
    *idx = cons;
    return n < max ? n : max;
}

static const struct xdp_desc *xsk_rx_desc(xsk_t *x, uint32_t idx) {
    return &((struct xdp_desc *)x->rx.ring)[idx & x->rx.mask];
}

/* the frame that starts at descriptor idx (of avail): *ndesc descriptors, *len bytes; in the
 * UMEM when it is one descriptor, else gathered; NULL when larger than the gather buffer (then
 * *len says how large) or when its last descriptor is not among avail (*ndesc 0) */
static uint8_t *xsk_rx_frame(xsk_t *x, uint32_t idx, uint32_t avail, uint32_t *ndesc, uint32_t *len) {
    const struct xdp_desc *d = xsk_rx_desc(x, idx);
    *ndesc = 1; *len = d->len;
    if (!(d->options & XDP_PKT_CONTD)) return x->umem + d->addr;
    uint32_t n = 0, total = 0;
    do {
        if (n == avail) { *ndesc = 0; return NULL; }
        d = xsk_rx_desc(x, idx + n++);
        if (x->gather && total + d->len <= XSK_GATHER) memcpy(x->gather + total, x->umem + d->addr, d->len);
        total += d->len;
    } while (d->options & XDP_PKT_CONTD);
    *ndesc = n; *len = total;
    return x->gather && total <= XSK_GATHER ? x->gather : NULL;
}

/* n descriptors done: their frames go back to the fill ring */
static void xsk_rx_release(xsk_t *x, uint32_t idx, uint32_t n) {
    uint64_t *fill = x->fill.ring;
    uint32_t fp = *x->fill.producer;
    for (uint32_t i = 0; i < n; i++) fill[(fp + i) & x->fill.mask] = xsk_rx_desc(x, idx + i)->addr & ~(uint64_t)(XSK_FRAME - 1);
    __atomic_store_n(x->fill.producer, fp + n, __ATOMIC_RELEASE);
    __atomic_store_n(x->rx.consumer, idx + n, __ATOMIC_RELEASE);
}

/* queue one frame for sending (copied into the send half, over several of its frames when
 * larger than one); 0, or -1 when too few are free */
static int xsk_tx(xsk_t *x, const uint8_t *d, uint32_t len) {
    uint32_t cc = *x->comp.consumer, cp = __atomic_load_n(x->comp.producer, __ATOMIC_ACQUIRE);
    for (; cc != cp; cc++) x->free_tx[x->nfree++] = ((uint64_t *)x->comp.ring)[cc & x->comp.mask];
    __atomic_store_n(x->comp.consumer, cc, __ATOMIC_RELEASE);
    uint32_t parts = len ? (len + XSK_FRAME - 1) / XSK_FRAME : 1;
    if (x->nfree < parts || (parts > 1 && !x->sg)) return -1;
    uint32_t tp = *x->tx.producer;
    for (uint32_t i = 0; i < parts; i++) {
        uint64_t addr = x->free_tx[--x->nfree];
        uint32_t n = i + 1 < parts ? XSK_FRAME : len - i * XSK_FRAME;
        memcpy(x->umem + addr, d + (size_t)i * XSK_FRAME, n);
        ((struct xdp_desc *)x->tx.ring)[(tp + i) & x->tx.mask] =
            (struct xdp_desc){addr, n, i + 1 < parts ? XDP_PKT_CONTD : 0};
    }
    __atomic_store_n(x->tx.producer, tp + parts, __ATOMIC_RELEASE);
    x->tx_pending++;
    return 0;
}

static void xsk_kick(xsk_t *x) {
    if (!x->tx_pending) return;
    sendto(x->fd, NULL, 0, MSG_DONTWAIT, NULL, 0);
    x->tx_pending = 0;
}
