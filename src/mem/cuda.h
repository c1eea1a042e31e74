/* CUDA device memory behind MRs, with libcuda loaded at run time.
 *
 * uroce never links CUDA: a pointer can only be device memory if the
 * process already loaded libcuda (it allocated it), so registration asks
 * dlopen(RTLD_NOLOAD) first and then cuPointerGetAttribute. Device memory
 * is read and written by the engine through pinned staging buffers and
 * cuMemcpy; managed and host-pinned CUDA memory are host memory. */
#ifndef UROCE_CUDA_H
#define UROCE_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* 1 if addr is CUDA device memory (fills the owning context); 0 if it is
 * host memory; -1 on a CUDA error (errno set). */
int uroce_cuda_probe(const void *addr, void **cuctx);
/* Synchronous copies between device memory and host memory. 0 or -1. */
int uroce_cuda_dtoh(void *cuctx, void *dst, uint64_t src_dev, size_t len);
int uroce_cuda_htod(void *cuctx, uint64_t dst_dev, const void *src, size_t len);
/* Pinned host memory for staging (falls back to malloc). */
void *uroce_cuda_host_alloc(void *cuctx, size_t len, int *pinned);
void uroce_cuda_host_free(void *p, int pinned);
const char *uroce_cuda_error(void);

#endif
