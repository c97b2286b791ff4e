/// @brief In-app confirmation's verdict and trial bookkeeping (Note [In-app confirmation] in confirm.h).
#include "cudal1/dispatcher/confirm.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cudal1/core/stats.h"

namespace cudal1::dispatcher {
namespace {

/// P(k < a) over all pairs, ties counted half: sort both, one merge-like sweep.
double superiority(std::vector<double> a, std::vector<double> k) {
  if (a.empty() || k.empty()) return 0.5;
  std::sort(a.begin(), a.end());
  std::sort(k.begin(), k.end());
  double wins = 0;
  for (double x : k) {
    const auto lo = std::lower_bound(a.begin(), a.end(), x), hi = std::upper_bound(a.begin(), a.end(), x);
    wins += static_cast<double>(a.end() - hi) + 0.5 * static_cast<double>(hi - lo);
  }
  return wins / (static_cast<double>(a.size()) * static_cast<double>(k.size()));
}

}  // namespace

const char* verdict_name(Verdict v) noexcept {
  switch (v) {
    case Verdict::kPending: return "pending";
    case Verdict::kPromote: return "promoted";
    case Verdict::kDemote: return "demoted";
  }
  return "?";
}

std::string TrialStats::text() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "in-app %.2fx (ATen %.1f us, kernel %.1f us, P %.2f, n %lld+%lld)", ratio, aten_us,
                kernel_us, superiority, static_cast<long long>(aten_n), static_cast<long long>(kernel_n));
  return buf;
}

Verdict judge(const std::vector<double>& aten, const std::vector<double>& kernel, int per_arm, int max_per_arm,
              TrialStats* stats) {
  TrialStats s;
  s.aten_n = static_cast<int64_t>(aten.size());
  s.kernel_n = static_cast<int64_t>(kernel.size());
  s.aten_us = median(aten);
  s.kernel_us = median(kernel);
  s.ratio = s.kernel_us > 0 ? s.aten_us / s.kernel_us : 0;
  s.superiority = superiority(aten, kernel);
  if (stats) *stats = s;
  const int64_t n = std::min(s.aten_n, s.kernel_n);
  if (n < per_arm) return Verdict::kPending;
  const double na = static_cast<double>(s.aten_n), nk = static_cast<double>(s.kernel_n);
  const double se = std::sqrt((na + nk + 1) / (12 * na * nk));  // Mann-Whitney U / (na nk) under the null
  if (s.kernel_us < s.aten_us && s.superiority >= 0.5 + 2 * se) return Verdict::kPromote;
  if (s.kernel_us >= s.aten_us || s.superiority <= 0.5 || n >= max_per_arm) return Verdict::kDemote;
  return Verdict::kPending;
}

Trial::Trial(int per_arm, int max_per_arm)
    : per_arm_(std::max(1, per_arm)), max_per_arm_(std::max(per_arm_, max_per_arm)), next_check_(per_arm_) {}

Verdict Trial::add(bool kernel, double us, TrialStats* stats) noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    if (decided_ || !std::isfinite(us) || us < 0) return Verdict::kPending;
    auto& arm = kernel ? kernel_ : aten_;
    if (static_cast<int>(arm.size()) >= max_per_arm_) return Verdict::kPending;  // the other arm catches up
    arm.push_back(us);
    if (static_cast<int>(std::min(aten_.size(), kernel_.size())) < next_check_) return Verdict::kPending;
    const Verdict v = judge(aten_, kernel_, next_check_, max_per_arm_, stats);
    if (v == Verdict::kPending) {
      next_check_ = std::min(max_per_arm_, next_check_ * 2);
      return v;
    }
    decided_ = true;
    return v;
  } catch (...) {
    return Verdict::kPending;
  }
}

}  // namespace cudal1::dispatcher
