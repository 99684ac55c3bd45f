// Status and StatusOr: how errors users can cause (files, endpoints, messages, layouts, commands,
// a missing GPU) travel back with a message naming the thing and the problem. One type for the
// engine, the kernels and the telemetry library, in a header that depends on nothing of ours.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace sy {

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    s.ok_ = false;
    return s;
  }
  bool ok() const { return ok_; }
  const std::string& message() const { return message_; }
  // Prefixes the message with context ("loading /m/config.json: " + message).
  Status with_context(const std::string& context) const { return ok_ ? *this : Error(context + ": " + message_); }

 private:
  bool ok_ = true;
  std::string message_;
};

template <class T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) { assert(!status_.ok()); }  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace sy

// Returns early from the enclosing function when `expr` (a Status) is an error.
#define SY_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::sy::Status sy_status_ = (expr);             \
    if (!sy_status_.ok()) return sy_status_;      \
  } while (0)
