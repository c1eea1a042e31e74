/* uroce demo: perftest-style tables.
 *   bandwidth: RDMA WRITE client -> server, 2 B .. max size, up to 128 WRs
 *              outstanding, every 16th signaled (like ib_write_bw).
 *   latency:   SEND/RECV ping-pong 2 B .. 4 KiB, half round trip (like
 *              ib_send_lat). */
#include "demo.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BW_MAX_ITERS 5000         /* perftest ib_write_bw default */
#define BW_MIN_ITERS 32
#define BW_BUDGET_NS 200000000ull /* default iterations: ~0.2 s per size */
#define LAT_MAX_ITERS 1000        /* perftest ib_send_lat default */
#define LAT_MIN_ITERS 100
#define LAT_WARMUP 50
#define LAT_BUDGET_NS 150000000ull
#define LAT_RQ_PREPOST 64
#define SOCK_WAIT_MS 30000

static const char dashes[] =
	"---------------------------------------------------------------------------------------";

static long clampl(long v, long lo, long hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

/* ---- bandwidth ---- */

/* Posts n RDMA WRITEs of size bytes; tpost/tcomp (may be NULL) get per-WR
 * post and completion times. Returns the elapsed ns, or 0 on error. */
static uint64_t bw_run(struct demo *d, uint64_t size, long n, uint64_t *tpost, uint64_t *tcomp)
{
	long tx_depth = DEMO_TX_DEPTH < (long)d->sq_depth ? DEMO_TX_DEPTH : (long)d->sq_depth;
	long posted = 0, done = 0, k;
	uint64_t t_start = demo_now_ns(), last = t_start, now;
	unsigned spins = 0;

	while (done < n) {
		struct ibv_wc wc[16];
		int r, i;

		while (posted < n && posted - done < tx_depth) {
			unsigned flags = 0;

			if (posted % DEMO_CQ_MOD == DEMO_CQ_MOD - 1 || posted == n - 1)
				flags |= IBV_SEND_SIGNALED;
			if (size <= d->max_inline)
				flags |= IBV_SEND_INLINE;
			if (tpost)
				tpost[posted] = demo_now_ns();
			if (demo_post_send(d, IBV_WR_RDMA_WRITE, 0, size, 0, 0, flags, (uint64_t)posted))
				return 0;
			posted++;
		}
		r = ibv_poll_cq(d->scq, 16, wc);
		if (r < 0) {
			demo_err(d, "bandwidth: ibv_poll_cq failed (%d)", r);
			return 0;
		}
		if (r > 0) {
			now = demo_now_ns();
			for (i = 0; i < r; i++) {
				long idx = (long)wc[i].wr_id;

				if (wc[i].status != IBV_WC_SUCCESS) {
					demo_err(d, "bandwidth: RDMA_WRITE %" PRIu64 " bytes: completion with error: %s "
						 "(status %d, vendor_err 0x%x, wr_id %ld)", size,
						 ibv_wc_status_str(wc[i].status), wc[i].status, wc[i].vendor_err, idx);
					return 0;
				}
				if (idx < done || idx >= posted) {
					demo_err(d, "bandwidth: completion for wr_id %ld, expected %ld .. %ld",
						 idx, done, posted - 1);
					return 0;
				}
				if (tcomp)
					for (k = done; k <= idx; k++)
						tcomp[k] = now;
				done = idx + 1;
			}
			last = now;
			spins = 0;
			continue;
		}
		if (++spins % DEMO_YIELD_SPINS == 0) {
			if (demo_now_ns() - last > DEMO_CQ_TIMEOUT_MS * 1000000ull) {
				demo_err(d, "bandwidth: RDMA_WRITE %" PRIu64 " bytes: timed out after %d ms "
					 "without a completion (%ld of %ld done)", size, DEMO_CQ_TIMEOUT_MS, done, n);
				return 0;
			}
			sched_yield();
		}
	}
	now = demo_now_ns();
	return now > t_start ? now - t_start : 1;
}

/* Peak as perftest: the best average time per message between posting WR i
 * and completing WR j, over i at signal boundaries and j at completions. */
static double bw_peak_gbps(uint64_t size, long n, const uint64_t *tpost, const uint64_t *tcomp)
{
	long pts = n / DEMO_CQ_MOD + 1;
	long stride = DEMO_CQ_MOD * (pts > 1000 ? (pts + 999) / 1000 : 1);
	double best = 0;
	long i, j;

	for (i = 0; i < n; i += stride) {
		for (j = ((i + 1 + DEMO_CQ_MOD - 1) / DEMO_CQ_MOD) * DEMO_CQ_MOD - 1;; j += stride) {
			double t;

			if (j >= n)
				j = n - 1;
			if (tcomp[j] > tpost[i]) {
				t = (double)(tcomp[j] - tpost[i]) / (double)(j - i + 1);
				if (best == 0 || t < best)
					best = t;
			}
			if (j == n - 1)
				break;
		}
	}
	return best > 0 ? (double)size * 8.0 / best : 0.0;
}

int demo_bw_table(struct demo *d, uint64_t max_size, long iters)
{
	uint64_t size;

	printf("\nRDMA_WRITE bandwidth (client -> server, %d WRs outstanding, every %dth signaled)\n",
	       DEMO_TX_DEPTH < (int)d->sq_depth ? DEMO_TX_DEPTH : (int)d->sq_depth, DEMO_CQ_MOD);
	printf("%s\n", dashes);
	printf(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n");
	for (size = 2; size <= max_size; size *= 2) {
		struct demo_msg m, r;
		long warm = clampl((long)((2u << 20) / size), 16, 256), n;
		uint64_t *tpost, *tcomp, ns, wns;
		double avg, rate, peak;

		memset(&m, 0, sizeof(m));
		m.type = M_BW;
		m.a = size;
		if (demo_request(d, &m, &r, SOCK_WAIT_MS))
			return -1;
		wns = bw_run(d, size, warm, NULL, NULL);
		if (!wns)
			return -1;
		if (iters)
			n = iters;
		else
			n = clampl((long)(BW_BUDGET_NS * (uint64_t)warm / wns), BW_MIN_ITERS, BW_MAX_ITERS);
		tpost = malloc((size_t)n * sizeof(*tpost));
		tcomp = malloc((size_t)n * sizeof(*tcomp));
		if (!tpost || !tcomp) {
			free(tpost);
			free(tcomp);
			demo_err(d, "bandwidth: out of memory for %ld iterations", n);
			return -1;
		}
		ns = bw_run(d, size, n, tpost, tcomp);
		if (!ns) {
			free(tpost);
			free(tcomp);
			return -1;
		}
		ns = tcomp[n - 1] > tpost[0] ? tcomp[n - 1] - tpost[0] : 1;
		avg = (double)size * (double)n * 8.0 / (double)ns;
		rate = (double)n * 1e3 / (double)ns;
		peak = bw_peak_gbps(size, n, tpost, tcomp);
		printf(" %-10" PRIu64 " %-14ld %-18.2f %-20.2f %.6f\n", size, n, peak, avg, rate);
		free(tpost);
		free(tcomp);
	}
	printf("%s\n", dashes);
	return 0;
}

/* ---- latency ---- */

static int lat_recv_one(struct demo *d, uint64_t size, const char *what)
{
	struct ibv_wc wc;

	if (demo_wait_cq(d, d->rcq, 1, &wc, what))
		return -1;
	if (wc.opcode != IBV_WC_RECV || wc.byte_len != size) {
		demo_err(d, "%s: completion opcode %d byte_len %u, want RECV of %" PRIu64 " bytes",
			 what, wc.opcode, wc.byte_len, size);
		return -1;
	}
	return 0;
}

/* One side of the ping-pong: n iterations. samples (client only, may be
 * NULL) get round-trip times in ns. The server sends its "ready" reply
 * after pre-posting its receives. */
static int lat_loop(struct demo *d, uint64_t size, long n, uint64_t *samples)
{
	long rposted = 0, pre = n < LAT_RQ_PREPOST ? n : LAT_RQ_PREPOST, i;
	long out = 0, out_max = (long)d->sq_depth / 2;
	unsigned flags = IBV_SEND_SIGNALED | (size <= d->max_inline ? IBV_SEND_INLINE : 0);
	const char *what = d->is_client ? "latency: client RECV" : "latency: server RECV";
	int r;

	if (pre > (long)d->rq_depth)
		pre = (long)d->rq_depth;
	if (out_max < 1)
		out_max = 1;
	for (; rposted < pre; rposted++)
		if (demo_post_recv(d, d->lat_rx_off, size, (uint64_t)rposted))
			return -1;

	if (d->is_client) {
		struct demo_msg m, rep;

		memset(&m, 0, sizeof(m));
		m.type = M_LAT;
		m.a = size;
		m.b = (uint64_t)n;
		if (demo_request(d, &m, &rep, SOCK_WAIT_MS))
			return -2;  /* no second reply will come */
	} else {
		struct demo_msg rep;

		memset(&rep, 0, sizeof(rep));
		rep.type = M_REPLY;
		snprintf(rep.text, sizeof(rep.text), "ready");
		if (demo_send_msg(d, &rep))
			return -1;
	}

	for (i = 0; i < n; i++) {
		uint64_t t0 = 0;

		if (d->is_client) {
			t0 = demo_now_ns();
			if (demo_post_send(d, IBV_WR_SEND, d->lat_tx_off, size, 0, 0, flags, (uint64_t)i))
				return -1;
			out++;
		}
		if (lat_recv_one(d, size, what))
			return -1;
		if (samples)
			samples[i] = demo_now_ns() - t0;
		if (rposted < n) {
			if (demo_post_recv(d, d->lat_rx_off, size, (uint64_t)rposted))
				return -1;
			rposted++;
		}
		if (!d->is_client) {
			if (demo_post_send(d, IBV_WR_SEND, d->lat_tx_off, size, 0, 0, flags, (uint64_t)i))
				return -1;
			out++;
		}
		r = demo_reap_cq(d, d->scq, 16, "latency: SEND");
		if (r < 0)
			return -1;
		out -= r;
		if (out >= out_max) {
			if (demo_wait_cq(d, d->scq, 1, NULL, "latency: SEND"))
				return -1;
			out--;
		}
	}
	if (out > 0 && demo_wait_cq(d, d->scq, (int)out, NULL, "latency: SEND"))
		return -1;
	return 0;
}

int demo_lat_serve(struct demo *d, uint64_t size, long iters)
{
	return lat_loop(d, size, iters, NULL) ? -1 : 0;
}

/* Client: one ping-pong run of n iterations, then the server's final reply. */
static int lat_run(struct demo *d, uint64_t size, long n, uint64_t *samples)
{
	struct demo_msg rep;
	char err[sizeof(d->err)];
	int rc = lat_loop(d, size, n, samples);

	if (rc == -2)
		return -1;
	if (rc) {
		/* The server answers once more when its loop ends (here after
		 * its own timeout); read that answer, keep our error. */
		memcpy(err, d->err, sizeof(err));
		demo_recv_msg(d, &rep, DEMO_CQ_TIMEOUT_MS + 5000);
		memcpy(d->err, err, sizeof(err));
		return -1;
	}
	if (demo_recv_msg(d, &rep, SOCK_WAIT_MS))
		return -1;
	if (rep.status < 0) {
		demo_err(d, "server: %s", rep.text);
		return -1;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double pct(const uint64_t *s, long n, double p)
{
	long k = (long)ceil(p * (double)n) - 1;

	return (double)s[clampl(k, 0, n - 1)];
}

int demo_lat_table(struct demo *d, uint64_t max_size, long iters)
{
	uint64_t size, top = max_size < DEMO_LAT_MAX ? max_size : DEMO_LAT_MAX;

	printf("\nSEND/RECV latency (ping-pong, half round trip)\n");
	printf("%s\n", dashes);
	printf(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]"
	       "    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n");
	for (size = 2; size <= top; size *= 2) {
		long warm = iters && iters < LAT_WARMUP ? iters : LAT_WARMUP, n, i;
		uint64_t *s, wns, t0;
		double sum = 0, var = 0, avg;

		s = malloc((size_t)(iters > warm ? iters : LAT_MAX_ITERS > warm ? LAT_MAX_ITERS : warm) *
			   sizeof(*s));
		if (!s) {
			demo_err(d, "latency: out of memory");
			return -1;
		}
		t0 = demo_now_ns();
		if (lat_run(d, size, warm, s)) {
			free(s);
			return -1;
		}
		wns = demo_now_ns() - t0;
		if (iters)
			n = iters;
		else
			n = clampl((long)(LAT_BUDGET_NS * (uint64_t)warm / (wns ? wns : 1)),
				   LAT_MIN_ITERS, LAT_MAX_ITERS);
		if (lat_run(d, size, n, s)) {
			free(s);
			return -1;
		}
		qsort(s, (size_t)n, sizeof(*s), cmp_u64);
		for (i = 0; i < n; i++)
			sum += (double)s[i];
		avg = sum / (double)n;
		for (i = 0; i < n; i++)
			var += ((double)s[i] - avg) * ((double)s[i] - avg);
		var /= (double)n;
		/* ns round trip -> usec one way */
		printf(" %-6" PRIu64 " %-14ld %-14.2f %-12.2f %-18.2f %-14.2f %-15.2f %-22.2f %.2f\n",
		       size, n, (double)s[0] / 2000.0, (double)s[n - 1] / 2000.0,
		       (double)s[n / 2] / 2000.0, avg / 2000.0, sqrt(var) / 2000.0,
		       pct(s, n, 0.99) / 2000.0, pct(s, n, 0.999) / 2000.0);
		free(s);
	}
	printf("%s\n", dashes);
	return 0;
}
