#!/usr/bin/python3
"""coll_check.py: the collectives of coll_check.c through mpi4py (issue 13).

    mpirun ... /usr/bin/python3 coll_check.py [ITERS] [MAXBYTES]

Allreduce (double sum), Allgather, Alltoall and Bcast on buffers (the
array module: no numpy needed), 8 B .. MAXBYTES per rank (x16 each step),
plus the pickle-based lower-case API (allreduce, allgather, alltoall,
bcast of Python objects). Every output is poisoned first and compared
element by element. Rank 0 prints one line per collective and
"coll_check.py ok" or "coll_check.py BAD"; exit status 0 only when every
rank saw every result right."""
import sys
from array import array

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, n = comm.Get_rank(), comm.Get_size()
iters = int(sys.argv[1]) if len(sys.argv) > 1 else 2
maxbytes = int(sys.argv[2]) if len(sys.argv) > 2 else 65536
NAMES = ("allreduce", "allgather", "alltoall", "bcast", "objects")
bad = dict.fromkeys(NAMES, 0)
POISON = float("nan")


def val(r, i, it):
    return float((r + 1) * 1000003 % 65521) + (i % 4099) * 3.0 + it * 7.0


def cmp(name, got, want):
    if list(got) != list(want):
        if bad[name] < 3:
            k = next(j for j, (a, b) in enumerate(zip(got, want)) if a != b)
            print(f"rank {rank}: {name} {len(want)} elements: element {k} is {got[k]}, want {want[k]}",
                  file=sys.stderr, flush=True)
        bad[name] += 1


nsizes = 0
it = 0
t0 = MPI.Wtime()
for it in range(iters):
    nbytes = 8
    nsizes = 0
    while nbytes <= maxbytes:
        nsizes += 1
        cnt = nbytes // 8
        a = array("d", (val(rank, i, it) for i in range(cnt)))
        out = array("d", [POISON]) * cnt
        comm.Allreduce([a, MPI.DOUBLE], [out, MPI.DOUBLE], op=MPI.SUM)
        cmp("allreduce", out, [sum(val(r, i, it) for r in range(n)) for i in range(cnt)])

        out = array("d", [POISON]) * (cnt * n)
        comm.Allgather([a, MPI.DOUBLE], [out, MPI.DOUBLE])
        cmp("allgather", out, [val(r, i, it) for r in range(n) for i in range(cnt)])

        send = array("d", (val(rank, i, it) + d * 0.5 for d in range(n) for i in range(cnt)))
        out = array("d", [POISON]) * (cnt * n)
        comm.Alltoall([send, MPI.DOUBLE], [out, MPI.DOUBLE])
        cmp("alltoall", out, [val(s, i, it) + rank * 0.5 for s in range(n) for i in range(cnt)])

        root = (it + nbytes) % n
        want = array("d", (val(root, i, it) + 0.25 for i in range(cnt)))
        buf = array("d", want) if rank == root else array("d", [POISON]) * cnt
        comm.Bcast([buf, MPI.DOUBLE], root=root)
        cmp("bcast", buf, want)
        nbytes *= 16

    # the pickle-based API: Python objects
    obj = {"rank": rank, "it": it, "data": [rank * k for k in range(10)]}
    g = comm.allgather(obj)
    cmp("objects", [x["rank"] for x in g], list(range(n)))
    s = comm.allreduce(rank + it, op=MPI.SUM)
    cmp("objects", [s], [n * (n - 1) // 2 + n * it])
    t = comm.alltoall([(rank, d) for d in range(n)])
    cmp("objects", t, [(s_, rank) for s_ in range(n)])
    b = comm.bcast(obj if rank == it % n else None, root=it % n)
    cmp("objects", [b["rank"], b["it"]], [it % n, it])

tot = comm.reduce([bad[k] for k in NAMES], op=lambda x, y, _=None: [p + q for p, q in zip(x, y)], root=0)
ok = True
if rank == 0:
    for k, v in zip(NAMES, tot):
        print(f"{k} {'BAD' if v else 'ok'} {n} ranks {nsizes} sizes {iters} iters", flush=True)
    ok = not any(tot)
    print(f"coll_check.py {'ok' if ok else 'BAD'} ({n} ranks, {MPI.Wtime() - t0:.2f} s)", flush=True)
ok = comm.bcast(ok, root=0)
sys.exit(0 if ok else 1)
