/// @brief The reduction family's reading of a call: which op, which dims, the output ATen returns, and the
/// "outputs x reduced" form of the input (Note [Reductions]); declines what it cannot reproduce exactly.
#include <algorithm>
#include <cmath>

#include "args.h"
#include "codegen_common.h"
#include "reduce_family.h"

namespace cudal1::optimizer::reduce {
namespace {

Status unsupported(const std::string& why) { return Status(Code::kUnsupported, why); }

struct OpInfo {
  const char* spec;
  Reduction op;
  size_t nargs;
};

// Argument order as in native_functions.yaml (keyword-only arguments follow on the stack in order):
//   sum.dim_IntList / mean.dim (self, int[1]? dim, bool keepdim, *, ScalarType? dtype)
//   amax / amin (self, int[1] dim, bool keepdim); max.dim / min.dim (self, int dim, bool keepdim)
//   argmax / argmin (self, int? dim, bool keepdim);
//   var/std.correction (self, int[1]? dim, *, Scalar? correction, bool keepdim)
//   linalg_vector_norm (self, Scalar ord, int[1]? dim, bool keepdim, *, ScalarType? dtype)
constexpr OpInfo kOps[] = {
    {"sum.dim_IntList", Reduction::kSum, 4}, {"mean.dim", Reduction::kMean, 4},  {"amax", Reduction::kAmax, 3},
    {"amin", Reduction::kAmin, 3},           {"max.dim", Reduction::kMaxDim, 3}, {"min.dim", Reduction::kMinDim, 3},
    {"argmax", Reduction::kArgmax, 3},       {"argmin", Reduction::kArgmin, 3},  {"var.correction", Reduction::kVar, 4},
    {"std.correction", Reduction::kStd, 4},  {"linalg_vector_norm", Reduction::kNorm, 5},
};

/// Drops size-1 dims and merges neighbours whose elements follow on each other (row-major order kept).
void merge_dims(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides, std::vector<int64_t>* ms,
                std::vector<int64_t>* mt) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == 1) continue;
    if (!ms->empty() && mt->back() == strides[i] * sizes[i]) {
      ms->back() *= sizes[i];
      mt->back() = strides[i];
    } else {
      ms->push_back(sizes[i]);
      mt->push_back(strides[i]);
    }
  }
}

/// The dims to reduce (sorted, wrapped), or Unsupported for what ATen would reject or we do not serve.
Result<std::vector<bool>> reduced_mask(const c10::IValue& d, Reduction op, int64_t rank) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  std::vector<int64_t> dims;
  const bool single = op == Reduction::kMaxDim || op == Reduction::kMinDim || op == Reduction::kArgmax ||
                      op == Reduction::kArgmin;
  if (d.isNone()) {
    // dim=None: every dim (sum/mean/var/std: the whole tensor; argmax/argmin: the flattened tensor).
    if (op == Reduction::kMaxDim || op == Reduction::kMinDim || op == Reduction::kAmax || op == Reduction::kAmin)
      return unsupported("dim is None");
    std::fill(mask.begin(), mask.end(), true);
    return mask;
  }
  if (single) {
    const auto v = int_value(d);
    if (!v) return unsupported("dim is not an int");
    dims = {*v};
  } else {
    const auto v = int_list(d);
    if (!v) return unsupported("dim is not an int list");
    if (v->empty() && op == Reduction::kNorm) {  // linalg_vector_norm: every dim (make_dim_mask)
      std::fill(mask.begin(), mask.end(), true);
      return mask;
    }
    if (v->empty()) return unsupported("empty dim list");  // means "every dim" in ATen; not served
    dims = *v;
  }
  for (int64_t x : dims) {
    if (x < -rank || x >= rank) return unsupported("dim out of range");
    const int64_t w = x < 0 ? x + rank : x;
    if (mask[static_cast<size_t>(w)]) return unsupported("dim repeated");
    mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

/// Widest vector (elements, <= 16 bytes) for which every stride in `mults` and the offset are multiples, `run`
/// (the stride-1 extent loaded as vectors) divides, given the condition `ok` for a vector path at all.
int widest_vec(const ReduceShape& s, bool ok, int64_t run, const std::vector<int64_t>& mults) {
  if (!ok) return 1;
  int v = 16 / elem_size(s.dtype);
  auto fits = [&](int vec) {
    if (run % vec != 0 || s.offset % vec != 0) return false;
    for (int64_t m : mults)
      if (m % vec != 0) return false;
    return true;
  };
  while (v > 1 && !fits(v)) v /= 2;
  return v;
}

/// Fills the merged form, O, K and the vector widths from sizes, strides and the reduced mask.
Status map_dims(const std::vector<bool>& mask, ReduceShape* s) {
  std::vector<int64_t> ks, kt, rs, rt;
  for (size_t d = 0; d < s->sizes.size(); ++d) {
    (mask[d] ? rs : ks).push_back(s->sizes[d]);
    (mask[d] ? rt : kt).push_back(s->strides[d]);
  }
  merge_dims(ks, kt, &s->kept_sizes, &s->kept_strides);
  merge_dims(rs, rt, &s->red_sizes, &s->red_strides);
  s->outputs = 1;
  s->length = 1;
  int64_t extent = s->offset;
  for (size_t d = 0; d < s->sizes.size(); ++d) {
    if (s->strides[d] < 0) return unsupported("negative stride");
    (mask[d] ? s->length : s->outputs) *= s->sizes[d];
    extent += (s->sizes[d] - 1) * s->strides[d];
  }
  if (s->outputs == 0 || s->length == 0) return unsupported("empty tensor");
  // 32-bit offsets in the kernel; ATen splits such inputs itself, and its mean factor is then per part.
  if (extent >= (int64_t{1} << 31) || s->outputs * s->length >= (int64_t{1} << 31))
    return unsupported("input needs 64-bit indexing");
  const bool row = s->red_sizes.size() == 1 && s->red_strides[0] == 1;
  s->row_vec = widest_vec(*s, row, s->length, s->kept_strides);
  const bool col = !s->kept_sizes.empty() && s->kept_strides.back() == 1;
  if (col) {
    std::vector<int64_t> mults(s->kept_strides.begin(), s->kept_strides.end() - 1);
    mults.insert(mults.end(), s->red_strides.begin(), s->red_strides.end());
    s->col_vec = widest_vec(*s, true, s->kept_sizes.back(), mults);
  }
  return Status();
}

/// linalg_vector_norm's ord and dtype= (Note [Reductions]): the ord class, float(p), and the result dtype ATen's
/// check_linalg_norm_dtype allows and we serve (the input's, or fp32 for fp16/bf16 input).
Status parse_norm_args(const Problem& p, ReduceShape* s) {
  const c10::IValue& o = p.args[1].value;
  double ord = 0;
  if (o.isInt()) ord = static_cast<double>(o.toInt());
  else if (o.isDouble()) ord = o.toDouble();
  else return unsupported("ord is not a real number");
  if (ord == 0) s->ord = NormOrd::kZero;
  else if (ord == 1) s->ord = NormOrd::kOne;
  else if (ord == 2) s->ord = NormOrd::kTwo;
  else if (std::isinf(ord)) s->ord = ord > 0 ? NormOrd::kInf : NormOrd::kNegInf;
  else if (std::isnan(ord) || std::fabs(ord) < 0.25 || std::fabs(ord) > 16)
    return unsupported("ord outside 0.25 <= |p| <= 16");
  else s->ord = NormOrd::kP, s->norm_p = static_cast<float>(ord);
  const c10::IValue& dt = p.args[4].value;
  if (dt.isNone()) return Status();
  if (!dt.isInt()) return unsupported("dtype is not a ScalarType");
  const auto want = static_cast<c10::ScalarType>(dt.toInt());
  if (want == s->dtype) return Status();
  if (want == c10::ScalarType::Float) return s->out_dtype = want, Status();  // fp16/bf16 read, fp32 result
  return unsupported(std::string("dtype=") + c10::toString(want));
}

}  // namespace

bool ReduceShape::has_values() const { return op != Reduction::kArgmax && op != Reduction::kArgmin; }

bool ReduceShape::has_indices() const {
  return op == Reduction::kMaxDim || op == Reduction::kMinDim || op == Reduction::kArgmax || op == Reduction::kArgmin;
}

Result<ReduceShape> parse_reduction(const Problem& p) {
  const std::string spec = p.overload.empty() ? p.op : p.op + "." + p.overload;
  const OpInfo* info = nullptr;
  for (const auto& o : kOps)
    if (spec == o.spec) info = &o;
  if (!info) return unsupported("op " + spec + " is not in this family");
  if (p.args.size() != info->nargs) return unsupported("unexpected arguments");
  if (!p.args[0].is_tensor || !p.args[0].tensor.defined) return unsupported("input is not a tensor");
  ReduceShape s;
  s.op = info->op;
  const auto& t = p.args[0].tensor;
  s.dtype = t.dtype;
  if (!generated_dtype(s.dtype)) return unsupported(std::string("dtype ") + c10::toString(s.dtype));
  if (s.dtype == c10::ScalarType::BFloat16 && p.sm < 80) return unsupported("bf16 needs sm_80+");
  if (t.sizes.empty()) return unsupported("0-dim input");
  if (t.strides.size() != t.sizes.size()) return unsupported("strides");
  s.sizes = t.sizes;
  s.strides = t.strides;
  s.offset = t.storage_offset;
  const int64_t rank = static_cast<int64_t>(s.sizes.size());

  const bool var = s.op == Reduction::kVar || s.op == Reduction::kStd;
  const bool norm = s.op == Reduction::kNorm;
  const c10::IValue& keep = p.args[var || norm ? 3 : 2].value;
  if (!keep.isBool()) return unsupported("keepdim is not a bool");
  const bool keepdim = keep.toBool();
  s.out_dtype = s.dtype;
  if (s.op == Reduction::kSum || s.op == Reduction::kMean) {
    const c10::IValue& dt = p.args[3].value;
    if (!dt.isNone() && !(dt.isInt() && dt.toInt() == static_cast<int64_t>(s.dtype)))
      return unsupported("dtype= converts");
  }
  if (norm) CUDAL1_RETURN_IF_ERROR(parse_norm_args(p, &s));
  if (var) {
    const c10::IValue& c = p.args[2].value;
    double corr = 1.0;  // ATen: correction.value_or(1), as accscalar_t (fp32 here)
    if (c.isInt()) corr = static_cast<double>(c.toInt());
    else if (c.isDouble()) corr = c.toDouble();
    else if (!c.isNone()) return unsupported("correction is not a real number");
    s.correction = static_cast<float>(corr);
  }
  CUDAL1_ASSIGN_OR_RETURN(std::vector<bool> mask, reduced_mask(p.args[norm ? 2 : 1].value, s.op, rank));
  CUDAL1_RETURN_IF_ERROR(map_dims(mask, &s));
  if (var && s.length >= (int64_t{1} << 24)) return unsupported("var/std over 2^24+ elements (fp32 counts)");
  if (norm && s.ord == NormOrd::kZero && s.length >= (int64_t{1} << 24))
    return unsupported("ord-0 norm over 2^24+ elements (fp32 counts)");
  // ATen's is_reduce_over_1D_vector: every reduced dim of size 1 gives abs(x) (or x != 0), not sqrt(x * x).
  if (norm && s.length == 1) return unsupported("norm over one element (ATen's abs path)");

  // Output sizes as ATen's resize_reduction: kept dims, reduced ones as 1 with keepdim (argmax with dim=None
  // reduces every dim of the flattened input, so keepdim gives all ones there too); contiguous.
  for (int64_t d = 0; d < rank; ++d) {
    if (!mask[static_cast<size_t>(d)]) s.out_sizes.push_back(s.sizes[static_cast<size_t>(d)]);
    else if (keepdim) s.out_sizes.push_back(1);
  }
  // mean: ATen's MeanOps factor, float(num_output_elements) / numel (float division).
  s.mean_factor = static_cast<float>(s.outputs) / static_cast<float>(s.outputs * s.length);
  return s;
}

}  // namespace cudal1::optimizer::reduce
