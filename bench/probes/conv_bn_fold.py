"""What conv + batch norm folding and cuDNN's fused conv epilogues would give ResNet-50, before cudal1 builds them
(a probe: not part of cudal1, run by hand on the GPU machine; session 40, issue 38's rewrites).

ResNet-50 fp32 batch 32, eval, random weights (scripts/models/export_models.py's model), TF32 convolutions as the
app's defaults leave them. Modes, each timed (median of 5 rounds of ITERS) and checked against eager:
  eager        the model as the app runs it (NCHW)
  folded       every conv + batch norm pair folded into one conv with bias (torch.nn.utils.fusion), ReLU and the
               residual add as separate ops: what removing the batch norm pass alone gives
  cudnn        folded, and conv + bias + ReLU as aten::cudnn_convolution_relu, the block end conv + bias +
               residual + ReLU as aten::cudnn_convolution_add_relu (one cuDNN call each): the library rewrite
  *_cl         the same with model and input channels-last
  compile      torch.compile, default mode
Usage: python3 bench/probes/conv_bn_fold.py [ITERS | nan]   (nan: only whether the fused ReLU keeps NaN)
"""
import copy
import statistics
import sys
import time

import torch
from torch.nn.utils.fusion import fuse_conv_bn_eval


def time_ms(fn, x, iters):
    for _ in range(3):
        fn(x)
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn(x)
        torch.cuda.synchronize()
        rounds.append((time.perf_counter() - t0) * 1e3 / iters)
    return statistics.median(rounds)


def folded_model(m):
    f = copy.deepcopy(m)
    f.conv1 = fuse_conv_bn_eval(f.conv1, f.bn1)
    f.bn1 = torch.nn.Identity()
    for layer in (f.layer1, f.layer2, f.layer3, f.layer4):
        for b in layer:
            for i in (1, 2, 3):
                setattr(b, f"conv{i}", fuse_conv_bn_eval(getattr(b, f"conv{i}"), getattr(b, f"bn{i}")))
                setattr(b, f"bn{i}", torch.nn.Identity())
            if b.downsample is not None:
                b.downsample = fuse_conv_bn_eval(b.downsample[0], b.downsample[1])
    return f


def conv_relu(c, x):
    return torch.ops.aten.cudnn_convolution_relu(x, c.weight, c.bias, c.stride, c.padding, c.dilation, c.groups)


def conv_add_relu(c, x, z):
    return torch.ops.aten.cudnn_convolution_add_relu(x, c.weight, z, 1.0, c.bias, c.stride, c.padding, c.dilation,
                                                     c.groups)


def cudnn_forward(f):
    def fwd(x):
        x = f.maxpool(conv_relu(f.conv1, x))
        for layer in (f.layer1, f.layer2, f.layer3, f.layer4):
            for b in layer:
                identity = b.downsample(x) if b.downsample is not None else x
                out = conv_relu(b.conv2, conv_relu(b.conv1, x))
                x = conv_add_relu(b.conv3, out, identity)
        return f.fc(torch.flatten(f.avgpool(x), 1))
    return fwd


def nan_check(m):
    """Does cuDNN's fused ReLU propagate NaN as ATen's relu does?"""
    conv, bn = m.layer1[0].conv2, m.layer1[0].bn2
    fc = fuse_conv_bn_eval(conv, bn)
    for fmt in (torch.contiguous_format, torch.channels_last):
        xi = torch.randn(2, 64, 16, 16, device="cuda").contiguous(memory_format=fmt)
        xi[0, 3, 5, 5] = float("nan")
        xi[1, 7, 9, 9] = float("inf")
        f2 = copy.deepcopy(fc).to(memory_format=fmt)
        ref_o = torch.relu(bn(conv(xi)))
        got = conv_relu(f2, xi)
        z = torch.randn_like(ref_o)
        z[0, 0, 0, 0] = float("nan")
        got_add = conv_add_relu(f2, xi, z)
        ref_add = torch.relu(bn(conv(xi)) + z)
        print(f"NAN {fmt}: ATen relu NaN {torch.isnan(ref_o).sum().item()} Inf {torch.isinf(ref_o).sum().item()}, "
              f"cudnn_convolution_relu NaN {torch.isnan(got).sum().item()} Inf {torch.isinf(got).sum().item()}; "
              f"add: ATen NaN {torch.isnan(ref_add).sum().item()}, cudnn NaN {torch.isnan(got_add).sum().item()}")


def main():
    import torchvision

    if len(sys.argv) > 1 and sys.argv[1] == "nan":
        with torch.inference_mode():
            nan_check(torchvision.models.resnet50(weights=None).eval().cuda())
        return
    iters = int(sys.argv[1]) if len(sys.argv) > 1 else 30

    print(f"torch {torch.__version__} cudnn {torch.backends.cudnn.version()} "
          f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32} {torch.cuda.get_device_name()}")
    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).eval().cuda()
    for mod in m.modules():  # non-trivial running statistics, as a trained model has
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)
    x = torch.randn(32, 3, 224, 224, device="cuda")
    with torch.inference_mode():
        ref = m(x)
        scale = ref.abs().max().item()
        f = folded_model(m)
        modes = {"eager": (m, x), "folded": (f, x), "cudnn": (cudnn_forward(f), x)}
        mcl = copy.deepcopy(m).to(memory_format=torch.channels_last)
        fcl = copy.deepcopy(f).to(memory_format=torch.channels_last)
        xcl = x.contiguous(memory_format=torch.channels_last)
        modes.update({"eager_cl": (mcl, xcl), "folded_cl": (fcl, xcl), "cudnn_cl": (cudnn_forward(fcl), xcl)})
        base = None
        for name, (fn, inp) in modes.items():
            try:
                out = fn(inp)
                diff = (out - ref).abs().max().item() / scale
                ms = time_ms(fn, inp, iters)
            except Exception as e:  # noqa: BLE001 (a probe: report and go on)
                print(f"MODE {name}: failed: {str(e)[:200]}")
                continue
            base = base or ms
            print(f"MODE {name:10s} ms={ms:.3f} speedup_over_eager={base / ms:.3f} max|diff|/scale={diff:.2e}")
            sys.stdout.flush()
        c = torch.compile(m)
        out = c(x)
        ms = time_ms(c, x, iters)
        print(f"MODE {'compile':10s} ms={ms:.3f} speedup_over_eager={base / ms:.3f} "
              f"max|diff|/scale={(out - ref).abs().max().item() / scale:.2e}")
        nan_check(m)
        # Per-layer: each distinct conv + bn + relu shape of the model, eager against the cuDNN fused call.
        seen = set()
        for b in [m.layer1[0], m.layer2[0], m.layer3[1], m.layer4[1]]:
            for i in (1, 2):
                conv, bn = getattr(b, f"conv{i}"), getattr(b, f"bn{i}")
                fc = fuse_conv_bn_eval(conv, bn)
                cin = conv.in_channels
                hw = {64: 56, 256: 56, 128: 28, 512: 14, 1024: 14, 2048: 7}.get(cin, 56)
                key = (cin, conv.out_channels, conv.kernel_size, conv.stride)
                if key in seen:
                    continue
                seen.add(key)
                xi = torch.randn(32, cin, hw, hw, device="cuda")
                e = time_ms(lambda t: torch.relu_(bn(conv(t))), xi, iters)
                u = time_ms(lambda t: conv_relu(fc, t), xi, iters)
                o = time_ms(lambda t: conv(t), xi, iters)
                print(f"LAYER conv{key} [32,{cin},{hw},{hw}]: conv+bn+relu {e * 1e3:.1f} us, conv alone "
                      f"{o * 1e3:.1f} us, cudnn_convolution_relu folded {u * 1e3:.1f} us ({e / u:.2f}x)")


if __name__ == "__main__":
    main()
