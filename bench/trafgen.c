/* UDP traffic source for bench_forwarding.py (built by it with the system cc; the sink is the
   receiving interface's counter, see bench/README.md).

   trafgen send DST DURATION SIZE RATE
       SIZE-byte UDP payloads to DST:9000 (unicast or a multicast group) for DURATION s, in
       sendmmsg batches; RATE packets/s (paced: each batch waits for its place in the schedule),
       0 = as fast as the socket takes them. Prints the packets the kernel accepted.

   A Python sender tops out near 200,000 packets/s on this project's machine, below what the
   forwarders under test deliver: in C the traffic is no longer what is measured. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PORT 9000
#define BATCH 32

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

static struct sockaddr_in address(const char *ip) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(PORT)};
    if (inet_pton(AF_INET, ip, &a.sin_addr) != 1) {
        fprintf(stderr, "trafgen: not an IPv4 address: %s\n", ip);
        exit(2);
    }
    return a;
}

static int send_mode(const char *dst, double duration, int size, double rate) {
    int s = socket(AF_INET, SOCK_DGRAM, 0), ttl = 16;
    if (s < 0) die("socket");
    setsockopt(s, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
    struct sockaddr_in to = address(dst);
    if (connect(s, (struct sockaddr *)&to, sizeof to) < 0) die("connect");
    static char payload[65536];
    struct iovec iov = {payload, (size_t)size};
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        msgs[i].msg_hdr.msg_iov = &iov;
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    prctl(PR_SET_TIMERSLACK, 1UL);   /* the default 50 us slack would blur the pacing */
    long sent = 0;
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
        int n = sendmmsg(s, msgs, want, 0);
        if (n > 0)
            sent += n;
        else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED)
            die("sendmmsg");
    }
    printf("%ld\n", sent);
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "send") == 0) {
        int size = atoi(argv[4]);
        if (size < 0 || size > 65507) {
            fprintf(stderr, "trafgen: payload size %s is not 0..65507\n", argv[4]);
            return 2;
        }
        return send_mode(argv[2], atof(argv[3]), size, atof(argv[5]));
    }
    fprintf(stderr, "usage: trafgen send DST DURATION SIZE RATE\n");
    return 2;
}
