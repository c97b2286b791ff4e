/// @brief Variant helpers, Problem construction and lookups over the family registry (the registry itself is
/// generated from optimizer/families/CMakeLists.txt, Note [Family plug-ins]).
#include "cudal1/optimizer/family.h"

#include "cudal1/cache/kernel_cache.h"
#include "cudal1/optimizer/chain_tuner.h"

#include <nlohmann/json.hpp>

namespace cudal1::optimizer {

Problem Problem::from_record(const dispatcher::SigRecord& rec, int sm, int sm_count) {
  return of_call(rec.op, rec.args, sm, sm_count, rec.sig.text);
}

Problem Problem::of_call(const c10::OperatorHandle& op, std::vector<dispatcher::ArgSpec> args, int sm, int sm_count,
                         std::string signature) {
  Problem p;
  const auto& name = op.operator_name();
  p.op = name.name.rfind("aten::", 0) == 0 ? name.name.substr(6) : name.name;
  p.overload = name.overload_name;
  p.args = std::move(args);
  p.sm = sm;
  p.sm_count = sm_count;
  p.signature = std::move(signature);
  return p;
}

std::string Variant::id() const {
  std::string s;
  for (const auto& [k, v] : knobs) s += (s.empty() ? "" : ".") + k + std::to_string(v);
  return s;
}

bool Variant::matches(const std::string& filter) const {
  const std::string s = id();
  if (filter.empty() || filter.back() != '$') return s.find(filter) != std::string::npos;
  const std::string tail = filter.substr(0, filter.size() - 1);
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

int Variant::get(const std::string& knob, int dflt) const {
  for (const auto& [k, v] : knobs)
    if (k == knob) return v;
  return dflt;
}

std::string Variant::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& [k, v] : knobs) j.push_back({k, v});
  return j.dump();
}

Result<Variant> Variant::from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return Status(Code::kCorrupt, "variant is not a JSON array");
  Variant v;
  for (const auto& kv : j) {
    if (!kv.is_array() || kv.size() != 2 || !kv[0].is_string() || !kv[1].is_number_integer())
      return Status(Code::kCorrupt, "variant knob is not [name, int]");
    v.knobs.emplace_back(kv[0].get<std::string>(), kv[1].get<int>());
  }
  return v;
}

const Family* family_for(const std::string& op, const std::string& overload) {
  const std::string spec = overload.empty() ? op : op + "." + overload;
  for (const Family* f : families())
    for (const auto& o : f->ops())
      if (o == spec) return f;
  return nullptr;
}

std::vector<std::string> all_family_ops() {
  std::vector<std::string> out;
  for (const Family* f : families())
    for (const auto& o : f->ops()) out.push_back(o);
  return out;
}

int generator_version(const std::string& family) {
  if (family == "chain") return kChainGeneratorVersion;
  for (const Family* f : families())
    if (family == f->name()) return f->version();
  return -1;
}

Status check_generator(const cache::KernelEntry& e) {
  const int now = generator_version(e.family);
  if (now < 0) return Status(Code::kMismatch, "made by family '" + e.family + "', which this cudal1 does not have");
  if (e.generator_version != now)
    return Status(Code::kMismatch, "made by the " + e.family + " generator " + std::to_string(e.generator_version) +
                                       ", this cudal1 has " + std::to_string(now) + " (stale)");
  return Status();
}

std::string generators_fingerprint() {
  std::string s;
  for (const Family* f : families())
    s += (s.empty() ? "" : ",") + std::string(f->name()) + ":" + std::to_string(f->version());
  return s + ",chains:" + std::to_string(kChainGeneratorVersion);  // chain kernels (Note [Chain tuning])
}

}  // namespace cudal1::optimizer
