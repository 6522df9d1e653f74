// What this build of Tenax is: its version, the commit it was compiled from (and whether that
// checkout had uncommitted changes), its flavour (cpu: Debian's libtorch; cuda: PyPI's CUDA
// wheel) and the libtorch it links. `tenax --version`, tenax_version() and the first log line of
// every program print version_line(), so a log or a benchmark result names the binaries that
// produced it.
// Thread-safety: constants.
#pragma once

#include <string>

namespace tenax {

struct BuildInfo {
  std::string version;     ///< the project's version, e.g. "0.1.0"
  std::string commit;      ///< the short commit hash, or "unknown" when not built from git
  std::string tree;        ///< "clean", "dirty" (tracked files changed) or "unknown"
  std::string flavour;     ///< "cpu" or "cuda"
  std::string libtorch;    ///< the libtorch version compiled against
  std::string build_type;  ///< CMake's build type (RelWithDebInfo, Asan, ...)
};

/// This build's provenance, fixed at compile time.
const BuildInfo& build_info();

/// "tenax 0.1.0 (commit 00c7bb9d1e2f, tree clean, flavour cpu, libtorch 1.13.0, RelWithDebInfo)"
const std::string& version_line();

}  // namespace tenax
