// Tells apart crashes of libhdf5 itself from crashes of Tenax code, for the sealed-checkpoint
// mode of the fuzz target.
//
// Sealed inputs hand damaged HDF5 metadata to libhdf5 on purpose, and Debian's libhdf5 1.10.8
// crashes on some of them no matter what the caller does (h5ls crashes on the same files; see
// README.md, "Findings"). In production the whole-file checksum keeps such files away from
// HDF5. So that a fuzz run can go on measuring Tenax's code, the harness first replays, in a
// forked child that runs no Tenax code, the HDF5 calls CheckpointReader will make on the
// shards (same calls, same order, same arguments). Only when that child dies is the input
// skipped; anything else runs through the real reader, where every crash is a finding.
//
// Thread-safety: forks; call from one thread only (libFuzzer's and the replay's).
#pragma once

#include <filesystem>

#include "tenax/storage/manifest.h"

namespace tenax::storage::fuzz {

enum class ProbeResult {
  kSurvived,  ///< libhdf5 returned from every call (successfully or not)
  kCrashed,   ///< the child was killed by a signal or a sanitizer inside libhdf5
  kHung,      ///< the child did not finish within the probe's time limit
};

/// Replays CheckpointReader's HDF5 calls for every tensor of `manifest` (verify_all's order,
/// then once more, as the harness reads every tensor again) on the shards in `step_dir`.
ProbeResult probe_hdf5(const std::filesystem::path& step_dir, const Manifest& manifest);

}  // namespace tenax::storage::fuzz
