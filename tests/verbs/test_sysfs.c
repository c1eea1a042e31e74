/* ibv_read_sysfs_file on uroce's devices: the files of the table in
 * src/verbs/sysfs.c, the device/ directory, and (case view_matches, run by
 * tests/clients/test_sysfs.sh under `uroce run`) that the view written into
 * /sys/class/infiniband says exactly what the library says. */
#include "common.h"

#include <sys/stat.h>
#include <sys/vfs.h>
#include <linux/magic.h>

/* Private libibverbs API (infiniband/driver.h), exported by rdma-core too. */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static struct ibv_device *lo_device(struct ibv_device ***list)
{
	int n = 0;

	setenv("UROCE_NETDEV", "lo", 1);
	*list = ibv_get_device_list(&n);
	T_ASSERTF(*list && n == 1, "ibv_get_device_list: %d devices", n);
	T_EQ_STR((*list)[0]->name, "uroce_lo");
	return (*list)[0];
}

static void expect_file(const char *dir, const char *file, const char *want)
{
	char buf[256];
	int n = ibv_read_sysfs_file(dir, file, buf, sizeof(buf));

	T_ASSERTF(n >= 0, "%s/%s: %s", dir, file, strerror(errno));
	T_EQ_INT(n, strlen(want));
	T_EQ_STR(buf, want);
}

T_CASE(table_files)
{
	struct ibv_device **l, *d = lo_device(&l);
	char dir[300], buf[64], guid[32];
	const uint8_t *g;
	__be64 be = ibv_get_device_guid(d);

	expect_file(d->ibdev_path, "board_id", "UROCE_SOFT_ROCE");
	expect_file(d->ibdev_path, "fw_ver", "0.1.0");
	expect_file(d->ibdev_path, "node_type", "1: CA");
	expect_file(d->ibdev_path, "ports/1/gids/0", "0000:0000:0000:0000:0000:ffff:7f00:0001");
	expect_file(d->ibdev_path, "ports/1/gid_attrs/types/0", "RoCE v2");
	expect_file(d->ibdev_path, "ports/1/gid_attrs/ndevs/0", "lo");
	expect_file(d->ibdev_path, "ports/1/pkeys/0", "0xffff");
	expect_file(d->ibdev_path, "ports/1/lid", "0x1"); /* 127.0.0.1: low 16 bits */
	snprintf(dir, sizeof(dir), "%s/ports/1", d->ibdev_path);
	expect_file(dir, "state", "4: ACTIVE");
	expect_file(dir, "link_layer", "Ethernet");
	expect_file(d->dev_path, "ibdev", "uroce_lo");
	g = (const uint8_t *)&be;
	snprintf(guid, sizeof(guid), "%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[0], g[1], g[2], g[3],
		 g[4], g[5], g[6], g[7]);
	expect_file(d->ibdev_path, "node_guid", guid);
	/* No GID at index 1: the zero GID, and no type. */
	expect_file(d->ibdev_path, "ports/1/gids/1", "0000:0000:0000:0000:0000:0000:0000:0000");
	errno = 0;
	T_EQ_INT(ibv_read_sysfs_file(d->ibdev_path, "ports/1/gid_attrs/types/1", buf, sizeof(buf)),
		 -1);
	T_EQ_INT(errno, ENOENT);
	T_EQ_INT(ibv_read_sysfs_file(d->ibdev_path, "ports/1/gids/16", buf, sizeof(buf)), -1);
	/* Truncation as rdma-core does it: the length copied, NUL-terminated. */
	T_EQ_INT(ibv_read_sysfs_file(d->ibdev_path, "board_id", buf, 4), 3);
	T_EQ_STR(buf, "URO");
	ibv_free_device_list(l);
}

/* device/... is read below what the device link points to: for lo, the
 * interface's own sysfs directory. */
T_CASE(device_dir)
{
	struct ibv_device **l, *d = lo_device(&l);
	char buf[256];
	int n = ibv_read_sysfs_file(d->ibdev_path, "device/uevent", buf, sizeof(buf));

	T_ASSERTF(n > 0, "device/uevent: %s", strerror(errno));
	T_ASSERTF(strstr(buf, "INTERFACE=lo") != NULL, "device/uevent: %s", buf);
	ibv_free_device_list(l);
}

/* Every regular file of the view that the table has says what the library
 * says; the view must have every file the table has (gids, types, ...). */
T_CASE(view_matches)
{
	static const char *const files[] = {
		"board_id", "fw_ver", "hw_rev", "hca_type", "node_type", "node_guid",
		"sys_image_guid", "ports/1/state", "ports/1/phys_state", "ports/1/rate",
		"ports/1/lid", "ports/1/sm_lid", "ports/1/link_layer", "ports/1/cap_mask",
		"ports/1/gids/0", "ports/1/gids/15", "ports/1/gid_attrs/types/0",
		"ports/1/gid_attrs/ndevs/0", "ports/1/pkeys/0",
	};
	struct ibv_device **l, *d;
	struct statfs sf;
	char path[512], want[256], got[256];

	if (statfs("/sys/class/infiniband", &sf) || sf.f_type != TMPFS_MAGIC)
		t_skip("not in a uroce run view");
	d = lo_device(&l);
	for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
		FILE *f;
		size_t len;

		T_ASSERTF(ibv_read_sysfs_file(d->ibdev_path, files[k], want, sizeof(want)) >= 0,
			  "library: %s", files[k]);
		snprintf(path, sizeof(path), "%s/%s", d->ibdev_path, files[k]);
		f = fopen(path, "r");
		T_ASSERTF(f != NULL, "%s: %s", path, strerror(errno));
		len = fread(got, 1, sizeof(got) - 1, f);
		fclose(f);
		got[len] = '\0';
		T_ASSERTF(len > 0 && got[len - 1] == '\n', "%s: no newline", path);
		got[len - 1] = '\0';
		T_EQ_STR(got, want);
	}
	snprintf(path, sizeof(path), "%s/ports/1/gid_attrs/types/1", d->ibdev_path);
	T_ASSERTF(access(path, F_OK) != 0, "%s exists", path);
	ibv_free_device_list(l);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
