/* Counters of one device as seen by one process, the figures a NIC exposes
 * in hw_counters and `rdma statistic`. They live in a small file in
 * /dev/shm (uroce-<pid>-<n>.stat) that the engine updates in place, so
 * `uroce stat` can read them live from another process. The layout is
 * versioned; readers check magic, version and size. */
#ifndef UROCE_COUNTERS_H
#define UROCE_COUNTERS_H

#include <stddef.h>
#include <stdint.h>

#define UROCE_STAT_MAGIC 0x74617473656f7275ull /* "urocesta" */
#define UROCE_STAT_VERSION 12
/* Engine threads a device context may run (UROCE_ENGINES); each writes
 * its own block of counters, readers add them up. */
#define UROCE_MAX_ENGINES 16
#define UROCE_STAT_DIR "/dev/shm"
#define UROCE_STAT_PREFIX "uroce-"

/* X(name, description): the name is what hw_counters would call it. */
#define UROCE_COUNTERS(X)                                                              \
	X(tx_pkts, "packets sent")                                                     \
	X(tx_bytes, "bytes sent (UDP payload)")                                        \
	X(rx_pkts, "packets received")                                                 \
	X(rx_bytes, "bytes received (UDP payload)")                                    \
	X(retrans_pkts, "packets sent again (go-back-N and selective)")                 \
	X(sr_retrans_pkts, "packets sent again selectively (selective repeat)")         \
	X(sr_sacks_sent, "SACKs sent (selective repeat NAKs)")                         \
	X(sr_sacks_rcvd, "SACKs received")                                             \
	X(sr_placed_ahead, "packets placed ahead of the expected PSN (selective repeat)") \
	X(timeouts, "local ACK timeouts (local_ack_timeout_err)")                      \
	X(timeouts_excused, "local ACK timeouts not charged to retry_cnt: the peer spoke") \
	X(seq_naks_sent, "PSN sequence error NAKs sent (out_of_sequence)")             \
	X(seq_naks_rcvd, "PSN sequence error NAKs received (packet_seq_err)")          \
	X(rnr_naks_sent, "RNR NAKs sent")                                              \
	X(rnr_naks_rcvd, "RNR NAKs received")                                          \
	X(dup_requests, "duplicate requests received (duplicate_request)")              \
	X(dup_responses, "duplicate READ responses received")                          \
	X(implied_naks, "implied NAKs (implied_nak_seq_err)")                           \
	X(retry_exceeded, "WQEs failed with retry exceeded")                           \
	X(rnr_retry_exceeded, "WQEs failed with RNR retry exceeded (rnr_nak_retry_err)") \
	X(icrc_errors, "packets dropped: bad ICRC")                                    \
	X(icrc_id_recovered, "packets whose ICRC matched only with a non-zero IP ID")  \
	X(drop_malformed, "packets dropped: malformed headers")                        \
	X(drop_bad_qpn, "packets dropped: wrong destination QP")                       \
	X(drop_state, "packets dropped: QP not in a state to take them")               \
	X(drop_pkey, "packets dropped: P_Key mismatch")                                \
	X(drop_opcode, "packets dropped: opcode not valid here")                       \
	X(drop_tx_full, "packets not sent: socket refused")                            \
	X(acks_sent, "ACKs sent")                                                      \
	X(acks_rcvd, "ACKs received")                                                  \
	X(rem_access_errs, "remote access errors (NAK)")                               \
	X(rem_inv_req_errs, "remote invalid request errors (NAK)")                     \
	X(cnp_sent, "CNPs sent (np_cnp_sent)")                                         \
	X(cnp_handled, "CNPs handled (rp_cnp_handled)")                                \
	X(ecn_marked, "ECN-marked packets received (np_ecn_marked_roce_packets)")      \
	X(ecn_queue_marked, "packets marked CE here: receive backlog over UROCE_ECN_QUEUE_KB") \
	X(cc_rate_cuts, "DCQCN rate cuts (CNPs acted on)")                             \
	X(cc_rate_incs, "DCQCN rate increase events (timer and byte counter)")         \
	X(cc_pace_waits, "times the DCQCN pacer held a QP's next packet")              \
	X(fault_dropped, "fault injection: packets dropped")                           \
	X(fault_duplicated, "fault injection: packets duplicated")                     \
	X(fault_corrupted, "fault injection: packets corrupted")                       \
	X(fault_reordered, "fault injection: packets reordered")                       \
	X(fault_delayed, "fault injection: packets delayed")                           \
	X(rx_fwd_out, "packets handed to the process owning their QP")               \
	X(rx_fwd_in, "packets handed over by another process")                         \
	X(fwd_failed, "packets not handed over: the owner's mailbox was full")         \
	X(flows_learned, "flow sockets connected to a peer port learned from traffic") \
	X(drop_qkey, "packets dropped: Q_Key mismatch (UD)")                            \
	X(drop_no_rwqe, "packets dropped: no receive WQE posted (UD, UC)")              \
	X(uc_msgs_dropped, "UC messages dropped whole after a missing packet")          \
	X(ud_len_errs, "UD datagrams longer than the receive WQE (completed in error)") \
	X(ooo_held, "packets after a gap held until it filled (reordering)")          \
	X(ooo_full, "packets after a gap dropped: no room to hold them")              \
	X(gap_filled, "gaps at the expected PSN filled before they were reported")    \
	X(rd_placed_ahead, "READ responses placed ahead of a gap")                    \
	X(rx_sock_drops, "packets the kernel dropped: receive socket buffer full")    \
	X(timer_holds, "engine turns whose retransmission timers waited for unread input") \
	X(tail_probes, "early timeouts that resent one probe packet instead of the window") \
	X(acks_held, "requested ACKs held over an application turn to leave with its reply") \
	X(timeouts_deferred, "local ACK timeouts not judged: the engine's own turns were too slow") \
	X(read_resp_abandoned, "re-executed READ responses abandoned: the MR went away meanwhile") \
	X(park_skips, "engine thread wakeups that parked again: an application thread had taken turns") \
	X(full_poll_turns, "turns taken by polls that found completions (every 16th such poll, or posts waited)") \
	X(posts_deferred, "posts left to a polling application's next turn, sent together") \
	X(gpu_place_copies, "copies of received payload into GPU memory started")     \
	X(gpu_place_bytes, "bytes copied into GPU memory (received payload)")         \
	X(gpu_stage_copies, "copies of GPU memory into staging buffers, to send it")  \
	X(gpu_stage_bytes, "bytes copied out of GPU memory to send them")             \
	X(gpu_stage_sync, "send windows copied out of GPU memory while the engine waited") \
	X(gpu_prefetch_hits, "send windows served from a copy started ahead (prefetch)") \
	X(gpu_wait_ns, "nanoseconds the engine thread waited for GPU copies")          \
	X(gpu_acks_deferred, "times a due ACK waited 2 us more for its payload's GPU copies")

struct uroce_counters {
#define X(n, d) uint64_t n;
	UROCE_COUNTERS(X)
#undef X
};

struct uroce_stat_file {
	uint64_t magic;
	uint32_t version;
	uint32_t size;            /* sizeof(struct uroce_stat_file) */
	int32_t pid;
	uint32_t nqps;            /* QPs open now */
	uint64_t start_ns;        /* CLOCK_REALTIME when the context opened */
	char ibdev[64];
	char ifname[16];
	char comm[32];            /* the process name */
	struct uroce_counters cnt;   /* the first engine's; the sum in a snapshot */
	struct uroce_counters more[UROCE_MAX_ENGINES - 1]; /* the other engines' */
};

/* The counters of all of a file's engines, added up. */
static inline void uroce_stat_total(const struct uroce_stat_file *f, struct uroce_counters *out)
{
	uint64_t *o = (uint64_t *)out;
	const uint64_t *v = (const uint64_t *)&f->cnt;

	for (size_t k = 0; k < sizeof(*out) / sizeof(uint64_t); k++)
		o[k] = v[k];
	for (int i = 0; i < UROCE_MAX_ENGINES - 1; i++) {
		v = (const uint64_t *)&f->more[i];
		for (size_t k = 0; k < sizeof(*out) / sizeof(uint64_t); k++)
			o[k] += v[k];
	}
}

#endif
