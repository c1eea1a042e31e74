/* NVLink counts between GPUs through NVML, loaded at run time with
 * dlopen("libnvidia-ml.so.1"), so uroce builds and runs without the NVIDIA
 * driver. Only the few entry points below are used; their types are
 * declared here from NVML's documented ABI (nvml.h is not needed). */
#include "topo.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define NVML_MAX_LINKS 18       /* NVML_NVLINK_MAX_LINKS (Hopper: 18) */
#define NVML_LINK_SWITCH 2      /* NVML_NVLINK_DEVICE_TYPE_SWITCH */

typedef void *nvml_dev;
struct nvml_pci {               /* nvmlPciInfo_t (v3) */
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

struct nvml {
	void *h;
	int (*init)(void);
	int (*shutdown)(void);
	int (*count)(unsigned *);
	int (*handle)(unsigned, nvml_dev *);
	int (*pci)(nvml_dev, struct nvml_pci *);
	int (*link_state)(nvml_dev, unsigned, int *);
	int (*remote_pci)(nvml_dev, unsigned, struct nvml_pci *);
	int (*remote_type)(nvml_dev, unsigned, int *);   /* optional */
};

static int nvml_open(struct nvml *n, char *why, size_t len)
{
	n->h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->h) {
		snprintf(why, len, "NVML not available (%s)", dlerror());
		return -1;
	}
	*(void **)&n->init = dlsym(n->h, "nvmlInit_v2");
	*(void **)&n->shutdown = dlsym(n->h, "nvmlShutdown");
	*(void **)&n->count = dlsym(n->h, "nvmlDeviceGetCount_v2");
	*(void **)&n->handle = dlsym(n->h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&n->pci = dlsym(n->h, "nvmlDeviceGetPciInfo_v3");
	*(void **)&n->link_state = dlsym(n->h, "nvmlDeviceGetNvLinkState");
	*(void **)&n->remote_pci = dlsym(n->h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	*(void **)&n->remote_type = dlsym(n->h, "nvmlDeviceGetNvLinkRemoteDeviceType");
	if (!n->init || !n->shutdown || !n->count || !n->handle || !n->pci ||
	    !n->link_state || !n->remote_pci) {
		snprintf(why, len, "libnvidia-ml.so.1 lacks the NVLink entry points");
		dlclose(n->h);
		return -1;
	}
	if (n->init() != 0) {
		snprintf(why, len, "nvmlInit failed (driver not loaded?)");
		dlclose(n->h);
		return -1;
	}
	return 0;
}

/* "00000000:34:00.0" -> "0000:34:00.0", our bus id spelling. */
static void norm_busid(const char *in, char *out, size_t len)
{
	unsigned d = 0, b = 0, s = 0, f = 0;

	if (sscanf(in, "%x:%x:%x.%x", &d, &b, &s, &f) == 4)
		snprintf(out, len, "%04x:%02x:%02x.%01x", d, b, s, f);
	else
		snprintf(out, len, "%s", in);
}

static int gpu_by_busid(const struct topo *tp, const char *busid)
{
	int i;

	for (i = 0; i < tp->ngpu; i++)
		if (!strcasecmp(tp->gpu[i].busid, busid))
			return i;
	return -1;
}

/* Links of one NVML device: direct ones into tp->nvl, links to an NVSwitch
 * counted in *to_switch. Returns our GPU index or -1. */
static int scan_links(struct topo *tp, struct nvml *n, nvml_dev dev, int *to_switch)
{
	struct nvml_pci p;
	char id[32];
	int me, l;

	if (n->pci(dev, &p) != 0)
		return -1;
	norm_busid(p.bus_id, id, sizeof(id));
	me = gpu_by_busid(tp, id);
	if (me < 0)
		return -1;
	for (l = 0; l < NVML_MAX_LINKS; l++) {
		int active = 0, type = -1, peer;

		if (n->link_state(dev, (unsigned)l, &active) != 0 || !active)
			continue;
		if (n->remote_type && n->remote_type(dev, (unsigned)l, &type) == 0 &&
		    type == NVML_LINK_SWITCH) {
			to_switch[me]++;
			continue;
		}
		if (n->remote_pci(dev, (unsigned)l, &p) != 0)
			continue;
		norm_busid(p.bus_id, id, sizeof(id));
		peer = gpu_by_busid(tp, id);
		if (peer >= 0 && peer != me)
			tp->nvl[me][peer]++;
		else if (peer < 0)
			to_switch[me]++;   /* not a GPU we know: an NVSwitch */
	}
	return me;
}

void topo_nvml(struct topo *tp)
{
	struct nvml n;
	int to_switch[TOPO_MAX_GPU] = { 0 };
	unsigned count = 0, i;
	int a, b, seen = 0;

	memset(&n, 0, sizeof(n));
	if (nvml_open(&n, tp->nvml_note, sizeof(tp->nvml_note)) < 0)
		return;
	if (n.count(&count) == 0)
		for (i = 0; i < count; i++) {
			nvml_dev dev;

			if (n.handle(i, &dev) == 0 && scan_links(tp, &n, dev, to_switch) >= 0)
				seen++;
		}
	/* Through NVSwitches every GPU reaches every other with as many links
	 * as the lesser of the two has into the switch fabric. */
	for (a = 0; a < tp->ngpu; a++)
		for (b = 0; b < tp->ngpu; b++)
			if (a != b && to_switch[a] && to_switch[b])
				tp->nvl[a][b] += to_switch[a] < to_switch[b] ? to_switch[a] : to_switch[b];
	snprintf(tp->nvml_note, sizeof(tp->nvml_note), "NVML: %u GPUs, %d matched to PCI devices",
		 count, seen);
	n.shutdown();
	dlclose(n.h);
}
