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
/* Makes the stream of the context's waited-for copies (engine thread, at
 * registration: before kernels run). */
void uroce_cuda_sync_prepare(void *cuctx);
int uroce_cuda_probe(const void *addr, void **cuctx);
/* Synchronous copies between device memory and host memory. 0 or -1. */
int uroce_cuda_dtoh(void *cuctx, void *dst, uint64_t src_dev, size_t len);
int uroce_cuda_htod(void *cuctx, uint64_t dst_dev, const void *src, size_t len);
/* Pinned host memory for staging (falls back to malloc). */
void *uroce_cuda_host_alloc(void *cuctx, size_t len, int *pinned);
void uroce_cuda_host_free(void *p, int pinned);

/* Asynchronous copies on a stream of uroce's own (non-blocking: it never
 * waits for the application's work on the legacy default stream, as a
 * NIC's DMA does not), and events to know when they are done. */
void *uroce_cuda_stream_new(void *cuctx);
void uroce_cuda_stream_free(void *cuctx, void *stream);
/* dir 0: device to host, 1: host to device. 0 or -1. */
int uroce_cuda_copy_async(void *cuctx, void *stream, int dir, void *host, uint64_t dev,
			  size_t len);
void *uroce_cuda_event_new(void *cuctx);
void uroce_cuda_event_free(void *cuctx, void *ev);
int uroce_cuda_event_record(void *cuctx, void *ev, void *stream);
/* 1 done, 0 not yet, -1 error. */
int uroce_cuda_event_done(void *cuctx, void *ev);
int uroce_cuda_event_wait(void *cuctx, void *ev);
const char *uroce_cuda_error(void);

#endif
