/* RoCEv2 invariant CRC (IBTA Annex A17.3.3) and IPv4 ID recovery. */
#include "wire.h"

#include <string.h>
#include <zlib.h>
#ifdef HAVE_ISAL
#include <isa-l/crc.h>
#endif

#if defined(HAVE_ISAL) && defined(__x86_64__)
/* Whether the CPU has AVX (vzeroupper exists). */
static int have_avx;

__attribute__((constructor)) static void icrc_cpu_init(void)
{
	__builtin_cpu_init();
	have_avx = __builtin_cpu_supports("avx");
}
#endif

uint32_t wire_crc32(uint32_t crc, const void *buf, size_t len)
{
#ifdef HAVE_ISAL
	/* Same polynomial, reflection and chaining convention as zlib. */
	crc = crc32_gzip_refl(crc, buf, (uint64_t)len);
#ifdef __x86_64__
	/* ISA-L's AVX-512 CRC (crc32_gzip_refl_by16_10) returns with the
	 * upper halves of the vector registers dirty, and the SSE code that
	 * follows (every inlined memcpy and memset of this library) then
	 * pays a state transition each time (Intel's optimization manual,
	 * "Mixing AVX code with SSE code"): a 48-byte and a 1 KiB CRC
	 * between two small memcpys took 200-260 ns here instead of 49, and
	 * a perf profile of ib_write_bw over a 1500-byte veth put 85% of
	 * uroce_eng_send's own samples on the first SSE instruction after
	 * wire_icrc_v4. vzeroupper is what compilers emit at such a
	 * boundary; it keeps the low 128 bits, the only ones SSE code uses. */
	if (have_avx)
		__asm__ volatile("vzeroupper");
#endif
	return crc;
#else
	return (uint32_t)crc32(crc, buf, (uInt)len);
#endif
}

/* The 8 ones standing in for the LRH, then the masked IPv4 and UDP headers. */
static void icrc_prefix_v4(uint8_t out[36], const struct wire_ip4 *ip, size_t udp_len)
{
	uint16_t tot = (uint16_t)(20 + udp_len);

	memset(out, 0xff, 8);
	out[8] = 0x45;
	out[9] = 0xff; /* TOS masked */
	out[10] = (uint8_t)(tot >> 8);
	out[11] = (uint8_t)tot;
	out[12] = (uint8_t)(ip->ip_id >> 8);
	out[13] = (uint8_t)ip->ip_id;
	out[14] = 0x40; /* DF */
	out[15] = 0;
	out[16] = 0xff; /* TTL masked */
	out[17] = 17;   /* UDP */
	out[18] = 0xff; /* header checksum masked */
	out[19] = 0xff;
	memcpy(out + 20, &ip->saddr, 4);
	memcpy(out + 24, &ip->daddr, 4);
	out[28] = (uint8_t)(ip->sport >> 8);
	out[29] = (uint8_t)ip->sport;
	out[30] = (uint8_t)(ip->dport >> 8);
	out[31] = (uint8_t)ip->dport;
	out[32] = (uint8_t)(udp_len >> 8);
	out[33] = (uint8_t)udp_len;
	out[34] = 0xff; /* UDP checksum masked */
	out[35] = 0xff;
}

uint32_t wire_icrc_v4(const struct wire_ip4 *ip, const struct iovec *iov, int iovcnt)
{
	/* The masked prefix, the BTH and the rest of the first iovec (the
	 * extension headers) in one buffer, so that they cost one CRC call:
	 * each call has a fixed cost of about 17 ns here, more than a 1 KiB
	 * payload's CRC, and a packet's headers made three. */
	uint8_t head[36 + BTH_LEN + 64];
	size_t total = 0, ext = iov[0].iov_len - BTH_LEN, n = 36 + BTH_LEN;
	const uint8_t *h0 = iov[0].iov_base;
	uint32_t crc;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	/* UDP length covers the header, the payload and the ICRC itself. */
	icrc_prefix_v4(head, ip, 8 + total + ICRC_LEN);
	memcpy(head + 36, h0, BTH_LEN);
	head[36 + 4] = 0xff; /* FECN, BECN, reserved: masked */
	if (ext <= sizeof(head) - n) {
		memcpy(head + n, h0 + BTH_LEN, ext);
		n += ext;
		ext = 0;
	}
	crc = wire_crc32(0, head, n);
	if (ext)
		crc = wire_crc32(crc, h0 + BTH_LEN, ext);
	for (int i = 1; i < iovcnt; i++)
		if (iov[i].iov_len)
			crc = wire_crc32(crc, iov[i].iov_base, iov[i].iov_len);
	return crc;
}

/* The linear contribution of the 16 ID bits to the CRC of a buffer in
 * which 'after' bytes follow the ID field. */
static void id_basis(uint32_t b[16], size_t after)
{
	static const uint8_t zero[2];
	uint32_t c0 = (uint32_t)crc32(0, zero, 2);

	for (int i = 0; i < 16; i++) {
		uint8_t e[2] = { (uint8_t)((1u << i) >> 8), (uint8_t)(1u << i) };
		uint32_t d = (uint32_t)crc32(0, e, 2) ^ c0;

		b[i] = (uint32_t)crc32_combine(d, 0, (z_off_t)after);
	}
}

/* The ID bases of one UDP length: raw (the CRC change of each ID bit)
 * and reduced to echelon form (for solving an ID from a CRC change). */
struct id_bases {
	size_t len;
	uint32_t raw[16];
	uint32_t basis[16], combo[16]; /* reduced vectors and their ID bits */
	int rank;
};

/* The bases for udp_len, from a per-thread cache of the last few lengths:
 * a GSO run brings full segments and a shorter last one (an ACK glued
 * after data, a message's tail), in both directions, and computing a
 * length's bases costs 16 crc32_combine calls (6% of a 2-core 8 KiB
 * ping-pong when one length was kept). Per thread: an engine thread both
 * sends and receives; nothing is shared. */
static const struct id_bases *id_bases_of(size_t udp_len)
{
	enum { ID_CACHE = 8 };
	static __thread struct id_bases c[ID_CACHE];
	static __thread unsigned next;
	struct id_bases *b;
	int k;

	for (k = 0; k < ID_CACHE; k++)
		if (c[k].len == udp_len)
			return &c[k];
	b = &c[next++ % ID_CACHE];
	/* ICRC buffer: 8 ones, 20 IP, then udp_len - 4 bytes of UDP header
	 * and payload; the ID ends at byte 14. */
	id_basis(b->raw, 8 + 20 + udp_len - ICRC_LEN - 14);
	b->rank = 0;
	for (int i = 0; i < 16; i++) {
		uint32_t v = b->raw[i], cb = 1u << i;

		for (int j = 0; j < b->rank; j++) {
			uint32_t top = 1u << (31 - __builtin_clz(b->basis[j]));

			if (v & top) {
				v ^= b->basis[j];
				cb ^= b->combo[j];
			}
		}
		if (v) {
			b->basis[b->rank] = v;
			b->combo[b->rank] = cb;
			b->rank++;
		}
	}
	b->len = udp_len;
	return b;
}

uint32_t wire_icrc_id_delta(uint16_t id, size_t udp_len)
{
	const struct id_bases *b = id_bases_of(udp_len);
	uint32_t d = 0;

	for (int i = 0; i < 16; i++)
		if (id & (1u << i))
			d ^= b->raw[i];
	return d;
}

int wire_icrc_solve_id(uint32_t computed_id0, uint32_t received, size_t udp_len,
		       uint16_t *id_out)
{
	const struct id_bases *b = id_bases_of(udp_len);
	const uint32_t *basis = b->basis, *combo = b->combo;
	uint32_t delta = computed_id0 ^ received, ids = 0;
	int rank = b->rank;

	for (int j = 0; j < rank; j++) {
		uint32_t top = 1u << (31 - __builtin_clz(basis[j]));

		if (delta & top) {
			delta ^= basis[j];
			ids ^= combo[j];
		}
	}
	if (delta)
		return 0;
	*id_out = (uint16_t)ids;
	return 1;
}
