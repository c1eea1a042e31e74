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
	setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	/* UDP GRO: the kernel hands over runs of same-sized datagrams of the
	 * flow as one buffer (split again by the engine). */
	if (uroce_net_gro)
		setsockopt(fd, SOL_UDP, UDP_GRO, &one, sizeof(one));
	/* the TOS byte of what arrives, for ECN (CE marks) */
	setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &one, sizeof(one));
	sin.sin_addr.s_addr = ip4;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	sin.sin_addr.s_addr = peer_ip4;
	sin.sin_port = htons(peer_sport);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		goto fail;
	return fd;
fail:;
	int e = errno;

	close(fd);
	return -e;
}
