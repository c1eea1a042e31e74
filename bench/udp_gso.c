/* bench/udp_gso.c: the kernel's UDP ceiling on a path, the bar issue 15
 * sets 1 MiB RDMA WRITEs against: one flow, one sending thread with UDP
 * GSO (UDP_SEGMENT: a ~64 KiB buffer per sendmsg, cut by the kernel into
 * datagrams of SEG bytes) and one receiving thread with UDP GRO, the same
 * socket calls uroce's engine makes. SEG is the size of the datagrams
 * uroce itself sends on that path (docs/benchmarks.md), so both carry the
 * same packets.
 *
 *   udp_gso server ADDR PORT SECS    prints one JSON line when done
 *   udp_gso client ADDR PORT SECS SEG
 *
 * The server counts what it receives during SECS seconds from the first
 * datagram (or until 1 s passes with nothing), the client sends for SECS
 * plus half a second, so the window the server measures is all load. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define MAX_SEGS 64	  /* the kernel's UDP_MAX_SEGMENTS */
#define MAX_UDP 65507	  /* IPv4: 65535 - 20 - 8 */
#define RX_BATCH 16
#define RX_BUF 65536

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int die(const char *what)
{
	fprintf(stderr, "udp_gso: %s: %s\n", what, strerror(errno));
	return 2;
}

static int addr_of(const char *ip, const char *port, struct sockaddr_in *sa)
{
	char *end;
	long p = strtol(port, &end, 10);

	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)p);
	if (*end || p <= 0 || p > 65535 || inet_pton(AF_INET, ip, &sa->sin_addr) != 1) {
		fprintf(stderr, "udp_gso: bad address %s:%s\n", ip, port);
		return -1;
	}
	return 0;
}

static void big_buffer(int fd, int opt, int force)
{
	int v = 8 << 20;

	/* root may go past net.core.[rw]mem_max, as uroce's engine tries */
	if (setsockopt(fd, SOL_SOCKET, force, &v, sizeof(v)))
		(void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

static int server(const struct sockaddr_in *sa, double secs)
{
	static uint8_t bufs[RX_BATCH][RX_BUF];
	struct mmsghdr m[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint64_t bytes = 0, calls = 0;
	double t0 = 0, last = 0, t;
	int fd = socket(AF_INET, SOCK_DGRAM, 0), one = 1;

	if (fd < 0)
		return die("socket");
	big_buffer(fd, SO_RCVBUF, SO_RCVBUFFORCE);
	if (setsockopt(fd, IPPROTO_UDP, UDP_GRO, &one, sizeof(one)))
		return die("UDP_GRO");
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)))
		return die("bind");
	for (int i = 0; i < RX_BATCH; i++) {
		iov[i].iov_base = bufs[i];
		iov[i].iov_len = RX_BUF;
		memset(&m[i], 0, sizeof(m[i]));
		m[i].msg_hdr.msg_iov = &iov[i];
		m[i].msg_hdr.msg_iovlen = 1;
	}
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		int n;

		if (poll(&pfd, 1, t0 ? 1000 : 30000) <= 0)
			break; /* a second of silence once started: the client is done */
		n = recvmmsg(fd, m, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return die("recvmmsg");
		t = now();
		if (n > 0 && !t0)
			t0 = t;
		for (int i = 0; i < n; i++)
			bytes += m[i].msg_len;
		if (n > 0) {
			calls++;
			last = t;
		}
		if (t0 && t - t0 >= secs)
			break;
	}
	if (!t0 || last <= t0) {
		fprintf(stderr, "udp_gso: nothing received\n");
		return 1;
	}
	printf("{\"gbps\":%.4f,\"bytes\":%llu,\"secs\":%.4f,\"recv_calls\":%llu}\n",
	       (double)bytes * 8 / (last - t0) / 1e9, (unsigned long long)bytes, last - t0,
	       (unsigned long long)calls);
	return 0;
}

static int client(const struct sockaddr_in *sa, double secs, int seg)
{
	static uint8_t buf[MAX_UDP];
	int fd = socket(AF_INET, SOCK_DGRAM, 0), nseg;
	uint64_t bytes = 0, drops = 0;
	int gso; /* setsockopt takes an int (the cmsg form a u16) */
	size_t len;
	double t0;

	if (seg < 64 || seg > 9000) {
		fprintf(stderr, "udp_gso: segment size %d: want 64..9000\n", seg);
		return 2;
	}
	nseg = MAX_UDP / seg < MAX_SEGS ? MAX_UDP / seg : MAX_SEGS;
	len = (size_t)nseg * (size_t)seg;
	gso = seg;
	if (fd < 0)
		return die("socket");
	big_buffer(fd, SO_SNDBUF, SO_SNDBUFFORCE);
	if (setsockopt(fd, IPPROTO_UDP, UDP_SEGMENT, &gso, sizeof(gso)))
		return die("UDP_SEGMENT");
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)))
		return die("connect");
	memset(buf, 0xa5, sizeof(buf));
	t0 = now();
	while (now() - t0 < secs + 0.5) {
		ssize_t r = send(fd, buf, len, 0);

		if (r > 0)
			bytes += (uint64_t)r;
		else if (errno == ECONNREFUSED || errno == ENOBUFS || errno == EAGAIN)
			drops++; /* the receiver's queue was full: UDP's way, go on */
		else
			return die("send");
	}
	printf("{\"sent_gbps\":%.4f,\"bytes\":%llu,\"segment\":%d,\"segments_per_send\":%d,"
	       "\"send_errors\":%llu}\n", (double)bytes * 8 / (now() - t0) / 1e9,
	       (unsigned long long)bytes, seg, nseg, (unsigned long long)drops);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa;
	double secs;

	if (argc < 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (!strcmp(argv[1], "client") && argc < 6)) {
		fprintf(stderr, "usage: udp_gso server ADDR PORT SECS\n"
				"       udp_gso client ADDR PORT SECS SEG\n");
		return 2;
	}
	if (addr_of(argv[2], argv[3], &sa))
		return 2;
	secs = atof(argv[4]);
	if (secs <= 0 || secs > 600) {
		fprintf(stderr, "udp_gso: SECS %s: want 0 < SECS <= 600\n", argv[4]);
		return 2;
	}
	return !strcmp(argv[1], "server") ? server(&sa, secs) : client(&sa, secs, atoi(argv[5]));
}
