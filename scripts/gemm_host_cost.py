"""Host (CPU) cost of enqueueing the GEMMs a training step makes, per dtype and cuBLAS
backend: microseconds per call to enqueue (no synchronisation), and the GPU time per call.

Under bf16 autocast a SAGE step was host-bound with ~3x the host time per GEMM of TF32's;
this measures the calls themselves, outside the model: with one row count throughout, and
with a new row count on every call (as every sampled batch has), which defeats any cache
of GEMM configurations keyed by shape.

    python scripts/gemm_host_cost.py [--rows 274000] [--width 256] [--backends cublas cublaslt]
"""
import argparse
import statistics
import time

import torch


def per_call(fn, calls: int = 40, reps: int = 5):
    """(median host us per call while enqueueing, GPU us per call)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        host.append((time.perf_counter() - t0) / calls * 1e6)
        end.record()
        torch.cuda.synchronize()
        gpu.append(start.elapsed_time(end) / calls * 1e3)
    return statistics.median(host), statistics.median(gpu)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--rows', type=int, default=274_000)
    p.add_argument('--width', type=int, default=256)
    p.add_argument('--backends', nargs='*', default=['cublas', 'cublaslt'])
    args = p.parse_args()
    f = args.width
    fresh = iter(range(args.rows, 0, -1))  # a row count never used before, for every call
    for backend in args.backends:
        torch.backends.cuda.preferred_blas_library(backend)
        for label, dtype, precision in (('fp32', torch.float32, 'highest'), ('tf32', torch.float32, 'high'),
                                        ('bf16', torch.bfloat16, 'highest')):
            torch.set_float32_matmul_precision(precision)
            x = torch.randn(args.rows, f, device='cuda', dtype=dtype)
            w = torch.randn(f, f, device='cuda', dtype=dtype)
            b = torch.randn(f, device='cuda', dtype=dtype)
            out = torch.randn(args.rows, f, device='cuda', dtype=dtype)
            cases = {
                'mm': lambda n: torch.mm(x[:n], w.t()),
                'linear+bias (addmm)': lambda n: torch.nn.functional.linear(x[:n], w, b),
                'mm then add_(bias)': lambda n: torch.mm(x[:n], w.t()).add_(b),
                'addmm_ in place': lambda n: out[:n].addmm_(x[:n], w.t()),
                'weight grad t().mm': lambda n: x[:n].t().mm(out[:n]),
            }
            for case, fn in cases.items():
                same = per_call(lambda: fn(args.rows))
                new = per_call(lambda: fn(next(fresh)))
                print(f'{backend:9s} {label:5s} {case:22s} host us/call: one shape {same[0]:6.1f}, new shapes '
                      f'{new[0]:6.1f};  GPU us/call {same[1]:7.1f}', flush=True)


if __name__ == '__main__':
    main()
