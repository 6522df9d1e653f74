// A reader of TensorBoard event files for the tests, written apart from the code under test:
// TFRecord framing with both CRCs checked (with the CRC-32C whose check values are tested on
// their own), and a minimal protobuf decoder of scalar Events.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tensorboard/crc32c.h"
#include "tensorboard/tfrecord.h"

namespace tenax::sdk::testing {

// Splits a file into TFRecord payloads, checking lengths and both masked CRCs.
inline std::vector<std::string> records_of(const std::string& file) {
  std::vector<std::string> out;
  std::size_t at = 0;
  auto le = [&](std::size_t pos, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(file[pos + i])) << (8 * i);
    return v;
  };
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size());
    if (at + 12 > file.size()) break;
    const std::uint64_t length = le(at, 8);
    EXPECT_EQ(le(at + 8, 4), tensorboard::mask_crc(tensorboard::crc32c(file.data() + at, 8)))
        << "length CRC at byte " << at;
    EXPECT_LE(at + 12 + length + 4, file.size());
    if (at + 12 + length + 4 > file.size()) break;
    std::string payload = file.substr(at + 12, length);
    EXPECT_EQ(le(at + 12 + length, 4), tensorboard::mask_crc(tensorboard::crc32c(payload)))
        << "payload CRC at byte " << at;
    out.push_back(std::move(payload));
    at += 12 + length + 4;
  }
  return out;
}

// The tag, step and value of a scalar Event, read with a minimal protobuf decoder of its own
// (not the encoder under test).
struct Scalar {
  std::string tag;
  std::int64_t step = 0;
  float value = 0;
};

inline std::uint64_t varint(const std::string& s, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    const auto byte = static_cast<unsigned char>(s.at(at++));
    v |= std::uint64_t(byte & 0x7F) << shift;
    if (!(byte & 0x80)) return v;
  }
}

// Calls visit(field, wire_type, at, length) for each field of a message.
template <typename Visit>
void fields(const std::string& msg, Visit visit) {
  std::size_t at = 0;
  while (at < msg.size()) {
    const std::uint64_t key = varint(msg, at);
    const int wire = static_cast<int>(key & 7);
    const std::size_t length = wire == 0 ? 0 : wire == 1 ? 8 : wire == 5 ? 4 : varint(msg, at);
    const std::size_t start = at;
    if (wire == 0) {
      varint(msg, at);
    } else {
      at += length;
    }
    visit(static_cast<int>(key >> 3), msg.substr(start, at - start));
  }
}

inline Scalar decode_scalar(const std::string& event) {
  Scalar s;
  fields(event, [&](int field, const std::string& bytes) {
    if (field == 2) {
      std::size_t at = 0;
      s.step = static_cast<std::int64_t>(varint(bytes, at));
    }
    if (field != 5) return;
    fields(bytes, [&](int, const std::string& value) {
      fields(value, [&](int f, const std::string& b) {
        if (f == 1) s.tag = b;
        if (f == 2) std::memcpy(&s.value, b.data(), 4);
      });
    });
  });
  return s;
}

}  // namespace tenax::sdk::testing
