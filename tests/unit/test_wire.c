/* Wire codec and ICRC against known-answer vectors.
 *
 * The vectors were produced by scapy's RoCE layer (scapy.contrib.roce,
 * python3-scapy 2.5), an implementation independent of ours, from headers
 * built field by field as IBTA 9.2 and annex A17 lay them out; see
 * tests/clients/test_capture.sh for the live cross-check on captures. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "t.h"
#include "wire.h"

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = 0;

	for (; h[0] && h[1]; h += 2) {
		unsigned v;

		sscanf(h, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

struct vec {
	const char *name, *ip_src, *ip_dst;
	uint16_t sport, ip_id;
	const char *hex; /* UDP payload: BTH .. ICRC */
};

static const struct vec vecs[] = {
	{ "send_only", "192.168.0.1", "192.168.0.2", 0xc000, 0,
	  "0400ffff00000012800012343031323334353637383961626364656665061f76" },
	{ "write_only_id1234", "10.0.0.1", "10.0.0.2", 0x8123, 0x1234,
	  "0a30ffff00ab8123007fffff1122334455667788deadbeef0000000568656c6c6f0000001324d79d" },
	{ "ack", "127.0.0.1", "127.0.0.1", 0x9999, 0, "1100ffff00019999000000101f000003577870a4" },
};

static uint32_t icrc_of(const struct vec *v, const uint8_t *pkt, size_t len, uint16_t id)
{
	struct wire_ip4 ip = { .sport = v->sport, .dport = ROCE_V2_PORT, .ip_id = id };
	struct iovec iov = { (void *)pkt, len - ICRC_LEN };

	inet_pton(AF_INET, v->ip_src, &ip.saddr);
	inet_pton(AF_INET, v->ip_dst, &ip.daddr);
	return wire_icrc_v4(&ip, &iov, 1);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

T_CASE(icrc_matches_scapy_vectors)
{
	for (size_t i = 0; i < (sizeof(vecs) / sizeof(vecs[0])); i++) {
		uint8_t pkt[256];
		size_t n = unhex(vecs[i].hex, pkt);

		T_EQ_U64(icrc_of(&vecs[i], pkt, n, vecs[i].ip_id), le32(pkt + n - 4));
	}
}

/* The ICRC does not depend on where the iovecs split the packet: the
 * headers (up to 64 bytes after the BTH) go into one CRC call with the
 * masked prefix, longer first iovecs take a second call. A 300-byte
 * packet split at every point, against the scapy-checked single iovec
 * of its first 12 + 64 bytes and the whole. */
/* The ICRC as the spec defines it (A17.3.3), by zlib over one masked
 * buffer: the 8 ones for the LRH, the masked IPv4 and UDP headers, the
 * packet with the BTH's FECN/BECN/reserved byte masked. */
static uint32_t icrc_ref(const struct wire_ip4 *ip, const uint8_t *pkt, size_t len)
{
	static uint8_t ref[36 + 10000];
	uint16_t udp = (uint16_t)(8 + len + ICRC_LEN), tot = (uint16_t)(20 + udp);

	memset(ref, 0xff, 8);
	ref[8] = 0x45;
	ref[9] = 0xff;
	ref[10] = (uint8_t)(tot >> 8);
	ref[11] = (uint8_t)tot;
	ref[12] = (uint8_t)(ip->ip_id >> 8);
	ref[13] = (uint8_t)ip->ip_id;
	ref[14] = 0x40;
	ref[15] = 0;
	ref[16] = 0xff;
	ref[17] = 17;
	ref[18] = ref[19] = 0xff;
	memcpy(ref + 20, &ip->saddr, 4);
	memcpy(ref + 24, &ip->daddr, 4);
	ref[28] = (uint8_t)(ip->sport >> 8);
	ref[29] = (uint8_t)ip->sport;
	ref[30] = (uint8_t)(ROCE_V2_PORT >> 8);
	ref[31] = (uint8_t)ROCE_V2_PORT;
	ref[32] = (uint8_t)(udp >> 8);
	ref[33] = (uint8_t)udp;
	ref[34] = ref[35] = 0xff;
	memcpy(ref + 36, pkt, len);
	ref[36 + 4] = 0xff;
	return (uint32_t)crc32(0, ref, (uInt)(36 + len));
}

T_CASE(icrc_iov_split_consistent)
{
	const struct vec *v = &vecs[1];
	struct wire_ip4 ip = { .sport = v->sport, .dport = ROCE_V2_PORT, .ip_id = 0x4321 };
	uint8_t pkt[300];
	uint32_t want;

	inet_pton(AF_INET, v->ip_src, &ip.saddr);
	inet_pton(AF_INET, v->ip_dst, &ip.daddr);
	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)(i * 131 + 7);
	{
		struct iovec one = { pkt, sizeof(pkt) };

		want = wire_icrc_v4(&ip, &one, 1);
	}
	for (size_t k = BTH_LEN; k <= sizeof(pkt); k++) {
		struct iovec two[3] = { { pkt, k }, { pkt + k, sizeof(pkt) - k }, { pkt, 0 } };

		T_ASSERTF(wire_icrc_v4(&ip, two, 3) == want, "split at %zu", k);
	}
	/* and against the definition, for the whole packet */
	T_EQ_U64(want, icrc_ref(&ip, pkt, sizeof(pkt)));
}

T_CASE(icrc_id_recovery)
{
	const struct vec *v = &vecs[1];
	uint8_t pkt[256];
	size_t n = unhex(v->hex, pkt);
	uint32_t c0 = icrc_of(v, pkt, n, 0);
	uint16_t id = 0;

	T_NE_INT(c0, le32(pkt + n - 4));
	T_ASSERT(wire_icrc_solve_id(c0, le32(pkt + n - 4), 8 + n, &id));
	T_EQ_INT(id, 0x1234);
	/* any single-bit payload corruption must not be explained by an ID */
	for (size_t bit = 12 * 8; bit < (n - 4) * 8; bit++) {
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		c0 = icrc_of(v, pkt, n, 0);
		T_ASSERTF(!wire_icrc_solve_id(c0, le32(pkt + n - 4), 8 + n, &id),
			  "bit %zu flip accepted as id 0x%x", bit, id);
		pkt[bit / 8] ^= (uint8_t)(1u << (bit % 8));
	}
}

/* The ICRC a GSO segment must carry (IP ID k) is the ID-0 one XOR the
 * delta, and it is exactly what the scapy vector with ID 0x1234 carries. */
T_CASE(icrc_id_delta_matches_real_id)
{
	const struct vec *v = &vecs[1];
	uint8_t pkt[256];
	size_t n = unhex(v->hex, pkt);
	uint32_t c0 = icrc_of(v, pkt, n, 0);
	uint16_t id = 0;

	T_EQ_U64(c0 ^ wire_icrc_id_delta(0x1234, 8 + n), le32(pkt + n - 4));
	T_EQ_U64(wire_icrc_id_delta(0, 8 + n), 0);
	for (uint32_t k = 1; k < 70000; k += 997) {
		uint16_t want = (uint16_t)k;

		T_EQ_U64(c0 ^ wire_icrc_id_delta(want, 8 + n), icrc_of(v, pkt, n, want));
		T_ASSERT(wire_icrc_solve_id(c0, c0 ^ wire_icrc_id_delta(want, 8 + n), 8 + n, &id));
		T_EQ_INT(id, want);
	}
	/* IDs 0..63 come from a table (a GSO run's segments): the same
	 * answers as the real computation, also around the table's end */
	for (uint16_t want = 0; want < 70; want++)
		T_EQ_U64(c0 ^ wire_icrc_id_delta(want, 8 + n), icrc_of(v, pkt, n, want));
}

/* The per-length caches of wire_icrc_id_delta and wire_icrc_solve_id
 * (a few lengths each) give the same answers when lengths rotate through
 * more of them than they keep: a payload of every length in turn, twice. */
#if defined(__x86_64__)
/* XINUSE (XGETBV with ECX = 1): which state components are not in their
 * initial configuration; bit 2 is the upper halves of YMM0-15, bit 6 of
 * ZMM0-15 (Intel SDM vol. 1, 13.6). */
static uint64_t xinuse(void)
{
	uint32_t lo, hi;

	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	return (uint64_t)hi << 32 | lo;
}
#endif

/* The CRC leaves no dirty upper vector state behind: ISA-L's AVX-512 CRC
 * returned with it, and every SSE instruction after it (the inlined
 * memcpys of the send path) paid a state transition, 4-5x the cost of
 * the CRC itself (docs/performance.md, "The CRC's dirty vector state"). */
T_CASE(crc_leaves_vector_state_clean)
{
#if defined(__x86_64__)
	static uint8_t buf[4096];
	unsigned a, b, c, d;
	volatile uint32_t crc;
	uint64_t x;

	if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & 4))
		T_SKIP("no XGETBV with ECX = 1 on this CPU");
	/* every implementation this CPU has (the 256-bit fold too) */
	for (int k = 0; k < 3; k++) {
		if (wire_crc_select(k == 0 ? "isal" : k == 1 ? "vpclmul" : NULL))
			continue;
		for (size_t len = 64; len <= sizeof(buf); len *= 4) {
			crc = wire_crc32(0, buf, len);
			x = xinuse();
			T_ASSERTF(!(x & 0x44), "after a %s CRC of %zu bytes XINUSE is 0x%llx: upper "
				  "YMM/ZMM state left dirty (crc 0x%08x)", wire_crc_name(), len,
				  (unsigned long long)x, (unsigned)crc);
		}
	}
#else
	T_SKIP("x86-64 only");
#endif
}

T_CASE(icrc_id_caches_rotate)
{
	static uint8_t pkt[4200];
	const struct vec *v = &vecs[1];
	size_t base = unhex(v->hex, pkt);

	for (int round = 0; round < 2; round++) {
		for (size_t extra = 0; extra <= 4096; extra += 512) {
			size_t n = base + extra;
			uint16_t want = (uint16_t)(0x100 + extra + (size_t)round), id = 0;
			uint32_t c0 = icrc_of(v, pkt, n, 0);

			T_EQ_U64(c0 ^ wire_icrc_id_delta(want, 8 + n), icrc_of(v, pkt, n, want));
			T_ASSERT(wire_icrc_solve_id(c0, icrc_of(v, pkt, n, want), 8 + n, &id));
			T_EQ_INT(id, want);
		}
	}
}

T_CASE(parse_vectors)
{
	uint8_t pkt[256];
	struct wire_pkt p;
	size_t n;

	n = unhex(vecs[0].hex, pkt);
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_OK);
	T_EQ_INT(p.opcode, OP_SEND_ONLY);
	T_EQ_INT(p.pkey, 0xffff);
	T_EQ_INT(p.dqpn, 0x12);
	T_EQ_INT(p.psn, 0x1234);
	T_EQ_INT(p.ackreq, 1);
	T_EQ_INT(p.paylen, 16);
	T_EQ_MEM(p.payload, "0123456789abcdef", 16);

	n = unhex(vecs[1].hex, pkt);
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_OK);
	T_EQ_INT(p.opcode, OP_WRITE_ONLY);
	T_EQ_INT(p.padcnt, 3);
	T_EQ_INT(p.dqpn, 0xab8123);
	T_EQ_INT(p.psn, 0x7fffff);
	T_EQ_U64(p.va, 0x1122334455667788ull);
	T_EQ_U64(p.rkey, 0xdeadbeef);
	T_EQ_INT(p.dma_len, 5);
	T_EQ_INT(p.paylen, 5);
	T_EQ_MEM(p.payload, "hello", 5);

	n = unhex(vecs[2].hex, pkt);
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_OK);
	T_EQ_INT(p.opcode, OP_ACK);
	T_EQ_INT(p.syndrome, 0x1f);
	T_EQ_INT(p.msn, 3);
	T_EQ_INT(p.psn, 0x10);
}

T_CASE(build_reproduces_vectors)
{
	uint8_t want[256], got[256];
	struct wire_pkt p;
	size_t n = unhex(vecs[1].hex, want), hl;

	memset(&p, 0, sizeof(p));
	p.opcode = OP_WRITE_ONLY;
	p.padcnt = 3;
	p.pkey = 0xffff;
	p.dqpn = 0xab8123;
	p.psn = 0x7fffff;
	p.va = 0x1122334455667788ull;
	p.rkey = 0xdeadbeef;
	p.dma_len = 5;
	hl = wire_build(got, &p);
	T_EQ_INT(hl, BTH_LEN + RETH_LEN);
	T_EQ_MEM(got, want, hl);
	T_EQ_INT(n, hl + 8 + ICRC_LEN);

	n = unhex(vecs[0].hex, want);
	memset(&p, 0, sizeof(p));
	p.opcode = OP_SEND_ONLY;
	p.pkey = 0xffff;
	p.dqpn = 0x12;
	p.psn = 0x1234;
	p.ackreq = 1;
	hl = wire_build(got, &p);
	T_EQ_MEM(got, want, hl);
}

T_CASE(roundtrip_every_opcode)
{
	for (int op = 0; op < 256; op++) {
		uint8_t buf[128];
		struct wire_pkt a, b;
		uint32_t f;
		size_t hl, len;

		if (!wire_opcode_valid((uint8_t)op))
			continue;
		f = wire_opcodes[op].flags;
		memset(&a, 0, sizeof(a));
		a.opcode = (uint8_t)op;
		a.se = 1;
		a.pkey = 0x8001;
		a.dqpn = 0xabcdef;
		a.psn = 0xfedcba;
		a.ackreq = 1;
		a.va = 0x0102030405060708ull;
		a.rkey = 0x11223344;
		a.dma_len = 4096;
		a.swap_add = 0xa1a2a3a4a5a6a7a8ull;
		a.compare = 0xb1b2b3b4b5b6b7b8ull;
		a.syndrome = 0x61;
		a.msn = 0x123456;
		a.orig = 0xc1c2c3c4c5c6c7c8ull;
		a.imm_be = htonl(0xcafef00d);
		a.padcnt = (f & OPF_PAYLOAD) ? 2 : 0;
		hl = wire_build(buf, &a);
		len = hl + ((f & OPF_PAYLOAD) ? 8 : 0) + ICRC_LEN;
		memset(buf + hl, 0x5a, len - hl);
		T_EQ_INT(wire_parse(buf, len, &b), WIRE_OK);
		T_EQ_INT(b.opcode, op);
		T_EQ_INT(b.se, 1);
		T_EQ_INT(b.pkey, 0x8001);
		T_EQ_INT(b.dqpn, 0xabcdef);
		T_EQ_INT(b.psn, 0xfedcba);
		if (f & (OPF_RETH | OPF_ATMETH)) {
			T_EQ_U64(b.va, a.va);
			T_EQ_U64(b.rkey, a.rkey);
		}
		if (f & OPF_RETH)
			T_EQ_INT(b.dma_len, 4096);
		if (f & OPF_ATMETH) {
			T_EQ_U64(b.swap_add, a.swap_add);
			T_EQ_U64(b.compare, a.compare);
		}
		if (f & OPF_AETH) {
			T_EQ_INT(b.syndrome, 0x61);
			T_EQ_INT(b.msn, 0x123456);
		}
		if (f & OPF_ATMACK)
			T_EQ_U64(b.orig, a.orig);
		if (f & (OPF_IMM | OPF_IETH))
			T_EQ_U64(b.imm_be, a.imm_be);
		T_EQ_INT(b.paylen, (f & OPF_PAYLOAD) ? 6 : 0);
	}
}

T_CASE(parse_rejects_malformed)
{
	uint8_t pkt[256];
	struct wire_pkt p;
	size_t n = unhex(vecs[1].hex, pkt);

	for (size_t l = 0; l < BTH_LEN + RETH_LEN + ICRC_LEN; l++)
		T_NE_INT(wire_parse(pkt, l, &p), WIRE_OK);
	pkt[1] |= 0x01; /* transport version 1 */
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_ERR_VERSION);
	pkt[1] &= 0xf0;
	pkt[0] = 0x1f; /* reserved RC opcode */
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_ERR_OPCODE);
	pkt[0] = OP_WRITE_ONLY;
	T_EQ_INT(wire_parse(pkt, n - 1, &p), WIRE_ERR_PAD); /* not a multiple of 4 */
	n = unhex(vecs[2].hex, pkt);
	T_EQ_INT(wire_parse(pkt, n + 4, &p), WIRE_ERR_PAD); /* ACK with trailing bytes */
	pkt[1] |= 0x20; /* pad count on a packet without payload */
	T_EQ_INT(wire_parse(pkt, n, &p), WIRE_ERR_PAD);
}

T_CASE(crc_backends_agree)
{
	static uint8_t buf[70000];
	const char *names[] = { "zlib", "isal", "vpclmul" };
	uint32_t seed = 12345;
	int tested = 0;

	for (size_t i = 0; i < sizeof(buf); i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		int r = wire_crc_select(names[k]);

		if (r == -ENOTSUP) {
			printf("  (crc %s: not in this build or CPU)\n", names[k]);
			continue;
		}
		T_EQ_INT(r, 0);
		T_ASSERT(!strcmp(wire_crc_name(), names[k]));
		tested++;
		for (size_t len = 0; len < 9000; len = len * 2 + 3) {
			uint32_t a = wire_crc32(0, buf, len), b = (uint32_t)crc32(0, buf, (uInt)len);

			T_EQ_U64(a, b);
			/* chaining */
			T_EQ_U64(wire_crc32(wire_crc32(0, buf, len / 2), buf + len / 2, len - len / 2),
				 b);
		}
		/* every length around the fold's block and lane sizes, odd
		 * alignments, start values other than 0, and a 64 KiB datagram */
		for (int t = 0; t < 3000; t++) {
			size_t off, len;
			uint32_t c0;

			seed = seed * 1103515245u + 12345u;
			off = (seed >> 8) % 61;
			len = t < 1200 ? (size_t)t : (seed >> 4) % 66000;
			c0 = seed ^ (uint32_t)t * 2654435761u;
			T_EQ_U64(wire_crc32(c0, buf + off, len),
				 (uint32_t)crc32(c0, buf + off, (uInt)len));
		}
	}
	T_ASSERT(tested >= 1);
	T_EQ_INT(wire_crc_select("crc64"), -EINVAL);
	T_EQ_INT(wire_crc_select(NULL), 0);
	printf("  (crc automatic choice here: %s)\n", wire_crc_name());
}

/* Long packets, as the engine hands them to the ICRC: received (one
 * buffer) and sent (headers, payload pieces, pad), with every backend,
 * for header lengths from a bare BTH to BTH + RETH + immediate and
 * payloads around the fold's thresholds, against the definition. */
T_CASE(icrc_long_packets_all_backends)
{
	static uint8_t pkt[9100];
	const char *names[] = { "zlib", "isal", "vpclmul" };
	const size_t hdrs[] = { BTH_LEN, BTH_LEN + 4, BTH_LEN + 16, BTH_LEN + 20, BTH_LEN + 28 };
	struct wire_ip4 ip = { .saddr = htonl(0xc6120001), .daddr = htonl(0xc6120002),
			       .sport = 0xc001, .dport = ROCE_V2_PORT, .ip_id = 0 };
	int tested = 0;

	for (size_t i = 0; i < sizeof(pkt); i++)
		pkt[i] = (uint8_t)(i * 167 + 13);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		if (wire_crc_select(names[k]) == -ENOTSUP)
			continue;
		tested++;
		for (size_t h = 0; h < sizeof(hdrs) / sizeof(hdrs[0]); h++)
			for (size_t pay = 380; pay < 9000; pay = pay < 700 ? pay + 1 : pay * 3 / 2 + 5) {
				size_t len = hdrs[h] + pay;
				uint32_t want = icrc_ref(&ip, pkt, len);
				struct iovec one = { pkt, len };
				struct iovec sent[4] = { { pkt, hdrs[h] },
							 { pkt + hdrs[h], pay - pay / 3 },
							 { pkt + hdrs[h] + pay - pay / 3, pay / 3 },
							 { pkt, 0 } };

				T_ASSERTF(wire_icrc_v4(&ip, &one, 1) == want, "%s: received, %zu + %zu",
					  names[k], hdrs[h], pay);
				T_ASSERTF(wire_icrc_v4(&ip, sent, 4) == want, "%s: sent, %zu + %zu",
					  names[k], hdrs[h], pay);
			}
	}
	T_ASSERT(tested >= 1);
	T_EQ_INT(wire_crc_select(NULL), 0);
}

T_CASE(psn_arithmetic)
{
	T_EQ_INT(psn_diff(0, 0xffffff), 1);
	T_EQ_INT(psn_diff(0xffffff, 0), -1);
	T_EQ_INT(psn_diff(5, 3), 2);
	T_EQ_INT(psn_diff(0x800000, 0), -0x800000);
	T_EQ_INT(psn_diff(0x7fffff, 0), 0x7fffff);
	T_EQ_INT(psn_add(0xfffffe, 3), 1);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
