#!/usr/bin/env python3
"""What a traced model's forward calls through the dispatcher, as cudal1's hook sees it (GPU machine).

Loads a TorchScript model saved by scripts/models/export_models.py, runs it a few times with TorchScript's
TensorExpr fuser on or off, and prints, for one forward after warm-up: each ATen op that reaches the dispatcher
(overload, argument kinds: tensor dtype/shape/device or Python scalar value, in order) with its count, and the
graph's fusion groups (what the fuser runs outside the dispatcher).

Usage: python3 bench/probes/traced_ops.py MODEL.pt INPUT_SPEC [on|off]   (INPUT_SPEC as the C++ runner's, e.g.
i64:8x512:50257)
"""
import collections
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def make_input(spec):
    parts = spec.split(":")
    shape = [int(s) for s in parts[1].split("x")]
    if parts[0] == "i64":
        return torch.randint(0, int(parts[2]), shape, device="cuda")
    return torch.randn(shape, device="cuda")


def describe(a):
    if isinstance(a, torch.Tensor):
        scalar = f"={a.item():.10g}" if a.dim() == 0 and a.device.type == "cpu" else ""
        return f"{str(a.dtype).replace('torch.', '')}{list(a.shape)}{'' if a.is_cuda else '@cpu'}{scalar}"
    if isinstance(a, (list, tuple)):
        return "[" + ",".join(describe(x) for x in a) + "]"
    return repr(a)


class Log(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()
        self.order = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        key = f"{func}({', '.join(describe(a) for a in args)}{', ' if kwargs else ''}" + \
              ", ".join(f"{k}={describe(v)}" for k, v in (kwargs or {}).items()) + ")"
        if key not in self.calls:
            self.order.append(key)
        self.calls[key] += 1
        return func(*args, **(kwargs or {}))


def main():
    path, spec = sys.argv[1], sys.argv[2]
    fuser = sys.argv[3] if len(sys.argv) > 3 else "on"
    torch._C._jit_set_texpr_fuser_enabled(fuser == "on")
    m = torch.jit.load(path, map_location="cuda").eval()
    x = make_input(spec)
    with torch.inference_mode():
        for _ in range(5):
            m(x)
        torch.cuda.synchronize()
        log = Log()
        with log:
            m(x)
    print(f"== {path}, TensorExpr fuser {fuser}: {sum(log.calls.values())} dispatcher calls, {len(log.calls)} kinds")
    for k in log.order:
        print(f"{log.calls[k]:5d}  {k}")
    graph = torch.jit.last_executed_optimized_graph()
    groups = [n for n in graph.nodes() if n.kind() in ("prim::TensorExprGroup", "prim::FusionGroup", "prim::CudaFusionGroup")]
    print(f"== fusion groups in the last optimized graph: {len(groups)}")
    for n in groups[:8]:
        sub = n.g("Subgraph")
        print("  " + "; ".join(s.kind() for s in sub.nodes()))


if __name__ == "__main__":
    main()
