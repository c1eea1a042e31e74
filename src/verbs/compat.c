/* ABI compatibility surface that uroce does not implement.
 *
 * 1. IBVERBS_PRIVATE_34: the provider-facing interface of rdma-core
 *    (ibv_cmd_*, verbs_*, execute_ioctl, ...). Distro providers such as
 *    libmlx5/libefa link against it, and perftest links those providers, so
 *    the symbols must exist for the dynamic linker. uroce has no kernel
 *    uverbs device behind it, so nothing here can do real work: functions
 *    returning int return EOPNOTSUPP (rdma-core's convention of returning an
 *    errno value), pointer-returning functions return NULL with errno set to
 *    EOPNOTSUPP, void functions do nothing. Exceptions:
 *      - verbs_register_driver_34: called from provider constructors at load
 *        time; accepted and ignored.
 *      - __verbs_log: printf-style provider logger; printed only when
 *        UROCE_LOG=debug.
 *      - verbs_allow_disassociate_destroy: a 1-byte data object (DO, .bss,
 *        size 1) in the system library, so it is a bool here.
 *      - __ioctl_final_num_attrs: a function (DF); returns the count it was
 *        given since no command buffers are ever linked or executed.
 *    ibv_query_gid_type and ibv_read_ibdev_sysfs_file are in this node too
 *    but are real functions implemented elsewhere.
 *
 * 2. The non-default compat versions name@IBVERBS_1.0 (33 symbols, the
 *    pre-1.1 ABI with differently laid out structs) and
 *    ibv_register_driver@IBVERBS_1.1. Nothing built in the last fifteen years
 *    binds to them; they exist so that the symbol table matches the system
 *    library. They are bound with .symver and fail with EOPNOTSUPP.
 *
 * The prototypes of (1) live in rdma-core's internal driver.h, which is not
 * installed; the ones below are our own minimal declarations. Argument
 * types are reduced to void pointers and scalars (the C calling convention
 * does not check them); what matters is the return type.
 */
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* --------------------------------------------------------------------- */
/* IBVERBS_PRIVATE_34                                                     */
/* --------------------------------------------------------------------- */

/* Data object: size 1 in the system library. Providers read it to decide
 * whether destroy may succeed after device disassociation. */
UROCE_EXPORT bool verbs_allow_disassociate_destroy;

/* Own minimal prototypes (rdma-core driver.h is not public). */
UROCE_EXPORT void verbs_register_driver_34(const void *ops);
UROCE_EXPORT void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
UROCE_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link);
UROCE_EXPORT int execute_ioctl(void *context, void *cmdb);
UROCE_EXPORT void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
						 void *context_offset, uint32_t driver_id);
UROCE_EXPORT void *verbs_open_device(void *device, void *private_data);
UROCE_EXPORT void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context);
UROCE_EXPORT void verbs_set_ops(void *vctx, const void *ops);
UROCE_EXPORT void verbs_uninit_context(void *vctx);

void verbs_register_driver_34(const void *ops)
{
	/* Providers register themselves from their constructors. uroce is its
	 * own provider and never loads another one, so registration is a
	 * no-op (and silent unless UROCE_LOG=debug). */
	uroce_dbg("ignoring provider registration (ops %p)", ops);
}

void __verbs_log(void *vctx, uint32_t level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	size_t n;

	if (likely(uroce__log_level < UROCE_LOG_DEBUG) || !fmt)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	n = strlen(buf);
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	uroce__log(UROCE_LOG_DEBUG, "provider log (level %u): %s", (unsigned int)level, buf);
}

unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void *link)
{
	/* Command buffers are never executed (execute_ioctl fails), so linked
	 * buffers are never merged; the caller's own count is enough. */
	return num_attrs;
}

int execute_ioctl(void *context, void *cmdb)
{
	return EOPNOTSUPP;
}

void *_verbs_init_and_alloc_context(void *device, int cmd_fd, size_t alloc_size,
				    void *context_offset, uint32_t driver_id)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void *verbs_open_device(void *device, void *private_data)
{
	errno = EOPNOTSUPP;
	return NULL;
}

void verbs_init_cq(void *cq, void *context, void *channel, void *cq_context)
{
}

void verbs_set_ops(void *vctx, const void *ops)
{
}

void verbs_uninit_context(void *vctx)
{
}

/* ibv_cmd_*: every one returns int (0 or an errno value). The real
 * argument lists differ per command; none is ever read here. */
#define UROCE_CMD_STUB(name)                          \
	UROCE_EXPORT int name(void);                  \
	int name(void)                                \
	{                                             \
		return EOPNOTSUPP;                    \
	}

UROCE_CMD_STUB(ibv_cmd_advise_mr)
UROCE_CMD_STUB(ibv_cmd_alloc_dm)
UROCE_CMD_STUB(ibv_cmd_alloc_mw)
UROCE_CMD_STUB(ibv_cmd_alloc_pd)
UROCE_CMD_STUB(ibv_cmd_attach_mcast)
UROCE_CMD_STUB(ibv_cmd_close_xrcd)
UROCE_CMD_STUB(ibv_cmd_create_ah)
UROCE_CMD_STUB(ibv_cmd_create_counters)
UROCE_CMD_STUB(ibv_cmd_create_cq)
UROCE_CMD_STUB(ibv_cmd_create_cq_ex)
UROCE_CMD_STUB(ibv_cmd_create_flow)
UROCE_CMD_STUB(ibv_cmd_create_flow_action_esp)
UROCE_CMD_STUB(ibv_cmd_create_qp)
UROCE_CMD_STUB(ibv_cmd_create_qp_ex)
UROCE_CMD_STUB(ibv_cmd_create_qp_ex2)
UROCE_CMD_STUB(ibv_cmd_create_rwq_ind_table)
UROCE_CMD_STUB(ibv_cmd_create_srq)
UROCE_CMD_STUB(ibv_cmd_create_srq_ex)
UROCE_CMD_STUB(ibv_cmd_create_wq)
UROCE_CMD_STUB(ibv_cmd_dealloc_mw)
UROCE_CMD_STUB(ibv_cmd_dealloc_pd)
UROCE_CMD_STUB(ibv_cmd_dereg_mr)
UROCE_CMD_STUB(ibv_cmd_destroy_ah)
UROCE_CMD_STUB(ibv_cmd_destroy_counters)
UROCE_CMD_STUB(ibv_cmd_destroy_cq)
UROCE_CMD_STUB(ibv_cmd_destroy_flow)
UROCE_CMD_STUB(ibv_cmd_destroy_flow_action)
UROCE_CMD_STUB(ibv_cmd_destroy_qp)
UROCE_CMD_STUB(ibv_cmd_destroy_rwq_ind_table)
UROCE_CMD_STUB(ibv_cmd_destroy_srq)
UROCE_CMD_STUB(ibv_cmd_destroy_wq)
UROCE_CMD_STUB(ibv_cmd_detach_mcast)
UROCE_CMD_STUB(ibv_cmd_free_dm)
UROCE_CMD_STUB(ibv_cmd_get_context)
UROCE_CMD_STUB(ibv_cmd_modify_cq)
UROCE_CMD_STUB(ibv_cmd_modify_flow_action_esp)
UROCE_CMD_STUB(ibv_cmd_modify_qp)
UROCE_CMD_STUB(ibv_cmd_modify_qp_ex)
UROCE_CMD_STUB(ibv_cmd_modify_srq)
UROCE_CMD_STUB(ibv_cmd_modify_wq)
UROCE_CMD_STUB(ibv_cmd_open_qp)
UROCE_CMD_STUB(ibv_cmd_open_xrcd)
UROCE_CMD_STUB(ibv_cmd_poll_cq)
UROCE_CMD_STUB(ibv_cmd_post_recv)
UROCE_CMD_STUB(ibv_cmd_post_send)
UROCE_CMD_STUB(ibv_cmd_post_srq_recv)
UROCE_CMD_STUB(ibv_cmd_query_context)
UROCE_CMD_STUB(ibv_cmd_query_device_any)
UROCE_CMD_STUB(ibv_cmd_query_mr)
UROCE_CMD_STUB(ibv_cmd_query_port)
UROCE_CMD_STUB(ibv_cmd_query_qp)
UROCE_CMD_STUB(ibv_cmd_query_srq)
UROCE_CMD_STUB(ibv_cmd_read_counters)
UROCE_CMD_STUB(ibv_cmd_reg_dm_mr)
UROCE_CMD_STUB(ibv_cmd_reg_dmabuf_mr)
UROCE_CMD_STUB(ibv_cmd_reg_mr)
UROCE_CMD_STUB(ibv_cmd_req_notify_cq)
UROCE_CMD_STUB(ibv_cmd_rereg_mr)
UROCE_CMD_STUB(ibv_cmd_resize_cq)

/* --------------------------------------------------------------------- */
/* Non-default compat versions                                            */
/* --------------------------------------------------------------------- */

/* The implementation symbols are default-visibility so that the versioned
 * aliases are exported; the version script's "local: *" keeps the
 * uroce_compat_* names themselves out of the dynamic symbol table. */

/* Returns 0 (failure) or an errno value. */
#define UROCE_COMPAT10_INT(name)                                              \
	UROCE_EXPORT int uroce_compat10_##name(void);                         \
	int uroce_compat10_##name(void)                                       \
	{                                                                     \
		return EOPNOTSUPP;                                            \
	}                                                                     \
	__asm__(".symver uroce_compat10_" #name ", " #name "@IBVERBS_1.0");

/* Returns NULL with errno set. */
#define UROCE_COMPAT10_PTR(name)                                              \
	UROCE_EXPORT void *uroce_compat10_##name(void);                       \
	void *uroce_compat10_##name(void)                                     \
	{                                                                     \
		errno = EOPNOTSUPP;                                           \
		return NULL;                                                  \
	}                                                                     \
	__asm__(".symver uroce_compat10_" #name ", " #name "@IBVERBS_1.0");

/* Returns nothing. */
#define UROCE_COMPAT10_VOID(name)                                             \
	UROCE_EXPORT void uroce_compat10_##name(void);                        \
	void uroce_compat10_##name(void)                                      \
	{                                                                     \
	}                                                                     \
	__asm__(".symver uroce_compat10_" #name ", " #name "@IBVERBS_1.0");

UROCE_COMPAT10_VOID(ibv_ack_async_event)
UROCE_COMPAT10_VOID(ibv_ack_cq_events)
UROCE_COMPAT10_PTR(ibv_alloc_pd)
UROCE_COMPAT10_INT(ibv_attach_mcast)
UROCE_COMPAT10_INT(ibv_close_device)
UROCE_COMPAT10_PTR(ibv_create_ah)
UROCE_COMPAT10_PTR(ibv_create_cq)
UROCE_COMPAT10_PTR(ibv_create_qp)
UROCE_COMPAT10_PTR(ibv_create_srq)
UROCE_COMPAT10_INT(ibv_dealloc_pd)
UROCE_COMPAT10_INT(ibv_dereg_mr)
UROCE_COMPAT10_INT(ibv_destroy_ah)
UROCE_COMPAT10_INT(ibv_destroy_cq)
UROCE_COMPAT10_INT(ibv_destroy_qp)
UROCE_COMPAT10_INT(ibv_destroy_srq)
UROCE_COMPAT10_INT(ibv_detach_mcast)
UROCE_COMPAT10_VOID(ibv_free_device_list)
UROCE_COMPAT10_INT(ibv_get_async_event)
UROCE_COMPAT10_INT(ibv_get_cq_event)
UROCE_COMPAT10_PTR(ibv_get_device_name)
UROCE_COMPAT10_INT(ibv_modify_qp)
UROCE_COMPAT10_INT(ibv_modify_srq)
UROCE_COMPAT10_PTR(ibv_open_device)
UROCE_COMPAT10_INT(ibv_query_device)
UROCE_COMPAT10_INT(ibv_query_gid)
UROCE_COMPAT10_INT(ibv_query_pkey)
UROCE_COMPAT10_INT(ibv_query_port)
UROCE_COMPAT10_INT(ibv_query_qp)
UROCE_COMPAT10_INT(ibv_query_srq)
UROCE_COMPAT10_PTR(ibv_reg_mr)
UROCE_COMPAT10_INT(ibv_resize_cq)

/* ibv_get_device_list@IBVERBS_1.0: no devices (and say so in *num). */
UROCE_EXPORT void *uroce_compat10_ibv_get_device_list(int *num_devices);
void *uroce_compat10_ibv_get_device_list(int *num_devices)
{
	if (num_devices)
		*num_devices = 0;
	errno = EOPNOTSUPP;
	return NULL;
}
__asm__(".symver uroce_compat10_ibv_get_device_list, ibv_get_device_list@IBVERBS_1.0");

/* ibv_get_device_guid@IBVERBS_1.0 returns a __be64 GUID; 0 means none. */
UROCE_EXPORT uint64_t uroce_compat10_ibv_get_device_guid(void *device);
uint64_t uroce_compat10_ibv_get_device_guid(void *device)
{
	errno = EOPNOTSUPP;
	return 0;
}
__asm__(".symver uroce_compat10_ibv_get_device_guid, ibv_get_device_guid@IBVERBS_1.0");

/* ibv_register_driver@IBVERBS_1.1: the pre-verbs_device_ops registration
 * entry point (void). Old-style drivers cannot work with uroce; ignore. */
UROCE_EXPORT void uroce_compat11_ibv_register_driver(const char *name, void *init_func);
void uroce_compat11_ibv_register_driver(const char *name, void *init_func)
{
}
__asm__(".symver uroce_compat11_ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
