#include "tensorboard/tfrecord.h"

#include "tensorboard/crc32c.h"

namespace tenax::sdk::tensorboard {
namespace {

void put_le(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

std::uint32_t mask_crc(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string frame_record(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, mask_crc(crc32c(out.data(), 8)), 4);
  out.append(payload);
  put_le(out, mask_crc(crc32c(payload)), 4);
  return out;
}

}  // namespace tenax::sdk::tensorboard
