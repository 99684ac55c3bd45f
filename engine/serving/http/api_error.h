// An error answer of the OpenAI-compatible API: the HTTP status and OpenAI's error body
// {"error": {"message", "type", "param", "code"}}, so that clients written for OpenAI (and vLLM)
// show the message and the field it names.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace sy::http {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault; empty: none
  std::string code;   // a machine-readable reason (e.g. "queue_full"); empty: none

  nlohmann::json body() const;

  // 400: `param` is missing, of the wrong type or out of range; the message names it.
  static ApiError bad_field(const std::string& param, const std::string& message);
  static ApiError not_found(const std::string& message, const std::string& code);
  // 429 or 503 with the coordinator's reason.
  static ApiError overloaded(int status, const std::string& message, const std::string& code);
  static ApiError unauthorized();
};

}  // namespace sy::http
