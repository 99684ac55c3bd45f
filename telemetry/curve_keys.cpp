#include "telemetry/curve_keys.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <zmq.h>

namespace sy::telemetry {

CurveKeyPair generate_curve_keypair() {
  char pub[41] = {};
  char sec[41] = {};
  // Fails only when libzmq was built without CURVE (libsodium), which the build rules out.
  if (zmq_curve_keypair(pub, sec) != 0) {
    throw std::runtime_error(std::string("zmq_curve_keypair: ") + zmq_strerror(zmq_errno()));
  }
  return {pub, sec};
}

bool is_valid_curve_key(std::string_view key) {
  if (key.size() != 40) return false;
  std::string text(key);
  std::uint8_t bytes[32];
  return zmq_z85_decode(bytes, text.c_str()) != nullptr;
}

Status write_key_file(const std::filesystem::path& path, const CurveKeyPair& keys, bool include_secret) {
  if (!is_valid_curve_key(keys.public_key)) return Status::Error(path.string() + ": public key is not a Z85 CURVE key");
  if (include_secret && !is_valid_curve_key(keys.secret_key)) {
    return Status::Error(path.string() + ": secret key is not a Z85 CURVE key");
  }
  std::ostringstream text;
  text << "# Switchyard ZeroMQ CURVE " << (include_secret ? "key pair; keep secret" : "public key") << "\n";
  text << "public = \"" << keys.public_key << "\"\n";
  if (include_secret) text << "secret = \"" << keys.secret_key << "\"\n";
  const std::string body = text.str();

  // Written beside the target and renamed over it, created with the final mode: a secret is
  // never readable by others, not even for a moment, and a crash leaves no half-written key.
  const std::filesystem::path tmp = path.string() + ".tmp";
  const mode_t mode = include_secret ? 0600 : 0644;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return Status::Error(tmp.string() + ": cannot create: " + std::strerror(errno));
  bool ok = ::fchmod(fd, mode) == 0;
  std::size_t done = 0;
  while (ok && done < body.size()) {
    const ssize_t n = ::write(fd, body.data() + done, body.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    return Status::Error(path.string() + ": cannot write: " + why);
  }
  return Status::Ok();
}

StatusOr<CurveKeyPair> read_key_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) {
    std::error_code ec;
    return Status::Error(path.string() + (std::filesystem::exists(path, ec) ? ": cannot read" : ": no such file"));
  }
  CurveKeyPair keys;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line_no > 64 || line.size() > 256) return Status::Error(path.string() + ": not a key file (too long)");
    const auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto eq = line.find('=');
    const std::string where = path.string() + ":" + std::to_string(line_no);
    if (eq == std::string::npos) return Status::Error(where + ": expected `public = \"…\"` or `secret = \"…\"`");
    auto trim = [](std::string s) {
      const auto b = s.find_first_not_of(" \t\r");
      const auto e = s.find_last_not_of(" \t\r");
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    const std::string name = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() < 2 || value.front() != '"' || value.back() != '"') {
      return Status::Error(where + ": the value of '" + name + "' must be in double quotes");
    }
    value = value.substr(1, value.size() - 2);
    if (name != "public" && name != "secret") return Status::Error(where + ": unknown key '" + name + "'");
    if (!is_valid_curve_key(value)) {
      return Status::Error(where + ": '" + name + "' is not a CURVE key (40 characters of Z85)");
    }
    (name == "public" ? keys.public_key : keys.secret_key) = value;
  }
  if (keys.public_key.empty()) return Status::Error(path.string() + ": no `public = \"…\"` line");
  return keys;
}

StatusOr<CurveClientKeys> load_client_keys(const std::filesystem::path& dir, std::string_view client_name) {
  auto server = read_key_file(dir / kServerPublicFile);
  if (!server.ok()) return server.status();
  const std::filesystem::path client_path = dir / (std::string(client_name) + ".key");
  auto client = read_key_file(client_path);
  if (!client.ok()) return client.status();
  if (client->secret_key.empty()) return Status::Error(client_path.string() + ": holds no secret key");
  return CurveClientKeys{server->public_key, *client};
}

}  // namespace sy::telemetry
