#include "rdzv_discovery.h"

#include <thread>

#include <sys/stat.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;

fs::path keys_file(const fs::path& dir, const std::string& id) { return dir / (id + ".keys"); }
fs::path endpoint_file(const fs::path& dir, const std::string& id) { return dir / (id + ".endpoint"); }

}  // namespace

void publish_rdzv_address(const fs::path& dir, const std::string& launch_id, const RdzvAddress& address) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) {
      throw ConfigError("cannot create the rendezvous directory " + dir.string() + ": " + ec.message() +
                        "; set TENAX_RDZV_DIR to a writable directory that every node sees");
    }
    ::chmod(dir.c_str(), 0700);  // the keys file is 0600 anyway; this only hides the names
  }
  // Files of an earlier run with the same launch id (a rerun by hand with the same TENAX_JOB_ID)
  // would otherwise keep their keys: write_job_keys_if_absent never replaces a file.
  fs::remove(endpoint_file(dir, launch_id), ec);
  fs::remove(keys_file(dir, launch_id), ec);
  write_job_keys_if_absent(keys_file(dir, launch_id), address.keys);
  try {
    files::atomic_write(endpoint_file(dir, launch_id), address.endpoint + "\n");
  } catch (const StorageError& e) {
    throw ConfigError(std::string("cannot publish the rendezvous endpoint: ") + e.what() +
                      "; set TENAX_RDZV_DIR to a writable directory that every node sees");
  }
}

RdzvAddress await_rdzv_address(const fs::path& dir, const std::string& launch_id, std::chrono::milliseconds timeout,
                               const std::string& who) {
  using Clock = std::chrono::steady_clock;
  const fs::path file = endpoint_file(dir, launch_id);
  const auto deadline = Clock::now() + timeout;
  std::error_code ec;
  while (!fs::exists(file, ec)) {
    if (Clock::now() >= deadline) {
      throw TimeoutError(who + ": rank 0 did not publish the rendezvous in " + file.string() + " within " +
                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                         " s; check that rank 0 started (and its log), that TENAX_RDZV_DIR=" + dir.string() +
                         " is on a file system every node shares, or set TENAX_RDZV_ENDPOINT to a `tenax rdzv` "
                         "store; TENAX_RDZV_TIMEOUT (seconds) waits longer");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  RdzvAddress address;
  try {
    address.endpoint = files::read_all(file);
  } catch (const StorageError& e) {
    throw ConfigError(who + ": " + e.what());
  }
  while (!address.endpoint.empty() && (address.endpoint.back() == '\n' || address.endpoint.back() == '\r')) {
    address.endpoint.pop_back();
  }
  if (address.endpoint.rfind("tcp://", 0) != 0) {
    throw ConfigError(who + ": " + file.string() + " does not hold a tcp:// endpoint; delete it and restart the job");
  }
  address.keys = read_job_keys(keys_file(dir, launch_id));
  return address;
}

void remove_rdzv_address(const fs::path& dir, const std::string& launch_id) noexcept {
  std::error_code ec;
  fs::remove(endpoint_file(dir, launch_id), ec);
  fs::remove(keys_file(dir, launch_id), ec);
}

}  // namespace tenax::elastic
