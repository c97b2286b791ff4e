"""Builds the real models of the end-to-end measurement from their configs (random weights: nothing is
downloaded), traces them to TorchScript for the C++ runner, and times the same models in Python, eager and
under torch.compile, in the same run. Used by scripts/real_models.sh on the GPU machine.

Usage: python3 export_models.py OUT_DIR [ITERS] [MODELS]   (MODELS: comma-separated from resnet50, gpt2, llama, bert;
default resnet50,gpt2). Writes OUT_DIR/<model>.pt for each and prints one line per model and mode:
  PY model=resnet50 mode=eager ms_per_iter=... ms_gpu=...
(ms_gpu: one forward's GPU time with the host out of the way, as the C++ runner measures it), and before them the
traced forward's synchronising CUDA calls ("SYNC model=..." lines, sync_report). With PROFILE=1 it also
writes OUT_DIR/<model>_<mode>_kernels.txt, the GPU kernels of one forward by total time (torch.profiler).
"""
import os
import statistics
import sys
import time

import torch


class TensorOut(torch.nn.Module):
    """One output field of an HF model (`logits`, `last_hidden_state`) as a plain tensor: a tensor out traces where
    HF's output dicts do not. `kwargs` go to every call (use_cache=False: no KV cache)."""

    def __init__(self, model, field, **kwargs):
        super().__init__()
        self.model, self.field, self.kwargs = model, field, kwargs

    def forward(self, ids):
        return getattr(self.model(input_ids=ids, **self.kwargs), self.field)


def models(names):
    if "resnet50" in names:
        import torchvision

        resnet = torchvision.models.resnet50(weights=None).eval().cuda()
        torch.manual_seed(0)
        yield "resnet50", resnet, torch.randn(32, 3, 224, 224).cuda()
    if "gpt2" in names:
        import transformers

        # GPT-2 small, HF's gelu_new composite in every MLP, no KV cache.
        cfg = transformers.GPT2Config(use_cache=False)
        gpt2 = TensorOut(transformers.GPT2LMHeadModel(cfg), "logits", use_cache=False).eval().half().cuda()
        torch.manual_seed(0)
        yield "gpt2", gpt2, torch.randint(cfg.vocab_size, (8, 512)).cuda()
    if "llama" in names:
        import transformers

        # A Llama-architecture decoder (RMSNorm written as ops, SwiGLU MLP, rotary embeddings, grouped-query SDPA
        # attention), 8 layers of TinyLlama's width, fp16, 8x512 tokens: a model no cudal1 rule was written for.
        cfg = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                                       num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                       max_position_embeddings=2048, use_cache=False)
        llama = TensorOut(transformers.LlamaForCausalLM(cfg), "logits", use_cache=False).eval().half().cuda()
        torch.manual_seed(0)
        yield "llama", llama, torch.randint(cfg.vocab_size, (8, 512)).cuda()
    if "bert" in names:
        import transformers

        # BERT-base (12 encoder layers, exact erf GELU, post-LayerNorm, SDPA attention), fp16, 8x512 tokens: linear
        # layers with biases whose query, key, value and output projections share one signature.
        cfg = transformers.BertConfig()
        bert = TensorOut(transformers.BertModel(cfg, add_pooling_layer=False), "last_hidden_state").eval().half().cuda()
        torch.manual_seed(0)
        yield "bert", bert, torch.randint(cfg.vocab_size, (8, 512)).cuda()


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


def gpu_ms(fn, x):
    """A spin kernel holds the stream while the host issues one forward; the events time only the GPU's work.
    A sample counts only if the spin was still running when the forward returned; the spin doubles up to 2**28
    cycles, and a forward that waits for the GPU (never ahead at that length 3 times) is given up. Median, or -1."""
    samples, cycles, misses = [], 4_000_000, 0
    for _ in range(21):
        if misses >= 3:
            break
        torch.cuda.synchronize()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        begin.record()
        fn(x)
        ahead = not begin.query()
        end.record()
        torch.cuda.synchronize()
        if ahead:
            samples.append(begin.elapsed_time(end))
        elif cycles < 2**28:
            cycles = min(2**28, cycles * 2)
        else:
            misses += 1
    return statistics.median(samples) if samples else -1.0


def profile(fn, x, path):
    from torch.profiler import ProfilerActivity, profile as prof

    with prof(activities=[ProfilerActivity.CUDA]) as p:
        fn(x)
        torch.cuda.synchronize()
    with open(path, "w") as f:
        f.write(p.key_averages().table(sort_by="cuda_time_total", row_limit=40, max_name_column_width=90))


SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy")


def sync_report(name, fn, x):
    """Prints, per op path, the CUDA runtime calls of one forward that make the host wait for the GPU (a forward
    holding one cannot run ahead of the GPU, and its CUDA-graph capture fails):
      SYNC model=llama calls=2 where=cudaStreamSynchronize <- aten::copy_ <- aten::_to_copy <- aten::to
    or "SYNC model=... none". Diagnostic only: a failure prints why and changes nothing else."""
    try:
        from torch.profiler import ProfilerActivity, profile as prof

        fn(x)
        torch.cuda.synchronize()
        with prof(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            fn(x)
        found = {}
        for e in p.events():
            if e.name not in SYNC_CALLS:
                continue
            path, parent = [e.name], e.cpu_parent
            while parent is not None and len(path) < 6:
                path.append(parent.name)
                parent = parent.cpu_parent
            key = " <- ".join(path)
            found[key] = found.get(key, 0) + 1
        for key, n in sorted(found.items(), key=lambda kv: -kv[1]):
            print(f"SYNC model={name} calls={n} where={key}", flush=True)
        if not found:
            print(f"SYNC model={name} none", flush=True)
    except Exception as e:  # noqa: BLE001 (a diagnostic never stops the export)
        print(f"SYNC model={name} not measured: {e}", flush=True)


def report(name, mode, fn, x, iters, out_dir):
    ms = time_ms(fn, x, iters)
    print(f"PY model={name} mode={mode} ms_per_iter={ms:.4f} ms_gpu={gpu_ms(fn, x):.4f}", flush=True)
    if os.environ.get("PROFILE") == "1":
        profile(fn, x, f"{out_dir}/{name}_{mode}_kernels.txt")


def main():
    out_dir = sys.argv[1]
    iters = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    names = sys.argv[3].split(",") if len(sys.argv) > 3 else ["resnet50", "gpt2"]
    for name, model, x in models(names):
        with torch.inference_mode():
            traced = torch.jit.trace(model, x, check_trace=False)
            traced.save(f"{out_dir}/{name}.pt")
            sync_report(name, traced, x)  # what the C++ runner runs: the traced graph
            for _ in range(10):
                model(x)
            report(name, "eager", model, x, iters, out_dir)
            compiled = torch.compile(model)
            for _ in range(10):  # compiles here, outside the timing
                compiled(x)
            report(name, "compile", compiled, x, iters, out_dir)
            del compiled
            torch._dynamo.reset()


if __name__ == "__main__":
    main()
