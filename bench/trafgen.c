/* UDP traffic source for bench_forwarding.py (built by it with the system cc; the sink is the
   receiving interface's counter, see bench/README.md).

   trafgen send IFACE SRCMAC DSTMAC SRCIP DSTIP DURATION SIZE RATE
       Ethernet/IPv4/UDP frames SRCIP:9000 -> DSTIP:9000 (unicast or a multicast group) with
       SIZE-byte payloads, checksums complete, out of IFACE for DURATION s; RATE frames/s
       (paced: each batch waits for its place in the schedule), 0 = as fast as the interface
       takes them. Prints the frames the kernel accepted.

   A packet generator, as a NIC benchmark uses one: the frames are built once and handed to the
   interface from a PACKET_TX_RING, a batch per system call, past the qdisc layer
   (PACKET_QDISC_BYPASS). A UDP socket (sendmmsg) spent ~1.2 us of a core per packet in the
   host's IP/UDP stack, on the same two cores as the forwarders under test, and offered at most
   ~0.75-1.4M pkt/s at flood; a Python sender topped out near 200,000. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT 9000
#define BATCH 256          /* frames per system call at most */
#define RING (2u << 20)    /* TX ring bytes: 1024 slots of 2 KiB, fewer of a jumbo frame */
#define MAXSIZE (65535 - 20 - 8)   /* the largest UDP payload of an IPv4 packet */
#define HDRS (14 + 20 + 8)
static unsigned SLOT = 2048, SLOTS;   /* bytes per TX ring frame (a power of two), frames */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void sleep_until(double when) {
    struct timespec t = {(time_t)when, (long)((when - (time_t)when) * 1e9)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void bad(const char *what, const char *value) {
    fprintf(stderr, "trafgen: not %s: %s\n", what, value);
    exit(2);
}

static void parse_mac(const char *s, uint8_t *mac) {
    unsigned m[6];
    char extra;
    if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5], &extra) != 6)
        bad("a MAC address", s);
    for (int i = 0; i < 6; i++) {
        if (m[i] > 255) bad("a MAC address", s);
        mac[i] = (uint8_t)m[i];
    }
}

static uint32_t parse_ip(const char *s) {
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1) bad("an IPv4 address", s);
    return a.s_addr;
}

static uint16_t fold(uint32_t sum) {
    while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
    return (uint16_t)~sum;
}

static uint32_t sum16(const uint8_t *p, size_t n, uint32_t sum) {
    for (size_t i = 0; i + 1 < n; i += 2) sum += (uint32_t)p[i] << 8 | p[i + 1];
    if (n & 1) sum += (uint32_t)p[n - 1] << 8;
    return sum;
}

/* the frame every slot carries: Ethernet, IPv4 (checksummed), UDP (checksummed), zeros */
static size_t build_frame(uint8_t *f, char **argv, int size) {
    memset(f, 0, HDRS + size);
    parse_mac(argv[3], f);                       /* destination */
    parse_mac(argv[2], f + 6);
    f[12] = 0x08;
    uint8_t *ip = f + 14, *udp = ip + 20;
    uint32_t src = parse_ip(argv[4]), dst = parse_ip(argv[5]);
    uint16_t ip_len = (uint16_t)(20 + 8 + size), udp_len = (uint16_t)(8 + size);
    ip[0] = 0x45; ip[2] = ip_len >> 8; ip[3] = (uint8_t)ip_len;
    ip[6] = 0x40; ip[8] = 16; ip[9] = 17;       /* don't fragment, TTL 16, UDP */
    memcpy(ip + 12, &src, 4);
    memcpy(ip + 16, &dst, 4);
    uint16_t c = fold(sum16(ip, 20, 0));
    ip[10] = c >> 8; ip[11] = (uint8_t)c;
    udp[0] = udp[2] = PORT >> 8; udp[1] = udp[3] = PORT & 0xFF;
    udp[4] = udp_len >> 8; udp[5] = (uint8_t)udp_len;
    uint32_t pseudo = sum16(ip + 12, 8, 17 + udp_len);
    c = fold(sum16(udp, udp_len, pseudo));
    if (!c) c = 0xFFFF;
    udp[6] = c >> 8; udp[7] = (uint8_t)c;
    return HDRS + size;
}

/* a raw socket on ifname with a TX ring whose every slot already holds the frame */
static int open_ring(const char *ifname, const uint8_t *frame, size_t len, uint8_t **ring) {
    int s = socket(AF_PACKET, SOCK_RAW, 0), v = TPACKET_V2, one = 1;   /* protocol 0: receives nothing */
    while (SLOT < TPACKET2_HDRLEN + len) SLOT *= 2;
    SLOTS = RING / SLOT;
    if (s < 0) die("socket");
    struct sockaddr_ll ll = {.sll_family = AF_PACKET, .sll_ifindex = (int)if_nametoindex(ifname)};
    if (!ll.sll_ifindex) bad("an interface", ifname);
    struct tpacket_req req = {SLOT * SLOTS, 1, SLOT, SLOTS};
    if (setsockopt(s, SOL_PACKET, PACKET_VERSION, &v, sizeof v) < 0) die("PACKET_VERSION");
    if (setsockopt(s, SOL_PACKET, PACKET_QDISC_BYPASS, &one, sizeof one) < 0) die("PACKET_QDISC_BYPASS");
    if (setsockopt(s, SOL_PACKET, PACKET_TX_RING, &req, sizeof req) < 0) die("PACKET_TX_RING");
    if (bind(s, (struct sockaddr *)&ll, sizeof ll) < 0) die("bind");
    *ring = mmap(NULL, (size_t)SLOT * SLOTS, PROT_READ | PROT_WRITE, MAP_SHARED, s, 0);
    if (*ring == MAP_FAILED) die("mmap");
    for (int i = 0; i < SLOTS; i++) {
        struct tpacket2_hdr *h = (struct tpacket2_hdr *)(*ring + (size_t)i * SLOT);
        memcpy((uint8_t *)h + TPACKET2_HDRLEN - sizeof(struct sockaddr_ll), frame, len);
        h->tp_len = (uint32_t)len;
    }
    return s;
}

static int send_mode(char **argv, double duration, int size, double rate) {
    static uint8_t frame[HDRS + MAXSIZE];
    size_t len = build_frame(frame, argv, size);
    uint8_t *ring;
    int s = open_ring(argv[1], frame, len, &ring);
    prctl(PR_SET_TIMERSLACK, 1UL);   /* the default 50 us slack would blur the pacing */
    long sent = 0, cur = 0;
    double start = now(), end = start + duration, t;
    while ((t = now()) < end) {
        int want = BATCH;
        if (rate > 0) {
            long due = (long)(rate * (t - start)) - sent;
            if (due < 1) {               /* ahead of the schedule: wait for the next packet */
                sleep_until(start + (sent + 1) / rate);
                continue;
            }
            want = due < BATCH ? (int)due : BATCH;
        }
        /* hand over the free slots from cur on (a slot is free again once its frame's skb is
           gone: the veth's peer took it or dropped it) */
        int queued = 0;
        for (; queued < want; queued++) {
            struct tpacket2_hdr *h = (struct tpacket2_hdr *)(ring + (size_t)((cur + queued) % SLOTS) * SLOT);
            uint32_t st = __atomic_load_n(&h->tp_status, __ATOMIC_ACQUIRE);
            if (st & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING)) break;
            __atomic_store_n(&h->tp_status, TP_STATUS_SEND_REQUEST, __ATOMIC_RELEASE);
        }
        if (!queued) {                   /* the ring is full: the kernel still holds every slot */
            send(s, NULL, 0, 0);
            continue;
        }
        ssize_t n = send(s, NULL, 0, MSG_DONTWAIT);
        if (n < 0 && errno != ENOBUFS && errno != EAGAIN) die("send");
        cur += queued;
        sent += queued;
    }
    send(s, NULL, 0, 0);                 /* what is still queued goes out before the count */
    printf("%ld\n", sent);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 10 && strcmp(argv[1], "send") == 0) {
        int size = atoi(argv[8]);
        if (size < 0 || size > MAXSIZE)          /* above the interface's MTU: send() says so */
            bad("a UDP payload size (0-65507)", argv[8]);
        return send_mode(argv + 1, atof(argv[7]), size, atof(argv[9]));
    }
    fprintf(stderr, "usage: trafgen send IFACE SRCMAC DSTMAC SRCIP DSTIP DURATION SIZE RATE\n");
    return 2;
}
