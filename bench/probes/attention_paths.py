"""Where the attention rewrite's time goes (Note [Attention rewrite]): on the chain suite's attention row ([8, 32,
1024, 128] fp16), times the ATen chain, torch.compile of it, and the fused-attention call as cudal1 makes it (q, k^T
and v as [1, BH, ., .] views, k^T transposed back, the result copied into the chain's contiguous output) next to its
parts: each SDPA backend alone, k contiguous or as the transposed view, and the copy alone. CUDA events around one
call, L2 flushed (256 MB read) before each, modes interleaved at random, median of REPS.
Usage: python3 attention_paths.py [reps]   (GPU machine)"""
import math
import random
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def chain(q, k, v):
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.softmax(s, -1) @ v


def main():
    B, H, L, D = 8, 32, 1024, 128
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.float16) for _ in range(3))
    bh = B * H
    q3, v3 = q.reshape(bh, L, D), v.reshape(bh, L, D)
    kt3 = k.reshape(bh, L, D).transpose(1, 2).contiguous()  # what the chain's first bmm reads: [BH, D, S]
    y = torch.empty(bh, L, D, device="cuda", dtype=torch.float16)
    scale = 1.0 / math.sqrt(D)
    flush = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def sdpa(kk, backend=None):
        def f():
            qq, vv = q3.unsqueeze(0), v3.unsqueeze(0)
            if backend is None:
                return F.scaled_dot_product_attention(qq, kk, vv, scale=scale)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(qq, kk, vv, scale=scale)
        return f

    k_view = kt3.transpose(1, 2).unsqueeze(0)  # as run_attention passes k
    k_cont = k_view.contiguous()
    compiled = torch.compile(chain)

    def as_cudal1():
        y.copy_(sdpa(k_view)().squeeze(0))

    modes = {
        "aten_chain": lambda: chain(q, k, v),
        "compile": lambda: compiled(q, k, v),
        "cudal1_path (view k, sdpa, copy)": as_cudal1,
        "sdpa k view": sdpa(k_view),
        "sdpa k contiguous": sdpa(k_cont),
        "copy [BH,L,D] alone": lambda: y.copy_(q3),
        "k^T -> k contiguous alone": lambda: k_view.contiguous(),
    }
    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                     ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        for kn, kk in (("view", k_view), ("contiguous", k_cont)):
            try:
                sdpa(kk, be)()
                modes[f"sdpa {name} k {kn}"] = sdpa(kk, be)
            except RuntimeError as e:
                print(f"# {name} with k {kn}: not available ({str(e).splitlines()[0][:100]})")

    def once(f):
        flush.max()
        start.record()
        f()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0

    with torch.inference_mode():
        for _ in range(3):
            for f in modes.values():
                once(f)
        times = {n: [] for n in modes}
        for _ in range(REPS):
            order = list(modes)
            random.shuffle(order)
            for n in order:
                times[n].append(once(modes[n]))
    ref = chain(q, k, v).reshape(bh, L, D)
    as_cudal1()
    print(f"# max |cudal1 path - ATen chain| = {(y.float() - ref.float()).abs().max().item():.3g}")
    base = sorted(times["aten_chain"])[REPS // 2]
    for n, t in times.items():
        m = sorted(t)[REPS // 2]
        print(f"PROBE attention {n:38s} {m:9.1f} us  {base / m:6.3f}x over the ATen chain")


if __name__ == "__main__":
    main()
