/// @brief Layer groups of program chains (Note [Skinny layers] in chain_program.h): planning, the kernel's source
/// and variants, and its launch.
#include "chain_layers.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <sstream>

#include "chain_plan.h"
#include "codegen_common.h"
#include "cudal1/core/cuda_driver.h"
#include "cudal1/dispatcher/cuda_glue.h"
#include "layer_kernel.h"

namespace cudal1::optimizer::chains {
namespace {

using dispatcher::ChainInput;
using dispatcher::ChainNode;

constexpr int64_t kVecElems = 8;                 ///< K must be a multiple of this (16 bytes of fp16/bf16)
constexpr int64_t kSharedBytes = int64_t{32} << 10;  ///< the most M x K x dtype bytes of the normalised input

bool reads_output(const TensorArg& t, int node) { return t.in.producer == node && t.in.index == 0; }

/// The activation kind of `node` reading node `from`'s output (Note [Skinny layers]'s LayerArgs::act), or 0.
int activation_of(const ChainNode& node, int from) {
  auto a = args_of(node);
  if (!a.ok() || a->tensors.size() != 1 || !reads_output(a->tensors[0], from)) return 0;
  const std::string op = functional_op(node);
  if (op == "aten::relu") return 1;
  if (op == "aten::silu") return 2;
  if (op != "aten::gelu") return 0;
  const c10::IValue* mode = a->arg("approximate");
  const std::string m = mode && mode->isString() ? mode->toStringRef() : "none";
  return m == "none" ? 3 : m == "tanh" ? 4 : 0;
}

const char* activation_name(int act) {
  static const char* const kNames[] = {"", "relu", "silu", "gelu", "gelu tanh"};
  return kNames[act];
}

/// A 1-d [n] external with unit stride (a bias, a layer norm's affine parameter), or absent (`ok` true, -1).
bool vector_slot(const TensorArg& t, int64_t n, c10::ScalarType dtype, int* slot) {
  *slot = -1;
  if (!t.spec || !t.spec->defined) return t.in.producer < 0;
  if (!is_external(t)) return false;
  const auto& s = *t.spec;
  if (s.dtype != dtype || s.sizes != std::vector<int64_t>{n} || (n > 1 && s.strides[0] != 1)) return false;
  *slot = t.in.index;
  return true;
}

/// An [m, n] value with a unit last stride.
bool row_major(const dispatcher::TensorSpec& s, int64_t m, int64_t n, c10::ScalarType dtype) {
  return s.defined && s.dtype == dtype && s.sizes == std::vector<int64_t>{m, n} && (n == 1 || s.strides[1] == 1);
}

}  // namespace

namespace {

/// The GEMM node `node` of a layer group reading `ln`'s output (ln -1: any input): addmm(bias, x, w.t()) or
/// mm(x, w.t()) with x [M, K] skinny and w a contiguous [N, K] external. Sets `a`'s m, k, n, w and bias.
bool plan_gemm(const ChainNode& node, int ln, LayerArgs* a) {
  const std::string op = functional_op(node);
  if (op != "aten::addmm" && op != "aten::mm") return false;
  auto gemm = args_of(node);
  if (!gemm.ok()) return false;
  const bool add_mm = op == "aten::addmm";
  if (gemm->tensors.size() != (add_mm ? 3u : 2u) || (add_mm && (!gemm->is_one("beta") || !gemm->is_one("alpha"))))
    return false;
  const TensorArg& x = gemm->tensors[add_mm ? 1 : 0];
  const TensorArg& wt = gemm->tensors[add_mm ? 2 : 1];
  if (ln >= 0 && !reads_output(x, ln)) return false;
  const auto& xs = *x.spec;
  const auto& ws = *wt.spec;
  if (!xs.defined || xs.sizes.size() != 2 || !ws.defined || ws.sizes.size() != 2 || !float_like(xs.dtype)) return false;
  a->m = xs.sizes[0];
  a->k = xs.sizes[1];
  a->n = ws.sizes[1];
  const c10::ScalarType dtype = xs.dtype;
  const int64_t bytes = static_cast<int64_t>(c10::elementSize(dtype));
  if (a->m < 1 || a->m > kLayerRows || a->k % kVecElems != 0 || a->k < kVecElems || a->n < 1 ||
      a->m * a->k * bytes > kSharedBytes || !row_major(xs, a->m, a->k, dtype))
    return false;
  // The weight as at::linear passes it: w.t() of a contiguous [N, K] external.
  if (!is_external(wt) || ws.dtype != dtype || ws.sizes[0] != a->k || ws.strides != std::vector<int64_t>{1, a->k})
    return false;
  a->w = wt.in.index;
  if (add_mm && !vector_slot(gemm->tensors[0], a->n, dtype, &a->bias)) return false;
  return node.outputs.size() == 1 && row_major(node.outputs[0], a->m, a->n, dtype);
}

/// The layer norm `node` over the last dim of the GEMM's [M, K] input, its affine parameters externals. Sets
/// `a`'s eps, ln_w and ln_b.
bool plan_layer_norm(const ChainNode& node, c10::ScalarType dtype, LayerArgs* a) {
  auto ln = args_of(node);
  if (!ln.ok() || ln->tensors.size() != 3) return false;
  const c10::IValue* shape = ln->arg("normalized_shape");
  const c10::IValue* eps = ln->arg("eps");
  if (!shape || !shape->isIntList() || shape->toIntVector() != std::vector<int64_t>{a->k} || !eps ||
      !scalar_of(*eps, &a->eps))
    return false;
  return row_major(*ln->tensors[0].spec, a->m, a->k, dtype) && vector_slot(ln->tensors[1], a->k, dtype, &a->ln_w) &&
         vector_slot(ln->tensors[2], a->k, dtype, &a->ln_b);
}

/// The epilogue after the GEMM node `g->gemm`: an activation read only by the next node, then a residual add
/// (alpha 1) of an [M, N] value. Sets `g`'s act, add, residual and last.
void plan_epilogue(const std::vector<ChainNode>& nodes, c10::ScalarType dtype, ProgramPlan::Group* g) {
  LayerArgs& a = g->args;
  size_t j = static_cast<size_t>(g->gemm);
  int prev = g->gemm;
  if (j + 1 < nodes.size() && readers(nodes, prev, 0) == 1) {
    if (const int act = activation_of(nodes[j + 1], prev); act && row_major(nodes[j + 1].outputs.at(0), a.m, a.n, dtype)) {
      a.act = act;
      g->act = prev = static_cast<int>(++j);
    }
  }
  if (j + 1 < nodes.size() && functional_op(nodes[j + 1]) == "aten::add.Tensor" && readers(nodes, prev, 0) == 1) {
    auto add = args_of(nodes[j + 1]);
    if (add.ok() && add->tensors.size() == 2 && add->is_one("alpha")) {
      const bool left = reads_output(add->tensors[0], prev), right = reads_output(add->tensors[1], prev);
      const TensorArg& other = add->tensors[left ? 1 : 0];
      // In place on the residual only where it is a program value (as conv groups: Note [Program chains]).
      const bool swapped_ok = !nodes[j + 1].inplace || other.in.producer >= 0;
      if ((left || (right && swapped_ok)) && !(left && right) && row_major(*other.spec, a.m, a.n, dtype) &&
          row_major(nodes[j + 1].outputs.at(0), a.m, a.n, dtype)) {
        g->add = static_cast<int>(++j);
        g->residual = other.in;
      }
    }
  }
  g->last = j;
}

std::string group_text(const ProgramPlan::Group& g) {
  const LayerArgs& a = g.args;
  std::ostringstream t;
  t << "layer " << (g.ln >= 0 ? "layer_norm %" + std::to_string(g.ln) + " + " : "") << "linear %" << g.gemm << " ["
    << a.m << ", " << a.k << "] x [" << a.k << ", " << a.n << "]" << (a.bias >= 0 ? " + bias" : "");
  if (a.act) t << " + " << activation_name(a.act) << " %" << g.act;
  if (g.add >= 0)
    t << " + residual "
      << (g.residual.producer >= 0 ? "%" + std::to_string(g.residual.producer) : "e" + std::to_string(g.residual.index));
  return t.str();
}

}  // namespace

bool plan_layer_group(const std::vector<ChainNode>& nodes, size_t k, ProgramPlan::Group* g, std::string* text) {
  ProgramPlan::Group out;
  out.first = k;
  const int ik = static_cast<int>(k);
  size_t j = k;
  if (functional_op(nodes[k]) == "aten::native_layer_norm") {  // read by the GEMM alone, its statistics by none
    if (k + 1 >= nodes.size() || readers(nodes, ik, 0) != 1 || readers(nodes, ik, 1) != 0 || readers(nodes, ik, 2) != 0)
      return false;
    out.ln = ik;
    out.args.ln = true;
    ++j;
  }
  if (!plan_gemm(nodes[j], out.ln, &out.args)) return false;
  const c10::ScalarType dtype = nodes[j].outputs[0].dtype;
  if (out.ln >= 0 && !plan_layer_norm(nodes[k], dtype, &out.args)) return false;
  out.gemm = static_cast<int>(j);
  plan_epilogue(nodes, dtype, &out);
  out.layer = true;
  *text += group_text(out);
  *g = out;
  return true;
}

std::string LayerVariant::id() const {
  return warps ? "w" + std::to_string(warps) + "u" + std::to_string(unroll) + (overlap ? "o" : "") : "";
}

std::vector<LayerVariant> layer_variants(const ProgramPlan& plan) {
  if (plan.layers == 0) return {};
  std::vector<LayerVariant> out;
  // unroll 16: a whole 8 KB weight row (K = 4096 in fp16) in flight a warp before the prologue.
  for (int warps : {4, 8})
    for (int unroll : {4, 8, 16})
      for (bool overlap : {false, true}) out.push_back(LayerVariant{warps, unroll, overlap});
  return out;
}

Result<LayerVariant> layer_variant_of(const ProgramPlan& plan, const std::string& id) {
  for (const LayerVariant& v : layer_variants(plan))
    if (v.id() == id) return v;
  return Status(Code::kMismatch, "layer variant " + id + " is not one of the program's");
}

std::string layer_source(const ProgramPlan& plan, const LayerVariant& v) {
  std::ostringstream s;
  s << dtype_prelude(plan.dtype) << "constexpr int kWarps = " << v.warps << ";\nconstexpr int kUnroll = " << v.unroll
    << ";\nconstexpr int kRows = " << std::max<int64_t>(plan.rows, 1)
    << ";\nconstexpr bool kOverlap = " << (v.overlap ? "true" : "false") << ";\n";
  // ATen's formula of each activation, as the pointwise generator writes them (Note [Pointwise chains]).
  s << "__device__ __forceinline__ float activation(int kind, float x) {\n  switch (kind) {\n";
  const StepOp ops[] = {StepOp::kRelu, StepOp::kSilu, StepOp::kGelu, StepOp::kGeluTanh};
  for (int kind = 1; kind <= 4; ++kind) {
    Step st;
    st.op = ops[kind - 1];
    st.args = {Operand{Operand::kStep, 0, 0}};
    s << "    case " << kind << ": return " << step_formula(st, [](const Operand&) { return std::string("x"); })
      << ";\n";
  }
  s << "    default: return x;\n  }\n}\n" << device_sources::kLayerKernel;
  return s.str();
}

Status launch_layer(const LoadedModule& module, const LayerVariant& v, const LayerArgs& a, const LayerOperands& o) {
  auto unsupported = [](const char* why) { return Status(Code::kUnsupported, std::string("layer kernel: ") + why); };
  const at::Tensor& w = o.w;
  if (!v.warps) return unsupported("no variant");
  if (o.x.dim() != 2 || o.x.size(0) != a.m || o.x.size(1) != a.k || (a.k > 1 && o.x.stride(1) != 1) ||
      o.y.dim() != 2 || o.y.size(0) != a.m || o.y.size(1) != a.n || (a.n > 1 && o.y.stride(1) != 1))
    return unsupported("an activation's shape");
  // w is the app's w.t(): [K, N] with strides [1, K] over a contiguous [N, K] weight.
  if (w.dim() != 2 || w.size(0) != a.k || w.size(1) != a.n || w.stride(0) != 1 || w.stride(1) != a.k ||
      reinterpret_cast<uintptr_t>(w.data_ptr()) % 16 != 0)
    return unsupported("the weight's layout");
  if (o.res.defined() && (o.res.dim() != 2 || o.res.size(0) != a.m || o.res.size(1) != a.n || (a.n > 1 && o.res.stride(1) != 1)))
    return unsupported("the residual's shape");
  for (const at::Tensor* t : {&o.ln_w, &o.ln_b, &o.bias})
    if (t->defined() && !t->is_contiguous()) return unsupported("a strided parameter");
  const c10::ScalarType dtype = o.x.scalar_type();
  for (const at::Tensor* t : {&o.ln_w, &o.ln_b, &w, &o.bias, &o.res, &o.y})
    if (t->defined() && (t->scalar_type() != dtype || t->get_device() != module.device()))
      return unsupported("an operand's dtype or device");
  const void* x = o.x.data_ptr();
  long long x_rs = a.m > 1 ? o.x.stride(0) : 0;
  int ln = a.ln ? 1 : 0;
  const void* ln_w = o.ln_w.defined() ? o.ln_w.data_ptr() : nullptr;
  const void* ln_b = o.ln_b.defined() ? o.ln_b.data_ptr() : nullptr;
  float eps = static_cast<float>(a.eps);
  const void* wp = w.data_ptr();
  const void* bias = o.bias.defined() ? o.bias.data_ptr() : nullptr;
  int act = a.act;
  const void* res = o.res.defined() ? o.res.data_ptr() : nullptr;
  long long res_rs = o.res.defined() && a.m > 1 ? o.res.stride(0) : 0;
  void* y = o.y.data_ptr();
  long long y_rs = a.m > 1 ? o.y.stride(0) : 0;
  int m = static_cast<int>(a.m), k = static_cast<int>(a.k), n = static_cast<int>(a.n);
  void* params[] = {&x, &x_rs, &ln, &ln_w, &ln_b, &eps, &wp, &bias, &act, &res, &res_rs, &y, &y_rs, &m, &k, &n};
  const unsigned smem = static_cast<unsigned>(a.m * a.k * static_cast<int64_t>(c10::elementSize(dtype)));
  const int64_t grid = (a.n + v.warps - 1) / v.warps;
  dispatcher::ContextScope ctx(module.device());
  CUDAL1_RETURN_IF_ERROR(ctx.status());
  CUDAL1_ASSIGN_OR_RETURN(CUstream stream, dispatcher::current_stream(module.device()));
  CUDAL1_ASSIGN_OR_RETURN(const DriverApi* api, driver());
  CUlaunchConfig config{};
  config.gridDimX = static_cast<unsigned>(std::min<int64_t>(grid, 0x7fffffff));
  config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = static_cast<unsigned>(v.warps * 32);
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = smem;
  config.hStream = stream;
  CUlaunchAttribute overlap{};
  overlap.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  overlap.value.programmaticStreamSerializationAllowed = 1;
  if (v.overlap && module.compute_capability() >= 90) {
    config.attrs = &overlap;
    config.numAttrs = 1;
  }
  CUDAL1_CU_TRY(api->cuLaunchKernelEx(&config, module.function(), params, nullptr));
  return Status();
}

}  // namespace cudal1::optimizer::chains
