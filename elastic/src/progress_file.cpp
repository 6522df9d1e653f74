#include "tenax/elastic/progress_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>

#include "tenax/core/logging.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {

ProgressFile ProgressFile::from_env(std::chrono::milliseconds min_interval) {
  const char* path = std::getenv(kProgressFileVariable);
  return ProgressFile(path != nullptr ? std::filesystem::path(path) : std::filesystem::path(), min_interval);
}

ProgressFile::ProgressFile(std::filesystem::path path, std::chrono::milliseconds min_interval)
    : path_(std::move(path)), min_interval_(min_interval) {}

ProgressFile::~ProgressFile() = default;  // the beacon's thread is joined and its file removed
ProgressFile::ProgressFile(ProgressFile&&) noexcept = default;
ProgressFile& ProgressFile::operator=(ProgressFile&&) noexcept = default;

void ProgressFile::report(std::int64_t step) {
  if (path_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (written_ && now - last_write_ < min_interval_) return;
  // The beacon first: whenever the agent finds the progress file, the beacon is there too, and a
  // worker without one (the Python helper) is judged by its progress alone.
  if (!beacon_ && !beacon_failed_) {
    try {
      beacon_ = std::make_unique<WaitBeacon>(wait_beacon_path(path_));
    } catch (const std::system_error& e) {  // no thread to be had: judged by its progress alone
      beacon_failed_ = true;
      logger("tenax.elastic")
          ->warn(
              "cannot start the wait beacon beside {} ({}); if a peer hangs, the agent's --hang-timeout may "
              "take this worker, which waits for it, for hung too",
              path_.string(), e.what());
    }
  }
  // Rewritten in place (not renamed): the agent looks at the modification time only.
  const std::string text = std::to_string(step) + "\n";
  UniqueFd fd(::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  const bool ok = fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.reset();  // errno kept for the warning
  if (!ok && !warned_) {
    warned_ = true;
    logger("tenax.elastic")
        ->warn(
            "cannot write the progress file {} ({}); the agent's --hang-timeout may "
            "take this worker for hung",
            path_.string(), std::strerror(errno));
  }
  written_ = true;
  last_write_ = now;
}

void ProgressFile::finish() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove(path_, ec);  // already gone: nothing to judge either way
  beacon_.reset();                     // after the progress file: never judged without it
  written_ = false;
}

}  // namespace tenax::elastic
