/* The all-reduce model (model.h, docs/model.md).
 *
 * Every algorithm is a number of message steps (each costing alpha) plus
 * bytes over the slowest of the resources they cross (beta = 1/bandwidth):
 *
 *   ring  over p = N x G ranks: 2(p-1) steps of S/p; every node sends and
 *         receives 2(p-1)/p x S through its NICs (the ring enters and leaves
 *         each node once per ring; K rings, one per NIC).
 *   tree  NCCL-style double binary tree between nodes, chain inside: about
 *         2 log2(N) steps up and down, 2(N-1)/N x S per node on average.
 *   hier  reduce-scatter inside the node over NVLink (S/G per GPU), an
 *         all-reduce of S/G across the N nodes on each GPU's rail, then an
 *         all-gather inside the node: the network carries the same
 *         2(N-1)/N x S per node, in 2(N-1) steps instead of 2(NG-1).
 *
 * Without GPUDirect every byte that crosses the network is staged through
 * host memory: a GPU-to-host copy before sending and a host-to-GPU copy
 * after receiving, over the GPU's PCIe link, and it passes through DRAM. */
#include "model.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const model_transport_name[MT_COUNT] = { "tcp", "roce", "gdr" };
const char *const model_transport_title[MT_COUNT] = { "TCP", "RoCEv2", "RDMA+GDR" };
const char *const model_algo_name[MA_COUNT] = { "ring", "tree", "hier" };

double model_ring_factor(double n)
{
	return n > 0 ? 2.0 * (n - 1.0) / n : 0.0;
}

double model_busbw(double algbw, double ranks)
{
	return algbw * model_ring_factor(ranks);
}

int model_log2_ceil(long n)
{
	int k = 0;

	while (n > 1 && (1L << k) < n)
		k++;
	return k;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

/* The bandwidth-bound part of a network phase: the network, the staging
 * copies and DRAM run at once (pipelined) or, without overlap, the copies
 * come before and after the sends. */
static double phase_bw(const struct model_in *in, double net, double stage, double mem, double nvl)
{
	double t = in->overlap ? max2(net, stage) : net + stage;

	return max2(max2(t, mem), nvl);
}

int model_allreduce(const struct model_in *in, const struct model_calib *c, enum model_transport t,
		    enum model_algo a, struct model_out *o)
{
	const struct model_tp *tp;
	double N, G, p, S, node_bw, nvl_bw, copy_bw, alpha, alpha_nvl, stagers;
	struct model_out r;

	if ((unsigned)t >= MT_COUNT || (unsigned)a >= MA_COUNT || in->nodes < 1 || in->gpus < 1 ||
	    in->nics < 1 || !(in->bytes > 0) || !(in->nic_gbps > 0) || !(in->nvlink_gbps > 0))
		return -1;
	tp = &c->tp[t];
	if (!(tp->eff > 0) || tp->eff > 1 || tp->alpha_us < 0 || tp->copies < 0)
		return -1;
	memset(&r, 0, sizeof(r));
	N = in->nodes;
	G = in->gpus;
	p = N * G;
	S = in->bytes;
	node_bw = in->nics * in->nic_gbps * 1e9 / 8 * tp->eff;
	nvl_bw = in->nvlink_gbps * 1e9 / 8;
	copy_bw = (c->d2h_gbs < c->h2d_gbs ? c->d2h_gbs : c->h2d_gbs) * 1e9;
	/* a step waits for the NICs and, when staged, for a copy at each end */
	alpha = (tp->alpha_us + 2 * tp->copies * c->copy_us) * 1e-6;
	alpha_nvl = c->nvlink_alpha_us * 1e-6;
	/* GPUs whose PCIe links carry the network traffic: a ring or tree
	 * leaves the node through one GPU per NIC; hier uses every GPU */
	stagers = in->nics < in->gpus ? in->nics : in->gpus;

	switch (a) {
	case MA_RING:
		r.steps = (long)(2 * (p - 1));
		r.net_bytes_node = N > 1 ? model_ring_factor(p) * S : 0;
		r.lat_s = r.steps * (N > 1 ? alpha : alpha_nvl);
		/* every GPU sends 2(p-1)/p x S to its ring neighbours; inside
		 * the node over NVLink */
		r.nvl_s = G > 1 ? model_ring_factor(p) * S / nvl_bw : 0;
		r.stage_bytes_gpu = r.net_bytes_node / stagers;
		break;
	case MA_TREE:
		r.steps = N > 1 ? 2L * model_log2_ceil(in->nodes) : 0;
		r.net_bytes_node = model_ring_factor(N) * S;
		r.lat_s = r.steps * alpha + 2 * (G - 1) * alpha_nvl;
		/* the chain inside the node: S down to the NIC's GPU, S back */
		r.nvl_s = G > 1 ? 2 * S / nvl_bw : 0;
		r.stage_bytes_gpu = r.net_bytes_node / stagers;
		r.steps += (long)(2 * (G - 1));
		break;
	case MA_HIER:
		r.steps = (long)(2 * (N - 1));
		r.net_bytes_node = model_ring_factor(N) * S;
		r.lat_s = r.steps * alpha + 2 * (G - 1) * alpha_nvl;
		/* reduce-scatter and all-gather: (G-1)/G x S each, not
		 * overlapped with the network phase between them */
		r.nvl_s = 2 * (G - 1) / G * S / nvl_bw;
		r.stage_bytes_gpu = r.net_bytes_node / G;
		r.steps += (long)(2 * (G - 1));
		break;
	default:
		return -1;
	}
	r.net_s = r.net_bytes_node / node_bw;
	r.stage_s = tp->copies > 0 ? tp->copies * r.stage_bytes_gpu / copy_bw : 0;
	r.mem_s = c->host_mem_gbs > 0 ? tp->dram_touches * 2 * r.net_bytes_node / (c->host_mem_gbs * 1e9)
				      : 0;
	if (!tp->copies)
		r.stage_bytes_gpu = 0;
	if (a == MA_HIER)
		r.time_s = r.lat_s + r.nvl_s + phase_bw(in, r.net_s, r.stage_s, r.mem_s, 0);
	else
		r.time_s = r.lat_s + phase_bw(in, r.net_s, r.stage_s, r.mem_s, r.nvl_s);

	/* what dominates */
	{
		double stage_part = in->overlap ? r.stage_s : 0;
		double parts[5] = { r.lat_s, r.net_s, stage_part, r.mem_s, r.nvl_s };
		static const char *const names[5] = { "latency", "network", "staging", "host memory",
						      "NVLink" };
		int best = 1;

		for (int i = 0; i < 5; i++)
			if (parts[i] > parts[best])
				best = i;
		r.bound = names[best];
	}
	r.algbw = S / r.time_s;
	r.busbw = model_busbw(r.algbw, p);
	r.cpu_cores = tp->cpu_s_per_gb * r.net_bytes_node / 1e9 / r.time_s;
	r.cpu_pct = in->cores > 0 ? 100.0 * r.cpu_cores / in->cores : 0;
	*o = r;
	return 0;
}

int model_parse_size(const char *s, double *out)
{
	char *end;
	double v, m = 1;

	if (!s || !*s)
		return -1;
	v = strtod(s, &end);
	if (end == s || !(v >= 0) || isinf(v))
		return -1;
	while (*end == ' ')
		end++;
	switch (toupper((unsigned char)*end)) {
	case 'K': m = 1e3; end++; break;
	case 'M': m = 1e6; end++; break;
	case 'G': m = 1e9; end++; break;
	case 'T': m = 1e12; end++; break;
	default: break;
	}
	if (m > 1 && (*end == 'i' || *end == 'I')) {
		m = pow(1024, round(log10(m) / 3));
		end++;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -1;
	*out = v * m;
	return 0;
}

const char *model_fmt_bytes(double b, char *buf, size_t len)
{
	static const char *const u[] = { "B", "KB", "MB", "GB", "TB", "PB" };
	int i = 0;

	while (b >= 1000 && i < 5) {
		b /= 1000;
		i++;
	}
	snprintf(buf, len, "%.4g %s", b, u[i]);
	return buf;
}

const char *model_fmt_time(double s, char *buf, size_t len)
{
	if (s >= 100)
		snprintf(buf, len, "%.0f s", s);
	else if (s >= 1)
		snprintf(buf, len, "%.1f s", s);
	else if (s >= 1e-3)
		snprintf(buf, len, "%.1f ms", s * 1e3);
	else
		snprintf(buf, len, "%.1f us", s * 1e6);
	return buf;
}
