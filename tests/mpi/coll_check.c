/* coll_check: MPI collectives with every result checked (issue 13).
 *
 *   mpirun ... coll_check [-n ITERS] [-m MAXBYTES] [-t SECONDS] [-k RANK [-s]]
 *
 * Per iteration and per size (8 B .. MAXBYTES per rank, x16 each step):
 * MPI_Allreduce (double sum and int max), MPI_Allgather, MPI_Alltoall and
 * MPI_Bcast (from a root that moves every iteration), each output buffer
 * poisoned first and compared element by element with the value every rank
 * can compute on its own (the values depend on rank, index and iteration,
 * so a stale or misplaced block is caught). Rank 0 prints one line per
 * collective ("allreduce ok 2 ranks 7 sizes 3 iters") and a final
 * "coll_check ok" or "coll_check BAD"; exit status 0 only when every rank
 * saw every result right.
 *
 * -t SECONDS: keep repeating the iterations for that long (loops, then the
 * summary); -k RANK: that rank prints "killme PID" and keeps going (a test
 * kills it from outside). Both are for the failure test: the other ranks
 * must leave with an error, not hang. -s (with -k): instead of collectives,
 * every other rank streams 4 KiB messages to RANK, which receives them all:
 * a peer frozen by SIGSTOP is only noticed by a sender with work in flight
 * (RC has no keepalive), and in a collective every rank may be waiting to
 * receive at the moment of the stop. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;
static long bad[4];
static const char *names[4] = {"allreduce", "allgather", "alltoall", "bcast"};

/* the value element i of rank r contributes in iteration it */
static double val(int r, size_t i, int it)
{
	return (double)((r + 1) * 1000003u % 65521u) + (double)(i % 4099) * 3.0 + it * 7.0;
}

static void report_bad(int c, size_t cnt, size_t i, double got, double want)
{
	if (bad[c]++ < 3)
		fprintf(stderr, "rank %d: %s count %zu element %zu: got %.17g, want %.17g\n",
			rank, names[c], cnt, i, got, want);
}

static void one_round(size_t maxbytes, int it)
{
	for (size_t bytes = 8; bytes <= maxbytes; bytes *= 16) {
		size_t cnt = bytes / sizeof(double), i;
		double *a = malloc(bytes), *b = malloc(bytes * (size_t)nranks);
		double *c = malloc(bytes * (size_t)nranks);
		int *ia = malloc(cnt * sizeof(int)), *ib = malloc(cnt * sizeof(int));

		if (!a || !b || !c || !ia || !ib) {
			fprintf(stderr, "rank %d: out of memory\n", rank);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		/* Allreduce: sum of doubles (exact: small integers) and max of ints */
		for (i = 0; i < cnt; i++) {
			a[i] = val(rank, i, it);
			ia[i] = (int)((rank * 7919 + i * 31 + it) % 100003);
		}
		memset(b, 0xff, bytes);
		MPI_Allreduce(a, b, (int)cnt, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		for (i = 0; i < cnt; i++) {
			double want = 0;
			for (int r = 0; r < nranks; r++)
				want += val(r, i, it);
			if (b[i] != want) {
				report_bad(0, cnt, i, b[i], want);
				break;
			}
		}
		memset(ib, 0xff, cnt * sizeof(int));
		MPI_Allreduce(ia, ib, (int)cnt, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
		for (i = 0; i < cnt; i++) {
			int want = -1;
			for (int r = 0; r < nranks; r++) {
				int v = (int)((r * 7919 + i * 31 + it) % 100003);
				if (v > want)
					want = v;
			}
			if (ib[i] != want) {
				report_bad(0, cnt, i, ib[i], want);
				break;
			}
		}
		/* Allgather: block r of the result is rank r's a[] */
		memset(b, 0xff, bytes * (size_t)nranks);
		MPI_Allgather(a, (int)cnt, MPI_DOUBLE, b, (int)cnt, MPI_DOUBLE, MPI_COMM_WORLD);
		for (int r = 0; r < nranks; r++)
			for (i = 0; i < cnt; i++)
				if (b[(size_t)r * cnt + i] != val(r, i, it)) {
					report_bad(1, cnt, i, b[(size_t)r * cnt + i], val(r, i, it));
					r = nranks;
					break;
				}
		/* Alltoall: block d of rank s's send buffer goes to rank d's block s */
		for (int d = 0; d < nranks; d++)
			for (i = 0; i < cnt; i++)
				c[(size_t)d * cnt + i] = val(rank, i, it) + d * 0.5;
		memset(b, 0xff, bytes * (size_t)nranks);
		MPI_Alltoall(c, (int)cnt, MPI_DOUBLE, b, (int)cnt, MPI_DOUBLE, MPI_COMM_WORLD);
		for (int s = 0; s < nranks; s++)
			for (i = 0; i < cnt; i++) {
				double want = val(s, i, it) + rank * 0.5;
				if (b[(size_t)s * cnt + i] != want) {
					report_bad(2, cnt, i, b[(size_t)s * cnt + i], want);
					s = nranks;
					break;
				}
			}
		/* Bcast from a root that changes with the iteration and size */
		int root = (int)((it + bytes) % (size_t)nranks);
		if (rank == root)
			for (i = 0; i < cnt; i++)
				b[i] = val(root, i, it) + 0.25;
		else
			memset(b, 0xff, bytes);
		MPI_Bcast(b, (int)cnt, MPI_DOUBLE, root, MPI_COMM_WORLD);
		for (i = 0; i < cnt; i++)
			if (b[i] != val(root, i, it) + 0.25) {
				report_bad(3, cnt, i, b[i], val(root, i, it) + 0.25);
				break;
			}
		free(a);
		free(b);
		free(c);
		free(ia);
		free(ib);
	}
}

int main(int argc, char **argv)
{
	int iters = 3, opt, kill_rank = -1, nsizes = 0, it = 0, stream = 0;
	size_t maxbytes = 1 << 20;
	double secs = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	while ((opt = getopt(argc, argv, "n:m:t:k:s")) != -1) {
		switch (opt) {
		case 'n': iters = atoi(optarg); break;
		case 'm': maxbytes = strtoull(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'k': kill_rank = atoi(optarg); break;
		case 's': stream = 1; break;
		default:
			if (!rank)
				fprintf(stderr, "usage: coll_check [-n ITERS] [-m MAXBYTES] [-t SECONDS] [-k RANK]\n");
			MPI_Finalize();
			return 2;
		}
	}
	for (size_t b = 8; b <= maxbytes; b *= 16)
		nsizes++;
	if (rank == kill_rank) {
		printf("killme %d\n", (int)getpid());
		fflush(stdout);
	}
	double t0 = MPI_Wtime();
	if (stream && kill_rank >= 0 && kill_rank < nranks) {
		static char msg[4096];
		long n = 0;

		/* the victim takes one message from each sender per round;
		 * rank 0's clock decides when all stop, every 256 rounds */
		for (int go = 1; go;) {
			for (int j = 0; j < 256; j++, n++) {
				if (rank == kill_rank) {
					for (int i = 0; i < nranks - 1; i++)
						MPI_Recv(msg, sizeof(msg), MPI_CHAR, MPI_ANY_SOURCE, 7,
							 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				} else {
					memset(msg, (int)(n & 0xff), sizeof(msg));
					MPI_Send(msg, sizeof(msg), MPI_CHAR, kill_rank, 7, MPI_COMM_WORLD);
				}
			}
			go = MPI_Wtime() - t0 < (secs > 0 ? secs : 1);
			MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		if (!rank)
			printf("coll_check stream ok (%ld rounds)\n", n);
		MPI_Finalize();
		return 0;
	}
	do {
		for (int k = 0; k < iters; k++, it++)
			one_round(maxbytes, it);
	} while (secs > 0 && MPI_Wtime() - t0 < secs);

	long tot[4];
	MPI_Reduce(bad, tot, 4, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
	if (!rank) {
		long all = 0;
		for (int c = 0; c < 4; c++) {
			printf("%s %s %d ranks %d sizes %d iters\n", names[c], tot[c] ? "BAD" : "ok", nranks, nsizes, it);
			all += tot[c];
		}
		printf("coll_check %s (%d ranks, %.2f s)\n", all ? "BAD" : "ok", nranks, MPI_Wtime() - t0);
		fflush(stdout);
		bad[0] = all;
	}
	MPI_Bcast(bad, 1, MPI_LONG, 0, MPI_COMM_WORLD);
	MPI_Finalize();
	return bad[0] ? 1 : 0;
}
