#include "tenax/elastic/wait_beacon.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "tenax/core/logging.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {

std::filesystem::path wait_beacon_path(const std::filesystem::path& progress_file) {
  std::filesystem::path out = progress_file;
  out += ".wait";
  return out;
}

std::string format_wait_beacon(const PeerWaitState& state) {
  if (state.waiting) return "waiting " + std::to_string(state.waited.count()) + "\n";
  return "working " + std::to_string(state.since_wait ? state.since_wait->count() : -1) + "\n";
}

std::optional<PeerWaitState> parse_wait_beacon(const std::string& text) {
  std::istringstream in(text);
  std::string word;
  long long ms = 0;
  if (!(in >> word >> ms) || (word != "waiting" && word != "working")) return std::nullopt;
  std::string rest;
  if (in >> rest) return std::nullopt;
  PeerWaitState state;
  state.waiting = word == "waiting";
  if (state.waiting) {
    if (ms < 0) return std::nullopt;
    state.waited = std::chrono::milliseconds(ms);
  } else if (ms >= 0) {
    state.since_wait = std::chrono::milliseconds(ms);
  } else if (ms != -1) {
    return std::nullopt;
  }
  return state;
}

WaitBeacon::WaitBeacon(std::filesystem::path path, std::chrono::milliseconds interval)
    : path_(std::move(path)), temporary_(path_.string() + ".tmp"), interval_(interval) {
  write();  // before the thread: the caller may rely on the file being there
  thread_ = std::thread([this] { run(); });
}

WaitBeacon::~WaitBeacon() { stop(); }

void WaitBeacon::stop() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::error_code ec;
  std::filesystem::remove(path_, ec);  // already gone: nothing to report either way
  std::filesystem::remove(temporary_, ec);
}

void WaitBeacon::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    write();
    lock.lock();
  }
}

void WaitBeacon::write() {
  const std::string text = format_wait_beacon(peer_wait_state());
  UniqueFd fd(::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  bool ok = fd && ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
  fd.reset();
  // Renamed into place: the agent reads the whole line or the previous one, never half.
  ok = ok && std::rename(temporary_.c_str(), path_.c_str()) == 0;
  if (!ok && !warned_) {
    warned_ = true;
    logger("tenax.elastic")
        ->warn(
            "cannot write the wait beacon {} ({}); if this worker stops making progress, the agent's "
            "--hang-timeout cannot tell whether it waits for a peer",
            path_.string(), std::strerror(errno));
  }
}

}  // namespace tenax::elastic
