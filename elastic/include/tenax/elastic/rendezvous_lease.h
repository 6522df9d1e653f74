// Who hosts the rendezvous service, recorded where every node of the job can read it: a lease
// file in the job's shared control directory (the directory of the job's keys file, which every
// node already reads). It removes the single point of failure of a fixed rendezvous host
// (DESIGN decision 14): when the holder dies, its renewals stop, and a survivor claims the next
// term and hosts a new service; every agent finds the service through this file.
//
//   <dir>/tenax-rdzv.lease         {"term", "holder", "endpoint", "beat", "generation",
//                                   "renewed_unix_ms"}, replaced atomically by each renewal
//   <dir>/tenax-rdzv.term-<N>      one per claimed term; link() makes the claim exclusive
//
// Why a file, not a vote among agents: a job of two nodes has no majority when they cannot
// reach each other, and the shared file system is the one arbiter both sides of a partition
// still see (a node that loses it cannot commit checkpoints either). A holder that can still
// write the file keeps the lease, so a network partition between agents does not elect a second
// host; a holder that stops renewing (dead, or paused for longer than the lease timeout) is
// replaced, and it stands down when it sees the higher term (LeaseKeeper::deposed()). Terms are
// claimed with link(2), atomic on local file systems and on NFS, so one claimant wins each term.
// Liveness is judged by the beat counter changing, on the observer's own clock (no clock sync
// needed); renewed_unix_ms lets a new agent see a long-dead lease at once (host clocks agree to
// within seconds on a cluster).
//
// Thread-safety: LeaseFile is a value (its calls may run on any thread; concurrent claims of one
// term from many processes are safe). LeaseKeeper owns a thread; its methods may be called from
// any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace tenax::elastic {

inline constexpr const char* kLeaseFileName = "tenax-rdzv.lease";

struct LeaseRecord {
  std::int64_t term = -1;        ///< claimed terms count 0, 1, 2, ... across the job's life
  std::string holder;            ///< node id of the agent hosting the service
  std::string endpoint;          ///< "tcp://host:port": where its service answers
  std::int64_t beat = 0;         ///< incremented by every renewal
  std::int64_t generation = -1;  ///< the last generation the holder's service formed
  std::int64_t renewed_unix_ms = 0;

  bool operator==(const LeaseRecord& o) const {
    return term == o.term && holder == o.holder && endpoint == o.endpoint && beat == o.beat &&
           generation == o.generation && renewed_unix_ms == o.renewed_unix_ms;
  }
};

class LeaseFile {
 public:
  /// `dir`: the job's shared control directory (must exist).
  explicit LeaseFile(std::filesystem::path dir);

  /// The current record; nullopt when none was written yet or the file is damaged (logged).
  std::optional<LeaseRecord> read() const;
  /// Claims `record.term` for `record.holder`: true when this call won the term (and the record
  /// is written), false when another node claimed it first. Throws Error naming the directory
  /// when the file system refuses (not writable, full).
  bool claim(const LeaseRecord& record) const;
  /// The holder's renewal: replaces the record atomically. Throws Error on failure.
  void write(const LeaseRecord& record) const;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path path() const { return dir_ / kLeaseFileName; }

 private:
  std::filesystem::path dir_;
};

/// The holder's side: renews the lease every `interval` on its own thread (so that a busy agent
/// loop never starves the renewals), and watches for a higher term claimed by another node.
class LeaseKeeper {
 public:
  /// `claimed`: the record this node won with LeaseFile::claim(). `generation` is asked at each
  /// renewal for the service's last formed generation (called on the keeper's thread).
  LeaseKeeper(LeaseFile file, LeaseRecord claimed, std::chrono::milliseconds interval,
              std::function<std::int64_t()> generation);
  ~LeaseKeeper();  ///< stops and joins the thread; the lease then expires on its own
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  /// Stops renewing and marks the lease released (renewed at the epoch), so that the next run
  /// of the job (a Slurm requeue) claims a new term at once instead of waiting for it to expire.
  /// Does nothing when deposed. Call after the service stopped.
  void release();
  /// True once another node claimed a higher term: this node's service must stop.
  bool deposed() const { return deposed_->load(); }
  const LeaseRecord& claimed() const { return claimed_; }

 private:
  void stop();

  LeaseFile file_;
  LeaseRecord claimed_;
  std::shared_ptr<std::atomic<bool>> deposed_;
  struct Thread;
  std::unique_ptr<Thread> thread_;
};

}  // namespace tenax::elastic
