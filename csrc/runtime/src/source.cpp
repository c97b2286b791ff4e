/// @brief cudal1::kernel_source: the CUDA source a family generates for a signature, without a GPU.
///
/// Note [Kernel sources]
/// A kernel that replaces an ATen op in production should be readable by the people who run it: which family
/// planned the signature, which techniques its space holds, and the exact CUDA C++ that NVRTC compiles. The
/// signature's text is complete (Note [Signature encoding]), so its call is rebuilt on the meta device
/// (dispatcher::rebuild_call, nothing allocated), its arguments are read as the hook reads them (arg_specs), and
/// the family's plan for the asked compute capability gives the space and the source, exactly as the tuner
/// would get them for that signature (the tuner's Problem also comes from the hook's arg_specs). Nothing is
/// compiled or run, so the GPU, the driver and cudal1's switch do not matter. The rebuilt call's tensors sit at
/// storage offset 0, as warm() tunes them; the text holds no offset.
#include "cudal1/cudal1.h"
#include "cudal1/dispatcher/call_of.h"
#include "cudal1/dispatcher/signature_of.h"
#include "cudal1/optimizer/family.h"

namespace cudal1 {

KernelSourceResult kernel_source(const std::string& signature, const std::string& variant, int sm,
                                 int sm_count) noexcept {
  KernelSourceResult r;
  try {
    if (sm < 10 || sm > 200) {
      r.error = "compute capability " + std::to_string(sm) + " is not one (e.g. 80 for sm_80, 90 for sm_90)";
      return r;
    }
    if (sm_count < 1 || sm_count > 1024) {
      r.error = std::to_string(sm_count) + " SMs is not a device's count (e.g. 132 for an H100 SXM or H200)";
      return r;
    }
    auto call = dispatcher::rebuild_call(signature, c10::Device(c10::DeviceType::Meta), /*fill=*/false);
    if (!call.ok()) {
      r.error = call.status().to_string();
      return r;
    }
    const auto& name = call->op.operator_name();
    const optimizer::Problem p =
        optimizer::Problem::of_call(call->op, dispatcher::arg_specs(call->stack, call->stack.size()), sm, sm_count,
                                     signature);
    const optimizer::Family* family = optimizer::family_for(p.op, p.overload);
    if (!family) {
      r.error = "no cudal1 family serves " + name.name + (p.overload.empty() ? "" : "." + p.overload) +
                " (ATen keeps every call of it)";
      return r;
    }
    r.family = family->name();
    auto plan = family->plan(p);
    if (!plan.ok()) {
      r.error = "the " + r.family + " family declines this signature (ATen keeps it): " + plan.status().message();
      return r;
    }
    const auto space = plan.value()->space();
    const optimizer::Variant* chosen = nullptr;
    for (const auto& v : space) {
      r.variants.push_back(v.id());
      if (!chosen && (variant.empty() || v.id() == variant)) chosen = &v;
    }
    if (!chosen) {
      r.error = "no variant " + variant + " in its space for sm_" + std::to_string(sm) + " (" +
                std::to_string(space.size()) + " variants)";
      return r;
    }
    auto src = plan.value()->source(*chosen);
    if (!src.ok()) {
      r.error = "variant " + chosen->id() + ": " + src.status().to_string();
      return r;
    }
    r.variant = chosen->id();
    r.kernel_name = src->kernel_name;
    r.code = std::move(src->code);
  } catch (const std::exception& e) {
    r.code.clear();
    r.error = std::string("kernel_source raised: ") + e.what();
  }
  return r;
}

}  // namespace cudal1
