#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/util/npy.h"

namespace sy {
namespace {

TEST(Npy, RoundTripKeepsShapeAndValues) {
  const auto path = std::filesystem::temp_directory_path() / "sy_test_npy.npy";
  const std::vector<float> data = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, -1e7f};
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{6}, {2, 3}, {1, 2, 3}}) {
    ASSERT_TRUE(write_npy(path, shape, data.data()).ok());
    auto back = read_npy(path);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(back->shape, shape);
    EXPECT_EQ(back->data, data);
    // The header is padded so the data starts on a 64-byte boundary, as NumPy requires.
    EXPECT_EQ((std::filesystem::file_size(path) - data.size() * 4) % 64, 0u);
  }
  std::filesystem::remove(path);
}

TEST(Npy, RejectsOtherDtypesAndNamesTheFile) {
  const auto path = std::filesystem::temp_directory_path() / "sy_test_npy_f8.npy";
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }";
  header.append(128 - 10 - header.size() - 1, ' ');  // magic+version+length+header: 128 bytes
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(header.size()), 0};
  out.write(len, 2);
  out << header << std::string(8, '\0');
  out.close();
  auto r = read_npy(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path.string()), std::string::npos);
  EXPECT_NE(r.status().message().find("<f4"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace sy
