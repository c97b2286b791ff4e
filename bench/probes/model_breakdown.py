"""Where a real model's GPU time goes, eager against torch.compile, on the GPU machine (a probe: not part of
cudal1, run by hand). Builds the models of scripts/models/export_models.py (random weights from their configs) and,
per model and mode, prints the time per iteration (median of 5 rounds) and the top kernels by GPU time per
iteration from torch.profiler, grouped into classes (convolution, GEMM, batch norm, pointwise, ...).

Usage: python3 bench/probes/model_breakdown.py [resnet50,gpt2] [ITERS]
ResNet-50 modes: eager (NCHW, as the app gives it), eager_cl (model and input channels-last), compile.
GPT-2 modes: eager, compile.
"""
import collections
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile


def time_ms(fn, x, iters):
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(rounds)


CLASSES = [("conv", ("conv", "implicit", "cudnn", "sm90_xmma_fprop", "xmma_fprop", "fprop")),
           ("gemm", ("gemm", "cutlass", "sm90_xmma", "nvjet", "cublas")),
           ("attention", ("flash", "fmha", "attention", "efficient")),
           ("layout", ("nchwtonhwc", "nhwctonchw", "transpose", "permute")),
           ("batch_norm", ("batch_norm", "batchnorm", "bn_")),
           ("triton", ("triton",)),
           ("pool", ("pool",)),
           ("reduce", ("reduce", "softmax", "layer_norm", "norm")),
           ("pointwise", ("elementwise", "vectorized", "unrolled"))]


def klass(name):
    low = name.lower()
    for cls, keys in CLASSES:
        if any(k in low for k in keys):
            return cls
    return "other"


def breakdown(tag, fn, x, iters=5):
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
    per_class = collections.Counter()
    per_kernel = collections.Counter()
    counts = collections.Counter()
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        per_class[klass(ev.name)] += us / iters
        per_kernel[ev.name[:90]] += us / iters
        counts[ev.name[:90]] += 1
    total = sum(per_class.values())
    print(f"BREAKDOWN {tag}: {total / 1e3:.3f} ms GPU time per iteration, "
          f"{sum(counts.values()) // iters} kernels per iteration")
    for cls, us in per_class.most_common():
        print(f"  class {cls:<11} {us / 1e3:7.3f} ms {100 * us / total:5.1f}%")
    for name, us in per_kernel.most_common(20):
        print(f"  kernel {us:8.1f} us x{counts[name] // iters:<3} {name}")
    sys.stdout.flush()


def main():
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["resnet50", "gpt2"]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    print(f"torch {torch.__version__} cudnn.allow_tf32={torch.backends.cudnn.allow_tf32} "
          f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
    with torch.inference_mode():
        if "resnet50" in names:
            import torchvision

            torch.manual_seed(0)
            m = torchvision.models.resnet50(weights=None).eval().cuda()
            x = torch.randn(32, 3, 224, 224, device="cuda")
            for _ in range(5):
                m(x)
            traced = torch.jit.trace(m, x, check_trace=False)
            for _ in range(5):
                traced(x)
            print(f"TIME resnet50 traced ms={time_ms(traced, x, iters):.3f}")
            breakdown("resnet50 traced", traced, x)
            print(f"TIME resnet50 eager ms={time_ms(m, x, iters):.3f}")
            breakdown("resnet50 eager", m, x)
            mcl = torchvision.models.resnet50(weights=None).eval().cuda().to(memory_format=torch.channels_last)
            xcl = x.contiguous(memory_format=torch.channels_last)
            for _ in range(5):
                mcl(xcl)
            print(f"TIME resnet50 eager_cl ms={time_ms(mcl, xcl, iters):.3f}")
            breakdown("resnet50 eager_cl", mcl, xcl)
            c = torch.compile(m)
            for _ in range(5):
                c(x)
            print(f"TIME resnet50 compile ms={time_ms(c, x, iters):.3f}")
            breakdown("resnet50 compile", c, x)
            del c
            torch._dynamo.reset()
        if "gpt2" in names:
            import transformers

            cfg = transformers.GPT2Config(use_cache=False)
            lm = transformers.GPT2LMHeadModel(cfg).eval().half().cuda()
            print(f"gpt2 attn_implementation={getattr(lm.config, '_attn_implementation', '?')} "
                  f"activation={cfg.activation_function} act={type(lm.transformer.h[0].mlp.act).__name__} "
                  f"transformers {transformers.__version__}")

            def fn(ids):
                return lm(input_ids=ids, use_cache=False).logits

            torch.manual_seed(0)
            ids = torch.randint(cfg.vocab_size, (8, 512), device="cuda")
            for _ in range(5):
                fn(ids)
            print(f"TIME gpt2 eager ms={time_ms(fn, ids, iters):.3f}")
            breakdown("gpt2 eager", fn, ids)
            class Logits(torch.nn.Module):  # a module: tracing a function would bake the weights in as constants
                def __init__(self, lm):
                    super().__init__()
                    self.lm = lm

                def forward(self, i):
                    return self.lm(input_ids=i, use_cache=False).logits

            traced = torch.jit.trace(Logits(lm), ids, check_trace=False)
            for _ in range(5):  # the profiling executor specialises and fuses over the first calls
                traced(ids)
            print(f"TIME gpt2 traced ms={time_ms(traced, ids, iters):.3f}")
            breakdown("gpt2 traced", traced, ids)
            graph = torch.jit.last_executed_optimized_graph()
            print("GRAPH gpt2 traced, executed ops:", collections.Counter(
                n.kind() for n in graph.nodes()).most_common(40))
            for n in graph.nodes():
                if "Group" in n.kind():
                    sub = n.g("Subgraph") if n.hasAttribute("Subgraph") else None
                    print("  fused group", n.kind(), [m.kind() for m in sub.nodes()] if sub else "")
                    break
            # The same traced model with TorchScript's TensorExpr fuser off: every op reaches the dispatcher.
            torch._C._jit_set_texpr_fuser_enabled(False)
            traced_nf = torch.jit.trace(Logits(lm), ids, check_trace=False)
            for _ in range(5):
                traced_nf(ids)
            print(f"TIME gpt2 traced_nofuser ms={time_ms(traced_nf, ids, iters):.3f}")
            breakdown("gpt2 traced_nofuser", traced_nf, ids)
            torch._C._jit_set_texpr_fuser_enabled(True)
            c = torch.compile(fn)
            for _ in range(5):
                c(ids)
            print(f"TIME gpt2 compile ms={time_ms(c, ids, iters):.3f}")
            breakdown("gpt2 compile", c, ids)


if __name__ == "__main__":
    main()
