/* Internal prototypes of the verbs layer. */
#ifndef UROCE_VERBS_INT_H
#define UROCE_VERBS_INT_H

#include <infiniband/verbs.h>

#include "engine.h"

#define UROCE_VENDOR_ID 0x5552ce    /* no hardware vendor's OUI */
#define UROCE_VENDOR_PART_ID 0x0001
#define UROCE_HW_VER 1
#define UROCE_FW_VER "0.1.0"

struct uroce_device {
	struct ibv_device ibdev;
	struct uroce_netdev nd;
	int index;
};

static inline struct uroce_device *to_udev(struct ibv_device *d)
{
	return container_of(d, struct uroce_device, ibdev);
}

/* device.c */
void uroce__fill_device_attr(struct uroce_ctx *ctx, struct ibv_device_attr *a);

/* ud.c */
int uroce__cap_net_raw(void);

/* xrc.c: XRC domains, SRQ numbers (ops wired in verbs.c) */
struct ibv_xrcd *uroce__open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *attr);
int uroce__close_xrcd(struct ibv_xrcd *ibx);
int uroce__get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num);
int uroce__xsrq_add(struct uroce_ctx *ctx, struct uroce_srq *srq);
void uroce__xsrq_remove(struct uroce_ctx *ctx, struct uroce_srq *srq);

/* verbs.c: the ops wired into each context */
void uroce__init_ops(struct uroce_ctx *ctx);

#endif
