// How the ranks of a direct launch without MPI learn the store that rank 0 hosts: two files in a
// directory every rank sees (direct_launch.h, step 2). `<launch id>.keys` holds the job's CURVE
// keys (mode 0600, job_keys.h's format); `<launch id>.endpoint` the store's endpoint, written
// after the keys, so that a reader that sees the endpoint finds the keys too.
// Thread-safety: stateless; the files are replaced atomically (rename/link).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "tenax/elastic/job_keys.h"

namespace tenax::elastic {

struct RdzvAddress {
  std::string endpoint;  ///< "tcp://host:port"
  JobKeys keys;
};

/// Rank 0: replaces any files of an earlier run with the same launch id, then writes the keys
/// and the endpoint. Creates `dir` (mode 0700) if needed. Throws ConfigError naming the file.
void publish_rdzv_address(const std::filesystem::path& dir, const std::string& launch_id, const RdzvAddress& address);

/// Other ranks: waits (polling; NFS has no inotify) until the endpoint file exists, then reads
/// both. Throws TimeoutError naming the file, the rank waiting and what to check.
RdzvAddress await_rdzv_address(const std::filesystem::path& dir, const std::string& launch_id,
                               std::chrono::milliseconds timeout, const std::string& who);

/// Rank 0, once every rank has connected: deletes both files. Never throws.
void remove_rdzv_address(const std::filesystem::path& dir, const std::string& launch_id) noexcept;

}  // namespace tenax::elastic
