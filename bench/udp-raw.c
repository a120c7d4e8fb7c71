/*
 * udp-raw.c -- the raw UDP ceiling of this machine's datapath: one sender
 * thread and one receiver thread (each pinned to its own core when the
 * machine has two), the same system calls the plait udp transport uses
 * (sendmmsg / recvmmsg, optionally UDP GSO and GRO), no protocol, no copy
 * beyond the kernel's. Prints the goodput the receiver saw.
 *
 *   udp-raw [-s DATAGRAM] [-g] [-t SECONDS] [-a ADDR] [-d DSTADDR]
 *     -s  bytes per datagram payload (default 32768; with -g the segment size)
 *     -g  GSO: hand the kernel 64 KB batches of -s byte segments (UDP_SEGMENT),
 *         and receive with UDP_GRO
 *     -t  seconds to send (default 3)
 *     -a  address the receiver binds (default 127.0.0.1)
 *     -r  role: both (default, two threads), send or recv (two processes,
 *         e.g. in two network namespaces; -d is the receiver's address)
 *     -p  receiver port (default 47000)
 * Output: "udp-raw: N bytes in T s = X Gbit/s (D datagrams, S bytes each, gso on|off)".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BATCH 32
#define BUF   65536

static size_t seg = 32768;
static int gso, port = 47000;
static double secs = 3;
static const char *addr = "127.0.0.1", *role = "both";
static atomic_int stop;
static uint64_t rx_bytes, rx_dgrams;
static double rx_secs;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void pin(int core)
{
    cpu_set_t s;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    CPU_ZERO(&s);
    CPU_SET(core, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static int udp_sock(int bind_port)
{
    int fd = socket(AF_INET, SOCK_DGRAM, 0), big = 8 << 20;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)bind_port)};
    inet_pton(AF_INET, addr, &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof big);
    if (bind_port && bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        perror("udp-raw: bind");
        exit(1);
    }
    return fd;
}

static void *receiver(void *arg)
{
    static uint8_t bufs[BATCH][BUF];
    static char ctl[BATCH][64];
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    int fd = *(int *)arg;
    double t0 = 0, last = 0;
    struct timeval tv = {0, 200000};
    pin(1);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (gso)
        setsockopt(fd, SOL_UDP, UDP_GRO, &(int){1}, sizeof(int));
    for (;;) {
        int n;
        for (int i = 0; i < BATCH; i++) {
            iov[i] = (struct iovec){bufs[i], BUF};
            memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
            m[i].msg_hdr.msg_iov = &iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
            m[i].msg_hdr.msg_control = ctl[i];
            m[i].msg_hdr.msg_controllen = sizeof ctl[i];
        }
        n = recvmmsg(fd, m, BATCH, 0, NULL);
        if (n <= 0) {
            if (atomic_load(&stop) || (t0 && now_s() - last > 0.5))
                break;
            continue;
        }
        last = now_s();
        if (!t0)
            t0 = last;
        for (int i = 0; i < n; i++) {
            rx_bytes += m[i].msg_len;
            rx_dgrams++;
        }
    }
    rx_secs = last - t0;
    return NULL;
}

static void sender(const char *dst)
{
    static uint8_t buf[BUF];
    struct mmsghdr m[BATCH];
    struct iovec iov[BATCH];
    char ctl[CMSG_SPACE(sizeof(uint16_t))];
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = udp_sock(0);
    size_t len = seg;
    double end;
    pin(0);
    inet_pton(AF_INET, dst, &to.sin_addr);
    if (gso)   /* as many whole segments as one IP datagram carries */
        len = (65000 / seg) * seg;
    memset(buf, 0x5a, sizeof buf);
    for (int i = 0; i < BATCH; i++) {
        iov[i] = (struct iovec){buf, len};
        memset(&m[i].msg_hdr, 0, sizeof m[i].msg_hdr);
        m[i].msg_hdr.msg_name = &to;
        m[i].msg_hdr.msg_namelen = sizeof to;
        m[i].msg_hdr.msg_iov = &iov[i];
        m[i].msg_hdr.msg_iovlen = 1;
        if (gso) {
            struct cmsghdr *c;
            m[i].msg_hdr.msg_control = ctl;
            m[i].msg_hdr.msg_controllen = sizeof ctl;
            c = CMSG_FIRSTHDR(&m[i].msg_hdr);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            *(uint16_t *)(void *)CMSG_DATA(c) = (uint16_t)seg;
        }
    }
    end = now_s() + secs;
    while (now_s() < end)
        if (sendmmsg(fd, m, BATCH, 0) < 0 && errno != ENOBUFS && errno != EAGAIN) {
            perror("udp-raw: sendmmsg");
            break;
        }
    close(fd);
}

int main(int argc, char **argv)
{
    int o, fd = -1;
    const char *dst = NULL;
    pthread_t rt;
    while ((o = getopt(argc, argv, "s:gt:a:d:r:p:")) != -1) {
        switch (o) {
        case 's': seg = strtoul(optarg, NULL, 0); break;
        case 'g': gso = 1; break;
        case 't': secs = atof(optarg); break;
        case 'a': addr = optarg; break;
        case 'd': dst = optarg; break;
        case 'r': role = optarg; break;
        case 'p': port = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: udp-raw [-s BYTES] [-g] [-t SECS] [-a ADDR] [-d DST] "
                            "[-r both|send|recv] [-p PORT]\n");
            return 2;
        }
    }
    if (seg < 64 || seg > 65000) {
        fprintf(stderr, "udp-raw: -s must be 64..65000\n");
        return 2;
    }
    if (strcmp(role, "send") != 0) {
        fd = udp_sock(port);
        pthread_create(&rt, NULL, receiver, &fd);
    }
    if (strcmp(role, "recv") != 0) {
        usleep(100000);
        sender(dst ? dst : addr);
    }
    if (fd >= 0) {
        if (strcmp(role, "recv") == 0)   /* the sender is elsewhere: give it -t and a margin */
            usleep((useconds_t)((secs + 2) * 1e6));
        atomic_store(&stop, 1);
        pthread_join(rt, NULL);
        printf("udp-raw: %llu bytes in %.2f s = %.2f Gbit/s (%llu datagrams, %zu bytes each, "
               "gso %s)\n", (unsigned long long)rx_bytes, rx_secs,
               rx_secs > 0 ? rx_bytes * 8 / rx_secs / 1e9 : 0.0, (unsigned long long)rx_dgrams,
               seg, gso ? "on" : "off");
    }
    return 0;
}
