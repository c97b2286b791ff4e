"""Which ATen op does eval-mode batch norm reach on this torch + GPU, and what does it return?

Prints, per configuration, every op that reaches the CUDA backend (below autograd, after composite
decomposition: what cudal1's dispatcher hook sees) with its argument and output shapes/dtypes.
Run on the GPU machine: python3 bench/probes/batch_norm_ops.py
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode


def describe(x):
    if isinstance(x, torch.Tensor):
        return f"T{tuple(x.shape)}:{str(x.dtype).replace('torch.', '')}:{'cl' if x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last) and not x.is_contiguous() else 'c' if x.is_contiguous() else 's'}"
    if isinstance(x, (list, tuple)):
        return "(" + ", ".join(describe(y) for y in x) + ")"
    return repr(x)


class Log(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        print(f"   {func}  args={describe(args)}  ->  {describe(out)}")
        return out


def case(name, shape, dtype, pdtype, cl=False, affine=True, stats=True, training=False):
    x = torch.randn(shape, device="cuda", dtype=dtype)
    if cl:
        x = x.to(memory_format=torch.channels_last)
    c = shape[1]
    bn = torch.nn.BatchNorm2d if len(shape) == 4 else torch.nn.BatchNorm1d if len(shape) in (2, 3) else torch.nn.BatchNorm3d
    m = bn(c, affine=affine, track_running_stats=stats).to("cuda", pdtype)
    m.train(training)
    print(f"-- {name}: x {describe(x)} params {pdtype} affine={affine} running_stats={stats} training={training}")
    with torch.no_grad(), Log():
        m(x)


print("torch", torch.__version__, "cudnn", torch.backends.cudnn.version(), torch.cuda.get_device_name())
case("f32 NCHW", (8, 64, 28, 28), torch.float32, torch.float32)
case("f16 NCHW, f16 params", (8, 64, 28, 28), torch.float16, torch.float16)
case("f16 NCHW, f32 params (autocast style)", (8, 64, 28, 28), torch.float16, torch.float32)
case("bf16 channels-last, f32 params", (8, 64, 28, 28), torch.bfloat16, torch.float32, cl=True)
case("f32 [N,C] (BatchNorm1d)", (256, 512), torch.float32, torch.float32)
case("f32 [N,C,L]", (16, 64, 100), torch.float32, torch.float32)
case("f32 5d", (2, 16, 4, 8, 8), torch.float32, torch.float32)
case("no affine", (8, 64, 28, 28), torch.float32, torch.float32, affine=False)
case("no running stats (batch stats even in eval)", (8, 64, 28, 28), torch.float32, torch.float32, stats=False)
case("training", (8, 64, 28, 28), torch.float32, torch.float32, training=True)
torch.backends.cudnn.enabled = False
case("f32 NCHW, cudnn disabled", (8, 64, 28, 28), torch.float32, torch.float32)
case("f16 NCHW f32 params, cudnn disabled", (8, 64, 28, 28), torch.float16, torch.float32)
