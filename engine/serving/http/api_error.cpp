#include "engine/serving/http/api_error.h"

namespace sy::http {

nlohmann::json ApiError::body() const {
  const auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", message}, {"type", type}, {"param", or_null(param)}, {"code", or_null(code)}}}};
}

ApiError ApiError::bad_field(const std::string& param, const std::string& message) {
  return ApiError{400, message, "invalid_request_error", param, {}};
}

ApiError ApiError::not_found(const std::string& message, const std::string& code) {
  return ApiError{404, message, "invalid_request_error", {}, code};
}

ApiError ApiError::overloaded(int status, const std::string& message, const std::string& code) {
  // OpenAI answers an overloaded service with these types; clients retry on 429 and 503.
  return ApiError{status, message, status == 429 ? "rate_limit_error" : "service_unavailable_error", {}, code};
}

ApiError ApiError::unauthorized() {
  return ApiError{401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                  "authentication_error", {}, "invalid_api_key"};
}

}  // namespace sy::http
