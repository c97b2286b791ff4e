/// @brief Every picked variant of a few problems compiled, bound and verified against ATen (variant_sweep.h).
#include "gpu/variant_sweep.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "cudal1/optimizer/compiler.h"
#include "cudal1/optimizer/device_info.h"
#include "cudal1/optimizer/measure.h"
#include "gpu/gpu_env.h"

namespace cudal1::testing {

Result<std::unique_ptr<optimizer::BoundKernel>> build_variant(const optimizer::Plan& plan, const optimizer::Variant& v,
                                                              int sm) {
  CUDAL1_ASSIGN_OR_RETURN(const auto src, plan.source(v));
  CUDAL1_ASSIGN_OR_RETURN(const auto compiled, optimizer::compile(src, sm));
  CUDAL1_ASSIGN_OR_RETURN(auto module, optimizer::LoadedModule::load(0, compiled.cubin, compiled.kernel_name));
  return plan.bind(v, std::move(module));
}

int device_sm() {
  auto info = optimizer::device_info(0);
  if (!info.ok()) return ADD_FAILURE() << info.status().to_string(), 0;
  return info.value().sm;
}

namespace {

/// `p` planned for device 0's SM count (held slabs size their grid in the source for it).
optimizer::Problem on_device(optimizer::Problem p) {
  auto info = optimizer::device_info(0);
  if (info.ok()) p.sm_count = info.value().sm_count;
  return p;
}

}  // namespace

int count_variants(const std::vector<optimizer::Problem>& problems,
                   const std::function<bool(const optimizer::Variant&)>& pick) {
  int offered = 0;
  for (const auto& q : problems) {
    const optimizer::Problem p = on_device(q);
    const optimizer::Family* family = optimizer::family_for(p.op, p.overload);
    if (family == nullptr) {
      ADD_FAILURE() << p.signature << ": no family";
      continue;
    }
    auto plan = family->plan(p);
    if (!plan.ok()) {
      ADD_FAILURE() << p.signature << ": " << plan.status().to_string();
      continue;
    }
    for (const auto& v : plan.value()->space()) offered += pick(v);
  }
  return offered;
}

int verify_variants(const std::vector<optimizer::Problem>& problems,
                    const std::function<bool(const optimizer::Variant&)>& pick) {
  using namespace cudal1::optimizer;
  int verified = 0;
  for (const auto& q : problems) {
    const Problem p = on_device(q);
    const Family* family = family_for(p.op, p.overload);
    if (family == nullptr) {
      ADD_FAILURE() << p.signature << ": no family";
      return verified;
    }
    auto plan = family->plan(p);
    if (!plan.ok()) {
      ADD_FAILURE() << p.signature << ": " << plan.status().to_string();
      return verified;
    }
    const auto& op = c10::Dispatcher::singleton().findSchemaOrThrow(("aten::" + p.op).c_str(), p.overload.c_str());
    for (const Variant& v : plan.value()->space()) {
      if (!pick(v)) continue;
      const std::string what = p.signature + " " + v.id();
      auto bound = build_variant(*plan.value(), v, p.sm);
      if (!bound.ok()) return ADD_FAILURE() << what << ": " << bound.status().to_string(), verified;
      const Status st = verify(p, op, *bound.value(), 0, kEveryScaleTrials, 4242 + verified, nullptr);
      if (!st.ok()) return ADD_FAILURE() << what << ": " << st.to_string(), verified;
      ++verified;
    }
  }
  return verified;
}

}  // namespace cudal1::testing
