/* Network interfaces and the UDP transport under the engine. */
#ifndef UROCE_NET_H
#define UROCE_NET_H

#include <net/if.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#define UROCE_MAX_DEVS 16
#define UROCE_GID_TBL_LEN 16

/* One soft RDMA device per usable network interface. */
struct uroce_netdev {
	char ibname[64];        /* uroce_<ifname> */
	char ifname[IF_NAMESIZE];
	int ifindex;
	int mtu;                /* interface MTU, bytes */
	int loopback;
	uint8_t mac[6];
	uint64_t guid;          /* network order, EUI-64 from the MAC */
	int ngids;
	uint8_t gid[UROCE_GID_TBL_LEN][16];
	int gid_family[UROCE_GID_TBL_LEN];
	uint32_t ip4;           /* network order, the address GID 0 maps */
};

/* Discovers interfaces (UROCE_NETDEV filters and orders them). Returns the
 * number found (at most max). */
int uroce_net_discover(struct uroce_netdev *devs, int max);
/* Fills the interface's MTU again (it can change at run time). */
int uroce_net_mtu(const char *ifname);

/* Active MTU enum value (IBV_MTU_*) for an interface MTU: the largest of
 * 256..4096 whose RoCEv2 packet (IP 20 + UDP 8 + BTH 12 + RETH 16 + ICRC 4
 * + payload) fits. */
int uroce_net_active_mtu(int if_mtu);

/* Sockets of one RC flow. tx: bound to (ip, sport), unconnected, DF set
 * (the kernel then writes IP ID 0, which the ICRC covers). rx: bound to
 * (ip, 4791) in a SO_REUSEPORT group and connected to the peer's flow
 * port, so the kernel hands each process exactly its flows' datagrams. */
int uroce_net_tx_socket(uint32_t ip4, uint16_t sport);
int uroce_net_rx_socket(uint32_t ip4, uint32_t peer_ip4, uint16_t peer_sport);
void uroce_net_set_bufs(int fd, int bytes);
/* UDP GSO on send and GRO on receive (UROCE_GSO=0 / UROCE_GRO=0 turn them off). */
extern int uroce_net_gso, uroce_net_gro;
/* The peer's MAC from the neighbour table; 1 if known. */
int uroce_net_peer_mac(int ifindex, uint32_t ip4, uint8_t mac[6]);

/* Synthetic LIDs: a port's LID is the low 16 bits of its IPv4 address; a
 * LID-addressed peer is the address with those bits in our /16. */
static inline uint16_t uroce_port_lid(uint32_t ip4_be)
{
	return (uint16_t)(ntohl(ip4_be) & 0xffff);
}

static inline uint32_t uroce_lid_to_ip4(uint32_t our_ip4_be, uint16_t lid)
{
	return htonl((ntohl(our_ip4_be) & 0xffff0000u) | lid);
}

#endif
