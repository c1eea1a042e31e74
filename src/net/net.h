/* Network interfaces and the UDP transport under the engine. */
#ifndef UROCE_NET_H
#define UROCE_NET_H

#include <net/if.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

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

/* Network backend: how the engine meets the host network (docs/design.md,
 * "Receive demultiplexing"). The engine only calls these; the UDP backend
 * below is the one there is today, a shared-memory or AF_XDP backend would
 * be another table of the same shape (valkey's ConnectionType).
 *
 * Receive side of an engine (one per device context):
 *  - a port socket per local address: UDP (ip, 4791), unconnected, in the
 *    address's SO_REUSEPORT group, so it hears RoCEv2 from any source port;
 *  - a mailbox: an AF_UNIX SOCK_SEQPACKET listener with the abstract name
 *    of the engine's slot (0..255, the top 8 bits of its QPNs), unique in
 *    the network namespace and released by the kernel when the process
 *    dies. A packet that the kernel handed to the wrong engine's port
 *    socket is forwarded, batched with others for the same engine, over a
 *    connection to the mailbox of the slot its DestQP names;
 *  - optionally a flow socket per QP, connected to the peer's (ip, port):
 *    the kernel prefers it over the group, so once it exists the flow's
 *    packets reach their owner directly.
 * Send side: one socket per QP bound to (ip, the QPN's low 16 bits), so
 * every flow has its own UDP source port (ECMP entropy). */
/* A mailbox message is a run of records: this header, then len bytes of
 * packet, padded to 4 bytes. */
struct uroce_fwd_hdr {
	uint32_t magic;        /* UROCE_FWD_MAGIC */
	uint32_t saddr, daddr; /* the datagram's addresses, network order */
	uint16_t sport;        /* its UDP source port, host order */
	uint16_t len;          /* packet bytes that follow */
	uint8_t tos;           /* its IP TOS byte (ECN) */
	uint8_t pad[3];
};
#define UROCE_FWD_MSG_MAX 65536
#define UROCE_FWD_MAGIC 0x55524657u /* "URFW" */
#define UROCE_MAX_SLOTS 256

struct uroce_backend {
	const char *name;
	/* Claims the lowest free slot and opens its mailbox (a listener): the
	 * fd, or -errno. */
	int (*mailbox_open)(unsigned *slot);
	/* A connection to our mailbox from an engine of user uid: its fd;
	 * -EAGAIN when none is pending; -EPERM for another user's (closed). */
	int (*mailbox_accept)(int listen_fd, uid_t uid);
	/* A connection to slot's mailbox: fd or -errno. */
	int (*mailbox_connect)(unsigned slot);
	/* 1 when another engine holds a slot in this network namespace. */
	int (*others_present)(unsigned my_slot);
	/* The unconnected receive socket of a local address: fd or -errno. */
	int (*port_open)(uint32_t ip4);
	/* A QP's send socket, bound to (ip4, sport): fd or -errno. */
	int (*tx_open)(uint32_t ip4, uint16_t sport);
	/* A QP's flow socket (see above): fd or -errno; flow_connect points
	 * an open one at another peer port: 0 or -errno. */
	int (*flow_open)(uint32_t ip4, uint32_t peer_ip4, uint16_t peer_sport);
	int (*flow_connect)(int fd, uint32_t peer_ip4, uint16_t peer_sport);
	/* Sends one mailbox message (never blocks): 0 or -errno. */
	int (*mailbox_send)(int conn_fd, const void *msg, size_t len);
	/* UD multicast: a receive socket that joined the IPv4 group on the
	 * interface (ifindex, address if_ip4): fd or -errno. Every such
	 * socket on the host gets its own copy of the group's datagrams. */
	int (*mcast_open)(uint32_t group, uint32_t if_ip4, int ifindex);
	/* Makes a send socket send to groups through the interface of
	 * if_ip4 (looping them back to this host's members): 0 or -errno. */
	int (*tx_mcast)(int tx_fd, uint32_t if_ip4);
	/* Bytes waiting in a receive socket (the kernel's accounting,
	 * buffer overhead included), or -1: the backlog CE marking reads. */
	int64_t (*rx_backlog)(int fd);
};

/* The backend UROCE_BACKEND names (only "udp" for now); NULL if unknown. */
const struct uroce_backend *uroce_net_backend(void);
extern const struct uroce_backend uroce_udp_backend;

/* The UDP backend's sockets, also used directly by tests. tx: bound to
 * (ip, sport), unconnected, DF set (the kernel then writes IP ID 0, which
 * the ICRC covers). rx: bound to (ip, 4791) in the SO_REUSEPORT group,
 * connected to (peer_ip4, peer_sport) unless peer_ip4 is 0. */
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
