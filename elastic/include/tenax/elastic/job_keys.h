// The job's CURVE keys: what lets the rendezvous service and the key-value store tell the job's
// own agents and workers from anybody else who can reach their ports.
//
// A job has two key pairs (ZeroMQ CURVE, Z85 text of 40 characters each): the servers' pair
// (the rendezvous service and the key-value store) and one client pair shared by every agent
// and worker of the job. The servers' ZAP handler admits only that client public key, so a peer
// without the job's key file is refused (and logged) before any message of it is read.
//
// The file (mode 0600, in the run directory unless --keys-file says otherwise):
//   # Tenax job keys (ZeroMQ CURVE, Z85). Private: anyone who reads this can join the job.
//   server_public <40 characters>
//   server_secret <40 characters>
//   client_public <40 characters>
//   client_secret <40 characters>
//
// Thread-safety: plain values; the functions touch only the file they are given.
//
//   auto keys = tenax::elastic::create_or_read_job_keys(run_dir / "tenax-job.keys");
//   tenax::elastic::KvService service(keys);
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace tenax::elastic {

inline constexpr const char* kJobKeysFileName = "tenax-job.keys";
/// Where workers find the job's key file (set by `tenax run`); unset: no CURVE.
inline constexpr const char* kJobKeysVariable = "TENAX_KEYS_FILE";

struct JobKeys {
  std::string server_public;  ///< Z85, 40 characters
  std::string server_secret;
  std::string client_public;
  std::string client_secret;

  /// Two fresh key pairs from libsodium/tweetnacl through zmq_curve_keypair.
  static JobKeys generate();

  bool operator==(const JobKeys& o) const {
    return server_public == o.server_public && server_secret == o.server_secret && client_public == o.client_public &&
           client_secret == o.client_secret;
  }
  bool operator!=(const JobKeys& o) const { return !(*this == o); }
};

/// Reads and checks a key file: a regular file, private (no group/other permission bits), each
/// key present once, 40 Z85 characters, each public key the one of its secret key. Throws
/// ConfigError naming the file, the line or key and what to do.
JobKeys read_job_keys(const std::filesystem::path& file);

/// Writes `keys` to `file` (mode 0600) unless it exists, atomically: a reader sees the whole
/// file or none. Returns the keys now in the file: `keys`, or those of the file already there.
/// Creates missing parent directories. Throws ConfigError when it cannot write or read.
JobKeys write_job_keys_if_absent(const std::filesystem::path& file, const JobKeys& keys);

/// write_job_keys_if_absent(file, JobKeys::generate()): what the node hosting the services does.
JobKeys create_or_read_job_keys(const std::filesystem::path& file);

/// What the other nodes do: waits until `file` exists (the hosting node writes it), then reads
/// it. `still_waiting` is called about every 5 s. Throws ConfigError naming the file and the
/// shared file system it needs when `timeout` passes.
JobKeys wait_for_job_keys(const std::filesystem::path& file, std::chrono::milliseconds timeout,
                          const std::function<void(std::chrono::seconds waited)>& still_waiting = {});

}  // namespace tenax::elastic
