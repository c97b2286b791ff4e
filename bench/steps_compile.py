"""The launch-bound loops of bench/steps_bench.cpp in Python: eager, torch.compile (default) and torch.compile's
reduce-overhead mode (CUDA graphs), timed like bench_steps: blocks of 50 steps back to back, wall clock from a
synchronised start to a synchronised end, median of the rounds. Prints
"PY row=<name> eager_us=<x> compile_us=<y> reduce_overhead_us=<z>" lines for bench_steps.
Usage: python3 steps_compile.py [rounds]"""
import sys
import time

import torch
import torch.nn.functional as F

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
WIDTH, LAYERS, STEPS = 4096, 8, 50


class DecodeStep(torch.nn.Module):
    """Per layer h = h + gelu(linear(layer_norm(h)), tanh), the weights as the module's parameters (as a model holds
    them: reduce-overhead's CUDA graphs read parameters in place, while tensors passed as arguments are copied)."""

    def __init__(self):
        super().__init__()
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(WIDTH, eps=1e-5) for _ in range(LAYERS))
        self.linears = torch.nn.ModuleList(torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))

    def forward(self, h):
        for n, l in zip(self.norms, self.linears):
            h = h + F.gelu(l(n(h)), approximate="tanh")
        return h


def per_step_us(fn, n):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e6 / n


def main():
    torch.manual_seed(0)
    model = DecodeStep().to(device="cuda", dtype=torch.float16).eval()
    x = torch.randn(1, WIDTH, device="cuda", dtype=torch.float16)
    with torch.inference_mode():
        modes = {"eager": model, "compile": torch.compile(model),
                 "reduce_overhead": torch.compile(model, mode="reduce-overhead")}
        fns = {k: (lambda f=f: f(x)) for k, f in modes.items()}
        for f in fns.values():  # compile and warm up (reduce-overhead records its graph after a few calls)
            per_step_us(f, 20)
        times = {k: [] for k in fns}
        for _ in range(ROUNDS):
            for k, f in fns.items():
                times[k].append(per_step_us(f, STEPS))
        med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
        ref = model(x).float()
        ro = fns["reduce_overhead"]().float()
        print(f"# reduce-overhead output max |diff| {(ro - ref).abs().max().item():.3g} at scale "
              f"{ref.abs().max().item():.3g}", flush=True)
        print(f"PY row=decode_step eager_us={med['eager']:.1f} compile_us={med['compile']:.1f} "
              f"reduce_overhead_us={med['reduce_overhead']:.1f}", flush=True)


if __name__ == "__main__":
    main()
