// How one collective checkpoint save ended, the same on every rank: one enum from the commit
// protocol (sdk/src/commit_protocol.h) through the Checkpointer (SaveResult) to the Trainer,
// which decides on it (Trainer::report_save).
// Thread-safety: plain values.
#pragma once

#include <cstdint>

namespace tenax::sdk {

enum class SaveOutcome : std::uint8_t {
  kCommitted,  ///< the checkpoint is committed and `latest` names it
  kFailed,     ///< nothing committed (a rank could not write, a timeout, ...); the previous one is intact
  /// Nothing committed because a newer generation formed: this process is in a stale partition
  /// and must not go on training as if it could save.
  kFenced,
  /// Nothing committed because a peer was lost while this rank waited on it and the agent
  /// recovers in process (the generation was superseded): the training loop heals, not fails.
  kSuperseded,
};

}  // namespace tenax::sdk
