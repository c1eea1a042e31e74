/* RoCEv2 wire format: header codec, opcode table, ICRC.
 * This is the only place that converts byte order. References: IBTA
 * Vol 1 Rel 1.4 ch. 9 (transport headers), Annex A17 (RoCEv2). */
#ifndef UROCE_WIRE_H
#define UROCE_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define ROCE_V2_PORT 4791
#define BTH_LEN 12
#define RETH_LEN 16
#define AETH_LEN 4
#define ATMETH_LEN 28
#define ATMACK_LEN 8
#define IMMDT_LEN 4
#define IETH_LEN 4
#define DETH_LEN 8
#define XRCETH_LEN 4
#define ICRC_LEN 4
#define DEFAULT_PKEY 0xffff
#define PSN_MASK 0xffffffu
#define QPN_MASK 0xffffffu
/* Largest header a packet we build or accept can carry (BTH+XRCETH+RETH+
 * ImmDt or BTH+XRCETH+AtomicETH). */
#define MAX_HDR_LEN (BTH_LEN + XRCETH_LEN + ATMETH_LEN)

/* RC opcodes, IBTA 9.2.1 table 38. */
enum {
	OP_SEND_FIRST = 0x00,
	OP_SEND_MIDDLE = 0x01,
	OP_SEND_LAST = 0x02,
	OP_SEND_LAST_IMM = 0x03,
	OP_SEND_ONLY = 0x04,
	OP_SEND_ONLY_IMM = 0x05,
	OP_WRITE_FIRST = 0x06,
	OP_WRITE_MIDDLE = 0x07,
	OP_WRITE_LAST = 0x08,
	OP_WRITE_LAST_IMM = 0x09,
	OP_WRITE_ONLY = 0x0a,
	OP_WRITE_ONLY_IMM = 0x0b,
	OP_READ_REQ = 0x0c,
	OP_READ_RESP_FIRST = 0x0d,
	OP_READ_RESP_MIDDLE = 0x0e,
	OP_READ_RESP_LAST = 0x0f,
	OP_READ_RESP_ONLY = 0x10,
	OP_ACK = 0x11,
	OP_ATOMIC_ACK = 0x12,
	OP_CMP_SWAP = 0x13,
	OP_FETCH_ADD = 0x14,
	OP_SEND_LAST_INV = 0x16,
	OP_SEND_ONLY_INV = 0x17,
	OP_CNP = 0x81,
};

/* The top 3 bits of an opcode name the transport (IBTA 9.2.1 table 38): UC
 * opcodes are the RC ones of SEND and RDMA WRITE plus 0x20; UD has SEND
 * ONLY (with immediate) at 0x64/0x65. */
enum {
	OP_TRANSPORT_MASK = 0xe0,
	OP_RC = 0x00,
	OP_UC = 0x20,
	OP_UD = 0x60,
	OP_UD_SEND_ONLY = 0x64,
	OP_UD_SEND_ONLY_IMM = 0x65,
	OP_XRC = 0xa0,           /* XRC: every RC opcode plus 0xa0 */
};

/* Opcode properties (the "mask" of the opcode table). */
enum {
	OPF_RETH = 1 << 0,
	OPF_AETH = 1 << 1,
	OPF_ATMETH = 1 << 2,
	OPF_ATMACK = 1 << 3,
	OPF_IMM = 1 << 4,
	OPF_IETH = 1 << 5,
	OPF_PAYLOAD = 1 << 6,
	OPF_REQ = 1 << 7,  /* sent by a requester */
	OPF_RESP = 1 << 8, /* sent by a responder */
	OPF_FIRST = 1 << 9,
	OPF_MIDDLE = 1 << 10,
	OPF_LAST = 1 << 11,
	OPF_SEND = 1 << 12,
	OPF_WRITE = 1 << 13,
	OPF_READ = 1 << 14,
	OPF_ATOMIC = 1 << 15,
	OPF_CNP = 1 << 16,       /* congestion notification */
	OPF_DETH = 1 << 17,      /* datagram extended transport header (UD) */
	OPF_XRCETH = 1 << 18,    /* XRC extended transport header (XRC requests) */
	OPF_ONLY = OPF_FIRST | OPF_LAST,
};

struct wire_opcode {
	const char *name;
	uint32_t flags;
	uint8_t hdr_len; /* BTH plus extension headers, bytes */
};

extern const struct wire_opcode wire_opcodes[256];

static inline int wire_opcode_valid(uint8_t op)
{
	return wire_opcodes[op].name != NULL;
}

/* AETH syndromes, IBTA 9.7.5.1 table 43. */
enum {
	AETH_ACK = 0x00,       /* low 5 bits: credit count */
	AETH_RNR_NAK = 0x20,   /* low 5 bits: RNR timer code */
	AETH_NAK = 0x60,       /* low 5 bits: NAK code below */
	AETH_TYPE_MASK = 0x60,
	AETH_ACK_NO_CREDIT = 0x1f,
	NAK_PSN_SEQ_ERR = 0,
	NAK_INVALID_REQ = 1,
	NAK_REM_ACCESS_ERR = 2,
	NAK_REM_OP_ERR = 3,
	NAK_INV_RD_REQ = 4,
};

/* A decoded packet (host byte order). Pointers refer into the buffer. */
struct wire_pkt {
	uint8_t opcode;
	uint8_t se;      /* solicited event */
	uint8_t mig;
	uint8_t padcnt;  /* pad bytes after the payload, 0..3 */
	uint8_t tver;
	uint8_t fecn, becn;
	uint8_t ackreq;
	uint8_t sack;    /* uroce selective repeat: first bit of BTH resv7 (docs/wire.md) */
	uint16_t pkey;
	uint32_t dqpn;   /* 24 bits */
	uint32_t psn;    /* 24 bits */
	/* RETH / AtomicETH */
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len; /* RETH DMA length, bytes */
	uint64_t swap_add, compare;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;    /* 24 bits */
	/* AtomicAckETH */
	uint64_t orig;
	/* XRCETH (XRC requests): the target's XRC SRQ */
	uint32_t xrc_srqn; /* 24 bits */
	/* DETH (UD) */
	uint32_t qkey;
	uint32_t src_qp; /* 24 bits */
	/* ImmDt / IETH: kept in network order, as ibv_wc.imm_data */
	uint32_t imm_be;
	const uint8_t *payload;
	uint32_t paylen;  /* bytes, without pad and ICRC */
};

/* Drop reasons counted by the receive path. */
enum wire_err {
	WIRE_OK = 0,
	WIRE_ERR_SHORT = 1,     /* shorter than its headers + ICRC */
	WIRE_ERR_OPCODE = 2,    /* unknown or unsupported opcode */
	WIRE_ERR_VERSION = 3,   /* BTH transport version != 0 */
	WIRE_ERR_PAD = 4,       /* pad count on a packet without payload, or payload shorter than pad */
	WIRE_ERR_ICRC = 5,
};

/* Parses a UDP payload (BTH .. ICRC). Does not check the ICRC. */
int wire_parse(const uint8_t *buf, size_t len, struct wire_pkt *p);
/* Writes BTH and the extension headers of p->opcode into buf; returns the
 * header length. The payload, pad and ICRC are the caller's. */
size_t wire_build(uint8_t *buf, const struct wire_pkt *p);

/* ICRC (RoCEv2 annex A17.3.3): CRC-32 over 8 bytes of 0xff, the IPv4 and UDP
 * headers with TOS, TTL, IP checksum and UDP checksum set to ones, and the
 * BTH with its FECN/BECN/reserved byte set to ones, then the rest of the UDP
 * payload up to the ICRC. Carried least significant byte first. */
struct wire_ip4 {
	uint32_t saddr, daddr; /* network order */
	uint16_t sport, dport; /* host order */
	uint16_t ip_id;        /* host order */
};

/* Computes the ICRC of a packet given as iovecs covering the UDP payload
 * without its ICRC (the first iovec must start with the BTH). */
uint32_t wire_icrc_v4(const struct wire_ip4 *ip, const struct iovec *iov, int iovcnt);
uint32_t wire_crc32(uint32_t crc, const void *buf, size_t len);
/* The CRC-32 implementation wire_crc32 uses: "zlib", "isal" (ISA-L, where
 * built with it) or "vpclmul" (a 256-bit carry-less fold, x86-64 with
 * AVX2 and VPCLMULQDQ). At load the fastest one this CPU has, or the one
 * UROCE_CRC names. wire_crc_select(NULL or "auto") goes back to the
 * automatic choice; 0, -EINVAL for an unknown name, -ENOTSUP for one this
 * build or CPU lacks. Not thread-safe: call it before any traffic. */
int wire_crc_select(const char *name);
const char *wire_crc_name(void);

/* IPv4 ID recovery for received packets: a UDP socket does not see the IP
 * ID, which the ICRC covers. CRC-32 is affine over GF(2), so a received
 * ICRC that differs from the one computed with ID 0 is consistent with
 * some ID exactly when the difference lies in the span of the 16 ID bit
 * contributions. Returns 1 (and the ID) when such an ID exists. */
int wire_icrc_solve_id(uint32_t computed_id0, uint32_t received, size_t udp_len,
		       uint16_t *id_out);

/* What changes in the ICRC of a packet (UDP length udp_len) when its IPv4
 * ID is id instead of 0: XOR it in. UDP GSO gives the k-th segment of a
 * datagram the ID k (inet_gso_segment), and a receiver that checks the
 * ICRC strictly (rxe, NICs) sees that ID. */
uint32_t wire_icrc_id_delta(uint16_t id, size_t udp_len);

/* 24-bit PSN arithmetic: signed distance a - b. */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}

static inline uint32_t psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & PSN_MASK;
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

const char *wire_opcode_name(uint8_t op);

#endif
