"""Elastic DistributedDataParallel training that survives restarts, node loss and SIGTERM.

Run it under cohort (or torchrun), which sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...:

    cohort run --standalone --nproc-per-node 2 --max-restarts 3 examples/python/train_ddp.py \\
        --epochs 4 --checkpoint-dir /tmp/ckpt

A small MLP learns a fixed random "teacher" network on a synthetic dataset that every rank
builds from --seed (no downloads). Gloo on CPU, NCCL on CUDA. The global batch is fixed
(--global-batch-size) and split evenly across ranks, so a step means the same thing at any world
size: after a node loss the survivors resume from the latest checkpoint and train on the same
batches. Rank 0 checkpoints atomically every --checkpoint-every steps; SIGTERM, SIGINT or SIGUSR1
(Slurm's --signal warning, which cohort forwards) makes every rank stop at the same step
boundary, rank 0 checkpoints, and all exit 0.
Guide: docs/guide/python-ddp.md.
"""
import argparse
import contextlib
import itertools
import os
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:  # cohort puts it on PYTHONPATH; under another launcher, heartbeats are skipped
    import cohort_heartbeat
except ImportError:
    cohort_heartbeat = None

IN_FEATURES = 16
TEACHER_HIDDEN = 32


def parse_signal(text):
    """'SIGKILL', 'kill' or '9' as a signal.Signals."""
    name = text.upper()
    try:
        if name.isdigit():
            return signal.Signals(int(name))
        return signal.Signals[name if name.startswith("SIG") else "SIG" + name]
    except (KeyError, ValueError):
        raise argparse.ArgumentTypeError(f"unknown signal {text!r}") from None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--steps-per-epoch", type=int, default=50)
    p.add_argument("--global-batch-size", type=int, default=32,
                   help="samples per optimizer step over all ranks (split evenly across them)")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--amp", action="store_true", help="mixed precision (CUDA only)")
    p.add_argument("--sync-bn", action="store_true",
                   help="add a BatchNorm layer, synchronised across ranks (SyncBatchNorm)")
    p.add_argument("--accumulate", type=int, default=1,
                   help="micro-batches per optimizer step (gradient accumulation)")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--checkpoint-every", type=int, default=10, help="steps between checkpoints")
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--step-log", default=None,
                   help="rank 0 appends 'round step loss world_size' after every step")
    p.add_argument("--dump-params", default=None,
                   help="rank 0 writes the final parameters, one float per line")
    p.add_argument("--step-sleep", type=float, default=0.0, help="seconds to pause per step")
    # Fault injection, on the first attempt only (TORCHELASTIC_RESTART_COUNT == 0).
    p.add_argument("--fail-at-step", type=int, default=None)
    p.add_argument("--fail-rank", type=int, default=0)
    p.add_argument("--fail-exit-code", type=int, default=1)
    p.add_argument("--fail-signal", type=parse_signal, default=None,
                   help="e.g. SIGKILL, KILL or 9: die by this signal instead of exiting")
    args = p.parse_args(argv)
    if args.accumulate < 1 or args.steps_per_epoch < 1 or args.checkpoint_every < 1:
        p.error("--accumulate, --steps-per-epoch and --checkpoint-every must be positive")
    return args


class StopRequest:
    """Remembers SIGTERM/SIGINT/SIGUSR1; the training loop acts on it at the next step boundary."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame):
        self.requested = True

    def agreed(self, device):
        """True on every rank once any rank was asked to stop (so all stop at the same step)."""
        flag = torch.tensor([1 if self.requested else 0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())


def make_dataset(num_samples, seed):
    """Inputs ~ N(0, 1); targets from a fixed random two-layer tanh network, plus a little noise."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(num_samples, IN_FEATURES, generator=g)
    w1 = torch.randn(IN_FEATURES, TEACHER_HIDDEN, generator=g) / IN_FEATURES**0.5
    w2 = torch.randn(TEACHER_HIDDEN, 1, generator=g) / TEACHER_HIDDEN**0.5
    y = torch.tanh(x @ w1) @ w2 + 0.01 * torch.randn(num_samples, 1, generator=g)
    return TensorDataset(x, y)


def make_model(hidden, batch_norm, seed):
    torch.manual_seed(seed)  # the same initial weights on every rank (DDP broadcasts rank 0's)
    layers = [nn.Linear(IN_FEATURES, hidden)]
    if batch_norm:
        layers.append(nn.BatchNorm1d(hidden))
    layers += [nn.ReLU(), nn.Linear(hidden, 1)]
    return nn.Sequential(*layers)


def save_checkpoint(path, model, optimizer, scaler, step, steps_per_epoch, loss):
    """Writes a temporary file, syncs it, and renames it over the old one: never half a file."""
    state = {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict(),
        "epoch": step // steps_per_epoch,
        "step": step,  # the next step to run
        "loss": loss,  # of the last step run
    }
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def maybe_fail(args, rank, step):
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if args.fail_at_step != step or args.fail_rank != rank or restart_count != 0:
        return
    sys.stdout.flush()
    if args.fail_signal:
        print(f"rank {rank}: injected failure at step {step}: {args.fail_signal.name}",
              file=sys.stderr, flush=True)
        signal.signal(args.fail_signal, signal.SIG_DFL)
        os.kill(os.getpid(), args.fail_signal)
        time.sleep(60)  # a signal that does not kill (SIGSTOP...) must not let training go on
    print(f"rank {rank}: injected failure at step {step}: exit {args.fail_exit_code}",
          file=sys.stderr, flush=True)
    os._exit(args.fail_exit_code)  # a crash: no clean-up, no destroy_process_group


def make_grad_scaler(enabled):
    """torch.amp's GradScaler where it exists (PyTorch 2.3 on; torch.cuda.amp's is deprecated
    there, with a FutureWarning), torch.cuda.amp's on older ones such as 1.13."""
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


def main(stop):
    args = parse_args()
    use_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if use_cuda else "gloo")  # env:// from the launcher
    train(args, stop, device, local_rank)
    # Destroy the process group only now that train() has returned and its DDP model is gone:
    # in PyTorch 1.13, a DDP reducer that is the last owner of a Gloo group destroys it at
    # interpreter exit while holding the GIL, which can deadlock with Gloo's worker threads.
    dist.destroy_process_group()
    return 0


def train(args, stop, device, local_rank):
    use_cuda = device.type == "cuda"
    rank, world_size = dist.get_rank(), dist.get_world_size()
    restart_count = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if args.global_batch_size % (world_size * args.accumulate) != 0:
        sys.exit(f"--global-batch-size {args.global_batch_size} is not a multiple of "
                 f"world size {world_size} x --accumulate {args.accumulate}")
    batch_size = args.global_batch_size // world_size  # per rank and step

    sync_bn = args.sync_bn and use_cuda
    if args.sync_bn and not use_cuda and rank == 0:
        print("note: SyncBatchNorm needs CUDA in PyTorch 1.13; using per-rank BatchNorm on CPU")
    use_amp = args.amp and use_cuda
    if args.amp and not use_cuda and rank == 0:
        print("note: --amp is for CUDA only; training in float32")

    model = make_model(args.hidden, args.sync_bn, args.seed).to(device)
    if sync_bn:
        model = nn.SyncBatchNorm.convert_sync_batchnorm(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    scaler = make_grad_scaler(use_amp)

    # Resume: every rank reads the latest checkpoint (rank 0 wrote it, maybe on another node).
    step = 0  # global index of the next optimizer step
    last_loss = float("nan")
    path = os.path.join(args.checkpoint_dir, "checkpoint.pt") if args.checkpoint_dir else None
    if path and os.path.exists(path):
        state = torch.load(path, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        step, last_loss = state["step"], state["loss"]
    elif path and rank == 0:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    if rank == 0:
        origin = f"resumed from {path} at step {step}" if step else "starting from scratch"
        print(f"round {restart_count}: world size {world_size}, {origin}", flush=True)

    def checkpoint():
        if path and rank == 0:
            save_checkpoint(path, model, optimizer, scaler, step, args.steps_per_epoch, last_loss)

    ddp_model = DDP(model, device_ids=[local_rank] if use_cuda else None)
    dataset = make_dataset(args.steps_per_epoch * args.global_batch_size, args.seed)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=args.seed)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    criterion = nn.MSELoss()

    total_steps = args.epochs * args.steps_per_epoch
    while step < total_steps:
        epoch = step // args.steps_per_epoch
        sampler.set_epoch(epoch)  # a new shuffle per epoch, the same on every rank
        # Rank r's batch b holds samples r, r+W, r+2W, ... of the epoch's global batch b, so
        # skipping to the step within the epoch resumes exactly where the checkpoint left off.
        for x, y in itertools.islice(loader, step % args.steps_per_epoch, None):
            if stop.agreed(device):
                checkpoint()
                if rank == 0:
                    print(f"stop requested: checkpoint at step {step}, exiting", flush=True)
                dist.barrier()
                return
            maybe_fail(args, rank, step)

            x, y = x.to(device), y.to(device)
            optimizer.zero_grad(set_to_none=True)
            step_loss = torch.zeros((), device=device)
            micro_batches = list(zip(x.chunk(args.accumulate), y.chunk(args.accumulate)))
            for i, (xm, ym) in enumerate(micro_batches):
                # DDP all-reduces the gradients only on the last micro-batch.
                last = i == len(micro_batches) - 1
                with contextlib.nullcontext() if last else ddp_model.no_sync():
                    with torch.amp.autocast("cuda", enabled=use_amp):
                        loss = criterion(ddp_model(xm), ym) / args.accumulate
                    scaler.scale(loss).backward()
                step_loss += loss.detach().float()
            scaler.step(optimizer)
            scaler.update()

            dist.all_reduce(step_loss)  # the mean loss over all ranks, for the log
            last_loss = step_loss.item() / world_size
            if args.step_log and rank == 0:
                with open(args.step_log, "a") as f:
                    f.write(f"{restart_count} {step} {last_loss:.9g} {world_size}\n")
            if rank == 0 and (step % args.log_every == 0 or step == total_steps - 1):
                print(f"epoch {epoch} step {step} loss {last_loss:.6f}", flush=True)
            if cohort_heartbeat:  # a sign of life for cohort run --hang-timeout
                cohort_heartbeat.beat(step)
            step += 1
            if step % args.checkpoint_every == 0:
                checkpoint()
            if args.step_sleep:
                time.sleep(args.step_sleep)

    checkpoint()
    if rank == 0:
        if args.dump_params:
            values = [v for p in model.parameters() for v in p.detach().cpu().flatten().tolist()]
            with open(args.dump_params, "w") as f:
                f.write("".join(f"{v:.9g}\n" for v in values))
        print(f"done: {step} steps, final loss {last_loss:.6f}", flush=True)
    dist.barrier()


if __name__ == "__main__":
    stop_request = StopRequest()
    try:
        sys.exit(main(stop_request))
    except RuntimeError as error:
        # A collective failed: a peer is gone, and the launcher is stopping or restarting the
        # group. Say why (one line if we were asked to stop anyway), write no checkpoint (the
        # ranks cannot agree on one), and leave at once: tearing down a broken group can block.
        if stop_request.requested:
            print(f"rank {os.environ.get('RANK', '?')}: stopping: {error}", file=sys.stderr)
        else:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
