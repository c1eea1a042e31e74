/* rdma_getaddrinfo(3) and rdma_freeaddrinfo(3): name resolution through the
 * system's getaddrinfo, mapped to RDMA terms (QP type, port space). There
 * is no InfiniBand SA or ACM service behind uroce, so RAI_SA is refused. */
#include "cm.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>

#ifndef RAI_SA
#define RAI_SA 0x00000020
#endif

static int copy_addr(struct sockaddr **dst, socklen_t *dst_len, const struct sockaddr *src,
		     socklen_t len)
{
	*dst = malloc(len);
	if (!*dst) {
		errno = ENOMEM;
		return -1;
	}
	memcpy(*dst, src, len);
	*dst_len = len;
	return 0;
}

CM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *n = res->ai_next;

		free(res->ai_connect);
		free(res->ai_route);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res);
		res = n;
	}
}

CM_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	static const struct rdma_addrinfo none;
	struct rdma_addrinfo *rai;
	struct addrinfo ah, *ai = NULL;
	int ret = 0;

	if ((!node && !service && !hints) || !res) {
		errno = EINVAL;
		return -1;
	}
	if (!hints)
		hints = &none;
	if (hints->ai_flags & RAI_SA) {
		errno = EOPNOTSUPP;
		return -1;
	}
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		errno = ENOMEM;
		return -1;
	}
	if (node || service) {
		memset(&ah, 0, sizeof(ah));
		if (hints->ai_flags & RAI_PASSIVE)
			ah.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			ah.ai_flags |= AI_NUMERICHOST;
		ah.ai_family = hints->ai_family == AF_IB ? AF_UNSPEC : hints->ai_family;
		if (!ah.ai_family)
			/* uroce speaks IPv4 (its GIDs are IPv4-mapped) */
			ah.ai_family = AF_INET;
		switch (hints->ai_qp_type) {
		case IBV_QPT_UD:
			ah.ai_socktype = SOCK_DGRAM;
			break;
		default:
			ah.ai_socktype = SOCK_STREAM;
		}
		if (hints->ai_port_space == RDMA_PS_UDP || hints->ai_port_space == RDMA_PS_IPOIB)
			ah.ai_socktype = SOCK_DGRAM;
		ret = getaddrinfo(node, service, &ah, &ai);
		if (ret) {
			/* as librdmacm: the getaddrinfo(3) error code itself */
			free(rai);
			return ret;
		}
		rai->ai_qp_type = hints->ai_qp_type ? hints->ai_qp_type
				  : ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
		rai->ai_port_space = hints->ai_port_space ? hints->ai_port_space
				     : ai->ai_socktype == SOCK_DGRAM ? RDMA_PS_UDP : RDMA_PS_TCP;
		rai->ai_family = ai->ai_family;
		if (ai->ai_flags & AI_PASSIVE) {
			rai->ai_flags = RAI_PASSIVE;
			if (ai->ai_canonname)
				rai->ai_src_canonname = strdup(ai->ai_canonname);
			ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, ai->ai_addr,
					ai->ai_addrlen);
		} else {
			if (ai->ai_canonname)
				rai->ai_dst_canonname = strdup(ai->ai_canonname);
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, ai->ai_addr,
					ai->ai_addrlen);
		}
		freeaddrinfo(ai);
	} else {
		rai->ai_flags = hints->ai_flags;
		rai->ai_family = hints->ai_family;
		rai->ai_qp_type = hints->ai_qp_type;
		rai->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_len)
			ret = copy_addr(&rai->ai_dst_addr, &rai->ai_dst_len, hints->ai_dst_addr,
					hints->ai_dst_len);
	}
	if (!ret && !rai->ai_src_len && hints->ai_src_len)
		ret = copy_addr(&rai->ai_src_addr, &rai->ai_src_len, hints->ai_src_addr,
				hints->ai_src_len);
	if (ret) {
		rdma_freeaddrinfo(rai);
		return -1;
	}
	*res = rai;
	return 0;
}
