// Helpers shared by the model-loading tests: a per-test temporary directory, raw file writing
// and a check that a Status failed with a message naming the right things.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy::testing_util {

// A fresh directory for one test, removed with everything in it afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? std::string(info->test_suite_name()) + "." + info->name() : "test";
    for (char& ch : name)
      if (ch == '/') ch = '_';
    path_ = std::filesystem::temp_directory_path() /
            ("sy_model_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++) + "_" + name);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

inline void write_file(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A safetensors file from a header text and a data section; the header is padded with spaces
// so the data starts 8-byte aligned, unless `pad` is false (then it is used verbatim).
inline std::string raw_safetensors(std::string header, const std::string& data, bool pad = true) {
  while (pad && (8 + header.size()) % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  const std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

// Passes when `status` is an error whose message contains every one of `parts`.
inline ::testing::AssertionResult FailsWith(const Status& status, std::initializer_list<std::string> parts) {
  if (status.ok()) return ::testing::AssertionFailure() << "expected an error, got OK";
  for (const std::string& part : parts) {
    if (status.message().find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "error message \"" << status.message() << "\" does not contain \""
                                           << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

template <class T>
::testing::AssertionResult FailsWith(const StatusOr<T>& result, std::initializer_list<std::string> parts) {
  if (result.ok()) return ::testing::AssertionFailure() << "expected an error, got a value";
  return FailsWith(result.status(), parts);
}

}  // namespace sy::testing_util
