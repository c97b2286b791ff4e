/// @brief The softmax family's ticketed column tiles (Note [Softmax ticket tiles]): parts of column tiles dealt by
/// ticket over a persistent cooperative grid, kept in registers; source generation and the bound kernel.
#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>

#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "softmax_family.h"

namespace cudal1::optimizer::softmax {
namespace {

int64_t groups_of(const ColumnShape& c, int vec) { return c.outer * ((c.inner / vec + 31) / 32); }

/// Workspace floats: each part's pairs, each group's final pairs, then 2 x groups + 1 counters.
int64_t workspace_floats(const ColumnShape& c, int vec, int block, int per) {
  const int64_t groups = groups_of(c, vec), cw = 32 * int64_t{vec};
  return groups * ticket_chunks(c, block, per) * 2 * cw + groups * 2 * cw + 2 * groups + 1;
}

class TicketKernel final : public BoundKernel {
 public:
  TicketKernel(const ColumnShape& c, int vec, int block, int per, std::shared_ptr<LoadedModule> m)
      : c_(c), block_(static_cast<unsigned>(block)), module_(std::move(m)) {
    outputs_.push_back(OutputSpec{c_.dtype, c_.sizes, c_.out_strides});
    align_ = static_cast<uintptr_t>(vec) * elem_size(c_.dtype);
    const int64_t groups = groups_of(c_, vec), chunks = ticket_chunks(c_, block, per);
    const int64_t resident = int64_t{module_->sm_count()} * module_->max_blocks_per_sm(block);
    chunks_ = chunks;
    resident_ = resident;
    grid_ = static_cast<unsigned>(std::max<int64_t>(1, std::min(resident, groups * chunks)));
    counters_ = 2 * groups + 1;
    floats_ = workspace_floats(c_, vec, block, per);
  }

  const std::vector<OutputSpec>& outputs() const override { return outputs_; }
  double input_scaled_atol() const override { return c_.log ? 4.0 : 0.0; }  // as the other softmax kernels

  /// Note [Softmax ticket tiles]: a device that keeps fewer blocks resident than a column has parts, a grid that
  /// cannot be resident, and a stream being captured (no cooperative graph nodes) are Unsupported: ATen serves.
  Status launch(const c10::IValue* args, size_t nargs, at::Tensor* outs, CUstream stream) noexcept override {
    try {
      CUDAL1_RETURN_IF_ERROR(check_column_call(c_, align_, args, nargs, outs));
      const at::Tensor& x = args[0].toTensor();
      if (resident_ < chunks_)
        return Status(Code::kUnsupported, "the device keeps fewer blocks resident (" + std::to_string(resident_) +
                                              ") than a column has parts (" + std::to_string(chunks_) + ")");
      const void* src = x.data_ptr();
      void* dst = outs[0].data_ptr();
      auto d = driver();
      if (!d.ok()) return d.status();
      const DriverApi* api = d.value();
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
      CUDAL1_CU_TRY(api->cuStreamIsCapturing(stream, &capture));
      if (capture != CU_STREAM_CAPTURE_STATUS_NONE) return Status(Code::kUnsupported, "stream is being captured");
      at::Tensor ws = at::empty({floats_}, x.options().dtype(at::kFloat));
      float* wsp = ws.data_ptr<float>();
      CUDAL1_CU_TRY(api->cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(wsp + floats_ - counters_), 0,
                                          static_cast<size_t>(counters_), stream));
      void* params[] = {&src, &dst, &wsp};
      const CUresult r =
          api->cuLaunchCooperativeKernel(module_->function(), grid_, 1, 1, block_, 1, 1, 0, stream, params);
      if (r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE || r == CUDA_ERROR_NOT_SUPPORTED)
        return Status(Code::kUnsupported, "cooperative grid cannot be resident: " + cu_error_text(r));
      if (r != CUDA_SUCCESS) return cu_status(r, "cuLaunchCooperativeKernel", __FILE__, __LINE__);
      return Status();
    } catch (const std::exception& e) {
      return Status(Code::kInternal, std::string("softmax launch raised: ") + e.what());
    }
  }

 private:
  ColumnShape c_;
  unsigned block_, grid_ = 1;
  std::shared_ptr<LoadedModule> module_;
  std::vector<OutputSpec> outputs_;
  uintptr_t align_ = 1;
  int64_t chunks_ = 1, resident_ = 0, counters_ = 0, floats_ = 0;
};

}  // namespace

int ticket_min_blocks(int block) { return block <= 256 ? 4 : 2; }

int64_t ticket_chunks(const ColumnShape& c, int block, int per) {
  const int64_t rows = int64_t{per} * (block / 32);
  return (c.n + rows - 1) / rows;
}

bool ticket_fits(const ColumnShape& c, int vec, int block, int per) {
  const int es = elem_size(c.dtype);
  const int64_t reference = c.sm >= 90 ? 132 : c.sm == 80 ? 108 : 0;  // H100 SXM / H200, A100
  const int64_t chunks = ticket_chunks(c, block, per), data = int64_t{per} * vec * es;
  const int64_t row_bytes = 32 * int64_t{vec} * es;
  return reference > 0 && (block == 256 || block == 512) && (per == 2 || per == 4 || per == 8 || per == 16) &&
         row_bytes >= 64 && row_bytes <= 512 && data <= (vec >= 4 ? 64 : 128) && chunks >= 2 &&
         chunks <= reference * ticket_min_blocks(block) && groups_of(c, vec) * chunks < (int64_t{1} << 31) &&
         workspace_floats(c, vec, block, per) <= kMaxTicketWorkspaceFloats;
}

KernelSource generate_softmax_ticket_tiles(const ColumnShape& c, int vec, int block, int per) {
  const int64_t iv = c.inner / vec, tiles = (iv + 31) / 32, chunks = ticket_chunks(c, block, per);
  std::ostringstream k;
  k << "// cudal1 softmax ticket tiles: log=" << c.log << " " << c10::toString(c.dtype) << " outer=" << c.outer
    << " n=" << c.n << " inner=" << c.inner << " vec=" << vec << " block=" << block << " per=" << per << "\n";
  k << "typedef long long index_t;\n" << dtype_prelude(c.dtype) << exact_divide_source() << ticket_source();
  k << "#define VEC " << vec << "\n#define BLOCK " << block << "\n#define W (BLOCK / 32)\n#define PER " << per
    << "\n#define LOG " << (c.log ? 1 : 0) << "\n#define MINB " << ticket_min_blocks(block)
    << "\n#define MB " << std::max(1, 8 / vec) << "  // parts' pairs a lane loads at once in the group merge\n";
  k << "static constexpr int N = " << c.n << ", NC = PER * W;  // rows, rows a part\n"
    << "static constexpr index_t IV = " << iv << ", TILES = " << tiles << ", CHUNKS = " << chunks
    << ";  // vectors along inner, tiles an outer index, parts a tile\n"
    << "static constexpr index_t GROUPS = " << c.outer * tiles << ", TOTAL = GROUPS * CHUNKS, CW = 32 * VEC;\n"
    << "static constexpr index_t OSV = " << c.outer_stride / vec << ", NSV = " << c.n_stride / vec
    << ";  // input strides in vectors\n";
  k << R"(#define NEG_INF __int_as_float(0xff800000u)
#define POS_INF __int_as_float(0x7f800000u)
#define QNAN __int_as_float(0x7fffffffu)
struct __align__(VEC * sizeof(storage_t)) vec_t { storage_t v[VEC]; };
)" << online_pair_source() << R"(// Note [Softmax ticket tiles]. Ticket t: part t % CHUNKS (rows [n0, n0 + NC)) of column group g = t / CHUNKS
// (32 x VEC adjacent inner columns of outer index g / TILES). Warp w keeps rows n0 + w + i * W (i < PER) of its
// lane's VEC columns in registers; pairs (fmaxf maximum, then the sum of exp(x - max) with the online kernels'
// special values) are merged over the warps in warp order and published; the group's last part merges the
// CHUNKS pairs once (all warps, then in warp order) and raises the group's flag; every part waits and writes.
extern "C" __global__ void __launch_bounds__(BLOCK, MINB)
cudal1_softmax(const storage_t* __restrict__ in, storage_t* __restrict__ out, float* __restrict__ ws) {
  float* const pairs = ws;                        // [TOTAL][2][CW]
  float* const fin = ws + TOTAL * 2 * CW;         // [GROUPS][2][CW]
  unsigned* const arrived = reinterpret_cast<unsigned*>(fin + GROUPS * 2 * CW);
  unsigned* const ready = arrived + GROUPS;
  unsigned* const tickets = ready + GROUPS;
  __shared__ float red_m[W][CW], red_s[W][CW];
  const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
  for (index_t t = ticket_share(ticket_ask(tickets)); t < TOTAL; t = ticket_share(ticket_ask(tickets))) {
    const index_t g = t / CHUNKS;
    const int n0 = (int)(t % CHUNKS) * NC, n1 = min(N, n0 + NC);
    const index_t iv = (g % TILES) * 32 + lane, o = g / TILES;
    const bool live = iv < IV;  // dead lanes still take part in the merges
    const vec_t* __restrict__ x = reinterpret_cast<const vec_t*>(in) + o * OSV + (live ? iv : 0);
    vec_t* __restrict__ y = reinterpret_cast<vec_t*>(out) + o * ((index_t)N * IV) + (live ? iv : 0);
)" << cached_rows_source() << R"(    float m[VEC], s[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      m[e] = NEG_INF;
      s[e] = 0.f;
    }
    FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) m[e] = fmaxf(m[e], to_float(t.v[e]));)
    FOR_EACH_PART(_Pragma("unroll") for (int e = 0; e < VEC; ++e) {
      const float v = to_float(t.v[e]);
      s[e] += v == NEG_INF ? 0.f : expf(v - m[e]);
    })
    merge_warps(m, s, red_m, red_s);
    if (w == 0)
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        pairs[t * 2 * CW + e * 32 + lane] = m[e];
        pairs[t * 2 * CW + CW + e * 32 + lane] = s[e];
      }
    if (arrive_last(arrived + g, (unsigned)CHUNKS)) {
      // The group's CHUNKS pairs: warp w folds parts w, w + W, ... (MB parts' loads in flight at once), then
      // the warps' results merge in warp order; one block computes them, so every part uses the same.
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        m[e] = NEG_INF;
        s[e] = 0.f;
      }
      const float* const base = pairs + g * CHUNKS * 2 * CW + lane;
      for (index_t q0 = w; q0 < CHUNKS; q0 += MB * W) {
        float lm[MB][VEC], lsum[MB][VEC];
#pragma unroll
        for (int u = 0; u < MB; ++u)
          if (q0 + u * W < CHUNKS)
#pragma unroll
            for (int e = 0; e < VEC; ++e) {
              lm[u][e] = __ldcg(base + (q0 + u * W) * 2 * CW + e * 32);
              lsum[u][e] = __ldcg(base + (q0 + u * W) * 2 * CW + CW + e * 32);
            }
#pragma unroll
        for (int u = 0; u < MB; ++u)
          if (q0 + u * W < CHUNKS)
#pragma unroll
            for (int e = 0; e < VEC; ++e) online_merge(m[e], s[e], lm[u][e], lsum[u][e]);
      }
      merge_warps(m, s, red_m, red_s);
      if (w == 0)
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
          fin[g * 2 * CW + e * 32 + lane] = m[e];
          fin[g * 2 * CW + CW + e * 32 + lane] = m[e] == NEG_INF ? QNAN : s[e];  // every element -Inf or NaN
        }
      flag_raise(ready + g);
    }
    flag_wait(ready + g);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      m[e] = __ldcg(fin + g * 2 * CW + e * 32 + lane);
      s[e] = __ldcg(fin + g * 2 * CW + CW + e * 32 + lane);
    }
)" << column_epilogue_source() << "}\n";  // the epilogue's closing brace ends the loop body, this one the kernel
  return KernelSource{k.str(), "cudal1_softmax"};
}

std::unique_ptr<BoundKernel> make_ticket_kernel(const ColumnShape& c, int vec, int block, int per,
                                                std::shared_ptr<LoadedModule> m) {
  return std::make_unique<TicketKernel>(c, vec, block, per, std::move(m));
}

}  // namespace cudal1::optimizer::softmax
