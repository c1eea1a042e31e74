/* UDP sockets for RoCEv2 flows (see net.h for the port-sharing scheme). */
#include "net.h"
#include "util.h"
#include "wire.h"

#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdio.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <linux/sock_diag.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/un.h>
#include <string.h>
#include <unistd.h>

int uroce_net_gso = 1, uroce_net_gro = 1;

void uroce_net_set_bufs(int fd, int bytes)
{
	/* SO_*BUFFORCE needs CAP_NET_ADMIN; fall back to the capped form. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &bytes, sizeof(bytes)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
}

static int udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int pmtu = IP_PMTUDISC_DO, one = 1;

	if (fd < 0)
		return -1;
	/* DF on every packet: unconnected DF datagrams carry IP ID 0. */
	setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	/* The UDP checksum stays on: UDP GSO refuses sockets without it,
	 * and veth/loopback offload it anyway. */
	(void)one;
	return fd;
}

int uroce_net_tx_socket(uint32_t ip4, uint16_t sport)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(sport) };
	int fd = udp_socket();

	if (fd < 0)
		return -errno;
	sin.sin_addr.s_addr = ip4;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

int uroce_net_peer_mac(int ifindex, uint32_t ip4, uint8_t mac[6])
{
	char line[256], ip[32], dev[IF_NAMESIZE + 1], want[IF_NAMESIZE];
	FILE *f = fopen("/proc/net/arp", "re");
	int found = 0;

	if (!f)
		return 0;
	if (!if_indextoname((unsigned)ifindex, want))
		want[0] = 0;
	inet_ntop(AF_INET, &ip4, ip, sizeof(ip));
	while (fgets(line, sizeof(line), f)) {
		char a[32], hw[32];
		unsigned m[6];

		if (sscanf(line, "%31s %*s %*s %31s %*s %16s", a, hw, dev) != 3 || strcmp(a, ip))
			continue;
		if (want[0] && strcmp(dev, want))
			continue;
		if (sscanf(hw, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6) {
			for (int i = 0; i < 6; i++)
				mac[i] = (uint8_t)m[i];
			found = 1;
			break;
		}
	}
	fclose(f);
	return found;
}

int uroce_net_rx_socket(uint32_t ip4, uint32_t peer_ip4, uint16_t peer_sport)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(ROCE_V2_PORT) };
	int fd = udp_socket(), one = 1;

	if (fd < 0)
		return -errno;
	/* All of an address's receive sockets, in every process of the user,
	 * form one SO_REUSEPORT group (socket(7)): the kernel gives a datagram
	 * to the connected member whose 4-tuple it matches, else to one of the
	 * unconnected members by a hash of its 4-tuple. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* UDP GRO: the kernel hands over runs of same-sized datagrams of the
	 * flow as one buffer (split again by the engine). */
	if (uroce_net_gro)
		setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	/* the TOS byte of what arrives, for ECN (CE marks) */
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	/* the count of datagrams dropped for a full buffer (rx_sock_drops) */
	setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &one, sizeof(one));
	sin.sin_addr.s_addr = ip4;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	if (peer_ip4) {
		sin.sin_addr.s_addr = peer_ip4;
		sin.sin_port = htons(peer_sport);
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
			goto fail;
	}
	return fd;
fail:;
	int e = errno;

	close(fd);
	return -e;
}

static int udp_flow_connect(int fd, uint32_t peer_ip4, uint16_t peer_sport)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(peer_sport) };

	/* connect(2) on a connected UDP socket re-targets it; the kernel
	 * rehashes it under the new 4-tuple. */
	sin.sin_addr.s_addr = peer_ip4;
	return connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ? -errno : 0;
}

/* Receive buffer of port and flow sockets: 64 MiB, or UROCE_RCVBUF_KB
 * (a small one stands in for a shallow switch buffer: make bench-incast). */
static int rcvbuf_bytes(void)
{
	const char *s = getenv("UROCE_RCVBUF_KB");
	unsigned long kb = s && *s ? strtoul(s, NULL, 0) : 0;

	return kb ? (int)MIN(MAX(kb, 64ul), 1ul << 20) << 10 : 64 << 20;
}

static int udp_port_open(uint32_t ip4)
{
	int fd = uroce_net_rx_socket(ip4, 0, 0);

	if (fd >= 0)
		uroce_net_set_bufs(fd, rcvbuf_bytes());
	return fd;
}

static int64_t udp_rx_backlog(int fd)
{
	uint32_t mi[SK_MEMINFO_VARS];
	socklen_t len = sizeof(mi);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) < 0 ||
	    len <= SK_MEMINFO_RMEM_ALLOC * sizeof(uint32_t))
		return -1;
	return mi[SK_MEMINFO_RMEM_ALLOC];
}

static int udp_flow_open(uint32_t ip4, uint32_t peer_ip4, uint16_t peer_sport)
{
	int fd = uroce_net_rx_socket(ip4, peer_ip4, peer_sport);

	/* as large as a port socket's: a flow socket may carry a UC or UD
	 * burst that nothing acknowledges or resends (a limit, not memory) */
	if (fd >= 0)
		uroce_net_set_bufs(fd, rcvbuf_bytes());
	return fd;
}

static int udp_tx_open(uint32_t ip4, uint16_t sport)
{
	int fd = uroce_net_tx_socket(ip4, sport);

	if (fd >= 0)
		uroce_net_set_bufs(fd, 4 << 20);
	return fd;
}

/* Mailbox names live in the abstract namespace (unix(7)): scoped to the
 * network namespace like the addresses and port 4791 themselves, and gone
 * with the last descriptor, so a crashed process leaves nothing behind.
 * SOCK_SEQPACKET rather than datagrams: a datagram socket takes at most
 * net.unix.max_dgram_qlen (10 by default) messages from unconnected
 * senders, far too few for a burst; a connection is limited only by its
 * buffer. */
static socklen_t mailbox_name(struct sockaddr_un *sun, unsigned slot)
{
	int n;

	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	n = snprintf(sun->sun_path + 1, sizeof(sun->sun_path) - 1, "uroce-engine-v1/%u", slot);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int seqpacket(void)
{
	return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static int udp_mailbox_open(unsigned *slot)
{
	int fd = seqpacket(), e;

	if (fd < 0)
		return -errno;
	for (unsigned s = 0; s < UROCE_MAX_SLOTS; s++) {
		struct sockaddr_un sun;
		socklen_t l = mailbox_name(&sun, s);

		if (bind(fd, (struct sockaddr *)&sun, l) == 0) {
			if (listen(fd, 256) < 0)
				break;
			*slot = s;
			return fd;
		}
		if (errno != EADDRINUSE)
			break;
	}
	e = errno == EADDRINUSE ? EMFILE : errno;
	close(fd);
	return -e;
}

static int udp_mailbox_accept(int listen_fd, uid_t uid)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);
	int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return -errno;
	/* only our own user's engines may hand us packets */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || cr.uid != uid) {
		close(fd);
		return -EPERM;
	}
	uroce_net_set_bufs(fd, 16 << 20);
	return fd;
}

static int udp_mailbox_connect(unsigned slot)
{
	struct sockaddr_un sun;
	socklen_t l = mailbox_name(&sun, slot);
	int fd = seqpacket();

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, l) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	uroce_net_set_bufs(fd, 16 << 20);
	return fd;
}

static int udp_others_present(unsigned my_slot)
{
	int found = 0;

	/* Slots are taken lowest first, so others are usually found early.
	 * A probe is a connection the owner accepts and sees close. */
	for (unsigned s = 0; s < UROCE_MAX_SLOTS && !found; s++) {
		int fd;

		if (s == my_slot)
			continue;
		fd = udp_mailbox_connect(s);
		if (fd >= 0) {
			close(fd);
			found = 1;
		} else if (fd == -EAGAIN) {
			found = 1; /* its backlog is full: it is there */
		}
	}
	return found;
}

static int udp_mailbox_send(int conn_fd, const void *msg, size_t len)
{
	return send(conn_fd, msg, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static int udp_mcast_open(uint32_t group, uint32_t if_ip4, int ifindex)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(ROCE_V2_PORT) };
	struct ip_mreqn mr = { .imr_ifindex = ifindex };
	int fd = udp_socket(), one = 1, e;

	if (fd < 0)
		return -errno;
	/* Bound to the group, so it hears only the group's datagrams; every
	 * member socket of every process gets a copy (ip(7), multicast
	 * delivery ignores SO_REUSEPORT balancing). */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	sin.sin_addr.s_addr = group;
	mr.imr_multiaddr.s_addr = group;
	mr.imr_address.s_addr = if_ip4;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) < 0) {
		e = errno;
		close(fd);
		return -e;
	}
	uroce_net_set_bufs(fd, 8 << 20);
	return fd;
}

static int udp_tx_mcast(int tx_fd, uint32_t if_ip4)
{
	struct in_addr a = { .s_addr = if_ip4 };
	int one = 1;

	if (setsockopt(tx_fd, IPPROTO_IP, IP_MULTICAST_IF, &a, sizeof(a)) < 0 ||
	    setsockopt(tx_fd, IPPROTO_IP, IP_MULTICAST_LOOP, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

const struct uroce_backend uroce_udp_backend = {
	.name = "udp",
	.mailbox_open = udp_mailbox_open,
	.mailbox_accept = udp_mailbox_accept,
	.mailbox_connect = udp_mailbox_connect,
	.others_present = udp_others_present,
	.port_open = udp_port_open,
	.tx_open = udp_tx_open,
	.flow_open = udp_flow_open,
	.flow_connect = udp_flow_connect,
	.mailbox_send = udp_mailbox_send,
	.mcast_open = udp_mcast_open,
	.tx_mcast = udp_tx_mcast,
	.rx_backlog = udp_rx_backlog,
};

const struct uroce_backend *uroce_net_backend(void)
{
	const char *s = getenv("UROCE_BACKEND");

	if (!s || !*s || !strcmp(s, "udp"))
		return &uroce_udp_backend;
	return NULL;
}
