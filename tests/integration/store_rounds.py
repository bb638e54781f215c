"""Worker-store checks under `cohort run`: each round's store is fresh, and Gloo works through it.

Every rank opens a raw TCPStore client on MASTER_ADDR:MASTER_PORT (the store the agent's
rendezvous hosts for this round). In round 0 each rank writes a key and the last rank then fails
on purpose, so the whole group restarts; in round 1 no rank may see a key of round 0. Both
rounds run init_process_group("gloo") through the same store and check an all-reduce.
"""
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

round_ = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
rank = int(os.environ["RANK"])
if os.environ["TORCHELASTIC_USE_AGENT_STORE"] != "True":
    sys.exit("not in agent-store mode")
raw = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                    timeout=timedelta(seconds=30))
if round_ == 0:
    raw.set(f"round0_rank{rank}", "written in round 0")
elif raw.compare_set(f"round0_rank{rank}", "probe", "probe") != b"probe":
    # compare_set on an absent key with a non-empty expected value answers that value and
    # stores nothing; on a present key it answers the stored value.
    sys.exit(f"rank {rank}: round {round_} sees a key of round 0")

dist.init_process_group("gloo", timeout=timedelta(seconds=60))
world = dist.get_world_size()
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
if value.item() != world * (world + 1) / 2:
    sys.exit(f"rank {rank}: wrong sum {value.item()}")
dist.barrier()
if round_ == 0 and rank == world - 1:
    sys.exit(3)  # one failure: every worker restarts in a fresh round
if rank == 0:
    print(f"ok round={round_} world={world} sum={value.item():.0f} keys={raw.num_keys()} "
          f"torch={torch.__version__}", flush=True)
dist.destroy_process_group()
