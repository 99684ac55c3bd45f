// Status and StatusOr for the engine: the telemetry library's (telemetry depends on nothing of
// ours, the engine depends on telemetry), so both report errors with one type.
#pragma once

#include "telemetry/status.h"

namespace sy {

using telemetry::Status;
using telemetry::StatusOr;

}  // namespace sy

// Returns early from the enclosing function when `expr` (a Status) is an error.
#define SY_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::sy::Status sy_status_ = (expr);             \
    if (!sy_status_.ok()) return sy_status_;      \
  } while (0)
