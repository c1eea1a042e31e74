/* Data-path trace: UROCE_TRACE=FILE ("%p" becomes the pid) writes one line
 * per step of every transfer, for `uroce trace --explain`:
 *
 *   <monotonic ns> <pid> <tid> <app|engine> <event> key=value ...
 *
 * Events: post_send, post_recv, doorbell, wqe_take, mem_read, pkt_tx,
 * pkt_rx, place, ack_rx, cqe, poll_cq. Off (one predictable branch) unless
 * the variable is set. */
#ifndef UROCE_TRACE_H
#define UROCE_TRACE_H

extern int uroce_trace_on;
void uroce_trace_init(void);
void uroce_trace_set_engine_thread(void);
void uroce_trace_flush(void);
void uroce__trace(const char *event, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define uroce_trace(ev, ...)                                     \
	do {                                                     \
		if (__builtin_expect(uroce_trace_on, 0))         \
			uroce__trace(ev, __VA_ARGS__);           \
	} while (0)

#endif
