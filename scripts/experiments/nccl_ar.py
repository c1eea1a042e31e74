import os, sys, torch, torch.distributed as dist
rank = int(sys.argv[1])
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=rank, world_size=2)
x = torch.full((1 << 20,), float(rank + 1), device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print("rank", rank, "allreduce", x[0].item(), x[-1].item(), flush=True)
dist.destroy_process_group()
