"""GEMMs whose output row length is not a multiple of 16 bytes (GPT-2's lm_head: [4096,768] x [768,50257] fp16),
and what padding buys (a probe: not part of cudal1; run by hand on the GPU machine). Per shape and dtype, times:
  aten        torch.mm(a, w.t()) as nn.Linear calls it (the output rows start at unaligned addresses)
  ld<P>       the same GEMM into a scratch whose rows are padded to a multiple of P elements, then a copy to the
              contiguous result (what the app expects)
  n<P>        the weight padded with zero rows to a multiple of P (precomputed), GEMM, then the copy
  copy        the copy alone
  chunk<R>    the padded-weight GEMM R rows at a time into one padded scratch of R rows, each chunk copied out
              while it is still in L2 (the scratch is re-used, so it is never written back to memory whole)
Median of 30 runs, each after a 256 MB L2 flush, CUDA events on one stream.
Usage: python3 bench/probes/gemm_pad.py [gpt2]   (gpt2: GPT-2's lm_head in fp16 only)
"""
import statistics
import sys

import torch

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def med_us(fn, reps=30):
    times = []
    for _ in range(reps):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3)
    return statistics.median(times)


def pad_to(n, p):
    return (n + p - 1) // p * p


def run(m, k, n, dtype):
    a = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype)
    ref = torch.mm(a, w.t())
    res = {"aten": med_us(lambda: torch.mm(a, w.t()))}
    out = torch.empty(m, n, device="cuda", dtype=dtype)
    for p in (8, 64):
        scratch = torch.empty(m, pad_to(n, p), device="cuda", dtype=dtype)[:, :n]

        def ld():
            torch.mm(a, w.t(), out=scratch)
            out.copy_(scratch)

        res[f"ld{p}"] = med_us(ld)
        ld()
        err_ld = (out.float() - ref.float()).abs().max().item()
        wp = torch.zeros(pad_to(n, p), k, device="cuda", dtype=dtype)
        wp[:n] = w

        def npad():
            out.copy_(torch.mm(a, wp.t())[:, :n])

        res[f"n{p}"] = med_us(npad)
        npad()
        err_n = (out.float() - ref.float()).abs().max().item()
        res[f"err{p}"] = max(err_ld, err_n)
    res["copy"] = med_us(lambda: out.copy_(scratch))
    wp = torch.zeros(pad_to(n, 8), k, device="cuda", dtype=dtype)
    wp[:n] = w
    for rows in (256, 512, 1024):
        buf = torch.empty(rows, pad_to(n, 8), device="cuda", dtype=dtype)

        def chunk():
            for r in range(0, m, rows):
                torch.mm(a[r:r + rows], wp.t(), out=buf[: min(rows, m - r)])
                out[r:r + rows].copy_(buf[: min(rows, m - r), :n])

        res[f"chunk{rows}"] = med_us(chunk)
        chunk()
        res[f"errc{rows}"] = (out.float() - ref.float()).abs().max().item()
    flops = 2 * m * k * n
    row = " ".join(f"{key}={val:.1f}" for key, val in res.items())
    best = min(v for key, v in res.items() if key[:2] in ("ld", "n8", "n6"))
    print(f"GEMM {m}x{k}x{n} {str(dtype)[6:]}: {row}  aten {flops / res['aten'] / 1e6:.0f} TFLOP/s, "
          f"best pad {flops / best / 1e6:.0f} TFLOP/s, aten/best {res['aten'] / best:.2f}x", flush=True)


def main():
    if sys.argv[1:] == ["gpt2"]:
        run(4096, 768, 50257, torch.float16)
        return
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        run(4096, 768, 50257, dtype)      # GPT-2 small lm_head, 8x512 tokens
        run(512, 768, 50257, dtype)       # one sequence
        run(4096, 1024, 32001, dtype)     # a vocabulary with one added token
        run(4096, 4096, 4097, dtype)      # an odd square-ish one
        run(4096, 1001, 4096, dtype)      # odd k: the inputs' rows are unaligned too
    a = torch.randn(8, 512, 768, device="cuda", dtype=torch.float16)
    lin = torch.nn.Linear(768, 50257, bias=False).cuda().half()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        lin(a)
        torch.cuda.synchronize()
    print("linear kernels:", [e.name[:80] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])


if __name__ == "__main__":
    main()
