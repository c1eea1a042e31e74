/* Packet capture: UROCE_PCAP=FILE records every packet a process sends and
 * receives as Ethernet/IPv4/UDP/RoCEv2 frames, as they are on the wire.
 * libpcap is loaded at run time, so capture costs nothing when off and the
 * library has no hard dependency on it. "%p" in FILE becomes the pid. */
#ifndef UROCE_PCAP_H
#define UROCE_PCAP_H

#include <stdint.h>
#include <sys/uio.h>

struct uroce_cap_hdr {
	const uint8_t *smac, *dmac;  /* 6 bytes each */
	uint32_t saddr, daddr;       /* network order */
	uint16_t sport, dport;       /* host order */
	uint8_t tos, ttl;
	uint16_t ip_id;
};

/* Opens the process's capture if UROCE_PCAP is set (once); 1 if on. */
int uroce_pcap_init(void);
extern int uroce_pcap_on;
/* Writes one datagram: the UDP payload as iovecs. Thread-safe. */
void uroce_pcap_write(const struct uroce_cap_hdr *h, const struct iovec *iov, int iovcnt);

#endif
