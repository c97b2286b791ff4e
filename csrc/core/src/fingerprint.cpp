/// @brief The fingerprint's canonical text, key and JSON form.
#include "cudal1/core/fingerprint.h"

#include <nlohmann/json.hpp>

#include "cudal1/core/signature.h"

namespace cudal1 {

std::string GpuFingerprint::canonical() const {
  std::string s;
  s += "gpu_name=" + gpu_name + "\n";
  s += "sm=" + std::to_string(sm) + "\n";
  s += "sm_count=" + std::to_string(sm_count) + "\n";
  s += "driver=" + std::to_string(driver_version) + "\n";
  s += "cuda_runtime=" + std::to_string(cuda_runtime_version) + "\n";
  s += "nvrtc=" + nvrtc_version + "\n";
  s += "torch=" + torch_version + "\n";
  s += "cudal1=" + cudal1_version + "\n";
  s += "format=" + std::to_string(format_version) + "\n";
  return s;
}

std::vector<std::string> GpuFingerprint::differing_fields(const GpuFingerprint& o) const {
  std::vector<std::string> out;
  auto field = [&](const char* name, const std::string& a, const std::string& b) {
    if (a != b) out.push_back(name);
  };
  field("gpu_name", gpu_name, o.gpu_name);
  field("sm", std::to_string(sm), std::to_string(o.sm));
  field("sm_count", std::to_string(sm_count), std::to_string(o.sm_count));
  field("driver", std::to_string(driver_version), std::to_string(o.driver_version));
  field("cuda_runtime", std::to_string(cuda_runtime_version), std::to_string(o.cuda_runtime_version));
  field("nvrtc", nvrtc_version, o.nvrtc_version);
  field("torch", torch_version, o.torch_version);
  field("cudal1", cudal1_version, o.cudal1_version);
  field("format", std::to_string(format_version), std::to_string(o.format_version));
  return out;
}

std::string GpuFingerprint::key() const {
  const std::string c = canonical();
  return hash_hex(c.data(), c.size());
}

std::string GpuFingerprint::to_json() const {
  nlohmann::json j = {{"gpu_name", gpu_name},
                      {"sm", sm},
                      {"sm_count", sm_count},
                      {"driver_version", driver_version},
                      {"cuda_runtime_version", cuda_runtime_version},
                      {"nvrtc_version", nvrtc_version}, {"torch_version", torch_version},
                      {"cudal1_version", cudal1_version}, {"generators", generators},
                      {"format_version", format_version}};
  return j.dump();
}

Result<GpuFingerprint> GpuFingerprint::from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status(Code::kCorrupt, "fingerprint is not a JSON object");
  try {
    GpuFingerprint f;
    f.gpu_name = j.at("gpu_name").get<std::string>();
    f.sm = j.at("sm").get<int>();
    f.sm_count = j.value("sm_count", 0);  // records written before it (their keys differ: never used)
    f.driver_version = j.at("driver_version").get<int>();
    f.cuda_runtime_version = j.at("cuda_runtime_version").get<int>();
    f.nvrtc_version = j.at("nvrtc_version").get<std::string>();
    f.torch_version = j.at("torch_version").get<std::string>();
    f.cudal1_version = j.at("cudal1_version").get<std::string>();
    f.generators = j.at("generators").get<std::string>();
    f.format_version = j.at("format_version").get<int>();
    return f;
  } catch (const nlohmann::json::exception& e) {
    return Status(Code::kCorrupt, std::string("fingerprint JSON: ") + e.what());
  }
}

}  // namespace cudal1
