/* uroce model: the all-reduce model of the course's case study (model.c),
 * calibrated from measurements (calib.c, calibrate.c). */
#include "cli.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void usage_model(FILE *f)
{
	fprintf(f,
		"usage: uroce model allreduce [OPTIONS]\n"
		"       uroce model allreduce --seed-case [--json] [--calibration FILE]\n"
		"       uroce model calibrate [OPTIONS]   (uroce model calibrate --help)\n"
		"\n"
		"An alpha-beta model of one all-reduce on a GPU cluster: the time of a\n"
		"step's gradient exchange, split into latency, network, host staging copies,\n"
		"host memory and NVLink, per transport and algorithm. Transport costs come\n"
		"from the calibration file (tools/model/calibration.json), each with its\n"
		"source. docs/model.md explains the formulas. Defaults: the course's case,\n"
		"256 servers x 8 A100, 200 GB, one 100 Gb/s NIC each.\n"
		"\n"
		"  --nodes N            servers (default 256)\n"
		"  --gpus-per-node G    GPUs per server, one rank each (default 8)\n"
		"  --bytes SIZE         bytes every rank all-reduces; K/M/G/T = 10^3..10^12,\n"
		"                       Ki/Mi/Gi = 2^10..2^30 (default 200G)\n"
		"  --nic-gbps X         line rate of one NIC in Gb/s (default 100)\n"
		"  --nics-per-node K    NICs (rails) per server (default 1)\n"
		"  --transport T        tcp, roce (RDMA from host memory), gdr (GPUDirect\n"
		"                       RDMA) or all (default all)\n"
		"  --nvlink-gbps X      NVLink bandwidth of one GPU, one direction, Gb/s\n"
		"                       (default 2400: A100, 300 GB/s)\n"
		"  --algo A             ring, tree, hier (reduce-scatter over NVLink, all-reduce\n"
		"                       per rail across servers, all-gather) or all (default ring)\n"
		"  --json               one JSON document\n"
		"  --svg FILE           plot step time against --sweep, one line per transport\n"
		"  --sweep nodes|bytes  what the plot varies (default nodes: 2 .. 4 x N)\n"
		"  --seed-case          the course's three rows, what they imply, and what\n"
		"                       reaches them (ignores the cluster options)\n"
		"  --calibration FILE   calibration file (default: the source tree's)\n"
		"  --eff F              override the transports' fraction of line rate (0..1]\n"
		"  --alpha-us U         override the transports' per-message latency\n"
		"  --no-overlap         staging copies not pipelined with the network\n"
		"  --cores N            CPU cores per server, for the CPU %% (default 128)\n"
		"\n"
		"examples:\n"
		"  uroce model allreduce --seed-case\n"
		"  uroce model allreduce --transport gdr --nics-per-node 8 --nic-gbps 200 --algo all\n"
		"  uroce model allreduce --svg time-vs-nodes.svg\n"
		"  uroce model allreduce --nodes 16 --bytes 1G --sweep bytes --svg time-vs-bytes.svg\n");
}

struct opts {
	struct model_in in;
	int transport;      /* -1: all */
	int algo;           /* -1: all */
	int json, seed, sweep_bytes;
	const char *svg, *cal;
	double eff, alpha;  /* < 0: from the calibration */
};

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (end == s || *end || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_dbl(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end || !(v >= lo) || !(v <= hi))
		return -1;
	*out = v;
	return 0;
}

static void apply_overrides(const struct opts *o, struct model_calib *mc)
{
	for (int t = 0; t < MT_COUNT; t++) {
		if (o->eff > 0)
			mc->tp[t].eff = o->eff;
		if (o->alpha >= 0)
			mc->tp[t].alpha_us = o->alpha;
	}
}

/* The calibration file as the user would type it: relative to the current
 * directory when it is below it. */
static const char *cal_name(const struct calib *cb)
{
	static char cwd[4096];
	size_t n;

	if (!cb->from_file)
		return "the built-in calibration";
	if (!getcwd(cwd, sizeof(cwd) - 1))
		return cb->path;
	n = strlen(cwd);
	if (!strncmp(cb->path, cwd, n) && cb->path[n] == '/')
		return cb->path + n + 1;
	return cb->path;
}

static const char *tp_color[MT_COUNT] = { "#d62728", "#ff7f0e", "#2ca02c" };

/* ---- the table ---- */

static void print_assumptions(const struct calib *cb, const struct model_calib *mc, const struct opts *o)
{
	char k[64];

	printf("\ntransport costs (%s%s):\n", cal_name(cb),
	       o->eff > 0 || o->alpha >= 0 ? ", with the overrides given" : "");
	for (int t = 0; t < MT_COUNT; t++) {
		const struct model_tp *tp = &mc->tp[t];
		const struct cal_entry *e;

		if (o->transport >= 0 && o->transport != t)
			continue;
		snprintf(k, sizeof(k), "%s.eff", model_transport_name[t]);
		e = calib_find((struct calib *)cb, k);
		printf("  %-4s %3.0f%% of line rate (%.*s); %.1f us per message", model_transport_name[t],
		       tp->eff * 100, (int)strcspn(e->src.command, ":"), e->src.command, tp->alpha_us);
		if (tp->copies > 0)
			printf(" + %g staging cop%s at each end (%.0f us each, %.1f/%.1f GB/s D2H/H2D)", tp->copies,
			       tp->copies == 1 ? "y" : "ies", mc->copy_us, mc->d2h_gbs, mc->h2d_gbs);
		printf("; %g DRAM passes per byte; %.3g CPU-s per GB\n", tp->dram_touches, tp->cpu_s_per_gb);
	}
	printf("  host memory %.0f GB/s per server, NVLink step %.1f us\n"
	       "  every value's source (command, date, machine): the calibration file, or --json\n",
	       mc->host_mem_gbs, mc->nvlink_alpha_us);
}

static void print_header(const struct opts *o)
{
	char b[32];
	const struct model_in *in = &o->in;
	double p = (double)in->nodes * in->gpus;

	printf("all-reduce of %s per rank: %d nodes x %d GPUs = %.0f ranks; %d x %g Gb/s NIC%s per node; "
	       "NVLink %g Gb/s per GPU%s\n",
	       model_fmt_bytes(in->bytes, b, sizeof(b)), in->nodes, in->gpus, p, in->nics, in->nic_gbps,
	       in->nics == 1 ? "" : "s", in->nvlink_gbps, in->overlap ? "" : "; staging not overlapped");
	printf("a ring over p ranks sends 2(p-1)/p x S = %s through each node's NICs (and receives as much)\n",
	       model_fmt_bytes(model_ring_factor(p) * in->bytes, b, sizeof(b)));
}

static void print_row(enum model_transport t, enum model_algo a, const struct model_out *r)
{
	char c[7][24];

	printf("%-5s %-5s %9s %9.1f h %9s %9s %9s %9s %9s %8.2f %8.2f %10s %6.2f %5.1f%%  %s\n",
	       model_transport_name[t], model_algo_name[a], model_fmt_time(r->time_s, c[0], sizeof(c[0])),
	       r->time_s * 1000 / 3600, model_fmt_time(r->lat_s, c[1], sizeof(c[1])),
	       model_fmt_time(r->net_s, c[2], sizeof(c[2])), model_fmt_time(r->stage_s, c[3], sizeof(c[3])),
	       model_fmt_time(r->mem_s, c[4], sizeof(c[4])), model_fmt_time(r->nvl_s, c[5], sizeof(c[5])),
	       r->algbw / 1e9, r->busbw / 1e9, model_fmt_bytes(r->net_bytes_node, c[6], sizeof(c[6])),
	       r->cpu_cores, r->cpu_pct, r->bound);
}

static void json_out(const struct model_out *r, enum model_transport t, enum model_algo a, int first)
{
	printf("%s{\"transport\":\"%s\",\"algo\":\"%s\",\"time_s\":%.15g,\"per_1000_steps_h\":%.15g,"
	       "\"latency_s\":%.15g,\"network_s\":%.15g,\"staging_s\":%.15g,\"host_memory_s\":%.15g,"
	       "\"nvlink_s\":%.15g,\"steps\":%ld,\"net_bytes_per_node\":%.15g,\"staged_bytes_per_gpu\":%.15g,"
	       "\"algbw_gbs\":%.15g,\"busbw_gbs\":%.15g,\"cpu_cores\":%.15g,\"cpu_percent\":%.15g,"
	       "\"bound\":\"%s\"}",
	       first ? "" : ",", model_transport_name[t], model_algo_name[a], r->time_s,
	       r->time_s * 1000 / 3600, r->lat_s, r->net_s, r->stage_s, r->mem_s, r->nvl_s, r->steps,
	       r->net_bytes_node, r->stage_bytes_gpu, r->algbw / 1e9, r->busbw / 1e9, r->cpu_cores,
	       r->cpu_pct, r->bound);
}

static void json_inputs(const struct model_in *in)
{
	printf("\"inputs\":{\"nodes\":%d,\"gpus_per_node\":%d,\"ranks\":%.0f,\"bytes\":%.15g,\"nic_gbps\":%g,"
	       "\"nics_per_node\":%d,\"nvlink_gbps\":%g,\"cores_per_node\":%d,\"overlap\":%s,"
	       "\"ring_factor\":%.15g}",
	       in->nodes, in->gpus, (double)in->nodes * in->gpus, in->bytes, in->nic_gbps, in->nics,
	       in->nvlink_gbps, in->cores, in->overlap ? "true" : "false",
	       model_ring_factor((double)in->nodes * in->gpus));
}

/* ---- the sweep and its plot ---- */

#define SWEEP_MAX 40

static int sweep_points(const struct opts *o, double *x)
{
	int n = 0;

	if (o->sweep_bytes) {
		double top = o->in.bytes, b = 1e3;

		if (top < 1e4)
			top = 1e4;
		while (b < top * 0.999 && n < SWEEP_MAX - 1) {
			x[n++] = b;
			b *= sqrt(10);
		}
		x[n++] = top;
	} else {
		long top = 16;

		while (top < 4L * o->in.nodes && top < 65536)
			top *= 2;
		for (long v = 2; v <= top && n < SWEEP_MAX; v *= 2)
			x[n++] = (double)v;
	}
	return n;
}

static int run_sweep(const struct opts *o, const struct model_calib *mc, enum model_algo a, double *x,
		     double y[MT_COUNT][SWEEP_MAX], int *n)
{
	*n = sweep_points(o, x);
	for (int t = 0; t < MT_COUNT; t++)
		for (int k = 0; k < *n; k++) {
			struct model_in in = o->in;
			struct model_out r;

			if (o->sweep_bytes)
				in.bytes = x[k];
			else
				in.nodes = (int)x[k];
			y[t][k] = model_allreduce(&in, mc, (enum model_transport)t, a, &r) ? NAN : r.time_s;
		}
	return 0;
}

static int write_plot(const struct opts *o, const struct model_calib *mc)
{
	enum model_algo a = o->algo >= 0 ? (enum model_algo)o->algo : MA_RING;
	double x[SWEEP_MAX], y[MT_COUNT][SWEEP_MAX];
	struct svg_series s[MT_COUNT];
	char title[200], foot[300], name[MT_COUNT][64], b[32];
	int n, ns = 0;

	run_sweep(o, mc, a, x, y, &n);
	for (int t = 0; t < MT_COUNT; t++) {
		if (o->transport >= 0 && o->transport != t)
			continue;
		snprintf(name[t], sizeof(name[t]), "%s (%s)", model_transport_title[t], model_transport_name[t]);
		s[ns].name = name[t];
		s[ns].color = tp_color[t];
		s[ns].x = x;
		s[ns].y = y[t];
		s[ns].n = n;
		ns++;
	}
	if (o->sweep_bytes)
		snprintf(title, sizeof(title), "All-reduce time vs message size: %s, %d nodes x %d GPUs",
			 model_algo_name[a], o->in.nodes, o->in.gpus);
	else
		snprintf(title, sizeof(title), "All-reduce time vs node count: %s, %s per rank, %d GPUs/node",
			 model_algo_name[a], model_fmt_bytes(o->in.bytes, b, sizeof(b)), o->in.gpus);
	snprintf(foot, sizeof(foot), "uroce model allreduce: %d x %g Gb/s NIC per node, NVLink %g Gb/s; "
				     "costs from the calibration file (docs/model.md)",
		 o->in.nics, o->in.nic_gbps, o->in.nvlink_gbps);
	if (model_svg(o->svg, title, o->sweep_bytes ? "bytes per rank (S)" : "nodes (N)",
		      "time of one all-reduce (s)", o->sweep_bytes, o->sweep_bytes, s, ns, foot)) {
		fprintf(stderr, "uroce model: cannot write %s\n", o->svg);
		return -1;
	}
	if (!o->json)
		fprintf(stderr, "uroce model: wrote %s (%d points per line)\n", o->svg, n);
	return 0;
}

/* ---- the seed's case ---- */

static const struct seed_row {
	enum model_transport t;
	double gbps;
	double seed_s;
	const char *label, *zh, *cpu, *util, *h1000;
} seed_rows[] = {
	{ MT_TCP, 25, 80, "TCP, 25GbE", "传统TCP (25GbE)", "100%", "~60%", "22.2 h" },
	{ MT_ROCE, 100, 20, "RoCEv2, 100GbE", "RoCEv2 (100GbE)", "~30%", "~85%", "5.6 h" },
	{ MT_GDR, 100, 8, "RDMA+GDR, 100GbE", "RDMA + GDR (100GbE)", "<5%", "~95%", "2.2 h" },
};

#define SEED_NODES 256
#define SEED_GPUS 8
#define SEED_BYTES 200e9

static const struct target {
	enum model_transport t;
	enum model_algo a;
	int nics;
	double gbps;
	const char *what;
} targets[] = {
	{ MT_GDR, MA_HIER, 1, 100, "the seed's row 3 as stated" },
	{ MT_GDR, MA_HIER, 4, 100, "4 rails of 100 GbE" },
	{ MT_GDR, MA_HIER, 2, 200, "2 rails of 200 Gb/s" },
	{ MT_GDR, MA_HIER, 1, 400, "1 NIC of 400 Gb/s" },
	{ MT_GDR, MA_HIER, 8, 200, "8 rails of 200 Gb/s (DGX A100: one HDR NIC per GPU)" },
	{ MT_ROCE, MA_HIER, 8, 200, "the same without GPUDirect" },
	{ MT_TCP, MA_HIER, 8, 200, "the same over TCP" },
};

static void seed_in(struct model_in *in, const struct opts *o, double gbps, int nics)
{
	*in = o->in;
	in->nodes = SEED_NODES;
	in->gpus = SEED_GPUS;
	in->bytes = SEED_BYTES;
	in->nic_gbps = gbps;
	in->nics = nics;
}

static int seed_case(const struct opts *o, const struct calib *cb, const struct model_calib *mc)
{
	const int nr = (int)(sizeof(seed_rows) / sizeof(seed_rows[0]));
	const int nt = (int)(sizeof(targets) / sizeof(targets[0]));
	double p = SEED_NODES * SEED_GPUS, moved = model_ring_factor(p) * SEED_BYTES;
	struct model_out r1[3], rk[3], rt[16], rtr[16];
	double naive[3], implied[3], need[3];
	int nics[3];
	char b[6][32];

	for (int i = 0; i < nr; i++) {
		const struct seed_row *s = &seed_rows[i];
		struct model_in in;
		double eff = mc->tp[s->t].eff;

		seed_in(&in, o, s->gbps, 1);
		if (model_allreduce(&in, mc, s->t, MA_RING, &r1[i]))
			return 1;
		naive[i] = SEED_BYTES * 8 / (s->gbps * 1e9 * eff);
		implied[i] = moved * 8 / s->seed_s / 1e9;      /* Gb/s of goodput per node */
		need[i] = implied[i] / (s->gbps * eff);
		nics[i] = (int)lround(need[i]);
		if (nics[i] < 1)
			nics[i] = 1;
		seed_in(&in, o, s->gbps, nics[i]);
		if (model_allreduce(&in, mc, s->t, MA_RING, &rk[i]))
			return 1;
	}
	for (int i = 0; i < nt; i++) {
		struct model_in in;

		seed_in(&in, o, targets[i].gbps, targets[i].nics);
		if (model_allreduce(&in, mc, targets[i].t, targets[i].a, &rt[i]) ||
		    model_allreduce(&in, mc, targets[i].t, MA_RING, &rtr[i]))
			return 1;
	}

	if (o->json) {
		printf("{\"seed_case\":{\"nodes\":%d,\"gpus_per_node\":%d,\"ranks\":%.0f,\"bytes\":%.15g,"
		       "\"ring_factor\":%.15g,\"bytes_per_node\":%.15g,\"rows\":[",
		       SEED_NODES, SEED_GPUS, p, SEED_BYTES, model_ring_factor(p), moved);
		for (int i = 0; i < nr; i++) {
			const struct seed_row *s = &seed_rows[i];

			printf("%s{\"label\":", i ? "," : "");
			cli_json_str(stdout, s->label);
			printf(",\"transport\":\"%s\",\"nic_gbps\":%g,\"seed_s\":%g,\"eff\":%g,\"naive_s\":%.15g,"
			       "\"model\":",
			       model_transport_name[s->t], s->gbps, s->seed_s, mc->tp[s->t].eff, naive[i]);
			json_out(&r1[i], s->t, MA_RING, 1);
			printf(",\"implied_gbps_per_node\":%.15g,\"nics_implied\":%.15g,\"nics\":%d,\"reproduced\":",
			       implied[i], need[i], nics[i]);
			json_out(&rk[i], s->t, MA_RING, 1);
			printf("}");
		}
		printf("],\"to_8s\":[");
		for (int i = 0; i < nt; i++) {
			printf("%s{\"what\":", i ? "," : "");
			cli_json_str(stdout, targets[i].what);
			printf(",\"nics\":%d,\"nic_gbps\":%g,\"result\":", targets[i].nics, targets[i].gbps);
			json_out(&rt[i], targets[i].t, targets[i].a, 1);
			printf(",\"ring\":");
			json_out(&rtr[i], targets[i].t, MA_RING, 1);
			printf("}");
		}
		printf("]},\"calibration\":");
		calib_json(cb, stdout);
		printf("}\n");
		return 0;
	}

	printf("The seed's case (chapter 1.5): 256 servers x 8 A100, about 200 GB of gradients\n"
	       "all-reduced per step, over TCP on 25GbE, RoCEv2 on 100GbE and RDMA + GPUDirect on 100GbE.\n\n");
	printf("Assumptions: every one of the %.0f GPUs all-reduces S = 200 GB (data parallel, as the\n"
	       "seed states it); one NIC per server, as the rows say; a ring all-reduce (NCCL's choice for\n"
	       "large messages); efficiency = the seed's utilisation column; latency, staging copies, DRAM\n"
	       "and CPU costs from %s.\n\n",
	       p, cal_name(cb));
	printf("1. What moves. A ring all-reduce over p ranks sends 2(p-1)/p x S through every node:\n"
	       "   2 x %.0f/%.0f x 200 GB = %s out of each server, and as much in.\n"
	       "   At 100 Gb/s that alone takes %.1f s; at 25 Gb/s, %.0f s.\n\n",
	       p - 1, p, model_fmt_bytes(moved, b[0], sizeof(b[0])), moved * 8 / 100e9, moved * 8 / 25e9);

	printf("2. The seed's rows and their corrected counterparts (same link, the model):\n\n");
	printf("   %-17s %6s %10s %5s %5s | %15s %7s %10s %5s  %s\n", "", "seed", "1000 steps", "CPU",
	       "util", "S/(rate x util)", "model", "1000 steps", "CPU", "bound");
	for (int i = 0; i < nr; i++) {
		const struct seed_row *s = &seed_rows[i];
		char cpu[32];

		snprintf(cpu, sizeof(cpu), "%.1f%%", r1[i].cpu_pct);
		printf("   %-17s %4.0f s %10s %5s %5s | %15s %7s %8.1f h %5s  %s\n", s->label, s->seed_s,
		       s->h1000, s->cpu, s->util, model_fmt_time(naive[i], b[0], sizeof(b[0])),
		       model_fmt_time(r1[i].time_s, b[1], sizeof(b[1])), r1[i].time_s * 1000 / 3600, cpu,
		       r1[i].bound);
	}
	printf("\n   S/(rate x util) sends S once: it gives the seed's RoCEv2 row (%.1f s for ~20 s) but not the\n"
	       "   others, and it forgets that an all-reduce moves the data twice (reduce, then share).\n"
	       "   The model's CPU %% is the transport's own work (the copies into and out of socket\n"
	       "   buffers for TCP) on a %d-core server; the seed's 100%% (many cores) / 30%% / <5%% are not\n"
	       "   what these costs give.\n\n",
	       naive[1], o->in.cores);

	printf("3. What the seed's times imply: %s per server in that time is\n\n",
	       model_fmt_bytes(moved, b[0], sizeof(b[0])));
	printf("   %-17s %6s %14s %26s | %s\n", "", "seed", "goodput/server", "NICs of that speed needed",
	       "reproduced: the model, ring, that many NICs");
	for (int i = 0; i < nr; i++) {
		const struct seed_row *s = &seed_rows[i];

		printf("   %-17s %4.0f s %9.0f Gb/s %9.1f x %3.0f Gb/s at %2.0f%% | %d x %g Gb/s %s: %s\n", s->label,
		       s->seed_s, implied[i], need[i], s->gbps, mc->tp[s->t].eff * 100, nics[i], s->gbps,
		       model_transport_name[s->t], model_fmt_time(rk[i].time_s, b[0], sizeof(b[0])));
	}
	printf("\n   The rows are true for servers with about %d, %d and %d NICs of the stated speed, not one.\n\n",
	       nics[0], nics[1], nics[2]);

	printf("4. What 8 s takes on this cluster. Ring: one ring per NIC through all 2048 GPUs;\n"
	       "   hier: reduce-scatter over NVLink, an all-reduce of S/8 per GPU rail across the servers,\n"
	       "   all-gather over NVLink (the NVLink phases add %s). Either way the network carries\n"
	       "   %s per server: only more bandwidth per server shortens it.\n\n",
	       model_fmt_time(rt[0].nvl_s, b[1], sizeof(b[1])), model_fmt_bytes(moved, b[0], sizeof(b[0])));
	printf("   %-4s %-14s %8s %8s  %s\n", "", "NICs", "ring", "hier", "ring bound");
	for (int i = 0; i < nt; i++) {
		const struct target *t = &targets[i];
		char nic[32];

		snprintf(nic, sizeof(nic), "%d x %g Gb/s", t->nics, t->gbps);
		printf("   %-4s %-14s %8s %8s  %-12s %s\n", model_transport_name[t->t], nic,
		       model_fmt_time(rtr[i].time_s, b[0], sizeof(b[0])),
		       model_fmt_time(rt[i].time_s, b[1], sizeof(b[1])), rtr[i].bound, t->what);
	}
	printf("\n   About 400 Gb/s of goodput per server reaches 8 s. Without GPUDirect, at 8 x 200 Gb/s the\n"
	       "   staged copies through host DRAM (%.0f GB/s assumed) become the limit.\n"
	       "   NVLink's part is already in every row: it keeps 7 of every 8 ring hops inside the\n"
	       "   server. A ring that left the server at every hop would send 8 x %s per server\n"
	       "   (%s at 1 x 100 Gb/s with GDR).\n",
	       mc->host_mem_gbs, model_fmt_bytes(moved, b[0], sizeof(b[0])),
	       model_fmt_time(SEED_GPUS * r1[2].net_s, b[1], sizeof(b[1])));
	print_assumptions(cb, mc, o);
	return 0;
}

static int allreduce(int argc, char **argv)
{
	struct opts o = { .in = { .nodes = 256, .gpus = 8, .bytes = 200e9, .nic_gbps = 100, .nics = 1,
				  .nvlink_gbps = 2400, .cores = 128, .overlap = 1 },
			  .transport = -1, .algo = MA_RING, .eff = -1, .alpha = -1 };
	struct calib cb;
	struct model_calib mc;
	int rc = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int bad = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage_model(stdout);
			return 0;
		} else if (!strcmp(a, "--json")) {
			o.json = 1;
		} else if (!strcmp(a, "--seed-case")) {
			o.seed = 1;
		} else if (!strcmp(a, "--no-overlap")) {
			o.in.overlap = 0;
		} else if (!v) {
			fprintf(stderr, "uroce model: unknown option or missing argument: %s\n\n", a);
			usage_model(stderr);
			return CLI_EXIT_USAGE;
		} else if (!strcmp(a, "--nodes")) {
			bad = parse_int(argv[++i], 1, 1 << 20, &o.in.nodes);
		} else if (!strcmp(a, "--gpus-per-node")) {
			bad = parse_int(argv[++i], 1, 1024, &o.in.gpus);
		} else if (!strcmp(a, "--bytes")) {
			bad = model_parse_size(argv[++i], &o.in.bytes) || !(o.in.bytes >= 1);
		} else if (!strcmp(a, "--nic-gbps")) {
			bad = parse_dbl(argv[++i], 1e-3, 1e6, &o.in.nic_gbps);
		} else if (!strcmp(a, "--nics-per-node")) {
			bad = parse_int(argv[++i], 1, 1024, &o.in.nics);
		} else if (!strcmp(a, "--nvlink-gbps")) {
			bad = parse_dbl(argv[++i], 1e-3, 1e7, &o.in.nvlink_gbps);
		} else if (!strcmp(a, "--cores")) {
			bad = parse_int(argv[++i], 1, 1 << 20, &o.in.cores);
		} else if (!strcmp(a, "--eff")) {
			bad = parse_dbl(argv[++i], 1e-6, 1, &o.eff);
		} else if (!strcmp(a, "--alpha-us")) {
			bad = parse_dbl(argv[++i], 0, 1e9, &o.alpha);
		} else if (!strcmp(a, "--svg")) {
			o.svg = argv[++i];
		} else if (!strcmp(a, "--calibration")) {
			o.cal = argv[++i];
		} else if (!strcmp(a, "--sweep")) {
			i++;
			bad = strcmp(argv[i], "nodes") && strcmp(argv[i], "bytes");
			o.sweep_bytes = !strcmp(argv[i], "bytes");
		} else if (!strcmp(a, "--transport")) {
			i++;
			o.transport = -2;
			if (!strcmp(argv[i], "all"))
				o.transport = -1;
			for (int t = 0; t < MT_COUNT; t++)
				if (!strcmp(argv[i], model_transport_name[t]))
					o.transport = t;
			bad = o.transport == -2;
		} else if (!strcmp(a, "--algo")) {
			i++;
			o.algo = -2;
			if (!strcmp(argv[i], "all"))
				o.algo = -1;
			for (int t = 0; t < MA_COUNT; t++)
				if (!strcmp(argv[i], model_algo_name[t]))
					o.algo = t;
			bad = o.algo == -2;
		} else {
			fprintf(stderr, "uroce model: unknown option '%s'\n\n", a);
			usage_model(stderr);
			return CLI_EXIT_USAGE;
		}
		if (bad) {
			fprintf(stderr, "uroce model: %s: bad value '%s'\n", a, argv[i]);
			return CLI_EXIT_USAGE;
		}
	}
	if (calib_load(&cb, o.cal))
		return 1;
	calib_to_model(&cb, &mc);
	apply_overrides(&o, &mc);
	if (o.seed) {
		rc = seed_case(&o, &cb, &mc);
		calib_free(&cb);
		return rc;
	}
	if (o.svg && write_plot(&o, &mc))
		rc = 1;

	if (o.json) {
		int first = 1;

		printf("{");
		json_inputs(&o.in);
		printf(",\"results\":[");
		for (int a = 0; a < MA_COUNT; a++)
			for (int t = 0; t < MT_COUNT; t++) {
				struct model_out r;

				if ((o.algo >= 0 && o.algo != a) || (o.transport >= 0 && o.transport != t))
					continue;
				if (model_allreduce(&o.in, &mc, (enum model_transport)t, (enum model_algo)a, &r)) {
					rc = 1;
					continue;
				}
				json_out(&r, (enum model_transport)t, (enum model_algo)a, first);
				first = 0;
			}
		printf("]");
		if (o.svg) {
			double x[SWEEP_MAX], y[MT_COUNT][SWEEP_MAX];
			int n;

			run_sweep(&o, &mc, o.algo >= 0 ? (enum model_algo)o.algo : MA_RING, x, y, &n);
			printf(",\"sweep\":{\"over\":\"%s\",\"x\":[", o.sweep_bytes ? "bytes" : "nodes");
			for (int k = 0; k < n; k++)
				printf("%s%.15g", k ? "," : "", x[k]);
			printf("],\"time_s\":{");
			for (int t = 0, ft = 1; t < MT_COUNT; t++) {
				if (o.transport >= 0 && o.transport != t)
					continue;
				printf("%s\"%s\":[", ft ? "" : ",", model_transport_name[t]);
				ft = 0;
				for (int k = 0; k < n; k++)
					printf("%s%.15g", k ? "," : "", y[t][k]);
				printf("]");
			}
			printf("}}");
		}
		printf(",\"calibration\":");
		calib_json(&cb, stdout);
		printf("}\n");
		calib_free(&cb);
		return rc;
	}

	print_header(&o);
	printf("\n%-5s %-5s %9s %11s %9s %9s %9s %9s %9s %8s %8s %10s %6s %6s  %s\n", "trans", "algo", "time",
	       "1000 steps", "latency", "network", "staging", "host mem", "NVLink", "algbw", "busbw",
	       "NIC bytes", "CPU", "CPU%", "bound");
	printf("%-5s %-5s %9s %11s %9s %9s %9s %9s %9s %8s %8s %10s %6s\n", "", "", "", "", "", "", "", "", "",
	       "GB/s", "GB/s", "per node", "cores");
	for (int a = 0; a < MA_COUNT; a++)
		for (int t = 0; t < MT_COUNT; t++) {
			struct model_out r;

			if ((o.algo >= 0 && o.algo != a) || (o.transport >= 0 && o.transport != t))
				continue;
			if (model_allreduce(&o.in, &mc, (enum model_transport)t, (enum model_algo)a, &r)) {
				fprintf(stderr, "uroce model: the %s parameters are out of range\n",
					model_transport_name[t]);
				rc = 1;
				continue;
			}
			print_row((enum model_transport)t, (enum model_algo)a, &r);
		}
	printf("\ntime = latency + the slowest of network, staging and host memory (pipelined)%s;\n"
	       "busbw = algbw x 2(p-1)/p as nccl-tests reports it; 1000 steps = 1000 x time\n",
	       o.algo == MA_HIER || o.algo < 0 ? " [hier: + the NVLink phases]" : "");
	print_assumptions(&cb, &mc, &o);
	calib_free(&cb);
	return rc;
}

int cmd_model(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage_model(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : 0;
	}
	if (!strcmp(argv[1], "allreduce"))
		return allreduce(argc - 1, argv + 1);
	if (!strcmp(argv[1], "calibrate"))
		return model_calibrate(argc - 1, argv + 1);
	fprintf(stderr, "uroce model: unknown model '%s' (allreduce, calibrate)\n\n", argv[1]);
	usage_model(stderr);
	return CLI_EXIT_USAGE;
}
