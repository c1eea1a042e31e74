/* uroce topo: the machine model shared by discovery (topo.c), NVML
 * (topo_nvml.c) and the JSON/SVG writers (topo_out.c).
 *
 * GPUs and NICs are PCI devices found by hwloc; each pair gets a path class
 * in the spirit of `nvidia-smi topo -m` (see docs/topo.md). */
#ifndef UROCE_TOPO_H
#define UROCE_TOPO_H

#include <hwloc.h>
#include <stdio.h>

#define TOPO_MAX_GPU 64
#define TOPO_MAX_NIC 64
#define TOPO_MAX_SOFT 32

/* Path classes, nearest first. The order matters: NCCL compares them. */
enum topo_path {
	TP_X,      /* the device itself */
	TP_NV,     /* NVLink (count in topo.nvl) */
	TP_PIX,    /* through at most one PCIe switch */
	TP_PXB,    /* through several PCIe switches, not the host bridge */
	TP_PHB,    /* through a PCIe host bridge (the CPU's root complex) */
	TP_NODE,   /* between host bridges of one NUMA node */
	TP_SYS,    /* across NUMA nodes (the SMP interconnect: QPI/UPI/IF) */
	TP_NONE,   /* no PCI location (virtual interface) */
};

/* NCCL's default NCCL_NET_GDR_LEVEL: GPUDirect RDMA is used when the
 * GPU-NIC path is no farther than this. */
#define TOPO_GDR_LEVEL TP_PXB

/* PCIe link: hwloc's current bandwidth, and from sysfs (live machine only)
 * the current and maximum speed and width. */
struct topo_link {
	double gbytes;          /* hwloc linkspeed, GB/s; 0 if unknown */
	int have_sysfs;
	char cur_speed[32], max_speed[32]; /* "16.0 GT/s PCIe" */
	int cur_width, max_width;
	int slow_speed, narrow; /* trained below the maximum */
};

struct topo_dev {
	int is_gpu;
	int index;              /* GPU# or NIC# */
	hwloc_obj_t pci;        /* NULL: no PCI location */
	char busid[16];         /* "0000:34:00.0" */
	char label[8];          /* "GPU0", "NIC3" */
	char name[64];          /* rdma device, netdev or GPU model */
	char model[128];
	char rdma[128];         /* real RDMA devices (OpenFabrics), comma list */
	char netdevs[128];      /* network interfaces, comma list */
	char soft[128];         /* uroce soft devices on those interfaces */
	char cpus[128];         /* CPU affinity list, "0-23,48-71" */
	char nodes[64];         /* NUMA affinity list */
	struct topo_link link;
};

/* Host facts deciding GPUDirect RDMA besides the distance. */
struct topo_host {
	int known;              /* 0 with --input: not this machine */
	int peermem;            /* nvidia_peermem / nv_peer_mem loaded */
	char peermem_why[160];
	int dmabuf;             /* kernel >= 5.12 and NVIDIA open kernel module */
	char dmabuf_why[160];
	int iommu_translates;   /* an IOMMU is on and not in passthrough */
	char iommu_why[160];
};

struct topo_soft {
	char name[64], netdev[32];
};

struct topo {
	hwloc_topology_t t;
	const char *input;      /* XML file or NULL for this machine */
	struct topo_dev gpu[TOPO_MAX_GPU];
	int ngpu;
	struct topo_dev nic[TOPO_MAX_NIC];
	int nnic;
	struct topo_soft soft[TOPO_MAX_SOFT]; /* soft devices with no PCI NIC */
	int nsoft;
	int nvl[TOPO_MAX_GPU][TOPO_MAX_GPU];  /* NVLinks between GPUs */
	char nvml_note[160];    /* how NVML went */
	struct topo_host host;
	char notes[1024];       /* what could not be read, one per line */
};

/* Path class between two devices, and its name ("PIX", "NV4", ...). */
enum topo_path topo_path(const struct topo *tp, const struct topo_dev *a,
			 const struct topo_dev *b);
const char *topo_path_name(enum topo_path p);
void topo_cell(const struct topo *tp, const struct topo_dev *a,
	       const struct topo_dev *b, char *buf, size_t len);

/* GPUDirect RDMA verdict for a GPU-NIC pair: "yes", "no" or "maybe"
 * (host support unknown), with the reason. */
const char *topo_gdr(const struct topo *tp, const struct topo_dev *g,
		     const struct topo_dev *n, char *why, size_t len);

/* The NIC nearest to a GPU (RDMA-capable first, then faster link), or NULL. */
const struct topo_dev *topo_best_nic(const struct topo *tp, const struct topo_dev *g);

/* NVML at run time (dlopen): fills tp->nvl and tp->nvml_note. */
void topo_nvml(struct topo *tp);

void topo_note(struct topo *tp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int topo_write_json(const struct topo *tp, FILE *f);
int topo_write_svg(const struct topo *tp, FILE *f);

#endif
