// File and directory names of a checkpoint tree (DESIGN.md 5):
//
//   <output_dir>/checkpoints/
//     step-000000500/              committed (contains manifest.json)
//       manifest.json
//       shard-00000-of-00004.h5
//     .tmp-step-000000600-g3/      being written by generation 3
//     latest                       "step-000000500"
//
// Thread-safety: pure functions and constants.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tenax::storage {

/// Name of the manifest file inside a step directory; its presence marks a commit.
inline constexpr const char* kManifestFile = "manifest.json";
/// Name of the file in the checkpoints root that names the newest committed step directory.
inline constexpr const char* kLatestFile = "latest";

/// "step-000000500" (at least 9 digits). Throws StorageError for a negative step.
std::string step_dir_name(std::int64_t step);
/// ".tmp-step-000000500-g3": where generation 3 writes step 500 before the commit rename.
std::string tmp_dir_name(std::int64_t step, std::int64_t generation);
/// "shard-00000-of-00004.h5". Throws StorageError unless 0 <= rank < world.
std::string shard_file_name(int rank, int world);
/// Inverse of step_dir_name; nullopt for any other (or non-canonical) name.
std::optional<std::int64_t> parse_step_dir_name(const std::string& name);

}  // namespace tenax::storage
