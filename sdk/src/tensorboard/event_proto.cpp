#include "tensorboard/event_proto.h"

#include <cstring>

namespace tenax::sdk::tensorboard {
namespace {

// Protobuf wire types.
constexpr std::uint32_t kVarint = 0;
constexpr std::uint32_t kFixed64 = 1;
constexpr std::uint32_t kLengthDelimited = 2;
constexpr std::uint32_t kFixed32 = 5;

void put_varint(std::string& out, std::uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, std::uint32_t field, std::uint32_t wire_type) {
  put_varint(out, (field << 3) | wire_type);
}

void put_fixed(std::string& out, std::uint64_t bits, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

void put_bytes_field(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// wall_time and step: proto3 scalars without presence, omitted when zero. For a double,
// protobuf tests the bit pattern, so -0.0 is written and +0.0 is not.
void put_header(std::string& out, double wall_time, std::int64_t step) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &wall_time, sizeof bits);
  if (bits != 0) {
    put_key(out, 1, kFixed64);
    put_fixed(out, bits, 8);
  }
  if (step != 0) {
    put_key(out, 2, kVarint);
    put_varint(out, static_cast<std::uint64_t>(step));  // negative: ten bytes, as protobuf's int64
  }
}

}  // namespace

std::string encode_file_version_event(double wall_time, std::string_view source_writer) {
  std::string event;
  put_header(event, wall_time, 0);
  put_bytes_field(event, 3, kFileVersion);
  if (!source_writer.empty()) {
    std::string source_metadata;
    put_bytes_field(source_metadata, 1, source_writer);
    put_bytes_field(event, 10, source_metadata);
  }
  return event;
}

std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
  std::string summary_value;
  if (!tag.empty()) put_bytes_field(summary_value, 1, tag);
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(summary_value, 2, kFixed32);
  put_fixed(summary_value, bits, 4);

  std::string summary;
  put_bytes_field(summary, 1, summary_value);

  std::string event;
  put_header(event, wall_time, step);
  put_bytes_field(event, 5, summary);
  return event;
}

}  // namespace tenax::sdk::tensorboard
