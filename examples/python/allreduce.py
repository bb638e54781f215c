"""The smallest real distributed PyTorch job: every rank contributes rank + 1, all_reduce sums them.

Run it under cohort (or torchrun), which sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT:

    cohort run --standalone --nproc-per-node 2 examples/python/allreduce.py

Rank 0 prints the sum, world_size * (world_size + 1) / 2 (3 for two workers). CPU only (Gloo).
"""
import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")  # env:// rendezvous from the launcher's variables
    rank = dist.get_rank()
    world_size = dist.get_world_size()
    value = torch.tensor([rank + 1], dtype=torch.int64)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    total = int(value.item())
    expected = world_size * (world_size + 1) // 2
    assert total == expected, f"rank {rank}: all_reduce gave {total}, expected {expected}"
    if rank == 0:
        print(f"allreduce sum={total} world_size={world_size}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
