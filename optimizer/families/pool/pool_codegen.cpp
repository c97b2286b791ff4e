/// @brief Source generation for the pooling family (Note [Pooling], Note [Pooling techniques]): the head every
/// variant shares (the signature's macros and typed constants, pool_common.cuh), the register and shared-memory
/// tiles (a kernel specialised by macros to the signature and the tile), and the dispatch to the other techniques.
#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "pool_cuda.h"
#include "pool_family.h"

namespace cudal1::optimizer::pool {

int64_t patch_rows(const PoolShape& s, const PoolKnobs& k) {
  return static_cast<int64_t>(k.oph - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
}

int64_t patch_cols(const PoolShape& s, const PoolKnobs& k) {
  return static_cast<int64_t>(k.opw - 1) * s.dw + static_cast<int64_t>(s.kw - 1) * s.dil_w + 1;
}

SmemTile smem_tile(const PoolShape& s, const PoolKnobs& k) {
  SmemTile g;
  const int64_t tw = (s.ow + k.opw - 1) / k.opw;
  while (g.bx < 32 && g.bx < tw && g.bx < k.block) g.bx *= 2;
  g.by = k.block / g.bx;
  g.rows = static_cast<int64_t>(g.by * k.oph - 1) * s.dh + static_cast<int64_t>(s.kh - 1) * s.dil_h + 1;
  g.cols = static_cast<int64_t>(g.bx * k.opw - 1) * s.dw + static_cast<int64_t>(s.kw - 1) * s.dil_w + 1;
  const int64_t step = static_cast<int64_t>(k.opw) * s.dw;  // tile columns between adjacent threads' patches
  g.vec = step % 4 == 0 ? 4 : step % 2 == 0 ? 2 : 1;
  const int64_t pc = patch_cols(s, k);
  g.patch_cols = (pc + g.vec - 1) / g.vec * g.vec;
  g.pitch = (g.bx - 1) * step + g.patch_cols;  // >= cols, a multiple of vec
  g.bytes = g.rows * g.pitch * static_cast<int64_t>(sizeof(float));
  return g;
}

PixelTile pixel_tile(const PoolShape& s, const PoolKnobs& k) {
  PixelTile g;
  const int64_t groups = s.c / k.opw;
  while (groups % (2 * g.sg) == 0 && 2 * g.sg * k.opw * elem_size(s.dtype) <= 128 && 2 * g.sg <= k.block) g.sg *= 2;
  g.py = std::max(1, k.block / g.sg / std::max(1, k.px));
  return g;
}

int64_t pool_threads(const PoolShape& s, const PoolKnobs& k) {
  if (s.channels_last && k.px) {
    const PixelTile g = pixel_tile(s, k);
    return s.n * (s.c / k.opw / g.sg) * ((s.oh + g.py - 1) / g.py) * ((s.ow + k.px - 1) / k.px) * k.block;
  }
  if (const auto t = adaptive_staging(k)) return t->threads(s);
  if (const auto t = packed_pairs(k)) return t->threads(s);
  if (const auto t = channels_last_walk(k)) return t->threads(s);
  if (k.slide) {
    const SlideGeometry g = slide_geometry(s, k);
    return s.n * s.c * g.segments * g.chunks;
  }
  if (const auto t = channels_last_runs(k)) return t->threads(s);
  if (s.channels_last) return s.n * s.oh * s.ow * (s.c / k.opw);
  const int64_t th = (s.oh + k.oph - 1) / k.oph, tw = (s.ow + k.opw - 1) / k.opw;
  if (k.smem) {
    const SmemTile g = smem_tile(s, k);
    return s.n * s.c * ((th + g.by - 1) / g.by) * ((tw + g.bx - 1) / g.bx) * k.block;
  }
  return s.n * s.c * th * tw;
}

namespace {

/// avg: the divisor when every window of the signature has the same one (Note [Pooling exact division]):
/// divisor_override, or count_include_pad where no window overhangs the padded image (ceil mode can make the
/// last one overhang), else 0.
int64_t const_divisor(const PoolShape& s) {
  if (s.kind != PoolKind::kAvg) return 0;
  if (s.divisor) return s.divisor;
  const bool fits = (s.oh - 1) * s.dh - s.ph + s.kh <= s.h + s.ph && (s.ow - 1) * s.dw - s.pw + s.kw <= s.w + s.pw;
  return s.count_include_pad && fits ? int64_t{s.kh} * s.kw : 0;
}

}  // namespace

void pool_constants(std::ostream& o, const PoolShape& s, int block, int64_t threads) {
  o << "namespace pool {\n";
  constant(o, "int", "kN", s.n);
  constant(o, "int", "kC", s.c);
  constant(o, "int", "kH", s.h);
  constant(o, "int", "kW", s.w);
  constant(o, "int", "kOh", s.oh);
  constant(o, "int", "kOw", s.ow);
  constant(o, "index_t", "kSn", s.sn);
  constant(o, "index_t", "kSc", s.sc);
  constant(o, "index_t", "kSh", s.sh);
  constant(o, "index_t", "kSw", s.sw);
  constant(o, "int", "kKh", s.kh);
  constant(o, "int", "kKw", s.kw);
  constant(o, "int", "kDh", s.dh);
  constant(o, "int", "kPh", s.ph);
  constant(o, "int", "kPw", s.pw);
  constant(o, "int", "kDlh", s.dil_h);
  constant(o, "int", "kDlw", s.dil_w);
  constant(o, "int", "kDivisor", s.divisor);
  constant(o, "bool", "kCountPad", s.count_include_pad);
  constant(o, "int", "kConstDiv", const_divisor(s));
  constant(o, "int", "kInnerDiv", s.divisor ? s.divisor : int64_t{s.kh} * s.kw);
  constant(o, "int", "kStorageBits", 8 * elem_size(s.dtype));
  constant(o, "bool", "kStorageBf16", s.dtype == c10::ScalarType::BFloat16);
  constant(o, "bool", "kIndices", s.indices);
  constant(o, "bool", "kChannelsLast", s.channels_last);
  constant(o, "int", "kBlock", block);
  constant(o, "index_t", "kThreads", threads);
  o << "}  // namespace pool\n";
}

namespace {

/// The shared head: the first line (the signature, the knobs and the technique's class where it has one), the
/// dtype prelude, the signature's macros (for the kernels generated from them) and typed constants, and
/// pool_common.cuh. A kernel without a class follows `using namespace pool;` (Note [Pooling techniques]).
void emit_common(std::ostringstream& k, const PoolShape& s, const PoolKnobs& kn, const char* technique) {
  k << "// cudal1 pool: kind=" << static_cast<int>(s.kind) << " indices=" << s.indices << " "
    << c10::toString(s.dtype) << " in=" << c10::str(c10::IntArrayRef(s.in_sizes)) << " out="
    << c10::str(c10::IntArrayRef(s.out_sizes)) << (s.channels_last ? " channels-last" : " nchw") << " opw=" << kn.opw
    << " oph=" << kn.oph << " block=" << kn.block << " smem=" << kn.smem << " px=" << kn.px << " slide=" << kn.slide
    << " seg=" << kn.seg << " cpx=" << kn.cpx << " walk=" << kn.walk << " flat=" << kn.flat << " sep=" << kn.sep
    << " pair=" << kn.pair << (technique ? " " : "") << (technique ? technique : "") << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(s.dtype) << exact_divide_source();
  k << "#define N " << s.n << "\n#define C " << s.c << "\n#define H " << s.h << "\n#define W " << s.w
    << "\n#define OH " << s.oh << "\n#define OW " << s.ow << "\n#define SN " << s.sn << "LL\n#define SC " << s.sc
    << "LL\n#define SH " << s.sh << "LL\n#define SW " << s.sw << "LL\n#define KH " << s.kh << "\n#define KW " << s.kw
    << "\n#define DH " << s.dh << "\n#define DW " << s.dw << "\n#define PH " << s.ph << "\n#define PW " << s.pw
    << "\n#define DLH " << s.dil_h << "\n#define DLW " << s.dil_w << "\n#define DIVISOR " << s.divisor
    << "\n#define CONST_DIV " << const_divisor(s)
    << "\n#define INNER_DIV " << (s.divisor ? s.divisor : int64_t{s.kh} * s.kw)
    << "\n#define STORAGE_BITS " << 8 * elem_size(s.dtype)
    << "\n#define STORAGE_BF16 " << (s.dtype == c10::ScalarType::BFloat16)
    << "\n#define COUNT_PAD " << (s.count_include_pad ? 1 : 0) << "\n#define INDICES " << (s.indices ? 1 : 0)
    << "\n#define CL_INIT_ZERO " << (s.channels_last ? 1 : 0) << "\n#define OPW " << kn.opw << "\n#define OPH "
    << kn.oph << "\n#define BLOCK " << kn.block << "\n#define THREADS " << pool_threads(s, kn) << "LL\n#define KIND "
    << static_cast<int>(s.kind) << "\n#define NEG_INF __int_as_float(0xff800000u)\n";
  pool_constants(k, s, kn.block, pool_threads(s, kn));
  k << device_sources::kPoolCommon;
  k << "struct __align__(OPW * sizeof(storage_t)) ovec_t { storage_t v[OPW]; };\n"
    << "struct __align__(OPW >= 2 ? 16 : 8) ivec_t { long long v[OPW]; };\n";
  if (!technique) k << "using namespace pool;\n";
}

/// NCHW output: a tile of OPH x OPW outputs of one plane per thread, from a register patch when tiled.
void emit_nchw(std::ostringstream& k, const PoolShape& s, const PoolKnobs& kn) {
  const bool patch = s.kind != PoolKind::kAdaptiveAvg && (kn.opw > 1 || kn.oph > 1 || kn.smem);
  k << "#define PATCH " << patch << "\n#define STORE_VEC " << (kn.opw > 1 && s.ow % kn.opw == 0)
    << "\n#define TW ((OW + OPW - 1) / OPW)\n#define TH ((OH + OPH - 1) / OPH)\n#define SMEM " << kn.smem << "\n";
  if (patch) k << "#define PR " << patch_rows(s, kn) << "\n#define PC " << patch_cols(s, kn) << "\n";
  if (kn.smem) {
    const SmemTile g = smem_tile(s, kn);
    k << "#define BX " << g.bx << "\n#define BY " << g.by
      << "\n#define BTW ((TW + BX - 1) / BX)\n#define BTH ((TH + BY - 1) / BY)"
      << "\n#define IR " << g.rows << "\n#define IC " << g.cols << "\n#define PITCH " << g.pitch
      << "\n#define VEC " << g.vec
      << "\n#define PCV ((PC + VEC - 1) / VEC)\n"
      << "struct __align__(VEC * sizeof(float)) svec_t { float v[VEC]; };\n";
  }
  k << R"(extern "C" __global__ void __launch_bounds__(BLOCK)
cudal1_pool(const storage_t* __restrict__ in, storage_t* __restrict__ out, long long* __restrict__ idx) {
#if SMEM
  // Block (bh, bw) of a plane: BY x BX threads, OPH x OPW outputs each. Every thread helps stage the block's
  // input rectangle (IR x IC of the image, from (h0, w0); padding and the pitch's spare columns hold 0), then
  // reads its patch from shared memory in VEC-float vectors. No thread returns before the barrier.
  __shared__ __align__(16) float tile[IR * PITCH];
  const index_t plane = blockIdx.x / (BTH * BTW);
  const int bh = (int)((blockIdx.x / BTW) % BTH), bw = (int)(blockIdx.x % BTW);
  const storage_t* __restrict__ x = in + (plane / C) * SN + (plane % C) * SC;
  {
    const int h0 = bh * (BY * OPH * DH) - PH, w0 = bw * (BX * OPW * DW) - PW;
    for (int i = threadIdx.x; i < IR * PITCH; i += BLOCK) {
      const int hh = h0 + i / PITCH, c = i % PITCH, ww = w0 + c;
      tile[i] = c < IC && (unsigned)hh < (unsigned)H && (unsigned)ww < (unsigned)W
                    ? to_float(x[(index_t)hh * SH + (index_t)ww * SW]) : 0.f;
    }
  }
  __syncthreads();
  const int ty = threadIdx.x / BX, tx = threadIdx.x % BX;
  const int oh0 = (bh * BY + ty) * OPH, ow0 = (bw * BX + tx) * OPW;
  if (oh0 >= OH || ow0 >= OW) return;
#else
  const index_t t = (index_t)blockIdx.x * BLOCK + threadIdx.x;
  if (t >= THREADS) return;
  const int tw = (int)(t % TW);
  const index_t r1 = t / TW;
  const int th = (int)(r1 % TH);
  const index_t plane = r1 / TH;
  const storage_t* __restrict__ x = in + (plane / C) * SN + (plane % C) * SC;
  const int oh0 = th * OPH, ow0 = tw * OPW;
#endif
  float res[OPH][OPW];
#if INDICES
  int ri[OPH][OPW];
#define RI(a, b) (&ri[a][b])
#else
#define RI(a, b) nullptr
#endif
#if PATCH
  const int h0 = oh0 * DH - PH, w0 = ow0 * DW - PW;
  bool rok[PR], cok[PC];
#pragma unroll
  for (int r = 0; r < PR; ++r) rok[r] = (unsigned)(h0 + r) < (unsigned)H;
#pragma unroll
  for (int c = 0; c < PC; ++c) cok[c] = (unsigned)(w0 + c) < (unsigned)W;
#if SMEM
  // Patch row r of this thread starts at tile row ty*OPH*DH + r, column tx*OPW*DW (a multiple of VEC, as is PITCH).
  float p[PR][PCV * VEC];
  const float* __restrict__ tp = tile + ty * (OPH * DH) * PITCH + tx * (OPW * DW);
#pragma unroll
  for (int r = 0; r < PR; ++r)
#pragma unroll
    for (int q = 0; q < PCV; ++q) {
      const svec_t v = *reinterpret_cast<const svec_t*>(tp + r * PITCH + q * VEC);
#pragma unroll
      for (int e = 0; e < VEC; ++e) p[r][q * VEC + e] = v.v[e];
    }
#else
  float p[PR][PC];  // cells no window reads are dead after unrolling and never loaded
#pragma unroll
  for (int r = 0; r < PR; ++r)
#pragma unroll
    for (int c = 0; c < PC; ++c)
      p[r][c] = (rok[r] && cok[c]) ? to_float(x[(index_t)(h0 + r) * SH + (index_t)(w0 + c) * SW]) : 0.f;
#endif
#endif
#pragma unroll
  for (int a = 0; a < OPH; ++a)
#pragma unroll
    for (int b = 0; b < OPW; ++b) {
#if KIND == 2
      const int oh = oh0 + a, ow = ow0 + b;
      const int ih0 = (oh * H) / OH, ih1 = ((oh + 1) * H + OH - 1) / OH;
      const int iw0 = (ow * W) / OW, iw1 = ((ow + 1) * W + OW - 1) / OW;
      float sum = 0.f;
      for (int hh = ih0; hh < ih1; ++hh)
        for (int ww = iw0; ww < iw1; ++ww) sum += to_float(x[(index_t)hh * SH + (index_t)ww * SW]);
      res[a][b] = sum / (ih1 - ih0) / (iw1 - iw0);
#else
      const int hs = (oh0 + a) * DH - PH, ws = (ow0 + b) * DW - PW;
#if PATCH
      auto get = [&](int i, int j) { return p[a * DH + i * DLH][b * DW + j * DLW]; };
      auto ok = [&](int i, int j) { return rok[a * DH + i * DLH] && cok[b * DW + j * DLW]; };
#else
      auto get = [&](int i, int j) { return to_float(x[(index_t)(hs + i * DLH) * SH + (index_t)(ws + j * DLW) * SW]); };
      auto ok = [&](int i, int j) { return (unsigned)(hs + i * DLH) < (unsigned)H && (unsigned)(ws + j * DLW) < (unsigned)W; };
#endif
#if KIND == 0
      max_window(hs, ws, get, ok, res[a][b], RI(a, b));
#else
      res[a][b] = avg_window<PATCH>(hs, ws, get, ok);  // patch cells outside the image hold +0
#endif
#endif
    }
  storage_t* __restrict__ y = out + plane * (index_t)(OH * OW);
#if INDICES
  long long* __restrict__ yi = idx + plane * (index_t)(OH * OW);
#endif
#pragma unroll
  for (int a = 0; a < OPH; ++a) {
    const int oh = oh0 + a;
    if (oh >= OH) break;
#if STORE_VEC
    store_vec<OPW>(y + oh * OW + ow0, res[a]);
#if INDICES
    ivec_t oi;
#pragma unroll
    for (int b = 0; b < OPW; ++b) oi.v[b] = ri[a][b];
    *reinterpret_cast<ivec_t*>(yi + oh * OW + ow0) = oi;
#endif
#else
#pragma unroll
    for (int b = 0; b < OPW; ++b) {
      if (ow0 + b >= OW) break;
      y[oh * OW + ow0 + b] = to_storage(res[a][b]);
#if INDICES
      yi[oh * OW + ow0 + b] = ri[a][b];
#endif
    }
#endif
  }
}
)";
}

}  // namespace

KernelSource generate_pool(const PoolShape& s, const PoolKnobs& kn) {
  std::ostringstream k;
  const char* technique = packed_pairs(kn)         ? PackedPairs::kName
                          : adaptive_staging(kn)   ? AdaptiveStaging::kName
                          : channels_last_runs(kn) ? ChannelsLastRuns::kName
                          : channels_last_walk(kn) ? ChannelsLastWalk::kName
                                                   : nullptr;
  emit_common(k, s, kn, technique);
  // The techniques with a class and a .cuh (Note [Pooling techniques]): their own constants and device code.
  const auto with_class = [&](const auto& t) { t.source(k, s); };
  if (const auto t = packed_pairs(kn))
    with_class(*t);
  else if (const auto t = adaptive_staging(kn))
    with_class(*t);
  else if (const auto t = channels_last_runs(kn))
    with_class(*t);
  else if (const auto t = channels_last_walk(kn))
    with_class(*t);
  else if (kn.slide)
    k << slide_kernel_source(s, kn);
  else if (s.channels_last)
    k << channels_last_kernel_source(s, kn);
  else
    emit_nchw(k, s, kn);
  return KernelSource{k.str(), "cudal1_pool"};
}

}  // namespace cudal1::optimizer::pool
