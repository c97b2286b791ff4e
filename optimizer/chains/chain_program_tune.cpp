/// @brief Program chains' verification and timing (Note [Program chains]): on the model's own weights and fresh
/// random inputs, against the ATen chain.
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <thread>

#include "chain_tuning.h"
#include "cudal1/cache/kernel_cache.h"
#include "cudal1/dispatcher/hook.h"
#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"

namespace cudal1::optimizer::chain_tuning {
namespace {

/// Each external slot's tensor as the chain's first reader of it recorded it.
std::vector<dispatcher::TensorSpec> external_specs(const dispatcher::ChainRecord& c) {
  std::vector<dispatcher::TensorSpec> out(static_cast<size_t>(c.externals));
  std::vector<char> seen(out.size(), 0);
  for (const auto& node : c.nodes) {
    const auto& schema = node.rec->op.schema().arguments();
    size_t ti = 0;
    for (size_t a = 0; a < schema.size() && a < node.rec->args.size(); ++a) {
      if (!dispatcher::is_tensor_argument(schema[a])) continue;
      if (ti >= node.inputs.size()) break;
      const dispatcher::ChainInput in = node.inputs[ti++];
      if (in.producer >= 0 || in.index < 0 || static_cast<size_t>(in.index) >= out.size() || seen[in.index]) continue;
      out[static_cast<size_t>(in.index)] = node.rec->args[a].tensor;
      seen[static_cast<size_t>(in.index)] = 1;
    }
  }
  return out;
}

/// The program's inputs for one trial: the model's own tensors of the last commit for its parameters (weights,
/// running statistics), fresh random ones for everything else (the activations), at scales 1, 4, 0.01, 30 in turn
/// with NaN and infinities injected from the second trial on.
Result<std::vector<at::Tensor>> trial_externals(const dispatcher::ChainRecord& c, const chains::ProgramPlan& p,
                                                int device, int trial, at::Generator& gen) {
  const std::vector<at::Tensor> live = c.last_externals();
  const auto specs = external_specs(c);
  static const double kScales[] = {1, 4, 0.01, 30};
  std::vector<at::Tensor> out;
  for (size_t e = 0; e < specs.size(); ++e) {
    const bool param = std::find(p.params.begin(), p.params.end(), static_cast<int>(e)) != p.params.end();
    if (param) {
      if (e >= live.size() || !live[e].defined())
        return Status(Code::kUnavailable, "program chain: the model's weights are gone");
      out.push_back(live[e]);
      continue;
    }
    const auto& s = specs[e];
    if (!s.defined) return Status(Code::kUnsupported, "program chain: an external never seen");
    int64_t extent = 1;
    for (size_t d = 0; d < s.sizes.size(); ++d) extent += (s.sizes[d] - 1) * s.strides[d];
    const auto opts = at::TensorOptions().dtype(at::kFloat).device(at::Device(at::kCUDA, static_cast<int8_t>(device)));
    at::Tensor base = at::randn({std::max<int64_t>(extent, 1)}, gen, opts).mul_(kScales[trial % 4]);
    if (trial > 0 && extent > 8) {
      const float specials[] = {NAN, INFINITY, -INFINITY};
      for (int i = 0; i < 3; ++i) base[(trial * 7919 + i * 104729) % extent].fill_(specials[i]);
    }
    out.push_back(base.to(s.dtype).as_strided(s.sizes, s.strides, 0));
  }
  return out;
}

/// `got` against `ref`: NaN where ATen has NaN, its infinities, and finite values within `c` of the largest
/// finite magnitude; integer outputs exactly.
bool program_close(const at::Tensor& got, const at::Tensor& ref, double c, std::string* why) {
  if (!at::isFloatingType(ref.scalar_type())) {
    if (at::equal(got, ref)) return true;
    *why = "an integer output differs";
    return false;
  }
  const at::Tensor o = got.to(at::kDouble), r = ref.to(at::kDouble);
  const at::Tensor fin_r = at::isfinite(r), fin_o = at::isfinite(o);
  const double maxabs = fin_r.any().item<bool>() ? r.masked_select(fin_r).abs().max().item<double>() : 0.0;
  const at::Tensor nan_ok = at::isnan(r) == at::isnan(o);
  const at::Tensor inf_ok = at::logical_or(~at::isinf(r), o == r);
  const at::Tensor fin_ok = at::logical_or(~fin_r, at::logical_and(fin_o, (o - r).abs() <= c * maxabs));
  const at::Tensor ok = nan_ok & inf_ok & fin_ok;
  if (ok.all().item<bool>()) return true;
  *why = std::to_string((~ok).sum().item<int64_t>()) + " elements differ (NaN " +
         std::to_string((~nan_ok).sum().item<int64_t>()) + ", inf " + std::to_string((~inf_ok).sum().item<int64_t>()) +
         ", beyond " + std::to_string(c) + " of " + std::to_string(maxabs) + " " +
         std::to_string((~fin_ok).sum().item<int64_t>()) + ")";
  return false;
}

/// The tolerance of Note [Program chains]: 8 u sqrt(convolutions and layers) of the largest magnitude.
double program_tolerance(const chains::ProgramPlan& p) {
  double u = std::ldexp(1.0, -20);  // fp32 convolutions without TF32: reassociation across the fold
  if (p.dtype == c10::ScalarType::Half) u = std::ldexp(1.0, -11);
  else if (p.dtype == c10::ScalarType::BFloat16) u = std::ldexp(1.0, -8);
  else if ((p.convs && at::globalContext().allowTF32CuDNN()) || (p.layers && at::globalContext().allowTF32CuBLAS()))
    u = std::ldexp(1.0, -11);
  return 8 * u * std::sqrt(static_cast<double>(std::max(p.convs + p.layers, 1)));
}

/// Verifies `k` on `trials` + 1 trials: the first with every value the program computes wanted by the app, the
/// others with the last output only.
Status verify_program(const dispatcher::ChainRecord& c, const chains::ProgramPlan& p, dispatcher::ChainKernel& k,
                      int device, int trials, uint64_t seed) {
  at::Generator gen = generator(device, seed);
  const double tol = program_tolerance(p);
  for (int t = 0; t <= trials; ++t) {
    CUDAL1_ASSIGN_OR_RETURN(std::vector<at::Tensor> ext, trial_externals(c, p, device, t, gen));
    auto ref = outputs(c, device, /*poison=*/true, /*last_only=*/false);
    CUDAL1_RETURN_IF_ERROR(dispatcher::replay_chain(c, c.nodes.size(), ext, ref));
    auto got = outputs(c, device, /*poison=*/true, /*last_only=*/t > 0);
    if (t == 0) {  // what the program computes: not the values inside a conv group, a batch norm's statistics
      for (const auto& g : p.groups)  // or an index output (all of which it declines to the ATen chain)
        if (g.grouped()) {
          for (size_t n = g.first; n < g.last; ++n)
            for (auto& o : got[n]) o = at::Tensor();
          for (size_t i = 1; i < got[g.last].size(); ++i) got[g.last][i] = at::Tensor();
        }
      for (auto& node : got)
        for (auto& o : node)
          if (o.defined() && !at::isFloatingType(o.scalar_type())) o = at::Tensor();
    }
    const Status s = k.run(ext, got);
    if (!s.ok()) return Status(Code::kVerifyFailed, "trial " + std::to_string(t) + ": " + s.to_string());
    for (size_t n = 0; n < got.size(); ++n)
      for (size_t i = 0; i < got[n].size(); ++i) {
        if (!got[n][i].defined()) continue;
        std::string why;
        if (!program_close(got[n][i], ref[n][i], tol, &why))
          return Status(Code::kVerifyFailed, "trial " + std::to_string(t) + ": output " + std::to_string(i) +
                                                 " of node " + std::to_string(n) + ": " + why);
      }
  }
  return Status();
}

}  // namespace

std::string program_launch_json(const chains::ProgramPlan& plan, bool fused, const chains::LayerVariant& layers) {
  nlohmann::json j{{"program", fused ? "fused" : "separate"}, {"plan", plan.text}};
  if (layers.warps) j["layers"] = layers.id();
  return j.dump();
}

Result<std::unique_ptr<dispatcher::ChainKernel>> tune_program(const dispatcher::ChainRecord& chain,
                                                              chains::ProgramPlan plan, const ChainTuneOptions& o,
                                                              ChainTuneReport& rep) {
  const int device = chain.nodes.front().rec->device_index;
  if (device < 0) return Status(Code::kUnsupported, rep.note = "chain: not on a CUDA device");
  dispatcher::BypassScope bypass;
  rep.plan = plan.text;
  rep.kernel_name = cache::kLibraryKernel;
  // The fused program with each layer-kernel variant (Note [Skinny layers]), then the separate one, tried only
  // when no fused variant verified.
  struct Candidate {
    bool fused;
    chains::LayerVariant layers;
  };
  const std::vector<chains::LayerVariant> lvs = chains::layer_variants(plan);
  std::vector<Candidate> cands;
  for (const chains::LayerVariant& lv : lvs) cands.push_back({true, lv});
  if (lvs.empty()) cands.push_back({true, {}});
  cands.push_back({false, {}});
  std::vector<VariantBuild> builds;
  if (!lvs.empty()) {
    CUDAL1_ASSIGN_OR_RETURN(DeviceInfo info, device_info(device));
    builds = compile_concurrently(
        lvs.size(), [&](size_t i) { return Result<KernelSource>(KernelSource{chains::layer_source(plan, lvs[i]), "layer_kernel"}); },
        info.sm, std::max<size_t>(1, std::thread::hardware_concurrency()));
  }
  std::string failures;
  std::unique_ptr<dispatcher::ChainKernel> best;
  ChainTiming best_t;
  for (size_t c = 0; c < cands.size(); ++c) {
    const Candidate& cand = cands[c];
    if (!cand.fused && best) break;
    ++rep.variants;
    std::string id = cand.fused ? "program.fused" : "program.separate";
    if (cand.layers.warps) id += "." + cand.layers.id();
    std::shared_ptr<LoadedModule> module;
    if (cand.layers.warps) {
      const Result<CompiledKernel>& built = builds[c].kernel;
      auto loaded = built.ok() ? LoadedModule::load(device, built.value().cubin, "layer_kernel")
                               : Result<std::shared_ptr<LoadedModule>>(built.status());
      if (!loaded.ok()) {
        failures += (failures.empty() ? "" : "; ") + id + ": " + loaded.status().to_string();
        continue;
      }
      module = loaded.value();
    }
    std::unique_ptr<dispatcher::ChainKernel> k = chains::program_kernel(chain, plan, cand.fused, cand.layers, module);
    if (const Status v = verify_program(chain, plan, *k, device, o.verify_trials, o.seed); !v.ok()) {
      failures += (failures.empty() ? "" : "; ") + id + ": " + v.to_string();
      continue;
    }
    ++rep.verified;
    if (o.reps <= 0) {
      rep.variant = id;
      return k;
    }
    at::Generator gen = generator(device, o.seed + 7);
    CUDAL1_ASSIGN_OR_RETURN(std::vector<at::Tensor> ext, trial_externals(chain, plan, device, 0, gen));
    CUDAL1_ASSIGN_OR_RETURN(ChainTiming t, time(chain, ext, *k, device, 2 * o.reps, o.seed + 7));
    if (best && t.kernel_us >= best_t.kernel_us) continue;
    best = std::move(k);
    best_t = t;
    rep.variant = id;
    rep.launch_json = program_launch_json(plan, cand.fused, cand.layers);
    rep.kernel_name = cand.layers.warps ? "layer_kernel" : cache::kLibraryKernel;
    rep.cubin = cand.layers.warps ? builds[c].kernel.value().cubin : "";
  }
  if (!best) {
    rep.note = "no variant verified (" + failures + ")";
    return Status(Code::kVerifyFailed, rep.note);
  }
  if (!failures.empty()) rep.note = "not verified: " + failures;
  CUDAL1_RETURN_IF_ERROR(judge(best_t, o, rep));
  return best;
}

}  // namespace cudal1::optimizer::chain_tuning
