/// @brief Private: the pooling family (max_pool2d with or without indices, avg_pool2d, _adaptive_avg_pool2d;
/// fp32/fp16/bf16 with fp32 arithmetic; NCHW or channels-last output as ATen picks it).
///
/// Note [Pooling]
/// Every output element is computed exactly as ATen's CUDA kernel computes it, so results are bit-identical:
/// - max: the window is scanned row by row (h outer, w inner, dilation steps, out-of-image positions
///   skipped); an element replaces the running maximum when it is greater or NaN, so the first maximum wins
///   and the last NaN wins. The running maximum starts at -Inf with index "first in-image position" in ATen's
///   NCHW kernel and index 0 in its channels-last kernel (which differ only for windows of -Inf or empty
///   windows, both possible: dilation can leave a window entirely in the padding).
/// - avg: the in-image part of the window is summed in fp32 in the same order and divided by the ATen divisor
///   (divisor_override, else the padded window clipped to image + padding, or the in-image count).
/// - adaptive avg: windows [floor(o*I/O), ceil((o+1)*I/O)), fp32 sum in order, then sum / kH / kW.
/// Technique space: NCHW outputs are computed in tiles of OPH x OPW outputs per thread from a patch of the input
/// held in registers (each input element loaded once per tile, which matters when windows overlap: a 4x4
/// stride-1 window reads 16 elements per output untiled, about 3 in a 4x4 tile), with vector stores of the
/// tile's rows; channels-last outputs give each thread OPC adjacent channels of one output pixel (16-byte
/// vector loads where the input is channels-last dense). Block size is the third knob. The index arithmetic
/// uses compile-time sizes (no runtime division). NCHW max/avg with overlapping windows may also stage the
/// block's input in shared memory (Note [Pooling smem]); channels-last outputs with overlapping windows may map
/// blocks onto 2-d pixel tiles (Note [Pooling channels-last tiles]). Declines: other dtypes, empty tensors,
/// arguments ATen rejects (it raises the error then), adaptive pooling of channels-last inputs, sizes needing
/// 64-bit indices.
///
/// Note [Pooling smem]
/// Knob smem=1 (NCHW max/avg, overlapping windows only). The register-patch kernel loads each tile's
/// (OPH-1)*DH+KH x (OPW-1)*DW+KW patch with scalar loads; neighbouring threads' patches overlap, so the L1/LSU
/// pipe carries several times the bytes (k4 s1, 4x4 tiles: 49 loads per 16 outputs, each warp load spanning 4
/// 128-byte wavefronts: ~0.38 wavefronts per output, ~3x the input bytes). With smem=1 a block is BY x BX threads
/// (BX = 32, or the next power of two >= the tiles per row) covering BY*OPH x BX*OPW outputs of one plane; it
/// loads its input rectangle IR x IC once, coalesced (consecutive threads, consecutive columns), as fp32 into
/// shared memory (zero outside the image; padding cells are skipped by the in-image tests anyway), syncs,
/// and each thread copies its patch into registers with VEC-float shared loads (VEC = 4/2/1 as OPW*DW allows,
/// so a quarter-warp's 16-byte reads hit distinct banks), then runs the same window loops: the values and the
/// order they are combined in are unchanged, so results stay bit-identical. Bytes: DRAM reads stay the input
/// once (the halo rows/columns shared with neighbouring blocks, IR*IC/(BY*OPH*DH*BX*OPW*DW) - 1 = 5-20%,
/// come from L2); the L1 pipe drops to ~0.04 wavefronts per output for the fill plus ~0.11 for the patch
/// reads (k4 s1, 4x4 tiles, block 128: 19 x 132 floats = 10 KB). Limits: static shared memory <= 48 KB
/// (kMaxSmemBytes: the launch passes no dynamic shared memory and sets no attribute), the register patch,
/// read in whole vectors, <= kMaxPatch floats. Predictions (H200, floor = input read once + outputs written
/// once): max_pool2d f32 [32,64,512,512] k4 s1 p1 1.67x -> ~1.15-1.25x without indices and 1.54x -> ~1.1-1.2x
/// with (the 8-byte index stores are then 2/3 of the bytes); the f16 k3 s2 stem 1.34x -> ~1.15-1.2x (tiny:
/// 231 MB, launch and tail effects of a ~56 us kernel remain).
/// Measured (H200, 2026-11-30, docs/PERF.md session 4): wrong. On the 4x4 stride-1 inference row the smem=1
/// variants ran 2529-4578 us against 1721-2060 us for the register tiles, and no row picked smem=1. Kept as
/// knob values (the tuner measures them per signature); the fill loop's scalar loads and the __syncthreads per
/// tile are the first suspects.
///
/// Note [Pooling channels-last tiles]
/// Knob px (channels-last, overlapping windows only). With px=0 thread t takes channel group t % (C/OPW) of
/// pixel t / (C/OPW): a block of 256 threads x 8 bf16 channels covers 4 adjacent pixels of a 512-channel
/// image, so its 3x3 stride-1 windows need 3 x 6 input pixels for 4 outputs: 4.5 input reads per output from
/// L2 (vertical neighbours sit in other blocks, whose lines L1 rarely still holds). That is why avg_pool2d
/// bf16 channels-last [64,512,28,28] k3 s1 ran at 2.19x the floor. With px > 0 a block is SG channel groups
/// (a power of two dividing C/OPW, at most 128 bytes of channels: one full line per pixel) x PY x px output
/// pixels (SG * PY * px = block): its windows meet in L1, and L2 reads fall to (PY+2)(px+2)/(PY*px) per
/// output for k3 s1: 8 x 4 pixels 1.9, 4 x 8 1.9, 8 x 8 (block 512) 1.56; for the k3 s2 stem from 6.75/4 to
/// 9 x 17 / (4 * 8) / 4 = 1.2x the input bytes. A warp still reads whole 128-byte lines (4 pixels x 8 groups x
/// 16 bytes). Only the thread-to-(pixel, channels) map changes; each output's window loop is the px=0 one, so
/// results are identical. Predictions: avg_pool2d bf16 channels-last k3 s1 2.19x -> ~1.3x (28 = 3.5 x 8: an
/// 8-wide tile idles 1/8 of its threads; the 4 x 8 tile fits 28 = 7 x 4 columns exactly but not the rows),
/// max_pool2d bf16 channels-last stem 1.37x -> ~1.2x. Not done: adaptive_avg_pool2d f32 [128,512,14,14] -> 7x7
/// (1.77x; its 2x2 windows do not overlap, so neither knob applies: what remains there is the OW = 7 row
/// tiles of opw=2 idling 1/8 of the threads and the small problem's ~15 us floor).
/// Measured (H200, 2026-11-30): the bf16 channels-last stem took px4, 1.37x -> 1.21x the floor; the
/// channels-last k3 s1 avg pool kept px0 at 2.25x.
#pragma once

#include <memory>

#include "cudal1/optimizer/family.h"

namespace cudal1::optimizer::pool {

/// The family object (a process-wide singleton).
const Family& pool_family();

enum class PoolKind { kMax, kAvg, kAdaptiveAvg };

/// One planned signature (4-d view: a 3-d input has N = 1 and sN = 0).
struct PoolShape {
  PoolKind kind = PoolKind::kMax;
  bool indices = false;  ///< max_pool2d_with_indices: also writes int64 indices
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::vector<int64_t> in_sizes, in_strides, out_sizes, out_strides;
  int64_t n = 1, c = 1, h = 1, w = 1, oh = 1, ow = 1;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;  ///< input strides (elements)
  int kh = 1, kw = 1, dh = 1, dw = 1, ph = 0, pw = 0, dil_h = 1, dil_w = 1;  ///< kernel, stride, pad, dilation
  bool count_include_pad = true;
  int64_t divisor = 0;         ///< avg: divisor_override, 0 when absent
  bool channels_last = false;  ///< output layout (ATen's suggest_memory_format of the input)
  int max_vec = 1;             ///< channels-last: widest channel vector the input layout allows
};

/// Technique knobs of one variant.
struct PoolKnobs {
  int opw = 1;    ///< outputs per thread along the output's fastest dim (ow for NCHW, c for channels-last)
  int oph = 1;    ///< NCHW: output rows per thread
  int block = 256;
  int smem = 0;   ///< NCHW max/avg: 1 stages the block's input rectangle in shared memory (Note [Pooling smem])
  int px = 0;     ///< channels-last: 0 channel-fastest order, else blocks of PY x px output pixels (Note below)
};

/// Geometry of a channels-last pixel-tile variant: sg channel groups of OPW channels (a power of two dividing
/// C / OPW, at most 128 bytes) times py x px output pixels per block.
struct PixelTile {
  int sg = 1, py = 1;
};

PixelTile pixel_tile(const PoolShape& s, const PoolKnobs& k);

/// Geometry of a shared-memory variant: BY x BX threads per block, the staged input rectangle (rows x cols of
/// the image, `pitch` floats per shared row), the float vector width of patch reads and the bytes it takes.
struct SmemTile {
  int bx = 1, by = 1, vec = 1;
  int64_t rows = 0, cols = 0, pitch = 0, patch_cols = 0, bytes = 0;
};

/// Static shared memory a variant may take (the default per-block limit without opting in to more).
constexpr int64_t kMaxSmemBytes = 48 * 1024;

SmemTile smem_tile(const PoolShape& s, const PoolKnobs& k);

/// Registers one tile's input patch may take; larger tiles are not offered.
constexpr int kMaxPatch = 64;

/// Input elements (rows x cols) a tile of `k` reads in NCHW form.
int64_t patch_rows(const PoolShape& s, const PoolKnobs& k);
int64_t patch_cols(const PoolShape& s, const PoolKnobs& k);

/// Threads one launch needs.
int64_t pool_threads(const PoolShape& s, const PoolKnobs& k);

/// CUDA source of `k` for `s`: `cudal1_pool(const storage_t* in, storage_t* out, long long* idx)`.
KernelSource generate_pool(const PoolShape& s, const PoolKnobs& k);

/// The bound kernel of a variant.
std::unique_ptr<BoundKernel> make_pool_kernel(const PoolShape& s, const PoolKnobs& k,
                                              std::shared_ptr<LoadedModule> module);

}  // namespace cudal1::optimizer::pool
