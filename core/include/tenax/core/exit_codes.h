// The exit codes of Tenax processes, shared by the launcher and worker programs (DESIGN.md 3).
// Thread-safety: constants.
#pragma once

namespace tenax {

inline constexpr int kExitDone = 0;       ///< finished
inline constexpr int kExitFailure = 1;    ///< failed (restart budget spent, unrecoverable error)
inline constexpr int kExitUsage = 2;      ///< usage or configuration error: a restart cannot fix it
inline constexpr int kExitPreempted = 3;  ///< preempted: checkpoint saved, requeue me

}  // namespace tenax
