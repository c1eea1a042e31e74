/* rma_check: MPI one-sided communication (MPI-3 RMA) with every result
 * checked (issue 13). Open MPI 4.1 runs it over osc ucx, i.e. UCX's RDMA
 * WRITE, READ and atomics on uroce's RC QPs.
 *
 *   mpirun ... rma_check [-n ITERS] [-m MAXBYTES]
 *
 * Each rank exposes a window of nranks x MAXBYTES bytes (MPI_Win_allocate).
 * Per iteration and size (8 B .. MAXBYTES, x8 each step):
 *   - fence epoch: every rank MPI_Puts its block into slot <rank> of its
 *     right neighbour's window and MPI_Gets slot <left> of its left
 *     neighbour's window as it was before the epoch (the neighbour's own
 *     pattern); after the fence both are compared element by element;
 *   - passive target: MPI_Win_lock_all, MPI_Accumulate (MPI_SUM of int64)
 *     of rank+1 into element 0 of rank 0's counter window from every rank,
 *     MPI_Fetch_and_op and MPI_Compare_and_swap on rank 0's counter,
 *     MPI_Win_flush_all, MPI_Win_unlock_all; after a barrier rank 0 checks
 *     the sum.
 * Rank 0 prints "rma_check ok N ranks S sizes I iters" or "rma_check BAD";
 * exit status 0 only when every rank saw every result right. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int rank, nranks;
static long bad;

/* byte i of the block rank r owns in iteration it */
static uint8_t pat(int r, size_t i, int it)
{
	return (uint8_t)((size_t)(r + 1) * 131u + i * 7u + (size_t)it * 29u + (i >> 8));
}

static void check(const char *what, const uint8_t *got, int r, size_t len, int it)
{
	for (size_t i = 0; i < len; i++) {
		if (got[i] != pat(r, i, it)) {
			if (bad++ < 3)
				fprintf(stderr, "rank %d: %s of %zu B iteration %d: byte %zu is 0x%02x, want 0x%02x\n",
					rank, what, len, it, i, got[i], pat(r, i, it));
			return;
		}
	}
}

static void fence_round(uint8_t *base, MPI_Win win, size_t maxbytes, int it, int *nsizes)
{
	int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
	uint8_t *src = malloc(maxbytes), *got = malloc(maxbytes);

	if (!src || !got) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	*nsizes = 0;
	for (size_t len = 8; len <= maxbytes; len *= 8) {
		(*nsizes)++;
		/* my own pattern in my slot <rank>, which my left neighbour
		 * reads; slot <left> is where it writes */
		for (size_t i = 0; i < len; i++) {
			base[(size_t)rank * maxbytes + i] = pat(rank, i, it);
			src[i] = pat(rank, i, it);
		}
		memset(base + (size_t)left * maxbytes, 0xee, len);
		memset(got, 0xee, len);
		MPI_Win_fence(0, win);
		MPI_Put(src, (int)len, MPI_BYTE, right, (MPI_Aint)((size_t)rank * maxbytes), (int)len,
			MPI_BYTE, win);
		MPI_Get(got, (int)len, MPI_BYTE, left, (MPI_Aint)((size_t)left * maxbytes), (int)len,
			MPI_BYTE, win);
		MPI_Win_fence(0, win);
		check("put", base + (size_t)left * maxbytes, left, len, it);
		check("get", got, left, len, it);
		if (nranks == 1)
			break;
	}
	free(src);
	free(got);
}

static void atomic_round(int64_t *ctr, MPI_Win cwin, int it)
{
	int64_t one = rank + 1, old = -1, cmp, swp = -7, res = -1, want = 0;

	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cwin);
		ctr[0] = 0;
		ctr[1] = 0;
		MPI_Win_unlock(0, cwin);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Win_lock_all(0, cwin);
	MPI_Accumulate(&one, 1, MPI_INT64_T, 0, 0, 1, MPI_INT64_T, MPI_SUM, cwin);
	MPI_Fetch_and_op(&one, &old, MPI_INT64_T, 0, 1, MPI_SUM, cwin);
	MPI_Win_flush_all(cwin);
	/* old is what ranks before me added to ctr[1]: 0 .. sum - (rank+1) */
	if (old < 0 || old > (int64_t)nranks * (nranks + 1) / 2 - one) {
		if (bad++ < 3)
			fprintf(stderr, "rank %d: fetch_and_op returned %lld\n", rank, (long long)old);
	}
	MPI_Win_unlock_all(cwin);
	MPI_Barrier(MPI_COMM_WORLD);
	want = (int64_t)nranks * (nranks + 1) / 2;
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cwin);
		if (ctr[0] != want || ctr[1] != want) {
			if (bad++ < 3)
				fprintf(stderr, "rank 0: iteration %d: accumulate %lld, fetch_and_op %lld, want %lld\n",
					it, (long long)ctr[0], (long long)ctr[1], (long long)want);
		}
		MPI_Win_unlock(0, cwin);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	/* compare-and-swap: only the rank whose compare value matches wins */
	cmp = want;
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, cwin);
	MPI_Compare_and_swap(&swp, &cmp, &res, MPI_INT64_T, 0, 0, cwin);
	MPI_Win_unlock(0, cwin);
	if (res != want && res != swp) {
		if (bad++ < 3)
			fprintf(stderr, "rank %d: compare_and_swap saw %lld\n", rank, (long long)res);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, cwin);
		if (ctr[0] != swp) {
			if (bad++ < 3)
				fprintf(stderr, "rank 0: after compare_and_swap %lld, want %lld\n",
					(long long)ctr[0], (long long)swp);
		}
		MPI_Win_unlock(0, cwin);
	}
}

int main(int argc, char **argv)
{
	size_t maxbytes = 1 << 20;
	int iters = 3, opt, nsizes = 0;
	long allbad = 0;
	uint8_t *base;
	int64_t *ctr;
	MPI_Win win, cwin;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	while ((opt = getopt(argc, argv, "n:m:")) != -1) {
		if (opt == 'n')
			iters = atoi(optarg);
		else if (opt == 'm')
			maxbytes = (size_t)strtoull(optarg, NULL, 0);
		else
			MPI_Abort(MPI_COMM_WORLD, 2);
	}
	if (iters < 1 || maxbytes < 8)
		MPI_Abort(MPI_COMM_WORLD, 2);
	MPI_Win_allocate((MPI_Aint)(maxbytes * (size_t)nranks), 1, MPI_INFO_NULL, MPI_COMM_WORLD,
			 &base, &win);
	MPI_Win_allocate(2 * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL, MPI_COMM_WORLD, &ctr,
			 &cwin);
	for (int it = 0; it < iters; it++) {
		fence_round(base, win, maxbytes, it, &nsizes);
		atomic_round(ctr, cwin, it);
	}
	MPI_Win_free(&cwin);
	MPI_Win_free(&win);
	MPI_Allreduce(&bad, &allbad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0 && allbad)
		printf("rma_check BAD %d ranks, %ld results wrong\n", nranks, allbad);
	else if (rank == 0)
		printf("rma_check ok %d ranks %d sizes %d iters\n", nranks, nsizes, iters);
	MPI_Finalize();
	return allbad ? 1 : 0;
}
