/* bench/pingpong.c: the kernel's own message latency on a path, as a
 * program that polls (an MPI rank, UCX, uroce's engine) sees it. sockperf
 * sleeps in recvfrom between messages, so its figure includes a wakeup
 * that a polling program does not pay; Open MPI's TCP BTL polls its
 * non-blocking sockets from the rank's progress loop. This program does
 * the same over UDP or TCP: one message of SIZE bytes each way per round,
 * received with MSG_DONTWAIT in a loop (or blocking with --block), and
 * prints the half round trip in microseconds.
 *
 *   pingpong server udp|tcp ADDR PORT [--block]
 *   pingpong client udp|tcp ADDR PORT ITERS SIZE [--block]
 *
 * The client prints one JSON line: {"proto","size","iters","block",
 * "p50_us","p99_us","mean_us"} (half round trips; the first 10% of the
 * rounds are warm-up and not counted). The server answers until its peer
 * sends a zero-length message (UDP) or closes (TCP). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE (1 << 16)

static int tcp, block;

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int die(const char *what)
{
	fprintf(stderr, "pingpong: %s: %s\n", what, strerror(errno));
	return 2;
}

/* Receives exactly len bytes (one datagram for UDP): len, 0 at the end, -1. */
static ssize_t recv_msg(int fd, uint8_t *buf, size_t len)
{
	size_t got = 0;
	int fl = block ? 0 : MSG_DONTWAIT;

	for (;;) {
		ssize_t r = recv(fd, buf + got, tcp ? len - got : MAX_SIZE, fl);

		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		if (!tcp)
			return r;
		if (r == 0)
			return 0;
		got += (size_t)r;
		if (got == len)
			return (ssize_t)got;
	}
}

static int send_msg(int fd, const uint8_t *buf, size_t len)
{
	size_t sent = 0;

	do {
		ssize_t r = send(fd, buf + sent, len - sent, 0);

		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
		sent += (size_t)r;
	} while (tcp && sent < len);
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static uint8_t buf[MAX_SIZE];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int server, fd, one = 1;
	long iters = 0, size = 0;

	if (argc < 5 || (strcmp(argv[1], "server") && strcmp(argv[1], "client")) ||
	    (strcmp(argv[2], "udp") && strcmp(argv[2], "tcp"))) {
		fprintf(stderr, "usage: pingpong server udp|tcp ADDR PORT [--block]\n"
				"       pingpong client udp|tcp ADDR PORT ITERS SIZE [--block]\n");
		return 2;
	}
	server = !strcmp(argv[1], "server");
	tcp = !strcmp(argv[2], "tcp");
	block = !strcmp(argv[argc - 1], "--block");
	if (inet_pton(AF_INET, argv[3], &sa.sin_addr) != 1) {
		fprintf(stderr, "pingpong: bad address %s\n", argv[3]);
		return 2;
	}
	sa.sin_port = htons((uint16_t)atoi(argv[4]));
	if (!server) {
		if (argc < 7)
			return fprintf(stderr, "pingpong: client needs ITERS SIZE\n"), 2;
		iters = atol(argv[5]);
		size = atol(argv[6]);
		if (iters < 10 || size < 1 || size > MAX_SIZE - 1)
			return fprintf(stderr, "pingpong: ITERS >= 10, 1 <= SIZE < 65536\n"), 2;
	}
	fd = socket(AF_INET, tcp ? SOCK_STREAM : SOCK_DGRAM, 0);
	if (fd < 0)
		return die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (server) {
		struct sockaddr_in peer;
		socklen_t pl = sizeof(peer);

		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
			return die("bind");
		if (tcp) {
			int c;

			if (listen(fd, 1))
				return die("listen");
			c = accept(fd, NULL, NULL);
			if (c < 0)
				return die("accept");
			close(fd);
			fd = c;
		} else {
			/* the first datagram names the client; then connect */
			ssize_t r = recvfrom(fd, buf, MAX_SIZE, 0, (struct sockaddr *)&peer, &pl);

			if (r < 0 || connect(fd, (struct sockaddr *)&peer, pl))
				return die("first datagram");
			if (send_msg(fd, buf, (size_t)r))
				return die("send");
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		for (;;) {
			/* the client's message size is learnt from the first one */
			ssize_t r = recv_msg(fd, buf, !tcp ? MAX_SIZE : size ? (size_t)size : 4);

			if (tcp && !size) {
				uint32_t n;

				/* TCP: the client sends the size first */
				if (r <= 0)
					break;
				memcpy(&n, buf, 4);
				size = n;
				if (size < 1 || size >= MAX_SIZE)
					break;
				continue;
			}
			if (r <= 0)
				break;
			if (send_msg(fd, buf, (size_t)r))
				return die("send");
		}
		close(fd);
		return 0;
	}

	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return die("connect");
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (tcp) {
		uint32_t n = (uint32_t)size;

		/* the server reads 4 bytes of size first */
		memcpy(buf, &n, 4);
		if (send_msg(fd, buf, 4))
			return die("send size");
	} else {
		/* hello, echoed: the server is there */
		if (send_msg(fd, buf, 1) || recv_msg(fd, buf, 1) != 1)
			return die("hello");
	}
	{
		long warm = iters / 10, n = iters - warm, k = 0;
		double *t = calloc((size_t)n, sizeof(double)), sum = 0;

		if (!t)
			return die("calloc");
		for (long i = 0; i < iters; i++) {
			double t0 = now_us();

			if (send_msg(fd, buf, (size_t)size) || recv_msg(fd, buf, (size_t)size) != size)
				return die("round trip");
			if (i >= warm) {
				t[k] = (now_us() - t0) / 2;
				sum += t[k++];
			}
		}
		if (!tcp)
			send(fd, buf, 0, 0); /* tells the server to stop */
		qsort(t, (size_t)n, sizeof(double), cmp_d);
		printf("{\"proto\":\"%s\",\"size\":%ld,\"iters\":%ld,\"block\":%s,"
		       "\"p50_us\":%.3f,\"p99_us\":%.3f,\"mean_us\":%.3f}\n",
		       tcp ? "tcp" : "udp", size, n, block ? "true" : "false", t[n / 2],
		       t[(size_t)((double)n * 0.99)], sum / (double)n);
		free(t);
	}
	close(fd);
	return 0;
}
