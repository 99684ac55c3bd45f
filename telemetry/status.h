// Status and StatusOr: how errors users can cause (files, endpoints, messages, layouts,
// commands) travel back with a message naming the thing and the problem. They live here
// because the telemetry library depends on nothing else of ours; the engine uses the same type.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace sy::telemetry {

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

}  // namespace sy::telemetry
