// The wire protocol between ZmqStoreClient (DEALER) and KvService (ROUTER).
//
// A request is a multipart message: a 17-byte header [op:u8][request id:u64][timeout ms:i64]
// (integers little-endian), then the op's frames:
//   PING                         → OK                 (connect check)
//   SET  key value               → OK
//   GET  key                     → VALUE value, or NOT_FOUND key when `timeout` passes first
//                                  (the service parks the request until the key exists)
//   ADD  key delta:i64           → VALUE new:i64
//   WAIT key...                  → OK, or NOT_FOUND missing-key... when `timeout` passes
// A reply is a 9-byte header [status:u8][request id:u64], then the status's frames; ERROR
// carries one frame of text. The request id lets a client drop a late reply to a request it
// has already given up on.
// The ROUTER adds/strips the routing-id frame; no empty delimiter frame is used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tenax::elastic::detail {

enum class KvOp : std::uint8_t { kPing = 1, kSet = 2, kGet = 3, kAdd = 4, kWait = 5 };
enum class KvStatus : std::uint8_t { kOk = 0, kValue = 1, kNotFound = 2, kError = 3 };

inline constexpr std::size_t kRequestHeaderSize = 17;
inline constexpr std::size_t kReplyHeaderSize = 9;

inline void put_u64(char* out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

inline std::uint64_t get_u64(const char* in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

inline std::string encode_i64(std::int64_t v) {
  std::string out(8, '\0');
  put_u64(out.data(), static_cast<std::uint64_t>(v));
  return out;
}

struct RequestHeader {
  KvOp op = KvOp::kPing;
  std::uint64_t request_id = 0;
  std::int64_t timeout_ms = 0;

  std::string encode() const {
    std::string out(kRequestHeaderSize, '\0');
    out[0] = static_cast<char>(op);
    put_u64(out.data() + 1, request_id);
    put_u64(out.data() + 9, static_cast<std::uint64_t>(timeout_ms));
    return out;
  }
  /// False when `bytes` is not a request header.
  bool decode(const void* bytes, std::size_t size) {
    if (size != kRequestHeaderSize) return false;
    const char* p = static_cast<const char*>(bytes);
    op = static_cast<KvOp>(p[0]);
    request_id = get_u64(p + 1);
    timeout_ms = static_cast<std::int64_t>(get_u64(p + 9));
    return true;
  }
};

struct ReplyHeader {
  KvStatus status = KvStatus::kOk;
  std::uint64_t request_id = 0;

  std::string encode() const {
    std::string out(kReplyHeaderSize, '\0');
    out[0] = static_cast<char>(status);
    put_u64(out.data() + 1, request_id);
    return out;
  }
  bool decode(const void* bytes, std::size_t size) {
    if (size != kReplyHeaderSize) return false;
    const char* p = static_cast<const char*>(bytes);
    status = static_cast<KvStatus>(p[0]);
    request_id = get_u64(p + 1);
    return true;
  }
};

}  // namespace tenax::elastic::detail
