#include "tenax/core/checksum.h"

#include <cstdio>

#include <xxhash.h>

#include "tenax/core/error.h"

namespace tenax {

std::uint64_t xxh3_64(const void* data, std::size_t size) { return XXH3_64bits(data, size); }

std::string checksum_hex(std::uint64_t checksum) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(checksum));
  return buf;
}

struct Xxh3::State {
  XXH3_state_t* s = nullptr;
};

Xxh3::Xxh3() : state_(std::make_unique<State>()) {
  state_->s = XXH3_createState();
  if (!state_->s || XXH3_64bits_reset(state_->s) != XXH_OK) throw Error("XXH3 state allocation failed");
}

Xxh3::~Xxh3() { XXH3_freeState(state_->s); }

void Xxh3::update(const void* data, std::size_t size) { XXH3_64bits_update(state_->s, data, size); }

std::uint64_t Xxh3::digest() const { return XXH3_64bits_digest(state_->s); }

}  // namespace tenax
