/// @brief Status and Result<T>: how expected failures (compile errors, verification mismatches, unsupported
/// shapes, corrupt cache entries, missing drivers) travel through cudal1 without exceptions.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace cudal1 {

/// What went wrong, coarse enough to branch on.
enum class Code {
  kOk = 0,
  kInvalidArgument,  ///< caller passed something meaningless
  kNotFound,         ///< a lookup found nothing (not an error in itself)
  kUnavailable,      ///< a driver, library or device is missing
  kUnsupported,      ///< the family cannot do this signature exactly; the call goes to ATen
  kCompileError,     ///< NVRTC rejected generated source (message carries the log)
  kVerifyFailed,     ///< a candidate's output differed from ATen's
  kCorrupt,          ///< stored data failed its checks
  kMismatch,         ///< stored data is valid but belongs to another GPU / version
  kIoError,          ///< the file system or database failed
  kCudaError,        ///< a driver call failed
  kInternal,         ///< a bug in cudal1
};

/// Printable name of a code, e.g. "VerifyFailed".
const char* code_name(Code code) noexcept;

/// A success or a coded failure with a message. Cheap to copy on success.
class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return Status(); }

  bool ok() const noexcept { return code_ == Code::kOk; }
  Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  /// "VerifyFailed: max abs error 3.1 at element 17"
  std::string to_string() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

/// Either a T or a failed Status. Accessing value() of a failed Result is a bug (checked, throws
/// std::logic_error, which the hook firewall catches).
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}                     // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) { check_failed(); }  // NOLINT
  Result(Code code, std::string message) : v_(Status(code, std::move(message))) { check_failed(); }

  bool ok() const noexcept { return std::holds_alternative<T>(v_); }
  const Status& status() const;
  T& value() &;
  const T& value() const&;
  T&& value() &&;
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void check_failed();
  std::variant<T, Status> v_;
};

namespace detail {
[[noreturn]] void throw_bad_result_access(const Status& s);
[[noreturn]] void throw_ok_status_as_error();
}  // namespace detail

template <typename T>
void Result<T>::check_failed() {
  if (std::get<Status>(v_).ok()) detail::throw_ok_status_as_error();
}
template <typename T>
const Status& Result<T>::status() const {
  static const Status kOk;
  return ok() ? kOk : std::get<Status>(v_);
}
template <typename T>
T& Result<T>::value() & {
  if (!ok()) detail::throw_bad_result_access(std::get<Status>(v_));
  return std::get<T>(v_);
}
template <typename T>
const T& Result<T>::value() const& {
  if (!ok()) detail::throw_bad_result_access(std::get<Status>(v_));
  return std::get<T>(v_);
}
template <typename T>
T&& Result<T>::value() && {
  if (!ok()) detail::throw_bad_result_access(std::get<Status>(v_));
  return std::move(std::get<T>(v_));
}

}  // namespace cudal1

namespace cudal1::detail {
inline const Status& to_status(const Status& s) { return s; }
template <typename T>
const Status& to_status(const Result<T>& r) { return r.status(); }
}  // namespace cudal1::detail

#define CUDAL1_CONCAT2(a, b) a##b
#define CUDAL1_CONCAT(a, b) CUDAL1_CONCAT2(a, b)

/// Propagates a failed Status (or the Status of a failed Result) out of the enclosing function.
#define CUDAL1_RETURN_IF_ERROR(expr)                                              \
  do {                                                                            \
    const auto& _cudal1_st = (expr);                                              \
    if (!_cudal1_st.ok()) return ::cudal1::detail::to_status(_cudal1_st);        \
  } while (0)

/// `CUDAL1_ASSIGN_OR_RETURN(auto x, make_x());` declares x from a Result or returns its Status.
#define CUDAL1_ASSIGN_OR_RETURN(lhs, expr)                                        \
  auto CUDAL1_CONCAT(_cudal1_r, __LINE__) = (expr);                               \
  if (!CUDAL1_CONCAT(_cudal1_r, __LINE__).ok())                                   \
    return CUDAL1_CONCAT(_cudal1_r, __LINE__).status();                           \
  lhs = std::move(CUDAL1_CONCAT(_cudal1_r, __LINE__)).value()
