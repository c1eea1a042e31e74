/* RoCEv2 invariant CRC (IBTA Annex A17.3.3) and IPv4 ID recovery. */
#include "wire.h"

#include <string.h>
#include <zlib.h>
#ifdef HAVE_ISAL
#include <isa-l/crc.h>
#endif

uint32_t wire_crc32(uint32_t crc, const void *buf, size_t len)
{
#ifdef HAVE_ISAL
	/* Same polynomial, reflection and chaining convention as zlib. */
	return crc32_gzip_refl(crc, buf, (uint64_t)len);
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
	uint8_t pre[36], bth[BTH_LEN];
	size_t total = 0;
	uint32_t crc;

	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	/* UDP length covers the header, the payload and the ICRC itself. */
	icrc_prefix_v4(pre, ip, 8 + total + ICRC_LEN);
	crc = wire_crc32(0, pre, sizeof(pre));
	memcpy(bth, iov[0].iov_base, BTH_LEN);
	bth[4] = 0xff; /* FECN, BECN, reserved: masked */
	crc = wire_crc32(crc, bth, BTH_LEN);
	crc = wire_crc32(crc, (const uint8_t *)iov[0].iov_base + BTH_LEN, iov[0].iov_len - BTH_LEN);
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

uint32_t wire_icrc_id_delta(uint16_t id, size_t udp_len)
{
	/* a few lengths cached: a GSO run's segments and its shorter last
	 * one, for the last runs (messages of other sizes, ACKs) */
	enum { DELTA_CACHE = 4 };
	static __thread size_t len_c[DELTA_CACHE];
	static __thread uint32_t basis_c[DELTA_CACHE][16];
	static __thread unsigned next;
	uint32_t d = 0;
	int k;

	for (k = 0; k < DELTA_CACHE && len_c[k] != udp_len; k++)
		;
	if (k == DELTA_CACHE) {
		k = (int)(next++ % DELTA_CACHE);
		/* as in wire_icrc_solve_id: the ID ends at byte 14 of the
		 * ICRC buffer (8 ones, then the IPv4 header) */
		id_basis(basis_c[k], 8 + 20 + udp_len - ICRC_LEN - 14);
		len_c[k] = udp_len;
	}
	for (int i = 0; i < 16; i++)
		if (id & (1u << i))
			d ^= basis_c[k][i];
	return d;
}

int wire_icrc_solve_id(uint32_t computed_id0, uint32_t received, size_t udp_len,
		       uint16_t *id_out)
{
	/* The reduced basis of the last ID_CACHE lengths seen: a GSO run
	 * brings full segments and a shorter last one (an ACK glued after
	 * data, a message's tail), and recomputing a basis costs 16
	 * crc32_combine calls (6% of a 2-core 8 KiB ping-pong when one
	 * length was kept). Per thread: one engine thread per context. */
	enum { ID_CACHE = 4 };
	static __thread struct {
		size_t len;
		uint32_t basis[16], combo[16]; /* reduced vectors and their ID bits */
		int rank;
	} c[ID_CACHE];
	static __thread unsigned next;
	uint32_t delta = computed_id0 ^ received, ids = 0;
	const uint32_t *basis, *combo;
	int k, rank;

	for (k = 0; k < ID_CACHE && c[k].len != udp_len; k++)
		;
	if (k == ID_CACHE) {
		uint32_t raw[16];

		k = (int)(next++ % ID_CACHE);
		/* ICRC buffer: 8 ones, 20 IP, then udp_len - 4 bytes of UDP
		 * header and payload; the ID ends at byte 14. */
		id_basis(raw, 8 + 20 + udp_len - ICRC_LEN - 14);
		c[k].rank = 0;
		for (int i = 0; i < 16; i++) {
			uint32_t v = raw[i], cb = 1u << i;

			for (int j = 0; j < c[k].rank; j++) {
				uint32_t top = 1u << (31 - __builtin_clz(c[k].basis[j]));

				if (v & top) {
					v ^= c[k].basis[j];
					cb ^= c[k].combo[j];
				}
			}
			if (v) {
				c[k].basis[c[k].rank] = v;
				c[k].combo[c[k].rank] = cb;
				c[k].rank++;
			}
		}
		c[k].len = udp_len;
	}
	basis = c[k].basis;
	combo = c[k].combo;
	rank = c[k].rank;
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
