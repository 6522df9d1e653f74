// XXH3-64 checksums (libxxhash), streaming and one-shot. Thread-safety: Xxh3 is not
// shareable between threads; the free function is stateless.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tenax {

/// XXH3-64 of a byte range (seed 0).
std::uint64_t xxh3_64(const void* data, std::size_t size);

/// 16 lowercase hex digits, as stored in manifests and HDF5 attributes.
std::string checksum_hex(std::uint64_t checksum);

/// Streaming XXH3-64 for data that arrives in pieces.
class Xxh3 {
 public:
  Xxh3();
  ~Xxh3();
  Xxh3(const Xxh3&) = delete;
  Xxh3& operator=(const Xxh3&) = delete;
  void update(const void* data, std::size_t size);
  std::uint64_t digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tenax
