#include "telemetry/endpoint.h"

#include <string>

namespace sy::telemetry {

bool is_loopback_endpoint(std::string_view endpoint) {
  if (endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://")) return true;
  if (!endpoint.starts_with("tcp://")) return false;
  std::string_view rest = endpoint.substr(6);
  // A connect-style "source;destination" pair is not something we listen on.
  if (rest.find(';') != std::string_view::npos) return false;
  if (rest.starts_with("[::1]:")) return true;
  const auto colon = rest.rfind(':');
  if (colon == std::string_view::npos) return false;
  const std::string_view host = rest.substr(0, colon);
  if (host == "localhost") return true;
  // 127.0.0.0/8, written as a dotted quad of decimal numbers.
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  int digits = 0;
  for (char c : host) {
    if (c == '.') {
      if (digits == 0) return false;
      ++dots;
      digits = 0;
    } else if (c >= '0' && c <= '9') {
      if (++digits > 3) return false;
    } else {
      return false;
    }
  }
  return dots == 3 && digits > 0;
}

bool has_zmq_transport(std::string_view endpoint) {
  return endpoint.starts_with("tcp://") || endpoint.starts_with("ipc://") || endpoint.starts_with("inproc://");
}

std::string zmq_bind_endpoint(std::string endpoint) {
  if (endpoint.starts_with("tcp://") && endpoint.ends_with(":0")) endpoint.replace(endpoint.size() - 1, 1, "*");
  return endpoint;
}

Status check_listen_endpoint(std::string_view what, std::string_view endpoint, bool have_curve_keys, bool insecure) {
  if (have_curve_keys || insecure || is_loopback_endpoint(endpoint)) return Status::Ok();
  return Status::Error("refusing to listen for " + std::string(what) + " on " + std::string(endpoint) +
                       " without CURVE keys: it is reachable from other machines. Pass --keys DIR (made by "
                       "`switchyard keys --out DIR`), or --insecure to accept any client");
}

}  // namespace sy::telemetry
