// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing.
// Table-driven, one byte at a time: event files are small, so no hardware path.
// Thread-safety: stateless.
//
//   std::uint32_t c = tenax::sdk::tensorboard::crc32c("123456789", 9);  // 0xE3069283
//
// Private to the SDK (under sdk/src: not installed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tenax::sdk::tensorboard {

/// CRC-32C of a byte range (initial value and final xor 0xFFFFFFFF, as iSCSI and TFRecord).
std::uint32_t crc32c(const void* data, std::size_t size);
/// CRC-32C of a string's bytes.
inline std::uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

}  // namespace tenax::sdk::tensorboard
