"""How NCCL moves data between this machine's GPUs, as the cross-host reads use it: run
under torchrun, one process per GPU (``NCCL_DEBUG=INFO`` adds the transport NCCL chose
for each peer, e.g. "via P2P/CUMEM" or "via SHM").

    NCCL_DEBUG=INFO torchrun --nproc_per_node 2 scripts/nccl_probe.py [--mb 1 16 64] [--reps 20]

Without GPUs it runs on gloo (a dry run of the script). Rank 0 prints one line per size: the median ms and GB/s (bytes each rank sends over the
time) of an ``all_to_all_single`` of equal splits and of the same exchange as one group
of point-to-point transfers (``batch_isend_irecv``, as ``HostShardedTier.read_many``
sends rows), each on a high-priority communicator of its own.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

from pyg_accel.data.hosts import new_exchange_group
from pyg_accel.distributed import setup, teardown


def timed(fn, reps: int, device: torch.device) -> float:
    """Median seconds of ``fn()`` over ``reps`` runs (after two warm-up runs), every rank
    starting together."""
    sync = torch.cuda.synchronize if device.type == 'cuda' else (lambda: None)
    times = []
    for i in range(reps + 2):
        dist.barrier()
        sync()
        start = time.perf_counter()
        fn()
        sync()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--mb', type=float, nargs='*', default=[1, 16, 64], help='MB each rank sends to each peer')
    p.add_argument('--reps', type=int, default=20)
    args = p.parse_args()
    rank, world, device = setup()  # (on CPUs: gloo, to try the script)
    group = new_exchange_group()
    dist.all_reduce(torch.ones(1, device=device), group=group)  # (connects the ring: NCCL_DEBUG prints transports)
    peers = [r for r in range(world) if r != rank]
    for mb in args.mb:
        rows = max(1, int(mb * 2**20) // 4)
        # block r of `send` goes to rank r: its value names sender and receiver
        send = (rank * world + torch.arange(world, device=device, dtype=torch.float32)).repeat_interleave(rows)
        recv = torch.empty_like(send)

        def all_to_all():
            dist.all_to_all_single(recv, send, group=group)

        def grouped():
            ops = [op for r in peers for op in (
                dist.P2POp(dist.isend, send[r * rows:(r + 1) * rows], dist.get_global_rank(group, r), group),
                dist.P2POp(dist.irecv, recv[r * rows:(r + 1) * rows], dist.get_global_rank(group, r), group))]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        sent = len(peers) * rows * 4
        for name, fn in (('all_to_all_single', all_to_all), ('batch_isend_irecv', grouped)):
            recv.fill_(-1)
            seconds = timed(fn, args.reps, device)
            expected = (torch.arange(world, device=device, dtype=torch.float32) * world + rank).repeat_interleave(rows)
            arrived = torch.cat([recv[r * rows:(r + 1) * rows] for r in peers])
            if not torch.equal(arrived, torch.cat([expected[r * rows:(r + 1) * rows] for r in peers])):
                raise RuntimeError(f'nccl_probe: {name} delivered the wrong rows on rank {rank}')
            if rank == 0:
                print(f'nccl_probe: {world} {device.type} processes, {mb:g} MB to each peer, {name}: {seconds * 1e3:.3f} ms, '
                      f'{sent / seconds / 1e9:.1f} GB/s sent per rank', flush=True)
    teardown()


if __name__ == '__main__':
    main()
