// Opening the STEP_DIR argument of a `tenax ckpt` subcommand, with the exit code its failure
// deserves: 2 (usage) when the path is not a checkpoint at all — missing, not a directory, no
// manifest.json (an uncommitted directory, or the checkpoints root given by mistake) — and 1
// when it is a committed checkpoint that is corrupt. Thread-safety: stateless.
#pragma once

#include <optional>
#include <string>

#include "tenax/storage/checkpoint_reader.h"

namespace tenax::launcher {

/// Opens `step_dir` (manifest parsed and validated, shard sizes checked; no data checksums).
/// On failure prints "tenax ckpt <subcommand>: <path>: <what is wrong>" to stderr, sets
/// `exit_code` and returns nullopt.
std::optional<storage::CheckpointReader> open_step_dir(const std::string& step_dir, const std::string& subcommand,
                                                       int& exit_code);

}  // namespace tenax::launcher
