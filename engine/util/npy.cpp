#include "engine/util/npy.h"

#include <cstring>
#include <fstream>
#include <functional>
#include <numeric>
#include <regex>
#include <string>

namespace sy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

}  // namespace

Status write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
                 const float* data) {
  std::string dims;
  for (std::int64_t d : shape) dims += std::to_string(d) + ", ";
  // Python tuple syntax: "(3,)" for 1-D, "(3, 4)" otherwise.
  if (shape.size() == 1) dims.pop_back();
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + '\n' must be a multiple of 64.
  std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');

  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::Error("cannot write " + path.string() + ": " + std::strerror(errno));
    out.write(kMagic, 6);
    const char version[2] = {1, 0};
    out.write(version, 2);
    const std::uint16_t len = static_cast<std::uint16_t>(header.size());
    const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
    out.write(len_bytes, 2);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data),
              static_cast<std::streamsize>(element_count(shape) * static_cast<std::int64_t>(sizeof(float))));
    if (!out.flush()) return Status::Error("cannot write " + path.string() + ": write failed");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::Error("cannot write " + path.string() + ": " + ec.message());
  return Status::Ok();
}

StatusOr<NpyArray> read_npy(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + name + ": " + std::strerror(errno));
  char magic[6];
  unsigned char version[2], len_bytes[2];
  in.read(magic, 6);
  in.read(reinterpret_cast<char*>(version), 2);
  if (!in || std::memcmp(magic, kMagic, 6) != 0) return Status::Error(name + " is not a .npy file");
  std::size_t header_len = 0;
  if (version[0] == 1) {
    in.read(reinterpret_cast<char*>(len_bytes), 2);
    header_len = static_cast<std::size_t>(len_bytes[0] | (len_bytes[1] << 8));
  } else {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = static_cast<std::size_t>(b[0] | (b[1] << 8) | (b[2] << 16)) | (static_cast<std::size_t>(b[3]) << 24);
  }
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) return Status::Error(name + ": truncated .npy header");
  if (header.find("'descr': '<f4'") == std::string::npos)
    return Status::Error(name + ": only little-endian float32 ('<f4') arrays are supported");
  if (header.find("'fortran_order': False") == std::string::npos)
    return Status::Error(name + ": Fortran-order arrays are not supported");
  std::smatch m;
  static const std::regex shape_re(R"('shape':\s*\(([^)]*)\))");
  if (!std::regex_search(header, m, shape_re)) return Status::Error(name + ": no shape in .npy header");
  NpyArray array;
  static const std::regex dim_re(R"(\d+)");
  const std::string dims = m[1].str();
  for (auto it = std::sregex_iterator(dims.begin(), dims.end(), dim_re); it != std::sregex_iterator(); ++it)
    array.shape.push_back(std::stoll(it->str()));
  array.data.resize(static_cast<std::size_t>(element_count(array.shape)));
  in.read(reinterpret_cast<char*>(array.data.data()),
          static_cast<std::streamsize>(array.data.size() * sizeof(float)));
  if (!in) return Status::Error(name + ": data shorter than its shape says");
  return array;
}

}  // namespace sy
