// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | payload |
//   uint32 masked_crc32c(payload)
// with all integers little-endian. Thread-safety: stateless.
//
//   file.append(tenax::sdk::tensorboard::frame_record(event_bytes));
//
// Private to the SDK (under sdk/src: not installed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tenax::sdk::tensorboard {

/// TFRecord's masking of a CRC ((crc >> 15) | (crc << 17)) + 0xa282ead8, which keeps a CRC
/// stored inside checksummed data from checksumming to a fixed value.
std::uint32_t mask_crc(std::uint32_t crc);

/// The framed record holding `payload`.
std::string frame_record(std::string_view payload);

}  // namespace tenax::sdk::tensorboard
