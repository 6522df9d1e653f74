// The input encoding of the IDX reader fuzz target (idx_reader_fuzz.cpp), shared with the seed
// generator (make_reader_corpus.cpp) so that both agree:
//
//   byte 0 & 3   the dimensions the harness asks read_idx_ubyte for, minus one (1..4)
//   byte 0 & 4   the harness gzips the rest before writing the file; else the rest is the file
//   byte 1..     the payload
//
// Thread-safety: constants and pure functions.
#pragma once

#include <string>

namespace tenax::sdk::fuzz {

inline constexpr unsigned kIdxGzipBit = 4;

/// An input asking for `dimensions` (1..4) over `payload`, gzipped by the harness or not.
inline std::string encode_idx_input(int dimensions, bool gzip_payload, const std::string& payload) {
  std::string out(1, static_cast<char>((dimensions - 1) | (gzip_payload ? kIdxGzipBit : 0)));
  return out + payload;
}

}  // namespace tenax::sdk::fuzz
