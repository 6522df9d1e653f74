// Deciding where the rendezvous service is, from what the lease file (rendezvous_lease.h) says
// over time. A pure state machine: lease observations and an injected clock in, a decision out;
// the agent does the file reads, the connecting and the hosting. So failover is tested
// deterministically (tests/elastic/host_election_test.cpp), without files, sockets or sleeps.
//
// The rules:
//   - A lease whose beat changed within the lease timeout (on this node's clock) is alive: use
//     its endpoint. A network partition between agents therefore never elects a second host
//     while the holder can still write the shared file system.
//   - A lease whose beat has not moved for lease timeout + stagger is dead: claim the next term.
//     So is one whose wall-clock age is beyond 3 x the lease timeout (a long-dead or released
//     lease found by a new agent, e.g. after a Slurm requeue), once this node's stagger passed.
//   - No lease at all: the job's designated first host (node rank 0 in the node list) claims
//     term 0 at once; the others wait lease timeout + stagger first (the designated host is
//     normally there in a second).
//   - stagger = position in the node list x stagger step: the lowest live node of the node list
//     claims first, deterministically; link() in LeaseFile::claim breaks any remaining tie.
//
// Thread-safety: none (one agent thread owns it).
//
//   HostElection election("node-000001", HostElectionOptions(1, std::chrono::seconds(5)));
//   election.observe(lease_file.read(), Clock::now(), unix_ms_now());
//   switch (election.decide(Clock::now()).action) { ... }
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "tenax/elastic/rendezvous_lease.h"

namespace tenax::elastic {

class HostElectionOptions {
 public:
  /// `position`: this node's index in the job's node list (0 = the designated first host).
  /// `lease_timeout`: a lease unrenewed for that long is dead (> 0).
  HostElectionOptions(int position, std::chrono::milliseconds lease_timeout);
  /// Extra wait per position before claiming a dead lease (default 1 s).
  HostElectionOptions& stagger_step(std::chrono::milliseconds value);

  int position() const { return position_; }
  std::chrono::milliseconds lease_timeout() const { return lease_timeout_; }
  std::chrono::milliseconds stagger() const { return stagger_step_ * position_; }

 private:
  int position_;
  std::chrono::milliseconds lease_timeout_;
  std::chrono::milliseconds stagger_step_ = std::chrono::seconds(1);
};

class HostElection {
 public:
  using Clock = std::chrono::steady_clock;

  enum class Action {
    kWait,     ///< nothing to do yet (keep the current service, or keep waiting for one)
    kConnect,  ///< the service is at decision.lease.endpoint
    kClaim,    ///< claim decision.term and host the service
  };
  struct Decision {
    Action action = Action::kWait;
    LeaseRecord lease;      ///< kConnect: the live lease
    std::int64_t term = 0;  ///< kClaim: the term to claim
    std::string reason;     ///< for the log: why
  };

  HostElection(std::string node_id, HostElectionOptions options);

  /// What the lease file held at `now` (nullopt: absent). `now_unix_ms` is the wall clock, for
  /// the age of a lease found for the first time.
  void observe(const std::optional<LeaseRecord>& lease, Clock::time_point now, std::int64_t now_unix_ms);
  /// The decision after the observations so far.
  Decision decide(Clock::time_point now) const;

  /// The last lease observed (nullopt before one was seen).
  const std::optional<LeaseRecord>& lease() const { return lease_; }
  /// The highest generation any observed lease recorded (-1: none): a new host numbers above it.
  std::int64_t highest_generation() const { return highest_generation_; }

 private:
  std::string node_id_;
  HostElectionOptions options_;
  std::optional<LeaseRecord> lease_;
  std::optional<Clock::time_point> first_observed_;  // the first observation of anything
  Clock::time_point beat_changed_{};                 // when lease_'s (term, beat) was first seen
  bool long_dead_ = false;                           // wall-clock age beyond 3 x lease timeout
  std::int64_t highest_generation_ = -1;
};

}  // namespace tenax::elastic
