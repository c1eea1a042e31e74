/* RoCEv2 invariant CRC (IBTA Annex A17.3.3) and IPv4 ID recovery. */
#include "wire.h"

#include <string.h>
#include <zlib.h>
#ifdef HAVE_ISAL
#include <isa-l/crc.h>
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ICRC_VPCLMUL 1
#include <immintrin.h>
#endif

#include <errno.h>
#include <stdlib.h>

/* The CRC-32 behind wire_crc32 (zlib's polynomial, reflection and
 * chaining), chosen once per process: UROCE_CRC=zlib|isal|vpclmul names
 * one, otherwise the fastest this CPU has (wire_crc_select). */
enum { CRC_ZLIB, CRC_ISAL, CRC_VPCLMUL };
static const char *const crc_names[] = { "zlib", "isal", "vpclmul" };
static int crc_impl = CRC_ZLIB;
#ifdef ICRC_VPCLMUL
/* Whether the CPU has AVX (vzeroupper exists). */
static int have_avx;
#endif

static uint32_t crc_zlib(uint32_t crc, const void *buf, size_t len)
{
	/* zlib's length is an unsigned int: long buffers in pieces */
	while (len > 0x40000000u) {
		crc = (uint32_t)crc32(crc, buf, 0x40000000u);
		buf = (const uint8_t *)buf + 0x40000000u;
		len -= 0x40000000u;
	}
	return (uint32_t)crc32(crc, buf, (uInt)len);
}

#ifdef HAVE_ISAL
static uint32_t crc_isal(uint32_t crc, const void *buf, size_t len)
{
	/* Same polynomial, reflection and chaining convention as zlib. */
	crc = crc32_gzip_refl(crc, buf, (uint64_t)len);
#ifdef ICRC_VPCLMUL
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
}
#endif

/* The CRC of short pieces (headers, the tail of the folding below). */
static uint32_t crc_small(uint32_t crc, const void *buf, size_t len)
{
#ifdef HAVE_ISAL
	return crc_isal(crc, buf, len);
#else
	return crc_zlib(crc, buf, len);
#endif
}

#ifdef ICRC_VPCLMUL
/* CRC-32 by folding with carry-less multiplication (Gopal et al., "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction",
 * Intel, 2009), 256-bit wide: for CPUs with VPCLMULQDQ and AVX2 but no
 * AVX-512, where ISA-L falls back to its 128-bit loop (AMD Zen 3: 12 GB/s
 * there, 24 GB/s here on 4 KiB buffers; docs/performance.md).
 *
 * A 128-bit lane X of the message, D bits before lane Y, contributes to
 * the remainder what X.lo * (x^(D+32) mod P) + X.hi * (x^(D-32) mod P)
 * contributes at Y's place, in the bit-reflected domain with the
 * constants reflected and shifted left by one (the paper's section 4).
 * So the message folds into one 128-bit lane whose CRC, followed by the
 * bytes not folded, is the message's CRC. The start value is XORed into
 * the first 4 bytes (a reflected CRC register is the first 32 message
 * bits' XOR), and the rest is computed from a zero register. */
static uint64_t k1024[2], k128[2]; /* {lo, hi} multipliers */

/* bit-reflected (x^n mod P) << 1, P the CRC-32 polynomial */
static uint64_t xpow_refl(unsigned n)
{
	uint64_t r = 1, o = 0;

	for (unsigned i = 0; i < n; i++) {
		r <<= 1;
		if (r & (1ull << 32))
			r ^= 0x104C11DB7ull;
	}
	for (int b = 0; b < 32; b++)
		if (r & (1ull << b))
			o |= 1ull << (31 - b);
	return o << 1;
}

__attribute__((target("avx2,pclmul,vpclmulqdq"))) static inline __m128i fold128(__m128i a,
										 __m128i k)
{
	return _mm_xor_si128(_mm_clmulepi64_si128(a, k, 0x00), _mm_clmulepi64_si128(a, k, 0x11));
}

__attribute__((target("avx2,pclmul,vpclmulqdq"))) static inline __m256i fold256(__m256i a,
										 __m256i k)
{
	return _mm256_xor_si256(_mm256_clmulepi64_epi128(a, k, 0x00),
				_mm256_clmulepi64_epi128(a, k, 0x11));
}

#define LOAD256(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))

/* len >= 128 */
__attribute__((target("avx2,pclmul,vpclmulqdq"))) static uint32_t
crc_fold(uint32_t crc, const uint8_t *p, size_t len)
{
	const __m256i k = _mm256_set_epi64x((long long)k1024[1], (long long)k1024[0],
					    (long long)k1024[1], (long long)k1024[0]);
	const __m128i k2 = _mm_set_epi64x((long long)k128[1], (long long)k128[0]);
	__m256i x0 = LOAD256(p), x1 = LOAD256(p + 32), x2 = LOAD256(p + 64), x3 = LOAD256(p + 96);
	__m128i a;
	uint8_t rest[32];

	x0 = _mm256_xor_si256(x0, _mm256_zextsi128_si256(_mm_cvtsi32_si128((int)~crc)));
	p += 128;
	len -= 128;
	/* four independent lanes pairs, 128 bytes apart: D = 1024 */
	for (; len >= 128; p += 128, len -= 128) {
		x0 = _mm256_xor_si256(fold256(x0, k), LOAD256(p));
		x1 = _mm256_xor_si256(fold256(x1, k), LOAD256(p + 32));
		x2 = _mm256_xor_si256(fold256(x2, k), LOAD256(p + 64));
		x3 = _mm256_xor_si256(fold256(x3, k), LOAD256(p + 96));
	}
	/* the eight 128-bit lanes into one, in message order: D = 128 */
	a = _mm256_castsi256_si128(x0);
	a = _mm_xor_si128(fold128(a, k2), _mm256_extracti128_si256(x0, 1));
	a = _mm_xor_si128(fold128(a, k2), _mm256_castsi256_si128(x1));
	a = _mm_xor_si128(fold128(a, k2), _mm256_extracti128_si256(x1, 1));
	a = _mm_xor_si128(fold128(a, k2), _mm256_castsi256_si128(x2));
	a = _mm_xor_si128(fold128(a, k2), _mm256_extracti128_si256(x2, 1));
	a = _mm_xor_si128(fold128(a, k2), _mm256_castsi256_si128(x3));
	a = _mm_xor_si128(fold128(a, k2), _mm256_extracti128_si256(x3, 1));
	for (; len >= 16; p += 16, len -= 16)
		a = _mm_xor_si128(fold128(a, k2), _mm_loadu_si128((const __m128i *)(const void *)p));
	_mm_storeu_si128((__m128i *)(void *)rest, a);
	memcpy(rest + 16, p, len);
	/* from a zero register: zlib's convention inverts on entry */
	return crc_small(0xffffffffu, rest, 16 + len);
}

/* Below this, the fold's fixed cost (eight lane merges) loses to ISA-L. */
#define FOLD_MIN 512

static uint32_t crc_vpclmul(uint32_t crc, const void *buf, size_t len)
{
	return len >= FOLD_MIN ? crc_fold(crc, buf, len) : crc_small(crc, buf, len);
}
#endif

/* Whether implementation i runs on this CPU and build. */
static int crc_usable(int i)
{
	switch (i) {
	case CRC_ZLIB:
		return 1;
	case CRC_ISAL:
#ifdef HAVE_ISAL
		return 1;
#else
		return 0;
#endif
	case CRC_VPCLMUL:
#ifdef ICRC_VPCLMUL
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("pclmul") &&
		       __builtin_cpu_supports("vpclmulqdq");
#else
		return 0;
#endif
	}
	return 0;
}

int wire_crc_select(const char *name)
{
	int best = CRC_ZLIB;

	if (name && *name && strcmp(name, "auto")) {
		for (int i = 0; i < (int)(sizeof(crc_names) / sizeof(crc_names[0])); i++)
			if (!strcmp(name, crc_names[i])) {
				if (!crc_usable(i))
					return -ENOTSUP;
				crc_impl = i;
				return 0;
			}
		return -EINVAL;
	}
	if (crc_usable(CRC_ISAL))
		best = CRC_ISAL;
#ifdef ICRC_VPCLMUL
	/* ISA-L's own 512-bit loop (crc32_gzip_refl_by16_10) runs where
	 * AVX-512 does; the 256-bit fold only where it would fall back to
	 * 128 bits. */
	if (crc_usable(CRC_VPCLMUL) &&
	    !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
	      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
	      crc_usable(CRC_ISAL)))
		best = CRC_VPCLMUL;
#endif
	crc_impl = best;
	return 0;
}

const char *wire_crc_name(void)
{
	return crc_names[crc_impl];
}

__attribute__((constructor)) static void icrc_cpu_init(void)
{
	const char *env = getenv("UROCE_CRC");

#ifdef ICRC_VPCLMUL
	__builtin_cpu_init();
	have_avx = __builtin_cpu_supports("avx");
	k1024[0] = xpow_refl(1024 + 32);
	k1024[1] = xpow_refl(1024 - 32);
	k128[0] = xpow_refl(128 + 32);
	k128[1] = xpow_refl(128 - 32);
#endif
	/* an unusable or unknown name leaves the automatic choice (the
	 * engine says so when it starts: wire_crc_name) */
	if (wire_crc_select(env) < 0)
		wire_crc_select(NULL);
}

uint32_t wire_crc32(uint32_t crc, const void *buf, size_t len)
{
	switch (crc_impl) {
#ifdef ICRC_VPCLMUL
	case CRC_VPCLMUL:
		return crc_vpclmul(crc, buf, len);
#endif
#ifdef HAVE_ISAL
	case CRC_ISAL:
		return crc_isal(crc, buf, len);
#endif
	default:
		return crc_zlib(crc, buf, len);
	}
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
	uint32_t low[64];   /* the change for IDs 0..63 (a GSO run's segments) */
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
	for (int id = 0; id < 64; id++) {
		uint32_t d = 0;

		for (int i = 0; i < 6; i++)
			if (id & (1 << i))
				d ^= b->raw[i];
		b->low[id] = d;
	}
	b->len = udp_len;
	return b;
}

uint32_t wire_icrc_id_delta(uint16_t id, size_t udp_len)
{
	const struct id_bases *b = id_bases_of(udp_len);
	uint32_t d = 0;

	if (id < 64)
		return b->low[id];
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
