"""A Gloo job for the multi-node tests: all-reduce in a loop, then report the world it ran in.

Each worker writes started_<round>_<rank> when its process group is up, runs STEPS all-reduces
(pausing between them so that a test can kill a node mid-run), checks every result, and rank 0
prints "done round=R world=W". Exits non-zero on a wrong sum.
"""
import os
import sys
import time

import torch
import torch.distributed as dist

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
marker_dir = sys.argv[2] if len(sys.argv) > 2 else "."
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
round_ = os.environ["TORCHELASTIC_RESTART_COUNT"]
open(os.path.join(marker_dir, f"started_{round_}_{rank}"), "w").close()
expected = world * (world + 1) / 2
for step in range(steps):
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    if value.item() != expected:
        sys.exit(f"rank {rank}: step {step}: sum {value.item()} != {expected}")
    time.sleep(0.05)
if rank == 0:
    print(f"done round={round_} world={world}", flush=True)
dist.destroy_process_group()
