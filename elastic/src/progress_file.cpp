#include "tenax/elastic/progress_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tenax/core/logging.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {

ProgressFile ProgressFile::from_env(std::chrono::milliseconds min_interval) {
  const char* path = std::getenv(kProgressFileVariable);
  return ProgressFile(path != nullptr ? std::filesystem::path(path) : std::filesystem::path(), min_interval);
}

ProgressFile::ProgressFile(std::filesystem::path path, std::chrono::milliseconds min_interval)
    : path_(std::move(path)), min_interval_(min_interval) {}

void ProgressFile::report(std::int64_t step) {
  if (path_.empty()) return;
  const auto now = std::chrono::steady_clock::now();
  if (written_ && now - last_write_ < min_interval_) return;
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
  written_ = false;
}

}  // namespace tenax::elastic
