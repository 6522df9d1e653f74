#include "tenax/core/checksum.h"

#include <string>

#include <gtest/gtest.h>

namespace tenax {
namespace {

TEST(CoreChecksum, StreamingEqualsOneShotAndDetectsAFlippedBit) {
  std::string data(100000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 31);
  const auto whole = xxh3_64(data.data(), data.size());
  Xxh3 stream;
  stream.update(data.data(), 777);
  stream.update(data.data() + 777, data.size() - 777);
  EXPECT_EQ(stream.digest(), whole);
  data[5000] ^= 1;
  EXPECT_NE(xxh3_64(data.data(), data.size()), whole);
  EXPECT_EQ(checksum_hex(0x1234).size(), 16u);
  EXPECT_EQ(checksum_hex(0x1234), "0000000000001234");
}

TEST(CoreChecksum, KnownValueOfEmptyInput) {
  // XXH3-64 of the empty input with seed 0 (xxHash's reference value).
  EXPECT_EQ(xxh3_64("", 0), 0x2D06800538D394C2ull);
}

}  // namespace
}  // namespace tenax
