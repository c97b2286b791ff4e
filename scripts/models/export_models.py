"""Builds the real models of the end-to-end measurement from their configs (random weights: nothing is
downloaded), traces them to TorchScript for the C++ runner, and times the same models in Python, eager and
under torch.compile, in the same run. Used by scripts/real_models.sh on the GPU machine.

Usage: python3 export_models.py OUT_DIR [ITERS] [MODELS]   (MODELS: comma-separated, default resnet50,gpt2)
Writes OUT_DIR/resnet50.pt, OUT_DIR/gpt2.pt and prints one line per model and mode:
  PY model=resnet50 mode=eager ms_per_iter=...
"""
import statistics
import sys
import time

import torch


def models(names):
    if "resnet50" in names:
        import torchvision

        resnet = torchvision.models.resnet50(weights=None).eval().cuda()
        torch.manual_seed(0)
        yield "resnet50", resnet, torch.randn(32, 3, 224, 224).cuda()
    if "gpt2" in names:
        import transformers

        class Logits(torch.nn.Module):  # the logits alone: a tensor out traces where HF's output dicts do not
            def __init__(self, lm):
                super().__init__()
                self.lm = lm

            def forward(self, ids):
                return self.lm(input_ids=ids, use_cache=False).logits

        # GPT-2 small, HF's gelu_new composite in every MLP, no KV cache.
        cfg = transformers.GPT2Config(use_cache=False)
        gpt2 = Logits(transformers.GPT2LMHeadModel(cfg)).eval().half().cuda()
        torch.manual_seed(0)
        yield "gpt2", gpt2, torch.randint(cfg.vocab_size, (8, 512)).cuda()


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


def main():
    out_dir = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else ["resnet50", "gpt2"]
    for name, model, x in models(names):
        with torch.inference_mode():
            traced = torch.jit.trace(model, x, check_trace=False)
            traced.save(f"{out_dir}/{name}.pt")
            for _ in range(10):
                model(x)
            print(f"PY model={name} mode=eager ms_per_iter={time_ms(model, x, iters):.4f}", flush=True)
            compiled = torch.compile(model)
            for _ in range(10):  # compiles here, outside the timing
                compiled(x)
            print(f"PY model={name} mode=compile ms_per_iter={time_ms(compiled, x, iters):.4f}", flush=True)
            del compiled
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
