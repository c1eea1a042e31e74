/* Interface discovery: one soft device per interface with an IPv4 address. */
#include "net.h"
#include "util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/if_packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int uroce_net_mtu(const char *ifname)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int mtu = 1500;

	if (fd < 0)
		return mtu;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ifname);
	if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
		mtu = ifr.ifr_mtu;
	close(fd);
	return mtu;
}

int uroce_net_active_mtu(int if_mtu)
{
	/* IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5 */
	const int overhead = 20 + 8 + 12 + 16 + 4;
	int best = 1;

	for (int m = 1; m <= 5; m++)
		if ((128 << m) + overhead <= if_mtu)
			best = m;
	return best;
}

static void fill_guid(struct uroce_netdev *d)
{
	uint8_t g[8];

	/* EUI-64 from the MAC; loopback has none, so derive one from the name. */
	if (d->mac[0] | d->mac[1] | d->mac[2] | d->mac[3] | d->mac[4] | d->mac[5]) {
		g[0] = d->mac[0] ^ 2;
		g[1] = d->mac[1];
		g[2] = d->mac[2];
		g[3] = 0xff;
		g[4] = 0xfe;
		g[5] = d->mac[3];
		g[6] = d->mac[4];
		g[7] = d->mac[5];
	} else {
		uint32_t h = 2166136261u;

		for (const char *s = d->ifname; *s; s++)
			h = (h ^ (uint8_t)*s) * 16777619u;
		g[0] = 0x02;
		g[1] = 0x00;
		g[2] = 0x00;
		g[3] = 0xff;
		g[4] = 0xfe;
		g[5] = (uint8_t)(h >> 16);
		g[6] = (uint8_t)(h >> 8);
		g[7] = (uint8_t)h;
	}
	memcpy(&d->guid, g, 8);
}

static struct uroce_netdev *find_or_add(struct uroce_netdev *devs, int *n, int max,
					const char *ifname)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(devs[i].ifname, ifname))
			return &devs[i];
	if (*n >= max)
		return NULL;
	memset(&devs[*n], 0, sizeof(devs[*n]));
	snprintf(devs[*n].ifname, sizeof(devs[*n].ifname), "%s", ifname);
	return &devs[(*n)++];
}

/* Position of ifname in UROCE_NETDEV, or -1 if not listed; -2 if unset. */
static int netdev_rank(const char *list, const char *ifname)
{
	int rank = 0;

	if (!list || !*list)
		return -2;
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == strlen(ifname) && !strncmp(p, ifname, l))
			return rank;
		rank++;
		if (!e)
			break;
		p = e + 1;
	}
	return -1;
}

int uroce_net_discover(struct uroce_netdev *devs, int max)
{
	const char *want = getenv("UROCE_NETDEV");
	struct uroce_netdev tmp[UROCE_MAX_DEVS];
	struct ifaddrs *ifa0, *ifa;
	int n = 0, out = 0;

	if (getifaddrs(&ifa0) < 0)
		return 0;
	for (ifa = ifa0; ifa; ifa = ifa->ifa_next) {
		struct uroce_netdev *d;

		if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP))
			continue;
		if (netdev_rank(want, ifa->ifa_name) == -1)
			continue;
		if (ifa->ifa_addr->sa_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)ifa->ifa_addr;

			d = find_or_add(tmp, &n, UROCE_MAX_DEVS, ifa->ifa_name);
			if (!d || d->ngids >= UROCE_GID_TBL_LEN)
				continue;
			if (!d->ip4)
				d->ip4 = sin->sin_addr.s_addr;
			/* RoCEv2 GID of an IPv4 address: ::ffff:a.b.c.d */
			memset(d->gid[d->ngids], 0, 16);
			d->gid[d->ngids][10] = 0xff;
			d->gid[d->ngids][11] = 0xff;
			memcpy(&d->gid[d->ngids][12], &sin->sin_addr, 4);
			d->gid_family[d->ngids++] = AF_INET;
			d->loopback = !!(ifa->ifa_flags & IFF_LOOPBACK);
		} else if (ifa->ifa_addr->sa_family == AF_PACKET) {
			struct sockaddr_ll *sll = (struct sockaddr_ll *)ifa->ifa_addr;

			d = find_or_add(tmp, &n, UROCE_MAX_DEVS, ifa->ifa_name);
			if (d && sll->sll_halen == 6)
				memcpy(d->mac, sll->sll_addr, 6);
			if (d)
				d->ifindex = sll->sll_ifindex;
		}
	}
	freeifaddrs(ifa0);

	/* Order: as listed in UROCE_NETDEV, else non-loopback first. */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			struct uroce_netdev *d = &tmp[i];
			int take;

			if (!d->ngids)
				continue;
			if (want && *want)
				take = 0;
			else
				take = pass == 0 ? !d->loopback : d->loopback;
			if (take && out < max)
				devs[out++] = *d;
		}
	}
	if (want && *want) {
		int rank = 0;

		for (const char *p = want; *p && out < max; rank++) {
			const char *e = strchr(p, ',');
			size_t l = e ? (size_t)(e - p) : strlen(p);

			for (int i = 0; i < n; i++)
				if (tmp[i].ngids && strlen(tmp[i].ifname) == l &&
				    !strncmp(tmp[i].ifname, p, l))
					devs[out++] = tmp[i];
			if (!e)
				break;
			p = e + 1;
		}
	}
	for (int i = 0; i < out; i++) {
		struct uroce_netdev *d = &devs[i];

		snprintf(d->ibname, sizeof(d->ibname), "uroce_%s", d->ifname);
		d->mtu = uroce_net_mtu(d->ifname);
		if (!d->ifindex)
			d->ifindex = (int)if_nametoindex(d->ifname);
		fill_guid(d);
	}
	return out;
}
