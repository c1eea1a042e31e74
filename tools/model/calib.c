/* The model's calibration file: every number the model uses, each with
 * where it came from (command, date, machine). Two tables:
 *
 *   params    what model.c computes with (efficiency, latency, copies,
 *             CPU cost per transport; GPU copy rates; ...). A param with
 *             "from" is a copy of a measurement and follows it.
 *   measured  what was measured on a host: this machine's loopback (TCP,
 *             uroce), the GPU machine's copy rates, NCCL's busbw.
 *
 * The built-in values below are a fallback for a binary without its source
 * tree: the figures of NOTES.md and docs/benchmarks.md, with those sources.
 * tools/model/calibration.json, refreshed by `uroce model calibrate`, is
 * what the model normally reads. */
#include "../cli.h" /* also built into tests/unit/test_model.c */
#include "model.h"
#include "mjson.h"

#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEED_SRC "seed chapter, 1.5 case table: column 网络利用率 (network utilisation)"
#define SEED_MACHINE "none: the course's assumption, not a measurement"
#define COUNT_MACHINE "none: counted from the data path (seed 1.3)"
#define ASSUME_MACHINE "none: an assumption (no RDMA NIC on this machine or on the GPU machine)"
#define GPU_MACHINE "GPU machine: 1x NVIDIA H200 on PCIe Gen5 x16, 16 cores, Ubuntu 24.04"
#define GPU_NOTES "PyTorch on the GPU machine, 1 GiB copies (docs: /work/shared/NOTES.md, 'The GPU machine')"
#define BENCH_DOC "docs/benchmarks.md 'Last run': BENCH_QUICK=1 BENCH_REPEAT=3 bench/run.sh, path lo"
#define HOST_2026 "2-core AMD EPYC VM, Debian 12, Linux 6.18 (this project's build machine)"

#define E(k, u, v, cmd, date, mach, from, note) \
	{ k, u, v, { cmd, date, mach }, from, note, 0 }

static const struct cal_entry builtin_params[] = {
	E("tcp.eff", "fraction of line rate", 0.60, SEED_SRC " ~60% for TCP (25GbE)", "2026-12-03",
	  SEED_MACHINE, "", "no 25 GbE NIC here: loopback TCP has no line rate to be a fraction of"),
	E("roce.eff", "fraction of line rate", 0.85, SEED_SRC " ~85% for RoCEv2 (100GbE)", "2026-12-03",
	  SEED_MACHINE, "", ""),
	E("gdr.eff", "fraction of line rate", 0.95, SEED_SRC " ~95% for RDMA + GDR (100GbE)",
	  "2026-12-03", SEED_MACHINE, "",
	  "NCCL's busbw on a real RDMA fabric over its line rate would replace it (measured nccl.busbw_gbs)"),
	E("tcp.alpha_us", "us", 27.8, BENCH_DOC ", sockperf TCP half round trip median", "2026-12-02",
	  HOST_2026, "host.tcp_half_rtt_us", ""),
	E("roce.alpha_us", "us", 3.0,
	  "assumption: one message step between hardware RoCE NICs through one switch (ib_write_lat 2 B "
	  "on such NICs is 1-3 us)",
	  "2026-12-03", ASSUME_MACHINE, "",
	  "uroce, a software RoCE, measures host.uroce_write_lat_us on loopback"),
	E("gdr.alpha_us", "us", 3.0, "assumption: as roce.alpha_us", "2026-12-03", ASSUME_MACHINE, "", ""),
	E("tcp.copies", "copies at each end", 1,
	  "counting: GPU memory -> host memory (cudaMemcpy) before sending, the reverse after receiving",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("roce.copies", "copies at each end", 1, "counting: as tcp.copies, RDMA from host memory",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("gdr.copies", "copies at each end", 0,
	  "counting: with GPUDirect RDMA the NIC reads and writes GPU memory over PCIe",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("tcp.dram_touches", "DRAM reads+writes per byte", 4,
	  "counting: the GPU writes the staging buffer, the kernel copies it into a socket buffer "
	  "(a read and a write), the NIC reads it; the same on receive",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("roce.dram_touches", "DRAM reads+writes per byte", 2,
	  "counting: the GPU writes the staging buffer, the NIC reads it; the same on receive",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("gdr.dram_touches", "DRAM reads+writes per byte", 0, "counting: GPU memory to NIC directly",
	  "2026-12-03", COUNT_MACHINE, "", ""),
	E("tcp.cpu_s_per_gb", "CPU-s per GB sent+received", 0.397,
	  BENCH_DOC ", CPU-s per GB: iperf3 TCP (both ends)", "2026-12-02", HOST_2026,
	  "host.tcp_cpu_s_per_gb", ""),
	E("roce.cpu_s_per_gb", "CPU-s per GB sent+received", 0,
	  "assumption: the transport runs on the NIC (seed 1.3, protocol offload)", "2026-12-03",
	  ASSUME_MACHINE, "", "in software it costs host.uroce_cpu_s_per_gb (uroce on loopback)"),
	E("gdr.cpu_s_per_gb", "CPU-s per GB sent+received", 0, "assumption: as roce.cpu_s_per_gb",
	  "2026-12-03", ASSUME_MACHINE, "", ""),
	E("gpu.d2h_gbs", "GB/s", 54.3, GPU_NOTES ": pinned device-to-host", "2026-12-02", GPU_MACHINE,
	  "gpu.d2h_pinned_gbs", "an A100 on PCIe Gen4 copies about half as fast"),
	E("gpu.h2d_gbs", "GB/s", 54.7, GPU_NOTES ": pinned host-to-device", "2026-12-02", GPU_MACHINE,
	  "gpu.h2d_pinned_gbs", ""),
	E("gpu.copy_us", "us", 20, GPU_NOTES ": a 64-byte host-to-device copy plus synchronise",
	  "2026-12-02", GPU_MACHINE, "gpu.copy_64b_us", ""),
	E("nvlink.alpha_us", "us", 2.0, "assumption: one step between GPUs of a node over NVLink",
	  "2026-12-03", "none: an assumption (one H200 on the GPU machine, no NVLink peer)", "", ""),
	E("node.host_mem_gbs", "GB/s", 300,
	  "assumption: 2 sockets x 8 channels of DDR4-3200 = 410 GB/s peak (DGX A100: 2x AMD EPYC "
	  "7742), about 3/4 of it for streams of DMA",
	  "2026-12-03", "none: an assumption", "", ""),
};

static const struct cal_entry builtin_meas[] = {
	E("host.tcp_gbps", "Gb/s", 19.8, BENCH_DOC ", iperf3 TCP, 1 stream", "2026-12-02", HOST_2026, "",
	  ""),
	E("host.tcp_cpu_s_per_gb", "CPU-s per GB", 0.397, BENCH_DOC ", iperf3 TCP CPU-s per GB", "2026-12-02",
	  HOST_2026, "", "client + server CPU time over the bytes received"),
	E("host.tcp_half_rtt_us", "us", 27.8, BENCH_DOC ", sockperf TCP half round trip median",
	  "2026-12-02", HOST_2026, "", ""),
	E("host.uroce_write_gbps", "Gb/s", 12.3, BENCH_DOC ", ib_write_bw 64 KiB through uroce",
	  "2026-12-02", HOST_2026, "", ""),
	E("host.uroce_cpu_s_per_gb", "CPU-s per GB", 1.208, BENCH_DOC ", ib_write_bw 64 KiB CPU-s per GB",
	  "2026-12-02", HOST_2026, "", "perftest's pollers spin: part of it is waiting"),
	E("host.uroce_write_lat_us", "us", 19.9, BENCH_DOC ", ib_write_lat 2 B typical", "2026-12-02",
	  HOST_2026, "", ""),
	E("gpu.h2d_pinned_gbs", "GB/s", 54.7, GPU_NOTES, "2026-12-02", GPU_MACHINE, "", ""),
	E("gpu.d2h_pinned_gbs", "GB/s", 54.3, GPU_NOTES, "2026-12-02", GPU_MACHINE, "", ""),
	E("gpu.h2d_pageable_gbs", "GB/s", 6.3, GPU_NOTES ": pageable host-to-device", "2026-12-02",
	  GPU_MACHINE, "", "why staging buffers are pinned"),
	E("gpu.copy_64b_us", "us", 20, GPU_NOTES ": 64-byte host-to-device copy plus synchronise",
	  "2026-12-02", GPU_MACHINE, "", ""),
	E("gpu.uroce_gpu_write_gbps", "Gb/s", 15.6,
	  "make bench-gpu (README 'GPU memory'): GPU->GPU RDMA WRITE over uroce loopback, 4 MiB",
	  "2026-12-02", GPU_MACHINE, "", ""),
	E("nccl.busbw_gbs", "GB/s", 1.86,
	  "NCCL 2.28.9 all-reduce, its socket transport, 2 ranks on one GPU (NCCL_HOSTID per rank), "
	  "256 MiB (NOTES.md)",
	  "2026-12-02", GPU_MACHINE, "", "loopback sockets: no line rate, so it does not set gdr.eff"),
};
#undef E

#define NPARAMS (int)(sizeof(builtin_params) / sizeof(builtin_params[0]))
#define NMEAS (int)(sizeof(builtin_meas) / sizeof(builtin_meas[0]))

static int exe_dir(char *buf, size_t len)
{
	char exe[PATH_MAX];

	if (!realpath("/proc/self/exe", exe))
		return -1;
	snprintf(buf, len, "%s", dirname(exe));
	return 0;
}

/* The default file: $UROCE_MODEL_CALIBRATION, else the source tree the
 * binary was built in (BUILD/bin/uroce -> tools/model/calibration.json),
 * else ./tools/model/calibration.json. */
static int default_path(char *out, size_t len)
{
	const char *env = getenv("UROCE_MODEL_CALIBRATION");
	char dir[PATH_MAX];

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return 0;
	}
	if (!exe_dir(dir, sizeof(dir))) {
		static const char *const rel[] = { "../../tools/model/calibration.json",
						   "../../../tools/model/calibration.json",
						   "../share/uroce/model-calibration.json" };

		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			char p[PATH_MAX + 64], r[PATH_MAX];

			snprintf(p, sizeof(p), "%s/%s", dir, rel[i]);
			if (realpath(p, r)) {
				snprintf(out, len, "%s", r);
				return 0;
			}
		}
	}
	if (!access("tools/model/calibration.json", R_OK)) {
		snprintf(out, len, "tools/model/calibration.json");
		return 0;
	}
	return -1;
}

static void copy_str(char *dst, size_t len, const char *s)
{
	snprintf(dst, len, "%s", s ? s : "");
}

static void load_entry(struct cal_entry *e, const struct mj *j)
{
	const struct mj *v = mj_get(j, "value");

	if (v && v->type == MJ_NUM)
		e->value = v->num;
	if (mj_get(j, "source")) {
		copy_str(e->src.command, sizeof(e->src.command), mj_str(j, "source/command"));
		copy_str(e->src.date, sizeof(e->src.date), mj_str(j, "source/date"));
		copy_str(e->src.machine, sizeof(e->src.machine), mj_str(j, "source/machine"));
	}
	if (mj_get(j, "from"))
		copy_str(e->from, sizeof(e->from), mj_str(j, "from"));
	if (mj_get(j, "note"))
		copy_str(e->note, sizeof(e->note), mj_str(j, "note"));
}

int calib_load(struct calib *cb, const char *path)
{
	char err[256], p[PATH_MAX];
	struct mj *j;

	memset(cb, 0, sizeof(*cb));
	cb->params = malloc(sizeof(builtin_params));
	cb->meas = malloc(sizeof(builtin_meas));
	if (!cb->params || !cb->meas) {
		calib_free(cb);
		return -1;
	}
	memcpy(cb->params, builtin_params, sizeof(builtin_params));
	memcpy(cb->meas, builtin_meas, sizeof(builtin_meas));
	cb->nparams = NPARAMS;
	cb->nmeas = NMEAS;
	snprintf(cb->updated, sizeof(cb->updated), "2026-12-03");
	if (!path) {
		if (default_path(p, sizeof(p))) {
			fprintf(stderr, "uroce model: no calibration file found (tools/model/calibration.json "
					"next to the build, or $UROCE_MODEL_CALIBRATION); using the built-in "
					"values\n");
			return 0;
		}
		path = p;
	}
	j = mj_parse_file(path, err, sizeof(err));
	if (!j) {
		fprintf(stderr, "uroce model: %s: %s\n", path, err);
		calib_free(cb);
		return -1;
	}
	if (mj_get(j, "schema") && mj_num(j, "schema") != 1)
		fprintf(stderr, "uroce model: %s: schema %g, expected 1\n", path, mj_num(j, "schema"));
	for (int i = 0; i < cb->nparams; i++) {
		const struct mj *e = mj_get(mj_get(j, "params"), cb->params[i].key);

		if (e)
			load_entry(&cb->params[i], e);
	}
	for (int i = 0; i < cb->nmeas; i++) {
		const struct mj *e = mj_get(mj_get(j, "measured"), cb->meas[i].key);

		if (e)
			load_entry(&cb->meas[i], e);
	}
	if (mj_str(j, "updated"))
		copy_str(cb->updated, sizeof(cb->updated), mj_str(j, "updated"));
	mj_free(j);
	copy_str(cb->path, sizeof(cb->path), path);
	cb->from_file = 1;
	return 0;
}

void calib_free(struct calib *cb)
{
	free(cb->params);
	free(cb->meas);
	cb->params = cb->meas = NULL;
}

struct cal_entry *calib_find(struct calib *cb, const char *key)
{
	for (int i = 0; i < cb->nparams; i++)
		if (!strcmp(cb->params[i].key, key))
			return &cb->params[i];
	for (int i = 0; i < cb->nmeas; i++)
		if (!strcmp(cb->meas[i].key, key))
			return &cb->meas[i];
	return NULL;
}

static double val(const struct calib *cb, const char *key)
{
	return calib_find((struct calib *)cb, key)->value;
}

void calib_to_model(const struct calib *cb, struct model_calib *mc)
{
	char k[64];

	memset(mc, 0, sizeof(*mc));
	for (int t = 0; t < MT_COUNT; t++) {
		struct model_tp *tp = &mc->tp[t];

		snprintf(k, sizeof(k), "%s.eff", model_transport_name[t]);
		tp->eff = val(cb, k);
		snprintf(k, sizeof(k), "%s.alpha_us", model_transport_name[t]);
		tp->alpha_us = val(cb, k);
		snprintf(k, sizeof(k), "%s.copies", model_transport_name[t]);
		tp->copies = val(cb, k);
		snprintf(k, sizeof(k), "%s.dram_touches", model_transport_name[t]);
		tp->dram_touches = val(cb, k);
		snprintf(k, sizeof(k), "%s.cpu_s_per_gb", model_transport_name[t]);
		tp->cpu_s_per_gb = val(cb, k);
	}
	mc->d2h_gbs = val(cb, "gpu.d2h_gbs");
	mc->h2d_gbs = val(cb, "gpu.h2d_gbs");
	mc->copy_us = val(cb, "gpu.copy_us");
	mc->nvlink_alpha_us = val(cb, "nvlink.alpha_us");
	mc->host_mem_gbs = val(cb, "node.host_mem_gbs");
}

static void json_entry(FILE *f, const struct cal_entry *e, const char *indent, int last)
{
	fprintf(f, "%s", indent);
	cli_json_str(f, e->key);
	fprintf(f, ": {\"value\": %.6g, \"unit\": ", e->value);
	cli_json_str(f, e->unit);
	if (e->from[0]) {
		fprintf(f, ", \"from\": ");
		cli_json_str(f, e->from);
	}
	fprintf(f, ",\n%s  \"source\": {\"command\": ", indent);
	cli_json_str(f, e->src.command);
	fprintf(f, ",\n%s             \"date\": ", indent);
	cli_json_str(f, e->src.date);
	fprintf(f, ", \"machine\": ");
	cli_json_str(f, e->src.machine);
	fprintf(f, "}");
	if (e->note[0]) {
		fprintf(f, ",\n%s  \"note\": ", indent);
		cli_json_str(f, e->note);
	}
	fprintf(f, "}%s\n", last ? "" : ",");
}

int calib_write(const struct calib *cb, const char *path)
{
	char tmp[PATH_MAX + 16];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f) {
		fprintf(stderr, "uroce model calibrate: %s: %s\n", tmp, strerror(errno));
		return -1;
	}
	fprintf(f, "{\n  \"schema\": 1,\n  \"about\": \"Calibration of 'uroce model allreduce' "
		   "(docs/model.md). params: what the model computes with; measured: what was "
		   "measured, and where. A param with 'from' copies a measurement. Refresh with "
		   "'uroce model calibrate'.\",\n");
	fprintf(f, "  \"updated\": ");
	cli_json_str(f, cb->updated);
	fprintf(f, ",\n  \"params\": {\n");
	for (int i = 0; i < cb->nparams; i++)
		json_entry(f, &cb->params[i], "    ", i == cb->nparams - 1);
	fprintf(f, "  },\n  \"measured\": {\n");
	for (int i = 0; i < cb->nmeas; i++)
		json_entry(f, &cb->meas[i], "    ", i == cb->nmeas - 1);
	fprintf(f, "  }\n}\n");
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, "uroce model calibrate: cannot write %s\n", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path)) {
		fprintf(stderr, "uroce model calibrate: rename %s: %s\n", path, strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

void calib_json(const struct calib *cb, FILE *f)
{
	fprintf(f, "{\"file\":");
	cli_json_str(f, cb->from_file ? cb->path : "");
	fprintf(f, ",\"updated\":");
	cli_json_str(f, cb->updated);
	fprintf(f, ",\"params\":{");
	for (int i = 0; i < cb->nparams; i++) {
		const struct cal_entry *e = &cb->params[i];

		fprintf(f, "%s", i ? "," : "");
		cli_json_str(f, e->key);
		fprintf(f, ":{\"value\":%.15g,\"unit\":", e->value);
		cli_json_str(f, e->unit);
		fprintf(f, ",\"source\":{\"command\":");
		cli_json_str(f, e->src.command);
		fprintf(f, ",\"date\":");
		cli_json_str(f, e->src.date);
		fprintf(f, ",\"machine\":");
		cli_json_str(f, e->src.machine);
		fprintf(f, "}}");
	}
	fprintf(f, "}}");
}
