// The manifest of one committed checkpoint: what was saved, where each tensor lives and how to
// verify it (DESIGN.md 5). manifest.json is written last, by rank 0; its presence is the commit.
//
// parse_manifest treats its input as untrusted: it never crashes or throws on arbitrary bytes
// and reports every inconsistency as kDataLoss naming the file and key.
//
// Thread-safety: plain values and pure functions.
//
//   Manifest m = make_manifest(step, epoch, generation, shard_infos_in_rank_order);
//   m.trainer_state = {{"global_step", step}};
//   std::string text = manifest_to_string(m);
//   auto back = parse_manifest(text, "step-000000500/manifest.json");
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/storage/shard_writer.h"

namespace tenax::storage {

/// The only manifest format version this build reads and writes.
inline constexpr int kManifestFormatVersion = 1;

/// One shard file as listed in the manifest.
struct ShardSummary {
  std::string file;            ///< file name inside the step directory
  std::uint64_t bytes = 0;     ///< exact file size
  std::uint64_t checksum = 0;  ///< XXH3-64 of the whole file
};

/// Everything manifest.json records.
struct Manifest {
  int format_version = kManifestFormatVersion;              ///< only 1 exists
  std::int64_t step = 0;                                    ///< global step saved
  std::int64_t epoch = 0;                                   ///< epoch at the save
  int world_size = 1;                                       ///< ranks that wrote (one shard each)
  std::int64_t generation = 0;                              ///< elastic generation that wrote it
  std::vector<ShardSummary> shards;                         ///< in rank order
  std::map<std::string, IndexEntry> tensors;                ///< tensor name → location and checksum
  nlohmann::json trainer_state = nlohmann::json::object();  ///< opaque to storage/
  nlohmann::json arguments = nlohmann::json::object();      ///< the run's options, opaque
};

/// Builds a manifest from every rank's ShardInfo (world_size = shards.size(), which must be
/// >= 1). Throws StorageError when a tensor name appears in two shards or a shard file name
/// repeats.
Manifest make_manifest(std::int64_t step, std::int64_t epoch, std::int64_t generation,
                       const std::vector<ShardInfo>& shards_in_rank_order);

/// Pretty-printed JSON; checksums as 16-hex strings.
std::string manifest_to_string(const Manifest& manifest);

/// Sets `root`'s content_checksum to match the rest of its content, as manifest_to_string
/// does. For tools that edit a manifest on purpose (tests, the fuzz harness).
void seal_manifest(nlohmann::json& root);

/// Parses and validates untrusted manifest text. `where` (usually the file path) starts
/// every error message. Unknown format_version → "written by a newer Tenax". All errors are
/// kDataLoss.
[[nodiscard]] StatusOr<Manifest> parse_manifest(const std::string& text, const std::string& where);

}  // namespace tenax::storage
