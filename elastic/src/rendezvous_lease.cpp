#include "tenax/elastic/rendezvous_lease.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <utility>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::elastic {
namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string to_text(const LeaseRecord& r) {
  nlohmann::json j;
  j["term"] = r.term;
  j["holder"] = r.holder;
  j["endpoint"] = r.endpoint;
  j["beat"] = r.beat;
  j["generation"] = r.generation;
  j["renewed_unix_ms"] = r.renewed_unix_ms;
  return j.dump() + "\n";
}

// A name no other writer uses: processes differ by pid, threads of one process by the counter.
std::filesystem::path unique_temporary(const std::filesystem::path& beside) {
  static std::atomic<unsigned> counter{0};
  return beside.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
}

// Written whole, then renamed over `path`: readers see the old or the new record. Not fsynced:
// the lease says who is alive now; after a crash of the whole file system it is stale anyway.
void replace_file(const std::filesystem::path& path, const std::string& contents) {
  const std::filesystem::path tmp = unique_temporary(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << contents;
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error("cannot write the rendezvous lease " + tmp.string() +
                  ": check that the job's control directory is writable and not full");
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot replace the rendezvous lease " + path.string() + ": " + std::strerror(err));
  }
}

}  // namespace

LeaseFile::LeaseFile(std::filesystem::path dir) : dir_(std::move(dir)) {}

std::optional<LeaseRecord> LeaseFile::read() const {
  std::ifstream in(path(), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    LeaseRecord r;
    r.term = j.at("term").get<std::int64_t>();
    r.holder = j.at("holder").get<std::string>();
    r.endpoint = j.at("endpoint").get<std::string>();
    r.beat = j.at("beat").get<std::int64_t>();
    r.generation = j.at("generation").get<std::int64_t>();
    r.renewed_unix_ms = j.at("renewed_unix_ms").get<std::int64_t>();
    return r;
  } catch (const std::exception& e) {
    logger("tenax.elastic")->warn("ignoring a damaged rendezvous lease {}: {}", path().string(), e.what());
    return std::nullopt;
  }
}

bool LeaseFile::claim(const LeaseRecord& record) const {
  const std::filesystem::path term_file = dir_ / ("tenax-rdzv.term-" + std::to_string(record.term));
  const std::filesystem::path tmp = unique_temporary(term_file);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << record.holder << "\n";
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw Error("cannot claim rendezvous term " + std::to_string(record.term) + " in " + dir_.string() +
                  ": the job's control directory is not writable or full");
    }
  }
  // link() fails with EEXIST when another node claimed the term first, atomically even on NFS
  // (unlike O_EXCL on NFSv2/3).
  const bool won = ::link(tmp.c_str(), term_file.c_str()) == 0;
  const int err = errno;
  ::unlink(tmp.c_str());
  if (!won) {
    if (err == EEXIST) return false;
    throw Error("cannot claim rendezvous term " + std::to_string(record.term) + " (" + term_file.string() +
                "): " + std::strerror(err));
  }
  LeaseRecord written = record;
  written.renewed_unix_ms = unix_ms_now();
  write(written);
  return true;
}

void LeaseFile::write(const LeaseRecord& record) const {
  LeaseRecord stamped = record;
  if (stamped.renewed_unix_ms == 0) stamped.renewed_unix_ms = unix_ms_now();
  replace_file(path(), to_text(stamped));
}

struct LeaseKeeper::Thread {
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread thread;
};

LeaseKeeper::LeaseKeeper(LeaseFile file, LeaseRecord claimed, std::chrono::milliseconds interval,
                         std::function<std::int64_t()> generation)
    : file_(file),
      claimed_(std::move(claimed)),
      deposed_(std::make_shared<std::atomic<bool>>(false)),
      thread_(std::make_unique<Thread>()) {
  thread_->thread = std::thread([this, file = std::move(file), interval, generation = std::move(generation)] {
    auto log = logger("tenax.elastic");
    LeaseRecord record = claimed_;
    std::unique_lock<std::mutex> lock(thread_->mutex);
    while (!thread_->wake.wait_for(lock, interval, [this] { return thread_->stop; })) {
      lock.unlock();
      try {
        const std::optional<LeaseRecord> current = file.read();
        if (current && current->term > record.term) {
          log->warn(
              "node '{}' lost the rendezvous lease: node '{}' claimed term {} (this node held term {}); its "
              "service at {} stops and its agent follows the new host at {}",
              record.holder, current->holder, current->term, record.term, record.endpoint, current->endpoint);
          deposed_->store(true);
          return;
        }
        ++record.beat;
        if (generation) record.generation = std::max(record.generation, generation());
        record.renewed_unix_ms = 0;
        file.write(record);
      } catch (const std::exception& e) {
        // The next renewal tries again; if the file system stays away, the lease expires and
        // another node takes over, which is right: this node cannot commit checkpoints either.
        log->warn("renewing the rendezvous lease in {} failed: {}", file.dir().string(), e.what());
      }
      lock.lock();
    }
  });
}

LeaseKeeper::~LeaseKeeper() { stop(); }

void LeaseKeeper::release() {
  stop();
  if (deposed()) return;
  try {
    std::optional<LeaseRecord> current = file_.read();
    if (!current || current->term != claimed_.term || current->holder != claimed_.holder) return;
    current->renewed_unix_ms = 1;
    file_.write(*current);
  } catch (const std::exception& e) {
    logger("tenax.elastic")->warn("could not release the rendezvous lease in {}: {}", file_.dir().string(), e.what());
  }
}

void LeaseKeeper::stop() {
  {
    std::lock_guard<std::mutex> lock(thread_->mutex);
    thread_->stop = true;
  }
  thread_->wake.notify_all();
  if (thread_->thread.joinable()) thread_->thread.join();
}

}  // namespace tenax::elastic
