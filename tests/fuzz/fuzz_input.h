// The input encoding of the checkpoint reader fuzz target (checkpoint_reader_fuzz.cpp), shared
// with the seed corpus generator (make_corpus.cpp) so that both agree byte for byte.
//
// An input is one mode byte followed by a payload:
//
//   byte 0 % 4   payload
//   0 kManifest          manifest.json text               → parse_manifest
//   1 kShardInfo         ShardInfo JSON (rank → rank 0)   → shard_info_from_json
//   2 kRawCheckpoint     manifest text, then each shard file's bytes, separated by
//                        kShardSeparator                  → CheckpointReader as the bytes are
//   3 kSealedCheckpoint  as 2, but the harness first rewrites each listed shard's "bytes" and
//                        "checksum" to match the fuzzed shard bytes, so they pass the
//                        whole-file gate and reach the HDF5 reading code
//
// Thread-safety: constants and a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tenax::storage::fuzz {

enum class FuzzMode : std::uint8_t {
  kManifest = 0,
  kShardInfo = 1,
  kRawCheckpoint = 2,
  kSealedCheckpoint = 3,
};
inline constexpr int kModeCount = 4;

/// Separates the manifest text and the shard files in the checkpoint modes. Valid JSON cannot
/// contain it unescaped outside a string, and an HDF5 shard of ours never does.
inline constexpr std::string_view kShardSeparator = "\n--tenax-fuzz-shard--\n";

/// Shards beyond this many are not split off (the rest stays in the last one).
inline constexpr std::size_t kMaxShards = 4;

/// The input the harness decodes into (mode, manifest, shards).
inline std::string encode_input(FuzzMode mode, const std::string& text, const std::vector<std::string>& shards = {}) {
  std::string out(1, static_cast<char>(mode));
  out += text;
  for (const std::string& shard : shards) {
    out += kShardSeparator;
    out += shard;
  }
  return out;
}

}  // namespace tenax::storage::fuzz
