/* Hostile packets: hand-built RoCEv2 datagrams injected through a raw
 * socket at a connected RC responder. Each must be dropped (and counted
 * where the design says so) without touching registered memory; a correctly
 * built WRITE is the positive control that proves the builder is right.
 *
 * The builder and the ICRC are local (the verbs tests link only the public
 * library) and are checked first against tests/unit/test_wire.c's vectors.
 * Needs CAP_NET_RAW; without it every injecting case is skipped. */
#include <glob.h>
#include <netinet/in.h>
#include <sys/mman.h>

#include "common.h"
#include "counters.h"
#include "wire.h" /* constants, opcodes and the inline be helpers only */

/* ---- local CRC-32 (zlib's polynomial and chaining convention) ---------- */

static uint32_t crc_tab[256];

static uint32_t t_crc32(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	if (!crc_tab[1])
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;

			for (int k = 0; k < 8; k++)
				c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
			crc_tab[i] = c;
		}
	crc = ~crc;
	while (len--)
		crc = crc_tab[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/* ICRC of a UDP payload pay[0..len) (BTH .. last byte before the ICRC),
 * for IPv4 saddr -> daddr (network order), UDP sport -> dport, IP id, DF. */
static uint32_t t_icrc(uint32_t saddr, uint32_t daddr, uint16_t sport, uint16_t dport,
		       uint16_t id, const uint8_t *pay, size_t len)
{
	uint8_t pre[36], bth[BTH_LEN];
	size_t udp_len = 8 + len + ICRC_LEN;
	uint32_t crc;

	memset(pre, 0xff, 8);
	pre[8] = 0x45;
	pre[9] = 0xff;
	pre[10] = (uint8_t)((20 + udp_len) >> 8);
	pre[11] = (uint8_t)(20 + udp_len);
	pre[12] = (uint8_t)(id >> 8);
	pre[13] = (uint8_t)id;
	pre[14] = 0x40; /* DF */
	pre[15] = 0;
	pre[16] = 0xff;
	pre[17] = 17;
	pre[18] = pre[19] = 0xff;
	memcpy(pre + 20, &saddr, 4);
	memcpy(pre + 24, &daddr, 4);
	pre[28] = (uint8_t)(sport >> 8);
	pre[29] = (uint8_t)sport;
	pre[30] = (uint8_t)(dport >> 8);
	pre[31] = (uint8_t)dport;
	pre[32] = (uint8_t)(udp_len >> 8);
	pre[33] = (uint8_t)udp_len;
	pre[34] = pre[35] = 0xff;
	crc = t_crc32(0, pre, sizeof(pre));
	memcpy(bth, pay, BTH_LEN);
	bth[4] = 0xff;
	crc = t_crc32(crc, bth, BTH_LEN);
	return t_crc32(crc, pay + BTH_LEN, len - BTH_LEN);
}

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- local header builder ---------------------------------------------- */

struct hpkt {
	uint8_t opcode, padcnt, ackreq;
	uint16_t pkey;
	uint32_t dqpn, psn;
	int reth;               /* write a RETH after the BTH */
	uint64_t va;
	uint32_t rkey, dma_len;
	const void *pay;
	uint32_t paylen;        /* payload bytes (pad bytes are added) */
};

/* Writes BTH [RETH] payload pad into buf; returns the length, no ICRC. */
static size_t build_hdr(uint8_t *buf, const struct hpkt *h)
{
	size_t n = BTH_LEN;

	buf[0] = h->opcode;
	buf[1] = (uint8_t)((h->padcnt & 3) << 4); /* SE 0, M 0, TVer 0 */
	buf[2] = (uint8_t)(h->pkey >> 8);
	buf[3] = (uint8_t)h->pkey;
	put_be32(buf + 4, h->dqpn & QPN_MASK); /* byte 4: FECN/BECN/resv 0 */
	put_be32(buf + 8, (h->psn & PSN_MASK) | (h->ackreq ? 0x80000000u : 0));
	if (h->reth) {
		put_be64(buf + n, h->va);
		put_be32(buf + n + 8, h->rkey);
		put_be32(buf + n + 12, h->dma_len);
		n += RETH_LEN;
	}
	if (h->paylen)
		memcpy(buf + n, h->pay, h->paylen);
	n += h->paylen;
	memset(buf + n, 0, h->padcnt & 3);
	return n + (h->padcnt & 3);
}

static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;

	for (; s[0] && s[1]; s += 2) {
		unsigned v;

		sscanf(s, "%2x", &v);
		out[n++] = (uint8_t)v;
	}
	return n;
}

static uint32_t ip4(const char *s)
{
	struct in_addr a;

	T_ASSERT(inet_pton(AF_INET, s, &a) == 1);
	return a.s_addr;
}

/* The known-answer vectors of tests/unit/test_wire.c (scapy-made). */
T_CASE(builder_and_icrc_match_known_vectors)
{
	static const struct {
		const char *src, *dst;
		uint16_t sport, id;
		const char *hex;
	} v[] = {
		{ "192.168.0.1", "192.168.0.2", 0xc000, 0,
		  "0400ffff00000012800012343031323334353637383961626364656665061f76" },
		{ "10.0.0.1", "10.0.0.2", 0x8123, 0x1234,
		  "0a30ffff00ab8123007fffff1122334455667788deadbeef0000000568656c6c6f0000001324d79d" },
		{ "127.0.0.1", "127.0.0.1", 0x9999, 0, "1100ffff00019999000000101f000003577870a4" },
	};
	uint8_t want[256], got[256];
	struct hpkt h;
	size_t n, m;

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		n = unhex(v[i].hex, want);
		T_EQ_U64(t_icrc(ip4(v[i].src), ip4(v[i].dst), v[i].sport, ROCE_V2_PORT, v[i].id,
				want, n - ICRC_LEN),
			 le32(want + n - ICRC_LEN));
	}

	/* SEND_ONLY with AckReq and a 16-byte payload */
	n = unhex(v[0].hex, want);
	memset(&h, 0, sizeof(h));
	h.opcode = OP_SEND_ONLY;
	h.pkey = 0xffff;
	h.dqpn = 0x12;
	h.psn = 0x1234;
	h.ackreq = 1;
	h.pay = "0123456789abcdef";
	h.paylen = 16;
	m = build_hdr(got, &h);
	put_le32(got + m, t_icrc(ip4(v[0].src), ip4(v[0].dst), v[0].sport, ROCE_V2_PORT, 0, got, m));
	T_EQ_INT(m + ICRC_LEN, n);
	T_EQ_MEM(got, want, n);

	/* WRITE_ONLY with RETH, "hello" and 3 pad bytes, IP ID 0x1234 */
	n = unhex(v[1].hex, want);
	memset(&h, 0, sizeof(h));
	h.opcode = OP_WRITE_ONLY;
	h.padcnt = 3;
	h.pkey = 0xffff;
	h.dqpn = 0xab8123;
	h.psn = 0x7fffff;
	h.reth = 1;
	h.va = 0x1122334455667788ull;
	h.rkey = 0xdeadbeef;
	h.dma_len = 5;
	h.pay = "hello";
	h.paylen = 5;
	m = build_hdr(got, &h);
	put_le32(got + m, t_icrc(ip4(v[1].src), ip4(v[1].dst), v[1].sport, ROCE_V2_PORT, 0x1234,
				 got, m));
	T_EQ_INT(m + ICRC_LEN, n);
	T_EQ_MEM(got, want, n);
}

/* ---- counters of one context of this process --------------------------- */

/* Counters of the idx-th device context this process opened (0: side a,
 * 1: side b of a separate_ctx pair), from /dev/shm/uroce-<pid>-<n>.stat. */
static struct uroce_counters ctx_cnt(int idx)
{
	char pat[64];
	glob_t g;
	struct uroce_counters c;
	char *path[8];
	unsigned seq[8];
	size_t np = 0;

	memset(&c, 0, sizeof(c));
	snprintf(pat, sizeof(pat), "/dev/shm/uroce-%d-*.stat", (int)getpid());
	T_ASSERTF(!glob(pat, 0, NULL, &g), "no stat files %s (UROCE_NO_STAT set?)", pat);
	for (size_t i = 0; i < g.gl_pathc && np < 8; i++) {
		const char *dash = strrchr(g.gl_pathv[i], '-');

		path[np] = g.gl_pathv[i];
		seq[np++] = (unsigned)strtoul(dash + 1, NULL, 10);
	}
	/* sort by creation sequence */
	for (size_t i = 1; i < np; i++)
		for (size_t j = i; j > 0 && seq[j] < seq[j - 1]; j--) {
			unsigned s = seq[j];
			char *q = path[j];

			seq[j] = seq[j - 1];
			path[j] = path[j - 1];
			seq[j - 1] = s;
			path[j - 1] = q;
		}
	T_ASSERTF((size_t)idx < np, "stat file %d of %zu wanted", idx, np);
	{
		FILE *f = fopen(path[idx], "r");
		struct uroce_stat_file sf;

		T_ASSERTF(f, "open %s: %s", path[idx], strerror(errno));
		T_ASSERT(fread(&sf, sizeof(sf), 1, f) == 1);
		fclose(f);
		T_EQ_U64(sf.magic, UROCE_STAT_MAGIC);
		T_EQ_INT(sf.size, sizeof(sf));
		uroce_stat_total(&sf, &c);
	}
	globfree(&g);
	return c;
}

#define CNT(side, name) (ctx_cnt(side).name)
#define SIDE_A 0
#define SIDE_B 1

/* Waits up to 2 s for counter name of side to reach at least want. */
#define WAIT_CNT(side, name, want)                                                     \
	do {                                                                           \
		double t0_ = tv_now();                                                 \
		uint64_t w_ = (want), v_;                                              \
		while ((v_ = CNT(side, name)) < w_ && tv_now() - t0_ < 2.0)            \
			tv_msleep(2);                                                  \
		T_ASSERTF(v_ >= w_, "counter " #name " of side %d is %llu, expected >= %llu", \
			  side, (unsigned long long)v_, (unsigned long long)w_);       \
	} while (0)

/* ---- fixture ------------------------------------------------------------ */

#define TGT_LEN 4096
#define HOST_OFF 256  /* where hostile WRITEs aim */
#define LIVE_OFF 2048 /* where the genuine liveness WRITE goes */
#define PAYLEN 64

struct fx {
	struct tv_pair p;
	struct tv_buf tgt; /* at b, REMOTE_WRITE */
	struct tv_buf src; /* at a, the genuine requester's source */
	int raw;
	uint16_t sport;    /* a's flow port */
	uint32_t dqpn;     /* b's QPN */
	uint32_t epsn;     /* b's expected PSN */
	uint32_t lo;       /* 127.0.0.1, network order */
	uint8_t pay[PAYLEN];
};

static void fx_open(struct fx *f)
{
	struct tv_opts o = tv_opts_default();
	int one = 1;

	memset(f, 0, sizeof(*f));
	f->raw = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	if (f->raw < 0)
		T_SKIP("raw IPv4 socket: %s (needs root / CAP_NET_RAW)", strerror(errno));
	T_EQ_INT(setsockopt(f->raw, IPPROTO_IP, IP_HDRINCL, &one, sizeof(one)), 0);
	o.separate_ctx = 1;
	o.mtu = IBV_MTU_1024;
	tv_pair_open(&f->p, &o);
	tv_buf_alloc(&f->tgt, f->p.b.pd, TGT_LEN, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	tv_buf_alloc(&f->src, f->p.a.pd, TGT_LEN, TV_ACCESS_ALL);
	f->sport = (uint16_t)(f->p.a.qp->qp_num & 0xffff);
	f->dqpn = f->p.b.qp->qp_num;
	f->epsn = f->p.a.psn; /* b's rq_psn is a's sq_psn */
	f->lo = htonl(INADDR_LOOPBACK);
	tv_fill(f->pay, PAYLEN, 0x4057113);
}

static void fx_close(struct fx *f)
{
	close(f->raw);
	tv_buf_free(&f->src);
	tv_buf_free(&f->tgt);
	tv_pair_close(&f->p);
}

/* A valid WRITE_ONLY of the fixture's payload to tgt+HOST_OFF; callers
 * spoil one field. */
static struct hpkt fx_write(const struct fx *f)
{
	struct hpkt h;

	memset(&h, 0, sizeof(h));
	h.opcode = OP_WRITE_ONLY;
	h.pkey = DEFAULT_PKEY;
	h.dqpn = f->dqpn;
	h.psn = f->epsn;
	h.ackreq = 1;
	h.reth = 1;
	h.va = (uintptr_t)f->tgt.p + HOST_OFF;
	h.rkey = f->tgt.mr->rkey;
	h.dma_len = PAYLEN;
	h.pay = f->pay;
	h.paylen = PAYLEN;
	return h;
}

/* Sends udp payload pay[0..len) from saddr:sport to 127.0.0.1:4791 as one
 * IPv4 datagram with DF and the given IP ID (UDP checksum 0: none, as the
 * kernel's rxe sends). */
static void inject_from(const struct fx *f, uint32_t saddr, uint16_t sport, uint16_t id,
			const uint8_t *pay, size_t len)
{
	uint8_t pkt[2048];
	size_t n = 20 + 8 + len;
	struct sockaddr_in dst;
	ssize_t r;

	T_ASSERT(n <= sizeof(pkt));
	memset(pkt, 0, 28);
	pkt[0] = 0x45;
	pkt[2] = (uint8_t)(n >> 8);
	pkt[3] = (uint8_t)n;
	pkt[4] = (uint8_t)(id >> 8);
	pkt[5] = (uint8_t)id;
	pkt[6] = 0x40; /* DF */
	pkt[8] = 64;
	pkt[9] = IPPROTO_UDP;
	memcpy(pkt + 12, &saddr, 4);
	memcpy(pkt + 16, &f->lo, 4);
	pkt[20] = (uint8_t)(sport >> 8);
	pkt[21] = (uint8_t)sport;
	pkt[22] = (uint8_t)(ROCE_V2_PORT >> 8);
	pkt[23] = (uint8_t)ROCE_V2_PORT;
	pkt[24] = (uint8_t)((8 + len) >> 8);
	pkt[25] = (uint8_t)(8 + len);
	if (len)
		memcpy(pkt + 28, pay, len);
	memset(&dst, 0, sizeof(dst));
	dst.sin_family = AF_INET;
	dst.sin_addr.s_addr = f->lo;
	r = sendto(f->raw, pkt, n, 0, (struct sockaddr *)&dst, sizeof(dst));
	T_ASSERTF(r == (ssize_t)n, "raw sendto %zu bytes: %zd (%s)", n, r, strerror(errno));
	tv_msleep(1); /* one datagram at a time */
}

static void inject_raw(const struct fx *f, uint16_t sport, const uint8_t *pay, size_t len)
{
	inject_from(f, f->lo, sport, 0, pay, len);
}

/* Builds h, appends its ICRC (computed for source port sport, then xored
 * with icrc_xor) and injects it from sport. */
static void inject(const struct fx *f, uint16_t sport, const struct hpkt *h, uint32_t icrc_xor)
{
	uint8_t buf[2048];
	size_t n = build_hdr(buf, h);

	put_le32(buf + n, t_icrc(f->lo, f->lo, sport, ROCE_V2_PORT, 0, buf, n) ^ icrc_xor);
	inject_raw(f, sport, buf, n + ICRC_LEN);
}

/* Injected packets leave no completion on b's side to synchronise with:
 * the test sees b's engine write the target memory the way a program sees
 * a NIC's DMA (ib_write_lat polls its buffer so). fx_sync orders what the
 * engine did before it with what the test does after, as a completion
 * would, for TSan too: deregistering an MR runs on each of b's engine
 * threads and waits for them (in any QP state). */
static void fx_sync(const struct fx *f)
{
	static uint8_t scratch[64];
	struct ibv_mr *mr = ibv_reg_mr(f->p.b.pd, scratch, sizeof(scratch), IBV_ACCESS_LOCAL_WRITE);

	T_ASSERT(mr);
	T_EQ_INT(ibv_dereg_mr(mr), 0);
}

/* Up to 2 s for buf[0..n) to hold pattern positions [pos, pos+n) of seed,
 * polled as a DMA target is: the reads race with the engine's writes by
 * design and are hidden from TSan, as a NIC's writes would be; fx_sync
 * after it, then check. */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize_thread, noinline))
#endif
static void dma_wait_pattern(const volatile uint8_t *buf, size_t n, uint64_t seed, size_t pos)
{
	uint8_t want[PAYLEN * 3];
	double t0 = tv_now();
	size_t i;

	if (n > sizeof(want))
		n = sizeof(want);
	tv_fill_at(want, n, seed, pos);
	do {
		for (i = 0; i < n && buf[i] == want[i]; i++)
			;
		if (i == n)
			return;
		tv_msleep(2);
	} while (tv_now() - t0 < 2.0);
}

/* Target memory is still all canary. */
static void fx_untouched(const struct fx *f)
{
	fx_sync(f);
	T_CANARY(f->tgt.p, 0, TGT_LEN);
}

/* The genuine requester still gets a WRITE through at b's expected PSN
 * (so the hostile packets neither consumed a PSN nor wedged the QP). */
static void fx_alive(struct fx *f, uint64_t seed)
{
	tv_fill(f->src.p, PAYLEN, seed);
	T_EQ_INT(tv_post1(f->p.a.qp, IBV_WR_RDMA_WRITE, 77, &f->src, 0, PAYLEN,
			  (uintptr_t)f->tgt.p + LIVE_OFF, f->tgt.mr->rkey, 0, IBV_SEND_SIGNALED),
		 0);
	tv_expect_wc_to(f->p.a.scq, f->p.a.qp, 77, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 10);
	fx_sync(f); /* a's completion came through the network, unseen by TSan */
	T_CANARY(f->tgt.p, 0, LIVE_OFF);
	T_PATTERN(f->tgt.p + LIVE_OFF, PAYLEN, seed, 0);
	T_CANARY(f->tgt.p, LIVE_OFF + PAYLEN, TGT_LEN - LIVE_OFF - PAYLEN);
	T_EQ_INT(tv_qp_state(f->p.b.qp), IBV_QPS_RTS);
}

/* ---- cases --------------------------------------------------------------- */

T_CASE(positive_control_valid_write_is_placed)
{
	struct fx f;
	struct hpkt h;
	uint64_t acks, rec;

	fx_open(&f);
	acks = CNT(SIDE_B, acks_sent);
	rec = CNT(SIDE_B, icrc_id_recovered);
	h = fx_write(&f);
	inject(&f, f.sport, &h, 0);
	dma_wait_pattern(f.tgt.p + HOST_OFF, PAYLEN, 0x4057113, 0);
	fx_sync(&f);
	T_CANARY(f.tgt.p, 0, HOST_OFF);
	T_PATTERN(f.tgt.p + HOST_OFF, PAYLEN, 0x4057113, 0);
	T_CANARY(f.tgt.p, HOST_OFF + PAYLEN, TGT_LEN - HOST_OFF - PAYLEN);
	WAIT_CNT(SIDE_B, acks_sent, acks + 1);
	/* the raw socket sent ID 0 with DF, so no ID recovery was needed */
	T_EQ_INT(CNT(SIDE_B, icrc_id_recovered), rec);
	T_EQ_INT(tv_qp_state(f.p.b.qp), IBV_QPS_RTS);
	fx_close(&f);
}

T_CASE(bad_icrc_dropped)
{
	struct fx f;
	struct hpkt h;
	uint8_t bad[PAYLEN];
	uint64_t c0, r0;
	uint8_t buf[256];
	size_t n;

	fx_open(&f);
	c0 = CNT(SIDE_B, icrc_errors);
	r0 = CNT(SIDE_B, icrc_id_recovered);
	h = fx_write(&f);
	/* ICRC of zero, and every ICRC bit inverted */
	inject(&f, f.sport, &h, 0xffffffffu ^ 0); /* all bits wrong */
	n = build_hdr(buf, &h);
	put_le32(buf + n, 0);
	inject_raw(&f, f.sport, buf, n + ICRC_LEN);
	/* one payload bit flipped after the ICRC was computed */
	n = build_hdr(buf, &h);
	put_le32(buf + n, t_icrc(f.lo, f.lo, f.sport, ROCE_V2_PORT, 0, buf, n));
	buf[BTH_LEN + RETH_LEN + 5] ^= 0x10;
	inject_raw(&f, f.sport, buf, n + ICRC_LEN);
	/* the right ICRC for another payload than the one carried */
	memcpy(bad, f.pay, PAYLEN);
	bad[0] ^= 1;
	n = build_hdr(buf, &h);
	{
		uint8_t other[256];
		struct hpkt h2 = h;

		h2.pay = bad;
		build_hdr(other, &h2);
		put_le32(buf + n, t_icrc(f.lo, f.lo, f.sport, ROCE_V2_PORT, 0, other, n));
	}
	inject_raw(&f, f.sport, buf, n + ICRC_LEN);
	/* a valid ICRC, but computed for another source port than the one
	 * the packet comes from */
	{
		n = build_hdr(buf, &h);
		put_le32(buf + n,
			 t_icrc(f.lo, f.lo, (uint16_t)(f.sport ^ 1), ROCE_V2_PORT, 0, buf, n));
		inject_raw(&f, f.sport, buf, n + ICRC_LEN);
	}
	WAIT_CNT(SIDE_B, icrc_errors, c0 + 5);
	tv_msleep(50);
	T_EQ_INT(CNT(SIDE_B, icrc_errors), c0 + 5);
	T_EQ_INT(CNT(SIDE_B, icrc_id_recovered), r0);
	fx_untouched(&f);
	fx_alive(&f, 101);
	fx_close(&f);
}

T_CASE(truncated_dropped_as_malformed)
{
	struct fx f;
	struct hpkt h;
	uint8_t buf[256];
	size_t n;
	uint64_t m0, rx0;

	fx_open(&f);
	m0 = CNT(SIDE_B, drop_malformed);
	h = fx_write(&f);
	n = build_hdr(buf, &h);
	/* 1, 8 and 15 bytes: shorter than BTH + ICRC (16) */
	inject_raw(&f, f.sport, buf, 1);
	inject_raw(&f, f.sport, buf, 8);
	inject_raw(&f, f.sport, buf, BTH_LEN + ICRC_LEN - 1);
	/* exactly BTH + ICRC, but a WRITE_ONLY needs its RETH */
	put_le32(buf + BTH_LEN, t_icrc(f.lo, f.lo, f.sport, ROCE_V2_PORT, 0, buf, BTH_LEN));
	inject_raw(&f, f.sport, buf, BTH_LEN + ICRC_LEN);
	/* half a RETH, with a valid ICRC over what is there */
	n = build_hdr(buf, &h);
	put_le32(buf + BTH_LEN + 8,
		 t_icrc(f.lo, f.lo, f.sport, ROCE_V2_PORT, 0, buf, BTH_LEN + 8));
	inject_raw(&f, f.sport, buf, BTH_LEN + 8 + ICRC_LEN);
	/* BTH + RETH with no room left for the ICRC */
	n = build_hdr(buf, &h);
	inject_raw(&f, f.sport, buf, BTH_LEN + RETH_LEN);
	/* BTH + RETH + ICRC - 1 */
	inject_raw(&f, f.sport, buf, BTH_LEN + RETH_LEN + ICRC_LEN - 1);
	WAIT_CNT(SIDE_B, drop_malformed, m0 + 7);
	/* an empty UDP datagram: nothing to parse; must not be delivered or wedge */
	rx0 = CNT(SIDE_B, rx_pkts);
	inject_raw(&f, f.sport, buf, 0);
	tv_msleep(50);
	t_log("empty datagram: drop_malformed %+lld, rx_pkts %+lld",
	      (long long)(CNT(SIDE_B, drop_malformed) - (m0 + 7)),
	      (long long)(CNT(SIDE_B, rx_pkts) - rx0));
	T_LE_INT(CNT(SIDE_B, drop_malformed), m0 + 8);
	fx_untouched(&f);
	fx_alive(&f, 102);
	(void)n;
	fx_close(&f);
}

T_CASE(wrong_dest_qpn_dropped)
{
	struct fx f;
	struct hpkt h;
	uint64_t q0, w0, m0;

	fx_open(&f);
	/* Injected from a's flow port, they reach b's flow socket; b drops
	 * each or, when its DestQP names another engine's slot, forwards it
	 * to that engine's mailbox (whoever holds the slot drops it). */
	q0 = CNT(SIDE_B, drop_bad_qpn);
	w0 = CNT(SIDE_B, rx_fwd_out);
	m0 = CNT(SIDE_B, fwd_failed);
	h = fx_write(&f);
	/* same flow port, another slot (a restarted peer's stale QPN) */
	h.dqpn = f.dqpn ^ 0x010000;
	inject(&f, f.sport, &h, 0);
	/* b's slot, a port no QP of b has */
	h.dqpn = f.dqpn ^ 0x0001;
	inject(&f, f.sport, &h, 0);
	/* QP 1 (GSI) and 0xffffff (multicast QPN): never forwarded */
	h.dqpn = 1;
	inject(&f, f.sport, &h, 0);
	h.dqpn = 0xffffff;
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, drop_bad_qpn, q0 + 3);
	tv_msleep(20);
	T_EQ_INT(CNT(SIDE_B, drop_bad_qpn) - q0 + CNT(SIDE_B, rx_fwd_out) - w0 +
			 CNT(SIDE_B, fwd_failed) - m0,
		 4);
	fx_untouched(&f);
	fx_alive(&f, 103);
	fx_close(&f);
}

T_CASE(wrong_pkey_dropped)
{
	struct fx f;
	struct hpkt h;
	uint64_t k0;

	fx_open(&f);
	k0 = CNT(SIDE_B, drop_pkey);
	h = fx_write(&f);
	h.pkey = 0x1234; /* another partition, limited member */
	inject(&f, f.sport, &h, 0);
	h.pkey = 0x8001; /* another partition, full member */
	inject(&f, f.sport, &h, 0);
	h.pkey = 0x0000; /* invalid P_Key */
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, drop_pkey, k0 + 3);
	tv_msleep(20);
	T_EQ_INT(CNT(SIDE_B, drop_pkey), k0 + 3);
	fx_untouched(&f);
	fx_alive(&f, 104);
	fx_close(&f);
}

T_CASE(psn_far_ahead_naked_not_placed)
{
	struct fx f;
	struct hpkt h;
	uint64_t n0;

	setenv("UROCE_RETRANS", "gbn", 1); /* selective repeat: the next case */
	fx_open(&f);
	n0 = CNT(SIDE_B, seq_naks_sent);
	h = fx_write(&f);
	h.psn = psn_add(f.epsn, 1000);
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, seq_naks_sent, n0 + 1);
	/* the same gap again: one NAK per gap (C9-110) */
	h.psn = psn_add(f.epsn, 5);
	inject(&f, f.sport, &h, 0);
	/* the furthest ahead a 24-bit PSN can be */
	h.psn = psn_add(f.epsn, 0x7fffff);
	inject(&f, f.sport, &h, 0);
	tv_msleep(50);
	T_EQ_INT(CNT(SIDE_B, seq_naks_sent), n0 + 1);
	fx_untouched(&f);
	fx_alive(&f, 105);
	fx_close(&f);
}

/* Selective repeat: a valid WRITE ahead of ePSN inside the window is
 * placed at once and SACKed (that is the point: IRN-style responders
 * accept the connected peer's packets anywhere in the window); one with a
 * wrong rkey, or beyond the window, is not placed; the QP goes on. */
T_CASE(sr_ahead_placed_in_window_only)
{
	struct fx f;
	struct hpkt h;
	uint64_t s0, a0;

	setenv("UROCE_RETRANS", "sr", 1);
	fx_open(&f);
	s0 = CNT(SIDE_B, sr_sacks_sent);
	a0 = CNT(SIDE_B, sr_placed_ahead);
	h = fx_write(&f);
	h.psn = psn_add(f.epsn, 1000);
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, sr_sacks_sent, s0 + 1);
	T_EQ_INT(CNT(SIDE_B, sr_placed_ahead), a0 + 1);
	fx_sync(&f);
	T_ASSERTF(!memcmp(f.tgt.p + HOST_OFF, f.pay, PAYLEN), "WRITE 1000 ahead not placed");
	/* restore the canary, then: wrong rkey, beyond the window, far ahead */
	tv_canary(f.tgt.p, TGT_LEN);
	h.psn = psn_add(f.epsn, 1001);
	h.rkey ^= 0x5a5a0000;
	inject(&f, f.sport, &h, 0);
	h.rkey = f.tgt.mr->rkey;
	h.psn = psn_add(f.epsn, 4096);
	inject(&f, f.sport, &h, 0);
	h.psn = psn_add(f.epsn, 0x7fffff);
	inject(&f, f.sport, &h, 0);
	tv_msleep(50);
	T_EQ_INT(CNT(SIDE_B, sr_placed_ahead), a0 + 1);
	fx_untouched(&f);
	fx_alive(&f, 107);
	fx_close(&f);
}

T_CASE(psn_far_behind_is_duplicate_not_placed)
{
	struct fx f;
	struct hpkt h;
	uint64_t d0;

	fx_open(&f);
	d0 = CNT(SIDE_B, dup_requests);
	h = fx_write(&f);
	h.psn = psn_add(f.epsn, PSN_MASK + 1 - 1000); /* 1000 behind */
	inject(&f, f.sport, &h, 0);
	h.psn = psn_add(f.epsn, PSN_MASK); /* 1 behind */
	inject(&f, f.sport, &h, 0);
	h.psn = psn_add(f.epsn, 0x800000); /* half the space: behind */
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, dup_requests, d0 + 3);
	tv_msleep(50);
	fx_untouched(&f);
	fx_alive(&f, 106);
	fx_close(&f);
}

/* A foreign RoCEv2 peer (the kernel's rxe, a NIC) sends from a source port
 * of its own choosing, with incrementing IP IDs and UDP checksum 0. Such a
 * packet reaches b from any port (through whichever engine's port socket
 * the kernel picks, forwarded if need be); a corrupted one does not, nor
 * one from an address that is not b's peer. */
T_CASE(foreign_source_port_delivered)
{
	struct fx f;
	struct hpkt h;
	uint8_t buf[2048];
	uint64_t rec, bad, qb;
	size_t n;
	uint32_t other;
	uint16_t ports[3];

	fx_open(&f);
	ports[0] = (uint16_t)(f.sport ^ 1);
	ports[1] = 0xc123;
	ports[2] = ROCE_V2_PORT;
	rec = CNT(SIDE_B, icrc_id_recovered);
	bad = CNT(SIDE_B, icrc_errors);
	qb = CNT(SIDE_B, drop_bad_qpn);
	h = fx_write(&f);
	/* corrupted (one payload bit) from a foreign port, ID 0x4242: dropped */
	n = build_hdr(buf, &h);
	put_le32(buf + n, t_icrc(f.lo, f.lo, 0xc123, ROCE_V2_PORT, 0x4242, buf, n));
	buf[n - 3] ^= 0x10;
	inject_from(&f, f.lo, 0xc123, 0x4242, buf, n + ICRC_LEN);
	WAIT_CNT(SIDE_B, icrc_errors, bad + 1);
	/* from another address of this host: not b's peer */
	other = htonl(INADDR_LOOPBACK + 1);
	n = build_hdr(buf, &h);
	put_le32(buf + n, t_icrc(other, f.lo, 0xc123, ROCE_V2_PORT, 7, buf, n));
	inject_from(&f, other, 0xc123, 7, buf, n + ICRC_LEN);
	WAIT_CNT(SIDE_B, drop_bad_qpn, qb + 1);
	tv_msleep(20);
	fx_untouched(&f);
	/* then genuine ones from three foreign ports, IDs counting up */
	for (int i = 0; i < 3; i++) {
		h.psn = psn_add(f.epsn, (uint32_t)i);
		h.va = (uintptr_t)f.tgt.p + HOST_OFF + (uint64_t)i * PAYLEN;
		n = build_hdr(buf, &h);
		put_le32(buf + n, t_icrc(f.lo, f.lo, ports[i], ROCE_V2_PORT, (uint16_t)(0x100 + i),
					 buf, n));
		inject_from(&f, f.lo, ports[i], (uint16_t)(0x100 + i), buf, n + ICRC_LEN);
	}
	dma_wait_pattern(f.tgt.p + HOST_OFF + 2 * PAYLEN, PAYLEN, 0x4057113, 0);
	fx_sync(&f);
	for (int i = 0; i < 3; i++)
		T_PATTERN(f.tgt.p + HOST_OFF + (size_t)i * PAYLEN, PAYLEN, 0x4057113, 0);
	T_EQ_INT(CNT(SIDE_B, icrc_id_recovered), rec + 3);
	T_EQ_INT(CNT(SIDE_B, icrc_errors), bad + 1);
	T_CANARY(f.tgt.p, HOST_OFF + 3 * PAYLEN, TGT_LEN - HOST_OFF - 3 * PAYLEN);
	T_EQ_INT(tv_qp_state(f.p.b.qp), IBV_QPS_RTS);
	fx_close(&f);
}

/* A forged NAK (remote access error) from b's flow port to a, for a PSN
 * far outside a's outstanding window (a has sent nothing): a ghost
 * response, which the requester must drop (IBA 9.7.5.1: only responses
 * to outstanding requests count); it must not fail the QP. */
T_CASE(ghost_nak_ignored_by_requester)
{
	struct fx f;
	struct hpkt h;
	uint8_t aeth[AETH_LEN] = { AETH_NAK | NAK_REM_ACCESS_ERR, 0, 0, 0 };
	uint64_t rx0;

	fx_open(&f);
	rx0 = CNT(SIDE_A, rx_pkts);
	memset(&h, 0, sizeof(h));
	h.opcode = OP_ACK;
	h.pkey = DEFAULT_PKEY;
	h.dqpn = f.p.a.qp->qp_num;
	h.psn = psn_add(f.p.a.psn, 1000);
	h.pay = aeth; /* the AETH, right after the BTH */
	h.paylen = AETH_LEN;
	inject(&f, (uint16_t)(f.p.b.qp->qp_num & 0xffff), &h, 0);
	WAIT_CNT(SIDE_A, rx_pkts, rx0 + 1);
	tv_msleep(50);
	T_EQ_INT(tv_qp_state(f.p.a.qp), IBV_QPS_RTS);
	fx_alive(&f, 108);
	fx_close(&f);
}

/* Injects a READ of len bytes at va wholly behind b's ePSN (a duplicate,
 * which b executes again: C9-104) and returns once its responses stream
 * to a. */
static void dup_read_streaming(struct fx *f, uint64_t va, uint32_t rkey, uint32_t len)
{
	uint64_t d0 = CNT(SIDE_B, dup_requests), r0 = CNT(SIDE_A, rx_pkts);
	struct hpkt h;

	memset(&h, 0, sizeof(h));
	h.opcode = OP_READ_REQ;
	h.pkey = DEFAULT_PKEY;
	h.dqpn = f->dqpn;
	h.psn = psn_add(f->epsn, PSN_MASK + 1 - len / 1024 - 8);
	h.ackreq = 1;
	h.reth = 1;
	h.va = va;
	h.rkey = rkey;
	h.dma_len = len;
	inject(f, f->sport, &h, 0);
	WAIT_CNT(SIDE_B, dup_requests, d0 + 1);
	WAIT_CNT(SIDE_A, rx_pkts, r0 + 2);
}

/* A duplicate READ is executed again (C9-104). If its MR is deregistered
 * while those responses still stream, the responder abandons them and
 * the QP stays in RTS: the requester had asked too early and completed
 * the READ from the first responses, and its application freed the
 * buffer (UCX's rendezvous: the sender frees after the ATS). Failing the
 * QP flushed a healthy MPI connection (CI of 2026-12-07, mpi/c-np8). The
 * 100 Mb/s pacing keeps the 1 MiB of responses streaming (84 ms) while
 * the MR goes. */
T_CASE(dup_read_mr_gone_abandoned)
{
	const uint32_t len = 1u << 20;
	struct tv_buf big;
	struct fx f;
	uint64_t a0;

	setenv("UROCE_CC_RATE_GBPS", "0.1", 1);
	fx_open(&f);
	tv_buf_alloc(&big, f.p.b.pd, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	a0 = CNT(SIDE_B, read_resp_abandoned);
	dup_read_streaming(&f, (uintptr_t)big.p, big.mr->rkey, len);
	T_EQ_INT(ibv_dereg_mr(big.mr), 0);
	big.mr = NULL;
	WAIT_CNT(SIDE_B, read_resp_abandoned, a0 + 1);
	T_EQ_INT(tv_qp_state(f.p.b.qp), IBV_QPS_RTS);
	T_EQ_INT(tv_qp_state(f.p.a.qp), IBV_QPS_RTS);
	fx_alive(&f, 109);
	tv_buf_free(&big);
	fx_close(&f);
}

/* The same, but the buffer is unmapped while its MR stays registered
 * (UCX's registration cache deregisters after the munmap it hooks; a
 * NIC would go on reading the pinned pages). The re-executed READ must
 * not touch the unmapped range (it killed the process with SIGSEGV in
 * the ICRC: CI of 2026-12-07, mpi/loss-c-np2); it is abandoned and
 * both QPs stay in RTS. */
T_CASE(dup_read_unmapped_abandoned)
{
	const uint32_t len = 1u << 20;
	struct ibv_mr *mr;
	struct fx f;
	uint64_t a0;
	void *p;

	setenv("UROCE_CC_RATE_GBPS", "0.1", 1);
	fx_open(&f);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	T_ASSERT(p != MAP_FAILED);
	memset(p, 0x5a, len);
	mr = ibv_reg_mr(f.p.b.pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	T_ASSERT(mr);
	a0 = CNT(SIDE_B, read_resp_abandoned);
	dup_read_streaming(&f, (uintptr_t)p, mr->rkey, len);
	T_EQ_INT(munmap(p, len), 0);
	WAIT_CNT(SIDE_B, read_resp_abandoned, a0 + 1);
	T_EQ_INT(tv_qp_state(f.p.b.qp), IBV_QPS_RTS);
	T_EQ_INT(tv_qp_state(f.p.a.qp), IBV_QPS_RTS);
	T_EQ_INT(ibv_dereg_mr(mr), 0);
	fx_alive(&f, 110);
	fx_close(&f);
}

/* Last of all: positive control, then a wrong rkey at the next PSN. */
T_CASE(wrong_rkey_access_error_last)
{
	struct fx f;
	struct hpkt h;
	uint64_t e0, ea0;
	double t0;

	fx_open(&f);
	h = fx_write(&f);
	inject(&f, f.sport, &h, 0);
	dma_wait_pattern(f.tgt.p + HOST_OFF, PAYLEN, 0x4057113, 0);
	fx_sync(&f);
	T_PATTERN(f.tgt.p + HOST_OFF, PAYLEN, 0x4057113, 0);
	/* put the canary back so the next check covers the whole buffer */
	tv_fill_at(f.tgt.p + HOST_OFF, PAYLEN, TV_CANARY, HOST_OFF);

	e0 = CNT(SIDE_B, rem_access_errs);
	ea0 = CNT(SIDE_A, rem_access_errs);
	h = fx_write(&f);
	h.psn = psn_add(f.epsn, 1); /* the control consumed one PSN */
	h.rkey = f.tgt.mr->rkey ^ 0x5a5a0000u;
	inject(&f, f.sport, &h, 0);
	WAIT_CNT(SIDE_B, rem_access_errs, e0 + 1);
	tv_msleep(50);
	fx_untouched(&f);
	/* IBA: an access violation at the responder moves its QP to ERROR */
	t0 = tv_now();
	while (tv_qp_state(f.p.b.qp) != IBV_QPS_ERR && tv_now() - t0 < 2.0)
		tv_msleep(2);
	T_EQ_INT(tv_qp_state(f.p.b.qp), IBV_QPS_ERR);
	{
		/* the application sees the state the engine moved it to: an
		 * RTS -> RTS modify no longer applies, and the QP's own
		 * min_rnr_timer with IBV_QP_CUR_STATE RTS is refused too */
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		T_EQ_INT(ibv_query_qp(f.p.b.qp, &a, IBV_QP_MIN_RNR_TIMER, &ia), 0);
		T_EQ_INT(a.qp_state, IBV_QPS_ERR);
		T_EQ_INT(ibv_modify_qp(f.p.b.qp, &a, IBV_QP_MIN_RNR_TIMER), EINVAL);
		a.cur_qp_state = IBV_QPS_RTS;
		T_EQ_INT(ibv_modify_qp(f.p.b.qp, &a, IBV_QP_CUR_STATE), EINVAL);
		a.cur_qp_state = IBV_QPS_ERR;
		a.qp_state = IBV_QPS_ERR;
		T_EQ_INT(ibv_modify_qp(f.p.b.qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
	}
	t_log("requester side: rem_access_errs %+lld (unsolicited NAK), state %d",
	      (long long)(CNT(SIDE_A, rem_access_errs) - ea0), (int)tv_qp_state(f.p.a.qp));
	/* a right-key WRITE after that is not placed either */
	h = fx_write(&f);
	h.psn = psn_add(f.epsn, 2);
	inject(&f, f.sport, &h, 0);
	h.psn = psn_add(f.epsn, 1);
	inject(&f, f.sport, &h, 0);
	tv_msleep(50);
	fx_untouched(&f);
	fx_close(&f);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
