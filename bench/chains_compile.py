"""The chain suite (bench/chain_suite.cpp) in Python, eager, torch.compile and its reduce-overhead mode (CUDA
graphs), timed like bench_chains: CUDA events around one call, L2 flushed (256 MB read) before each, the modes
interleaved at random, median. Prints "PY row=<name> eager_us=<x> compile_us=<y> reduce_overhead_us=<z>" lines for
bench_chains. Usage: python3 chains_compile.py [reps]"""
import math
import os
import random
import sys

import torch
import torch.nn.functional as F

REPS = int(sys.argv[1]) if len(sys.argv) > 1 else 30
T = 4096


def rmsnorm(x, w):
    var = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(var + 1e-6) * w


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def residual_layernorm(a, b, w):
    h = a + b
    return F.layer_norm(h, (h.shape[-1],), w, w, 1e-5)


def softmax_ops(x):
    e = x.exp()
    return e / e.sum(-1, keepdim=True)


def bn_relu_maxpool(x, w, b, rm, rv):
    y = F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
    return F.max_pool2d(torch.relu(y), 3, 2, 1)


def conv_bn_relu_maxpool(x, cw, w, b, rm, rv):
    y = F.batch_norm(F.conv2d(x, cw, None, 2, 3), rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
    return F.max_pool2d(torch.relu(y), 3, 2, 1)


def bn_relu_(x, w, b, rm, rv):
    y = F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
    return y.relu_()


def bn_add_relu_(x, w, b, rm, rv, identity):
    y = F.batch_norm(x, rm, rv, w, b, training=False, momentum=0.1, eps=1e-5)
    y += identity
    return y.relu_()


def attention(q, k, v, mask=None):
    s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    return torch.softmax(s, -1) @ v


ROWS = [
    ("rmsnorm_ops bf16", rmsnorm, [(8192, 4096), (4096,)], torch.bfloat16),
    ("swiglu bf16", lambda a, b: F.silu(a) * b, [(T, 11008), (T, 11008)], torch.bfloat16),
    ("gelu_new f16", gelu_new, [(T, 3072)], torch.float16),
    ("bias_gelu f16", lambda x, b: F.gelu(x + b), [(T, 3072), (3072,)], torch.float16),
    ("residual_layernorm f16", residual_layernorm, [(T, 768), (T, 768), (768,)], torch.float16),
    ("softmax_ops f32", softmax_ops, [(4096, 4096)], torch.float32),
    ("x_sigmoid_x f16", lambda x: x * torch.sigmoid(x), [(8192, 8192)], torch.float16),
    ("bn_relu_maxpool f32", bn_relu_maxpool, [(32, 64, 112, 112), (64,), (64,), (64,), (64,)], torch.float32),
    ("conv_bn_relu_maxpool f32", conv_bn_relu_maxpool,
     [(32, 3, 224, 224), (64, 3, 7, 7), (64,), (64,), (64,), (64,)], torch.float32),
    ("bn_relu_ f32", bn_relu_, [(32, 128, 56, 56), (128,), (128,), (128,), (128,)], torch.float32),
    ("bn_add_relu_ f32", bn_add_relu_, [(32, 256, 56, 56), (256,), (256,), (256,), (256,), (32, 256, 56, 56)],
     torch.float32),
    ("residual_relu f32", lambda a, b: torch.relu(a + b), [(32, 256, 56, 56), (32, 256, 56, 56)], torch.float32),
    ("conv1d_bias f16", lambda x, w, b: b + x.mm(w), [(T, 768), (768, 3072), (3072,)], torch.float16),
    ("conv1d_gelu_new f16", lambda x, w, b: gelu_new(b + x.mm(w)), [(T, 768), (768, 3072), (3072,)], torch.float16),
    ("linear_gelu_tanh_linear f16",
     lambda x, w1, b1, w2, b2: F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2),
     [(4096, 4096), (4096, 4096), (4096,), (4096, 4096), (4096,)], torch.float16),
    ("attention f16", attention, [(8, 32, 1024, 128)] * 3, torch.float16),
    ("attention_causal f16", attention, [(8, 32, 1024, 128)] * 3 + [(1024, 1024)], torch.float16),
]


def main():
    flush = torch.zeros(64 << 20, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def once(f, args):
        flush.max()
        start.record()
        f(*args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0

    with torch.inference_mode():
        only = [w for w in os.environ.get("CHAIN_ROWS", "").split("|") if w]  # as bench_chains reads it
        for name, fn, sizes, dtype in ROWS:
            if only and not any(w in name for w in only):
                continue
            args = [torch.randn(s, device="cuda", dtype=dtype) for s in sizes]
            if name.startswith("bn_"):  # a running variance: positive, as bench/chain_suite.cpp draws it
                args[4] = torch.rand(sizes[4], device="cuda", dtype=dtype) + 0.5
            if name.startswith("conv_bn_"):
                args[5] = torch.rand(sizes[5], device="cuda", dtype=dtype) + 0.5
            if name == "attention_causal f16":  # additive causal mask, as bench/chain_suite.cpp draws it
                args[3] = torch.full(sizes[3], float("-inf"), device="cuda", dtype=dtype).triu(1)
            modes = {"eager": fn, "compile": torch.compile(fn),
                     "reduce_overhead": torch.compile(fn, mode="reduce-overhead")}
            for _ in range(3):
                for f in modes.values():
                    once(f, args)
            times = {k: [] for k in modes}
            for _ in range(REPS):
                order = list(modes)
                random.shuffle(order)
                for k in order:
                    times[k].append(once(modes[k], args))
            med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
            print(f"PY row={name} eager_us={med['eager']:.1f} compile_us={med['compile']:.1f} "
                  f"reduce_overhead_us={med['reduce_overhead']:.1f}", flush=True)


if __name__ == "__main__":
    main()
