/// @brief Note [Source digests] (compile_variants_test.cpp): a test's generated sources pinned to their generator's
/// version in tests/optimizer/source_digests.txt (path: CUDAL1_SOURCE_DIGESTS).
#pragma once

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cudal1::testing {

/// Checks the digest of `parts` (one a source: its id and code; order does not matter) against the line `name`
/// of the digests file, recorded with `generator` at `version`; with CUDAL1_UPDATE_DIGESTS=DIR writes the line to
/// DIR instead and returns false (the caller then skips compiling). `missing_ok`: a name the file lacks is only
/// reported (sources that depend on the LibTorch they were recorded with: the digest of CI's is kept).
inline bool check_source_digest(const std::string& name, const std::string& generator, int version,
                                std::vector<std::string> parts, bool missing_ok = false) {
  std::sort(parts.begin(), parts.end());
  std::string all;
  for (const auto& part : parts) all += part + '\0';
  char digest[17];
  std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(XXH3_64bits(all.data(), all.size())));
  const std::string line = name + " " + generator + " " + std::to_string(version) + " " + digest;
  if (const char* dir = std::getenv("CUDAL1_UPDATE_DIGESTS"); dir && *dir) {
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');
    std::ofstream(std::string(dir) + "/" + file + ".line") << line << "\n";
    return false;
  }
  std::ifstream in(CUDAL1_SOURCE_DIGESTS);
  std::string recorded;
  for (std::string l; std::getline(in, l);)
    if (l.rfind(name + " ", 0) == 0) recorded = l;
  if (recorded == line) return true;
  std::istringstream old(recorded);
  std::string old_name, old_generator, old_version, old_digest;
  old >> old_name >> old_generator >> old_version >> old_digest;
  if (recorded.empty() && missing_ok)
    std::printf("no digest recorded for %s (Note [Source digests]): %s\n", name.c_str(), line.c_str());
  else if (recorded.empty())
    ADD_FAILURE() << name << ": no digest recorded in " << CUDAL1_SOURCE_DIGESTS << " (Note [Source digests])";
  else if (old_version == std::to_string(version))
    ADD_FAILURE() << generator << "'s generated code changed (" << name << ": " << old_digest << " -> " << digest
                  << ") but its version is still " << old_version
                  << ": bump the generator's version, then update the digests (Note [Source digests])";
  else
    ADD_FAILURE() << generator << " is at version " << version << ", the digests at " << old_version
                  << ": update them (Note [Source digests])";
  return true;
}

}  // namespace cudal1::testing
