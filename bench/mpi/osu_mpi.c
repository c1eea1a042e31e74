/* osu_mpi: MPI micro-benchmarks in the style of the OSU micro-benchmarks
 * (osu_allreduce, osu_latency, osu_bw), for make bench-mpi (issue 13).
 *
 *   mpirun ... osu_mpi [-t SECONDS] [-a SIZES] [-l SIZES] [-b SIZES] [-e SIZES] [-w WINDOW] [-x MAXITERS]
 *
 * SIZES are comma-separated byte counts. One JSON line per measurement on
 * rank 0's stdout:
 *   {"bench":"allreduce","size":S,"ranks":N,"iters":K,"avg_us":..,"min_us":..,"max_us":..,"ok":true}
 *     MPI_Allreduce of S bytes of MPI_FLOAT (MPI_SUM): the time per call,
 *     averaged over the iterations on each rank; avg/min/max over the
 *     ranks (osu_allreduce reports the average). The first call's result
 *     is checked against the exact sum ("ok").
 *   {"bench":"latency","size":S,"iters":K,"avg_us":..}
 *     ping-pong between ranks 0 and 1 (osu_latency): half the round trip.
 *   {"bench":"bw","size":S,"iters":K,"window":W,"MBps":..}
 *     ranks 0 -> 1, W non-blocking sends in flight then a 4-byte reply per
 *     iteration (osu_bw), MB = 1e6 bytes.
 *   {"bench":"exchange","size":S,"iters":K,"avg_us":..}
 *     ranks 0 and 1 swap S bytes at once (MPI_Sendrecv, both directions
 *     busy, as in a 2-rank allreduce's steps): the time per swap. Off
 *     unless -e names sizes.
 * Iterations: each size runs for about SECONDS (default 0.3) after a
 * calibration of a few calls, at least 5 and at most MAXITERS (1000),
 * after a tenth as many warm-up calls; rank 0 decides, everyone follows. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;

static int parse_sizes(const char *s, size_t *out, int max)
{
	int n = 0;

	while (s && *s && n < max) {
		char *end;
		unsigned long long v = strtoull(s, &end, 0);

		if (end == s)
			break;
		out[n++] = (size_t)v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* rank 0's choice of iterations from the time t of one call */
static int pick_iters(double t, double secs, int maxit)
{
	int it = maxit;

	if (rank == 0) {
		double want = t > 0 ? secs / t : maxit;

		it = want > maxit ? maxit : want < 5 ? 5 : (int)want;
	}
	MPI_Bcast(&it, 1, MPI_INT, 0, MPI_COMM_WORLD);
	return it;
}

static void allreduce(size_t size, double secs, int maxit)
{
	int cnt = (int)(size / sizeof(float)), ok = 1, allok;
	float *s = malloc(size), *r = malloc(size);
	double t0, t, lmin, lmax, lsum;

	if (cnt < 1)
		cnt = 1;
	for (int i = 0; i < cnt; i++)
		s[i] = (float)((rank + 1) * (i % 7 + 1));
	memset(r, 0, size);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	for (int i = 0; i < cnt; i++)
		if (r[i] != (float)((i % 7 + 1) * nranks * (nranks + 1) / 2)) {
			ok = 0;
			break;
		}
	/* calibration: 2 calls */
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int k = 0; k < 2; k++)
		MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	t = (MPI_Wtime() - t0) / 2;
	MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	int it = pick_iters(t, secs, maxit), warm = it / 10 > 0 ? it / 10 : 1;

	for (int k = 0; k < warm; k++)
		MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	for (int k = 0; k < it; k++)
		MPI_Allreduce(s, r, cnt, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	t = (MPI_Wtime() - t0) / it * 1e6;
	MPI_Reduce(&t, &lmin, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
	MPI_Reduce(&t, &lmax, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(&t, &lsum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&ok, &allok, 1, MPI_INT, MPI_MIN, 0, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("{\"bench\":\"allreduce\",\"size\":%zu,\"ranks\":%d,\"iters\":%d,\"avg_us\":%.3f,"
		       "\"min_us\":%.3f,\"max_us\":%.3f,\"ok\":%s}\n",
		       (size_t)cnt * sizeof(float), nranks, it, lsum / nranks, lmin, lmax, allok ? "true" : "false");
		fflush(stdout);
	}
	free(s);
	free(r);
}

static void pingpong(char *buf, int size, int n)
{
	for (int k = 0; k < n; k++) {
		if (rank == 0) {
			MPI_Send(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
			MPI_Recv(buf, size, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			MPI_Recv(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, size, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
		}
	}
}

static void latency(size_t size, double secs, int maxit)
{
	char *buf = calloc(1, size ? size : 1);
	double t0, t = 0;

	MPI_Barrier(MPI_COMM_WORLD);
	pingpong(buf, (int)size, 1);
	t0 = MPI_Wtime();
	pingpong(buf, (int)size, 2);
	t = (MPI_Wtime() - t0) / 2;
	int it = pick_iters(t, secs, maxit), warm = it / 10 > 0 ? it / 10 : 1;

	pingpong(buf, (int)size, warm);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	pingpong(buf, (int)size, it);
	t = MPI_Wtime() - t0;
	if (rank == 0) {
		printf("{\"bench\":\"latency\",\"size\":%zu,\"iters\":%d,\"avg_us\":%.3f}\n", size, it,
		       t / (2.0 * it) * 1e6);
		fflush(stdout);
	}
	free(buf);
}

static void swap(char *s, char *r, int size, int n)
{
	int peer = rank == 0 ? 1 : 0;

	for (int k = 0; k < n && rank < 2; k++)
		MPI_Sendrecv(s, size, MPI_CHAR, peer, 2, r, size, MPI_CHAR, peer, 2, MPI_COMM_WORLD,
			     MPI_STATUS_IGNORE);
}

static void exchange(size_t size, double secs, int maxit)
{
	char *s = calloc(1, size ? size : 1), *r = calloc(1, size ? size : 1);
	double t0, t;

	MPI_Barrier(MPI_COMM_WORLD);
	swap(s, r, (int)size, 1);
	t0 = MPI_Wtime();
	swap(s, r, (int)size, 2);
	t = (MPI_Wtime() - t0) / 2;
	int it = pick_iters(t, secs, maxit), warm = it / 10 > 0 ? it / 10 : 1;

	swap(s, r, (int)size, warm);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	swap(s, r, (int)size, it);
	t = MPI_Wtime() - t0;
	if (rank == 0) {
		printf("{\"bench\":\"exchange\",\"size\":%zu,\"iters\":%d,\"avg_us\":%.3f}\n", size, it,
		       t / it * 1e6);
		fflush(stdout);
	}
	free(s);
	free(r);
}

static void bw_loop(char *s, char *r, int size, int window, int n)
{
	MPI_Request *req = malloc(sizeof(*req) * (size_t)window);
	char ack[4] = {0};

	for (int k = 0; k < n; k++) {
		if (rank == 0) {
			for (int w = 0; w < window; w++)
				MPI_Isend(s, size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Recv(ack, 4, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else if (rank == 1) {
			for (int w = 0; w < window; w++)
				MPI_Irecv(r, size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &req[w]);
			MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
			MPI_Send(ack, 4, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
		}
	}
	free(req);
}

static void bandwidth(size_t size, int window, double secs, int maxit)
{
	char *s = calloc(1, size), *r = calloc(1, size);
	double t0, t;

	MPI_Barrier(MPI_COMM_WORLD);
	bw_loop(s, r, (int)size, window, 1);
	t0 = MPI_Wtime();
	bw_loop(s, r, (int)size, window, 2);
	t = (MPI_Wtime() - t0) / 2;
	int it = pick_iters(t, secs, maxit), warm = it / 10 > 0 ? it / 10 : 1;

	bw_loop(s, r, (int)size, window, warm);
	MPI_Barrier(MPI_COMM_WORLD);
	t0 = MPI_Wtime();
	bw_loop(s, r, (int)size, window, it);
	t = MPI_Wtime() - t0;
	if (rank == 0) {
		printf("{\"bench\":\"bw\",\"size\":%zu,\"iters\":%d,\"window\":%d,\"MBps\":%.3f}\n", size, it,
		       window, (double)size * window * it / t / 1e6);
		fflush(stdout);
	}
	free(s);
	free(r);
}

int main(int argc, char **argv)
{
	size_t asz[64], lsz[64], bsz[64], esz[64];
	int na, nl, nb, ne = 0, opt, window = 64, maxit = 1000;
	double secs = 0.3;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	na = parse_sizes("8,64,512,4096,32768,262144,1048576,4194304,16777216", asz, 64);
	nl = parse_sizes("8,64,512,4096,32768,262144,1048576", lsz, 64);
	nb = parse_sizes("4096,65536,1048576,4194304", bsz, 64);
	while ((opt = getopt(argc, argv, "t:a:l:b:e:w:x:")) != -1) {
		switch (opt) {
		case 't': secs = atof(optarg); break;
		case 'a': na = parse_sizes(optarg, asz, 64); break;
		case 'l': nl = parse_sizes(optarg, lsz, 64); break;
		case 'b': nb = parse_sizes(optarg, bsz, 64); break;
		case 'e': ne = parse_sizes(optarg, esz, 64); break;
		case 'w': window = atoi(optarg); break;
		case 'x': maxit = atoi(optarg); break;
		default:
			if (!rank)
				fprintf(stderr, "usage: osu_mpi [-t SECONDS] [-a SIZES] [-l SIZES] [-b SIZES] [-e SIZES] [-w WINDOW] [-x MAXITERS]\n");
			MPI_Finalize();
			return 2;
		}
	}
	if (nranks < 2) {
		if (!rank)
			fprintf(stderr, "osu_mpi: needs at least 2 ranks\n");
		MPI_Finalize();
		return 2;
	}
	if (rank == 0) {
		char host[256] = "";

		gethostname(host, sizeof(host) - 1);
		printf("{\"bench\":\"start\",\"ranks\":%d,\"host0\":\"%s\",\"secs\":%g,\"window\":%d}\n", nranks, host,
		       secs, window);
		fflush(stdout);
	}
	for (int i = 0; i < nl; i++)
		latency(lsz[i], secs, maxit);
	for (int i = 0; i < nb; i++)
		bandwidth(bsz[i], window, secs, maxit);
	for (int i = 0; i < ne; i++)
		exchange(esz[i], secs, maxit);
	for (int i = 0; i < na; i++)
		allreduce(asz[i], secs, maxit);
	if (rank == 0) {
		printf("{\"bench\":\"end\"}\n");
		fflush(stdout);
	}
	MPI_Finalize();
	return 0;
}
