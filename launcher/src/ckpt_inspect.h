// `tenax ckpt inspect STEP_DIR [--json]`: what one checkpoint holds, for humans (step, epoch,
// world size, generation, format version, shards, a table of tensors sorted by name, totals,
// trainer_state and arguments) or, with --json, manifest.json exactly as stored.
//
// It validates the manifest and the shard sizes but reads no tensor data: `tenax ckpt verify`
// checks the checksums. Exit 0 when shown, 1 for a corrupt checkpoint, 2 when STEP_DIR is not a
// checkpoint. Thread-safety: writes to stdout/stderr; call from one thread.
#pragma once

#include <string>

namespace tenax::launcher {

enum class InspectFormat { kText, kJson };

/// Prints the checkpoint at `step_dir` to stdout; returns the process exit code.
int inspect_checkpoint(const std::string& step_dir, InspectFormat format);

}  // namespace tenax::launcher
