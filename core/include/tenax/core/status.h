// Status and StatusOr<T> for places where failure is an expected event that drives a
// decision (elastic/, storage/). Codes follow abseil's meanings:
//   kUnavailable        retry later
//   kAborted            tear down and re-rendezvous
//   kFailedPrecondition stop and report
//   kDataLoss           the bytes are corrupt; fall back
// Thread-safety: values; no shared state.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "tenax/core/error.h"

namespace tenax {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kUnavailable,
  kAborted,
  kDeadlineExceeded,
  kFailedPrecondition,
  kDataLoss,
  kInternal,
};

/// Human-readable name of a status code ("DATA_LOSS", ...).
const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "DATA_LOSS: shard-00001-of-00002.h5: checksum mismatch ..."
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit like absl::StatusOr
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.is_ok()) status_ = Status(StatusCode::kInternal, "StatusOr built from an OK status");
  }

  bool is_ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T&& value() && {
    check();
    return std::move(*value_);
  }

 private:
  void check() const {
    if (!value_) throw Error("StatusOr::value() on an error: " + status_.to_string());
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace tenax
