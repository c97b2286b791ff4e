/// @brief Status names and the out-of-line failure paths of Result<T>.
#include "cudal1/core/status.h"

#include <stdexcept>

namespace cudal1 {

const char* code_name(Code code) noexcept {
  switch (code) {
    case Code::kOk: return "Ok";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kUnavailable: return "Unavailable";
    case Code::kUnsupported: return "Unsupported";
    case Code::kCompileError: return "CompileError";
    case Code::kVerifyFailed: return "VerifyFailed";
    case Code::kCorrupt: return "Corrupt";
    case Code::kMismatch: return "Mismatch";
    case Code::kIoError: return "IoError";
    case Code::kCudaError: return "CudaError";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  return std::string(code_name(code_)) + ": " + message_;
}

namespace detail {
void throw_bad_result_access(const Status& s) {
  throw std::logic_error("cudal1: value() of a failed Result: " + s.to_string());
}
void throw_ok_status_as_error() {
  throw std::logic_error("cudal1: a Result was built from an ok Status");
}
}  // namespace detail

}  // namespace cudal1
