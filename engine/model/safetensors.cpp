// The safetensors format: 8-byte little-endian header length N, N bytes of JSON header
// ({name: {dtype, shape, data_offsets}, "__metadata__": {...}}), then the data section.
#include "engine/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"

namespace sy {

using nlohmann::json;

const char* safetensors_dtype_name(kernels::DType dtype) {
  switch (dtype) {
    case kernels::DType::F32: return "F32";
    case kernels::DType::F16: return "F16";
    case kernels::DType::BF16: return "BF16";
  }
  return "?";
}

namespace {

// The safetensors format's dtypes of whole bytes, and their element sizes; those the kernels
// compute with map to a kernels::DType.
struct DtypeSpec {
  const char* name;
  std::size_t size;
  bool computable;
  kernels::DType dtype;
};
constexpr DtypeSpec kDtypes[] = {
    {"F32", 4, true, kernels::DType::F32},   {"F16", 2, true, kernels::DType::F16},
    {"BF16", 2, true, kernels::DType::BF16}, {"F64", 8, false, {}},
    {"F8_E4M3", 1, false, {}},               {"F8_E5M2", 1, false, {}},
    {"F8_E8M0", 1, false, {}},               {"C64", 8, false, {}},
    {"BOOL", 1, false, {}},                  {"U8", 1, false, {}},
    {"I8", 1, false, {}},                    {"U16", 2, false, {}},
    {"I16", 2, false, {}},                   {"U32", 4, false, {}},
    {"I32", 4, false, {}},                   {"U64", 8, false, {}},
    {"I64", 8, false, {}},
};

const DtypeSpec* find_dtype(const std::string& name) {
  for (const DtypeSpec& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

std::string dtype_list() {
  std::string s;
  for (const DtypeSpec& d : kDtypes) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Product of the dims times `elem`, or false when it exceeds `limit` (no overflow).
bool checked_bytes(const std::vector<std::int64_t>& shape, std::size_t elem, std::uint64_t limit, std::uint64_t* out) {
  std::uint64_t n = elem;
  for (std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (u != 0 && n > limit / u) return false;
    n *= u;
  }
  *out = n;
  return true;
}

bool read_u64_list(const json& v, std::size_t expect, std::vector<std::uint64_t>* out) {
  if (!v.is_array()) return false;
  if (expect && v.size() != expect) return false;
  out->clear();
  for (const json& e : v) {
    if (!e.is_number_integer()) return false;
    if (!e.is_number_unsigned() && e.get<std::int64_t>() < 0) return false;
    out->push_back(e.get<std::uint64_t>());
  }
  return true;
}

std::string errno_text() { return std::strerror(errno); }

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<std::map<std::string, TensorInfo>> parse_safetensors(const unsigned char* bytes, std::uint64_t file_size,
                                                              const std::filesystem::path& path) {
  const std::string p = path.string();
  if (file_size < 8) {
    return Status::Error(p + " is truncated: " + std::to_string(file_size) +
                         " bytes, shorter than the 8-byte safetensors header length");
  }

  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > file_size - 8) {
    return Status::Error(p + " is truncated or not a safetensors file: its header length field says " +
                         std::to_string(header_len) + " bytes but only " + std::to_string(file_size - 8) +
                         " bytes follow it");
  }
  const char* header_begin = reinterpret_cast<const char*>(bytes + 8);
  auto parsed = parse_json(std::string_view(header_begin, header_len));
  if (!parsed.ok()) return Status::Error("the header of " + p + " is not valid JSON: " + parsed.status().message());
  const json header = std::move(parsed).value();
  if (!header.is_object()) return Status::Error("the header of " + p + " is not a JSON object");

  const std::uint64_t data_start = 8 + header_len;
  const std::uint64_t data_size = file_size - data_start;
  struct Range {
    std::uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;
  std::map<std::string, TensorInfo> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string where = "tensor '" + name + "' in " + p;
    if (!entry.is_object()) return Status::Error(where + ": header entry is not an object");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!entry.contains(key)) return Status::Error(where + ": header entry has no '" + key + "'");
    if (!entry["dtype"].is_string()) return Status::Error(where + ": 'dtype' is not a string");
    TensorInfo info;
    info.name = name;
    info.file = path;
    const std::string dtype = entry["dtype"].get<std::string>();
    const DtypeSpec* spec = find_dtype(dtype);
    if (spec == nullptr) {
      return Status::Error("unknown dtype '" + dtype + "' for tensor '" + name + "' in " + p +
                           " (the safetensors dtypes: " + dtype_list() + ")");
    }
    info.dtype_name = dtype;
    info.element_size = spec->size;
    info.computable = spec->computable;
    info.dtype = spec->dtype;
    std::vector<std::uint64_t> dims, offsets;
    if (!read_u64_list(entry["shape"], 0, &dims))
      return Status::Error(where + ": 'shape' is not a list of non-negative integers: " + entry["shape"].dump());
    for (std::uint64_t d : dims) {
      if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        return Status::Error(where + ": 'shape' dimension out of range: " + entry["shape"].dump());
      info.shape.push_back(static_cast<std::int64_t>(d));
    }
    if (!read_u64_list(entry["data_offsets"], 2, &offsets) || offsets[0] > offsets[1]) {
      return Status::Error(where + ": 'data_offsets' must be [begin, end] with 0 <= begin <= end, got " +
                           entry["data_offsets"].dump());
    }
    const std::uint64_t begin = offsets[0], end = offsets[1];
    if (end > data_size) {
      return Status::Error(where + " is truncated: data_offsets [" + std::to_string(begin) + ", " +
                           std::to_string(end) + "] reach beyond the " + std::to_string(data_size) +
                           " data bytes in the file");
    }
    const std::size_t elem = spec->size;
    std::uint64_t expected = 0;
    const bool fits = checked_bytes(info.shape, elem, std::numeric_limits<std::uint64_t>::max(), &expected);
    if (!fits || expected != end - begin) {
      return Status::Error(where + ": shape " + shape_string(info.shape) + " of " + dtype + " needs " +
                           (fits ? std::to_string(expected) : std::string("more than 2^64")) +
                           " bytes but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                           "] hold " + std::to_string(end - begin));
    }
    if ((data_start + begin) % elem != 0) {
      return Status::Error(where + " starts at byte " + std::to_string(data_start + begin) +
                           " of the file, not a multiple of its element size " + std::to_string(elem));
    }
    info.data = bytes + data_start + begin;
    info.nbytes = static_cast<std::size_t>(end - begin);
    auto [it, inserted] = tensors.emplace(name, std::move(info));
    (void)inserted;  // JSON object keys are unique after parsing
    ranges.push_back({begin, end, &it->first});
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;
    if (prev != nullptr && r.begin < prev->end) {
      return Status::Error("tensors '" + *prev->name + "' and '" + *r.name + "' in " + p +
                           " overlap (data_offsets [" + std::to_string(prev->begin) + ", " +
                           std::to_string(prev->end) + "] and [" + std::to_string(r.begin) + ", " +
                           std::to_string(r.end) + "])");
    }
    prev = &r;
  }
  return tensors;
}

StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::filesystem::path& path) {
  const std::string p = path.string();
  // Non-blocking: opening a FIFO would otherwise wait for a writer; it is refused below.
  const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::Error("safetensors file " + p + " does not exist");
    return Status::Error("cannot open " + p + ": " + errno_text());
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = errno_text();
    ::close(fd);
    return Status::Error("cannot stat " + p + ": " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Error(p + " is not a regular file");
  }
  const auto file_size = static_cast<std::uint64_t>(st.st_size);
  if (file_size < 8) {  // nothing to map; the parser names the problem
    ::close(fd);
    const unsigned char none[8] = {};
    return parse_safetensors(none, file_size, path).status();
  }
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string map_err = errno_text();
  ::close(fd);
  if (map == MAP_FAILED) return Status::Error("cannot memory-map " + p + ": " + map_err);

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = file_size;
  auto tensors = parse_safetensors(static_cast<const unsigned char*>(map), file_size, path);
  if (!tensors.ok()) return tensors.status();
  file->tensors_ = std::move(tensors).value();
  return file;
}

namespace {

// Closes and removes the temporary file unless released.
struct TempFile {
  std::FILE* f = nullptr;
  std::filesystem::path path;
  bool keep = false;
  ~TempFile() {
    if (f != nullptr) std::fclose(f);
    if (!keep) {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }
};

Status write_impl(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                  const TensorFiller* fill) {
  const std::string p = path.string();
  // Data order: wider elements first, then by name (the order the safetensors library uses), so
  // every tensor starts at a multiple of its element size and the data section has no holes.
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const std::size_t ea = kernels::dtype_size(tensors[a].dtype), eb = kernels::dtype_size(tensors[b].dtype);
    return ea != eb ? ea > eb : tensors[a].name < tensors[b].name;
  });

  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::uint64_t> nbytes(tensors.size());
  std::uint64_t offset = 0;
  std::set<std::string> names;
  for (std::size_t i : order) {
    const TensorToWrite& t = tensors[i];
    if (t.name.empty() || t.name == "__metadata__")
      return Status::Error("cannot write " + p + ": invalid tensor name '" + t.name + "'");
    if (!names.insert(t.name).second)
      return Status::Error("cannot write " + p + ": tensor '" + t.name + "' given twice");
    std::uint64_t n = kernels::dtype_size(t.dtype);
    for (std::int64_t d : t.shape) {
      if (d < 0) return Status::Error("cannot write " + p + ": tensor '" + t.name + "' has a negative dimension");
      n *= static_cast<std::uint64_t>(d);
    }
    if (fill == nullptr && n > 0 && t.data == nullptr)
      return Status::Error("cannot write " + p + ": tensor '" + t.name + "' has no data");
    nbytes[i] = n;
    header[t.name] = {{"dtype", safetensors_dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');

  TempFile tmp;
  tmp.path = path;
  tmp.path += ".tmp";
  tmp.f = std::fopen(tmp.path.string().c_str(), "wb");
  if (tmp.f == nullptr) return Status::Error("cannot create " + tmp.path.string() + ": " + errno_text());
  auto put = [&](const void* data, std::size_t n) -> Status {
    if (n > 0 && std::fwrite(data, 1, n, tmp.f) != n)
      return Status::Error("cannot write " + tmp.path.string() + ": " + errno_text());
    return Status::Ok();
  };
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * i));
  SY_RETURN_IF_ERROR(put(len, sizeof len));
  SY_RETURN_IF_ERROR(put(text.data(), text.size()));
  std::vector<unsigned char> buffer;
  for (std::size_t i : order) {
    if (fill == nullptr) {
      SY_RETURN_IF_ERROR(put(tensors[i].data, nbytes[i]));
    } else {
      buffer.assign(nbytes[i], 0);
      SY_RETURN_IF_ERROR((*fill)(i, buffer.data(), buffer.size()));
      SY_RETURN_IF_ERROR(put(buffer.data(), buffer.size()));
    }
  }
  if (std::fflush(tmp.f) != 0 || ::fsync(::fileno(tmp.f)) != 0)
    return Status::Error("cannot write " + tmp.path.string() + ": " + errno_text());
  const int rc = std::fclose(tmp.f);
  tmp.f = nullptr;
  if (rc != 0) return Status::Error("cannot write " + tmp.path.string() + ": " + errno_text());
  std::error_code ec;
  std::filesystem::rename(tmp.path, path, ec);
  if (ec) return Status::Error("cannot rename " + tmp.path.string() + " to " + p + ": " + ec.message());
  tmp.keep = true;
  return Status::Ok();
}

}  // namespace

Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors) {
  return write_impl(path, tensors, nullptr);
}

Status write_safetensors_streamed(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                                  const TensorFiller& fill) {
  return write_impl(path, tensors, &fill);
}

}  // namespace sy
