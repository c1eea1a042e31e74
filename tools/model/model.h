/* uroce model: an alpha-beta model of all-reduce on a GPU cluster, for the
 * course's case study (256 servers x 8 GPUs, ~200 GB of gradients per
 * step). docs/model.md walks through the formulas.
 *
 * Units: bytes, seconds, bytes per second inside; Gb/s (1e9 bits) and
 * GB/s (1e9 bytes) at the edges. */
#ifndef UROCE_MODEL_H
#define UROCE_MODEL_H

#include <stdio.h>

enum model_transport { MT_TCP, MT_ROCE, MT_GDR, MT_COUNT };
enum model_algo { MA_RING, MA_TREE, MA_HIER, MA_COUNT };

extern const char *const model_transport_name[MT_COUNT];
extern const char *const model_transport_title[MT_COUNT];
extern const char *const model_algo_name[MA_COUNT];

/* What one transport costs (from the calibration file). */
struct model_tp {
	double eff;            /* achievable fraction of the NIC's line rate */
	double alpha_us;       /* latency of one message step, NIC to NIC */
	double copies;         /* host staging copies at each end: GPU->host before
				* sending, host->GPU after receiving (0 with GDR) */
	double dram_touches;   /* host DRAM reads + writes per byte sent or received */
	double cpu_s_per_gb;   /* CPU-seconds per 1e9 bytes a node sends and receives */
};

struct model_calib {
	struct model_tp tp[MT_COUNT];
	double d2h_gbs, h2d_gbs;  /* pinned copy rate of one GPU, GB/s */
	double copy_us;           /* fixed cost of one staging copy */
	double nvlink_alpha_us;   /* latency of one step over NVLink */
	double host_mem_gbs;      /* node DRAM bandwidth available to staged traffic, GB/s */
};

struct model_in {
	int nodes;             /* N */
	int gpus;              /* G per node; ranks p = N x G */
	double bytes;          /* S: the buffer every rank all-reduces */
	double nic_gbps;       /* line rate of one NIC */
	int nics;              /* K NICs (rails) per node */
	double nvlink_gbps;    /* NVLink bandwidth of one GPU, one direction */
	int cores;             /* CPU cores per node (for the CPU %) */
	int overlap;           /* staging copies pipelined with the network (NCCL does) */
};

struct model_out {
	double time_s;          /* one all-reduce */
	double lat_s;           /* the alpha terms (network and NVLink steps) */
	double net_s;           /* network bytes / node bandwidth */
	double stage_s;         /* host staging copies (PCIe), 0 with GDR */
	double mem_s;           /* staged traffic through host DRAM */
	double nvl_s;           /* bandwidth terms over NVLink */
	double net_bytes_node;  /* bytes a node sends (and receives) through its NICs */
	double stage_bytes_gpu; /* bytes one GPU copies to host (and back) */
	double algbw;           /* S / time, bytes/s (nccl-tests' algbw) */
	double busbw;           /* algbw x 2(p-1)/p (nccl-tests' busbw for all-reduce) */
	double cpu_cores;       /* cores busy per node on average */
	double cpu_pct;         /* of the node's cores */
	long steps;             /* message steps on the network path */
	const char *bound;      /* what limits it: network, staging, host memory, NVLink, latency */
};

/* Closed forms, also used by the tests. */
double model_ring_factor(double n);   /* 2(n-1)/n */
double model_busbw(double algbw, double ranks);
int model_log2_ceil(long n);

/* Fills o for one transport and algorithm. Returns 0, or -1 when the
 * inputs make no sense (o untouched). */
int model_allreduce(const struct model_in *in, const struct model_calib *c, enum model_transport t,
		    enum model_algo a, struct model_out *o);

/* Parses "200G", "4MiB", "1e9", "512K": K/M/G/T are powers of 1000,
 * Ki/Mi/Gi/Ti powers of 1024; a trailing B is allowed. -1 on error. */
int model_parse_size(const char *s, double *out);

/* "200 GB", "4 MiB"-style text for a byte count (powers of 1000). */
const char *model_fmt_bytes(double b, char *buf, size_t len);
const char *model_fmt_time(double s, char *buf, size_t len);

/* ---- calibration (calib.c) ---- */

struct cal_source {
	char command[400];     /* what produced the number */
	char date[32];         /* YYYY-MM-DD */
	char machine[200];     /* where */
};

struct cal_entry {
	const char *key;       /* "tcp.eff", "host.tcp_gbps" */
	const char *unit;
	double value;
	struct cal_source src;
	char from[64];         /* a param copied from this measurement, or "" */
	char note[400];
	int refreshed;         /* set by calibrate */
};

struct calib {
	struct cal_entry *params, *meas;
	int nparams, nmeas;
	char path[4096];       /* where it was read from, "" = built-in */
	char updated[32];
	int from_file;
};

/* Loads path (NULL: the default search, see calib.c); falls back to the
 * built-in values with a message on stderr when no file is found. Returns
 * -1 only for a file that exists but cannot be parsed. */
int calib_load(struct calib *cb, const char *path);
void calib_free(struct calib *cb);
void calib_to_model(const struct calib *cb, struct model_calib *mc);
struct cal_entry *calib_find(struct calib *cb, const char *key);
int calib_write(const struct calib *cb, const char *path);
/* The JSON of the parameters the model used, with their sources. */
void calib_json(const struct calib *cb, FILE *f);

int model_calibrate(int argc, char **argv);
void usage_model_calibrate(FILE *f);

/* ---- the SVG plot (model_svg.c) ---- */

struct svg_series {
	const char *name;
	const char *color;
	const double *x, *y;
	int n;
};

/* Writes a line plot: x log2 (nodes) or log10 (bytes), y linear from 0 or
 * log10. Returns 0 or -1. */
int model_svg(const char *path, const char *title, const char *xlabel, const char *ylabel,
	      int xlog10, int ylog, const struct svg_series *s, int ns, const char *footnote);

#endif
