/// @brief Private: pre-warming one chain from its cache key (Note [Pre-warming chains] in warm_chain.cpp).
#pragma once

#include <string>

#include "cudal1/cudal1.h"

namespace cudal1::runtime {

/// Rebuilds the chain `key` names (a chain cache key, "chain %0 = ... | %1 = ..."), runs it through the hook on
/// `options.device` until recorded, and has the runtime handle it as a hot chain (from the cache, else tuned and
/// stored), waiting at most `seconds_left`. A dry run parses and rebuilds on the Meta device only. Never throws
/// for bad input: the result says "error" and why.
WarmResult warm_chain(const std::string& key, const WarmOptions& options, double seconds_left);

}  // namespace cudal1::runtime
