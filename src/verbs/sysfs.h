/* The sysfs files of uroce's devices: /sys/class/infiniband/<dev>/... and
 * /sys/class/infiniband_verbs/uverbsN/..., the files programs read directly
 * (NCCL, UCX, Open MPI, rdma-core's tools; docs/design.md, "The sysfs
 * view"). One table serves both users: ibv_read_sysfs_file answers from it
 * (device.c), and `uroce run` writes it out into its private mount
 * namespace (tools/run/), linking this object and netdev.o statically, so
 * that the library's ABI stays exactly rdma-core's. Nothing here may call
 * into other parts of the library. */
#ifndef UROCE_SYSFS_H
#define UROCE_SYSFS_H

#include <stddef.h>

#include "counters.h"
#include "net.h"

#define UROCE_SYSFS_IB "/sys/class/infiniband"
#define UROCE_SYSFS_VERBS "/sys/class/infiniband_verbs"

/* The content of the file at rel (e.g. "ports/1/gids/0") below the
 * device's directory (verbs = 0) or below its uverbs directory (verbs = 1),
 * without the trailing newline; -1 if the device has no such file (counters
 * are not in the table: their files hold live values, see below). */
int uroce_sysfs_file(const struct uroce_netdev *nd, int verbs, const char *rel, char *out,
		     size_t n);

/* Where the device's `device` link points: the nearest PCI device at or
 * above /sys/class/net/<if>/device (virtio-net's virtioN is a child of its
 * PCI function), else the interface's own directory
 * (/sys/devices/virtual/net/<if> for lo and veth). 0, or -1 if not even
 * that resolves. */
int uroce_sysfs_device_target(const char *ifname, char *out, size_t n);

/* Writes the files and links of every device that ibv_get_device_list
 * would give this process (UROCE_NETDEV applies; the device at position i
 * is uverbs<i>) into ib_dir/<dev>/ and verbs_dir/uverbs<i>/, counters all
 * zero (lifespan_ms: see below). Fills nds (at most max). Returns the
 * number of devices, or -errno. */
int uroce_sysfs_render(const char *ib_dir, const char *verbs_dir, struct uroce_netdev *nds,
		       int max, unsigned lifespan_ms);

/* Writes dev_dir/ports/1/hw_counters/ and dev_dir/ports/1/counters/ from
 * the counters now, each file replaced atomically (rename), only those
 * whose value differs from old (NULL: all). lifespan_ms: how stale a value
 * may be, written as hw_counters/lifespan like the kernel's. 0 or -errno. */
int uroce_sysfs_write_counters(const char *dev_dir, const struct uroce_counters *now,
			       const struct uroce_counters *old, unsigned lifespan_ms);

#endif
