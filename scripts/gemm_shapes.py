"""The fp32 GEMM shapes of one SAGE 3x256 training step (issue 5's setting) timed as the
layer calls them and in other forms, to find what cuBLAS runs slowly.

On an H100 the GEMMs take ~10.4 of a 13.5 ms fp32 step (scripts/profile_step.py), ~40
TFLOPS against a 67 TFLOPS fp32 peak. The weight gradients are products with the batch's
~367k rows as the inner dimension and a 256 x 256 (or smaller) output: few output tiles
for 132 SMs unless cuBLAS splits the inner dimension. This times each shape as the layer
computes it, the transposed product, and a split of the inner dimension into k slices
(a batched GEMM, then a sum over the slices).

    python scripts/gemm_shapes.py [--rows 367000] [--reps 20] [--shapes 256:47 256:48]
                                  [--blas cublas|cublaslt]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'benchmarks'))
from common import median_time, print_table  # noqa: E402


def split_inner(a_t: torch.Tensor, b: torch.Tensor, k: int) -> torch.Tensor:
    """``a_t @ b`` (``a_t`` ``[O, N]`` a transposed view of ``[N, O]``, ``b`` ``[N, K]``)
    with the inner dimension split into k equal slices summed after one batched GEMM; the
    rows past k * (N // k) are added by one more GEMM."""
    a = a_t.t()
    n = a.size(0)
    c = n // k
    head = torch.bmm(a[:k * c].view(k, c, -1).transpose(1, 2), b[:k * c].view(k, c, -1)).sum(0)
    if k * c < n:
        head.addmm_(a[k * c:].t(), b[k * c:])
    return head


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--rows', type=int, default=367_000)
    p.add_argument('--reps', type=int, default=20)
    p.add_argument('--shapes', nargs='*', default=['100:256', '256:256', '256:47'],
                   help="each layer's 'in:out' widths (the step's: 100:256, 256:256 and 256:47)")
    p.add_argument('--device', default='cuda')
    p.add_argument('--blas', choices=['cublas', 'cublaslt'], default=None,
                   help="torch.backends.cuda.preferred_blas_library for the run (default: PyTorch's)")
    args = p.parse_args(argv)
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.blas is not None:
        torch.backends.cuda.preferred_blas_library(args.blas)
    n = args.rows
    rows = []

    def record(kind, shape, flops, forms):
        r = {'GEMM': kind, 'shape': shape, 'GFLOP': flops / 1e9}
        for name, fn in forms.items():
            ms = median_time(fn, device, reps=args.reps) * 1e3
            r[f'{name} ms'] = ms
            r[f'{name} TFLOPS'] = flops / ms / 1e9
        rows.append(r)
        print(r, flush=True)

    for shape in args.shapes:
        k_in, o = (int(v) for v in shape.split(':'))
        x = torch.randn(n, k_in, device=device)
        w = torch.randn(o, k_in, device=device)
        g = torch.randn(n, o, device=device)
        out = torch.randn(n, o, device=device)
        flops = 2 * n * k_in * o
        record('forward x W^T', f'[{n},{k_in}]x[{k_in},{o}]', flops,
               {'mm': lambda: x.mm(w.t()), 'addmm_': lambda: out.addmm_(x, w.t())})
        record('input grad g W', f'[{n},{o}]x[{o},{k_in}]', flops,
               {'mm': lambda: g.mm(w), 'addmm_': lambda: x.addmm_(g, w)})
        forms = {'g^T x': lambda: g.t().mm(x), '(x^T g)^T': lambda: x.t().mm(g).t()}
        for k in (4, 8, 16, 32):
            forms[f'split {k}'] = (lambda k=k: split_inner(g.t(), x, k))
        # (entries are sums of ~367k products of N(0, 1) values: hundreds in size)
        torch.testing.assert_close(split_inner(g.t(), x, 8), g.t().mm(x), rtol=1e-3, atol=2.0)
        record('weight grad g^T x', f'[{o},{n}]x[{n},{k_in}]', flops, forms)
        del x, w, g, out
    columns = list(dict.fromkeys(c for r in rows for c in r if not c.endswith('TFLOPS')))
    name = torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'
    print_table(rows, columns, f'fp32 GEMMs of a SAGE 3x256 step, {n} rows ({name})')
    return rows


if __name__ == '__main__':
    main()
