/* Several processes on one host, each running its own QPs at the same time:
 * pairs of processes (a server and a client each) move data with WRITE, READ
 * and SEND concurrently; every byte must reach the QP it was meant for, so
 * payload patterns carry the pair and QP index. */
#include "common.h"

#define MIB (1024u * 1024u)

struct job {
	int pair, server;   /* which pair; 1 = responder, 0 = requester */
	int nqp;            /* QP pairs between the two processes */
	size_t size, chunk; /* bytes per operation kind per QP, bytes per WR */
	enum ibv_mtu mtu;
	int sock;           /* to the other process of the pair */
	int ready_fd, go_fd;
};

static uint64_t seed_of(const struct job *j, int qp, int kind)
{
	return 0x3000000000ULL + (uint64_t)j->pair * 1000 + (uint64_t)qp * 10 + (uint64_t)kind;
}

enum { K_WRITE = 1, K_READ = 2, K_SEND = 3 };

#define MAXQP 8

struct qpmem {
	struct tv_buf w, r, v; /* server: WRITE target, READ source, SEND target;
				  client: WRITE source, READ target, SEND source */
};

static void wait_go(const struct job *j)
{
	char c;
	struct pollfd pfd = { j->go_fd, POLLIN, 0 };

	T_EQ_INT(write(j->ready_fd, "r", 1), 1);
	T_ASSERTF(poll(&pfd, 1, 100000) == 1, "no go signal");
	T_EQ_INT(read(j->go_fd, &c, 1), 0); /* closed by the parent */
}

static void worker(struct job *j)
{
	struct tv_opts o = tv_opts_default();
	struct ibv_context *ctx;
	struct tv_side s[MAXQP];
	struct qpmem m[MAXQP];
	struct tv_info mine[MAXQP], peer[MAXQP];
	size_t nwr = j->size / j->chunk;
	double t0;

	T_LE_INT(j->nqp, MAXQP);
	o.mtu = j->mtu;
	o.max_send_wr = (uint32_t)(3 * nwr + 8);
	o.max_recv_wr = (uint32_t)(nwr + 8);
	o.cqe = (int)(4 * nwr + 64);
	memset(mine, 0, sizeof(mine));
	ctx = tv_open_device();
	for (int q = 0; q < j->nqp; q++) {
		tv_side_open(&s[q], &o, ctx);
		tv_buf_alloc(&m[q].w, s[q].pd, j->size, TV_ACCESS_ALL);
		tv_buf_alloc(&m[q].r, s[q].pd, j->size, TV_ACCESS_ALL);
		tv_buf_alloc(&m[q].v, s[q].pd, j->size, TV_ACCESS_ALL);
		if (j->server) {
			tv_fill(m[q].r.p, j->size, seed_of(j, q, K_READ));
		} else {
			tv_fill(m[q].w.p, j->size, seed_of(j, q, K_WRITE));
			tv_fill(m[q].v.p, j->size, seed_of(j, q, K_SEND));
		}
		mine[q].addr[0] = (uintptr_t)m[q].w.p;
		mine[q].rkey[0] = m[q].w.mr->rkey;
		mine[q].addr[1] = (uintptr_t)m[q].r.p;
		mine[q].rkey[1] = m[q].r.mr->rkey;
		tv_proc_connect(j->sock, &s[q], &o, &mine[q], &peer[q]);
		/* Receives go in once the QP left RESET; the client only sends
		 * after everyone is connected (wait_go). */
		if (j->server)
			for (size_t i = 0; i < nwr; i++)
				T_EQ_INT(tv_post_recv1(s[q].qp, i, &m[q].v, i * j->chunk, j->chunk), 0);
	}
	wait_go(j);
	t0 = tv_now();
	if (!j->server) {
		/* WRITE i, READ i, SEND i on every QP, all in flight at once. */
		for (size_t i = 0; i < nwr; i++)
			for (int q = 0; q < j->nqp; q++) {
				size_t off = i * j->chunk;

				T_EQ_INT(tv_post1(s[q].qp, IBV_WR_RDMA_WRITE, 3 * i, &m[q].w, off,
						  j->chunk, peer[q].addr[0] + off, peer[q].rkey[0],
						  0, IBV_SEND_SIGNALED), 0);
				T_EQ_INT(tv_post1(s[q].qp, IBV_WR_RDMA_READ, 3 * i + 1, &m[q].r, off,
						  j->chunk, peer[q].addr[1] + off, peer[q].rkey[1],
						  0, IBV_SEND_SIGNALED), 0);
				T_EQ_INT(tv_post1(s[q].qp, IBV_WR_SEND, 3 * i + 2, &m[q].v, off,
						  j->chunk, 0, 0, 0, IBV_SEND_SIGNALED), 0);
			}
		for (int q = 0; q < j->nqp; q++)
			for (size_t i = 0; i < 3 * nwr; i++)
				tv_expect_wc_to(s[q].scq, s[q].qp, i, IBV_WC_SUCCESS,
						i % 3 == 0 ? IBV_WC_RDMA_WRITE
						: i % 3 == 1 ? IBV_WC_RDMA_READ
							     : IBV_WC_SEND,
						90.0);
		for (int q = 0; q < j->nqp; q++)
			T_PATTERN(m[q].r.p, j->size, seed_of(j, q, K_READ), 0);
		t_log("pair %d client: %d QPs x 3 x %zu MiB in %.2f s", j->pair, j->nqp,
		      j->size / MIB, tv_now() - t0);
		tv_sync(j->sock); /* done; the server checks its memory */
		tv_sync(j->sock); /* the server's checks passed */
	} else {
		for (int q = 0; q < j->nqp; q++)
			for (size_t i = 0; i < nwr; i++) {
				struct ibv_wc wc = tv_expect_wc_to(s[q].rcq, s[q].qp, i,
								   IBV_WC_SUCCESS, IBV_WC_RECV,
								   90.0);

				T_EQ_INT(wc.byte_len, j->chunk);
			}
		tv_sync(j->sock);
		for (int q = 0; q < j->nqp; q++) {
			T_PATTERN(m[q].w.p, j->size, seed_of(j, q, K_WRITE), 0);
			T_PATTERN(m[q].v.p, j->size, seed_of(j, q, K_SEND), 0);
			T_PATTERN(m[q].r.p, j->size, seed_of(j, q, K_READ), 0);
		}
		tv_sync(j->sock);
	}
	for (int q = 0; q < j->nqp; q++) {
		tv_buf_free(&m[q].w);
		tv_buf_free(&m[q].r);
		tv_buf_free(&m[q].v);
		tv_side_close(&s[q]);
	}
	T_EQ_INT(ibv_close_device(ctx), 0);
}

/* Forks npairs x 2 processes, lets them connect, starts them together and
 * waits for all of them. */
static void run_pairs(int npairs, int nqp, size_t size, size_t chunk, enum ibv_mtu mtu)
{
	struct tv_proc pr[16];
	int ready[2], go[2], n = 0;
	double t0;

	T_LE_INT(npairs, 8);
	T_EQ_INT(pipe(ready), 0);
	T_EQ_INT(pipe(go), 0);
	fflush(NULL);
	for (int k = 0; k < npairs; k++) {
		int sv[2];

		T_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		for (int role = 0; role < 2; role++) {
			pid_t pid = fork();

			T_ASSERT(pid >= 0);
			if (pid == 0) {
				struct job j;

				close(go[1]);
				close(ready[0]);
				close(sv[role ? 1 : 0]);
				memset(&j, 0, sizeof(j));
				j.pair = k;
				j.server = role;
				j.nqp = nqp;
				j.size = size;
				j.chunk = chunk;
				j.mtu = mtu;
				j.sock = sv[role ? 0 : 1];
				j.ready_fd = ready[1];
				j.go_fd = go[0];
				worker(&j);
				fflush(NULL);
				_exit(0);
			}
			pr[n].pid = pid;
			pr[n].fd = -1;
			n++;
		}
		close(sv[0]);
		close(sv[1]);
	}
	close(ready[1]);
	close(go[0]);
	/* All connected, then go. */
	for (int i = 0; i < n; i++) {
		struct pollfd pfd = { ready[0], POLLIN, 0 };
		char c;

		T_ASSERTF(poll(&pfd, 1, 60000) == 1, "only %d of %d processes connected", i, n);
		T_ASSERTF(read(ready[0], &c, 1) == 1, "only %d of %d processes connected "
			  "(one failed; see above)", i, n);
	}
	t0 = tv_now();
	close(go[1]);
	for (int i = 0; i < n; i++)
		tv_proc_wait(&pr[i], 110);
	t_log("%d processes, %d QPs each, %zu MiB per operation kind per QP: %.2f s",
	      n, nqp, size / MIB, tv_now() - t0);
}

/* Baselines: the same traffic with fewer processes at once. */
T_CASE(one_pair_32m_write_read_send)
{
	run_pairs(1, 1, 32 * (size_t)MIB, MIB, IBV_MTU_4096);
}

T_CASE(two_pairs_32m_write_read_send)
{
	run_pairs(2, 1, 32 * (size_t)MIB, MIB, IBV_MTU_4096);
}

T_CASE(four_pairs_32m_write_read_send)
{
	run_pairs(4, 1, 32 * (size_t)MIB, MIB, IBV_MTU_4096);
}

T_CASE(four_pairs_four_qps_each)
{
	run_pairs(4, 4, 4 * (size_t)MIB, 256 * 1024, IBV_MTU_1024);
}

T_CASE(eight_pairs_small_messages)
{
	run_pairs(8, 2, 1 * (size_t)MIB, 4096, IBV_MTU_4096);
}

int main(int argc, char **argv)
{
	return t_run(argc, argv);
}
