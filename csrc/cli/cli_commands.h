/// @brief The CLI's commands, one function each; they print to `out` and return the exit code.
#pragma once

#include <ostream>
#include <string>

namespace cudal1::cli {

struct Options {
  std::string cache_dir;    ///< empty: from the configuration
  bool json = false;
  bool all = false;
  bool list_runs = false;
  std::string fingerprint;
  std::string run;
};

int cache_ls(const Options& o, std::ostream& out);
int cache_clear(const Options& o, std::ostream& out);
int report(const Options& o, std::ostream& out);
int env(const Options& o, std::ostream& out);

}  // namespace cudal1::cli
