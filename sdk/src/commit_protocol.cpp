#include "commit_protocol.h"

#include <algorithm>
#include <optional>
#include <system_error>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/core/trace_point.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"

namespace tenax::sdk::detail {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kOk = "ok";
constexpr const char* kErrorTag = "error:";
constexpr const char* kFencedTag = "fenced:";
constexpr const char* kSupersededTag = "superseded:";

std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

bool is_error(const std::string& value) { return value.rfind(kErrorTag, 0) == 0; }
bool is_fenced(const std::string& value) { return value.rfind(kFencedTag, 0) == 0; }
bool is_superseded(const std::string& value) { return value.rfind(kSupersededTag, 0) == 0; }

// Waits on other ranks' keys. Each ends with the value, or with nullopt and `why` when the
// deadline passes, `cancelled` is set, the store fails (service gone), or the generation is
// superseded: under in-process recovery a dead peer never writes its key, and the agent's mark
// (kSupersededKey) is what tells the survivors, long before the deadline.
class PeerWait {
 public:
  PeerWait(elastic::Store& store, const std::atomic<bool>& cancelled, std::chrono::milliseconds poll)
      : store_(store), cancelled_(cancelled), poll_(poll) {}

  std::optional<std::string> get(const std::string& key, Clock::time_point deadline) {
    while (!cancelled_.load()) {
      const auto now = Clock::now();
      if (now >= deadline) {
        why = "timed out waiting for " + key;
        return std::nullopt;
      }
      const auto slice = std::min(poll_, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
      try {
        const std::vector<char> value = store_.get(key, std::max(slice, std::chrono::milliseconds(1)));
        return std::string(value.begin(), value.end());
      } catch (const TimeoutError&) {
      } catch (const std::exception& e) {
        why = std::string("the rendezvous store failed while waiting for ") + key + ": " + e.what();
        return std::nullopt;
      }
      try {
        if (store_.add(elastic::kSupersededKey, 0) > 0) {
          superseded = true;
          why = "a peer was lost while waiting for " + key + " (the generation was superseded)";
          return std::nullopt;
        }
      } catch (const std::exception& e) {
        why = std::string("the rendezvous store failed while waiting for ") + key + ": " + e.what();
        return std::nullopt;
      }
    }
    why = "cancelled while waiting for " + key;
    return std::nullopt;
  }

  std::string why;          ///< of the last get() that returned nullopt
  bool superseded = false;  ///< a get() ended because the generation was superseded

 private:
  elastic::Store& store_;
  const std::atomic<bool>& cancelled_;
  std::chrono::milliseconds poll_;
};

void publish(elastic::Store& store, const std::string& key, const std::string& value) {
  store.set(key, bytes_of(value));
}

std::string rank_tag(int rank) { return "rank " + std::to_string(rank) + ": "; }

// This rank's shard; the report value for the store.
std::string write_my_shard(const CommitPlan& plan, const std::filesystem::path& tmp) {
  try {
    auto written = storage::write_shard(tmp / storage::shard_file_name(plan.rank, plan.world_size), plan.tensors);
    if (!written.is_ok()) return kErrorTag + written.status().to_string();
    return "ok:" + storage::to_json(written.value()).dump();
  } catch (const std::exception& e) {
    return std::string(kErrorTag) + e.what();
  }
}

void remove_quietly(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

void apply_retention(const CommitPlan& plan) {
  if (plan.save_total_limit <= 0) return;
  try {
    storage::RetentionPolicy policy;
    policy.save_total_limit = plan.save_total_limit;
    if (!plan.metric_for_best_model.empty()) {
      policy.best_step = best_step(plan.root, plan.metric_for_best_model, plan.greater_is_better);
    }
    (void)storage::CheckpointDirectory(plan.root).prune(policy);
  } catch (const std::exception& e) {
    // A checkpoint too many is no data lost; say so and go on.
    logger("tenax.checkpoint")->warn("retention could not prune old checkpoints under {}: {}", plan.root.string(),
                                     e.what());
  }
}

// A newer generation formed: this rank's part of a stale partition's save, which commits nothing.
CommitOutcome fenced_outcome(const CommitPlan& plan, const Status& fence) {
  CommitOutcome out;
  out.fenced = true;
  out.error = fence.message() + ": this partition must not commit checkpoint step " + std::to_string(plan.step) +
              "; not moving latest";
  return out;
}

// The fence's verdict on committing now: a hold while plan.generation is current (none without a
// fence); kAborted when a newer generation formed; any other error fails the save (closed).
StatusOr<std::optional<elastic::FenceHold>> hold_fence(const CommitPlan& plan) {
  if (plan.fence_dir.empty()) return std::optional<elastic::FenceHold>();
  StatusOr<elastic::FenceHold> hold = elastic::GenerationFence(plan.fence_dir).hold_if_current(plan.generation);
  if (!hold.is_ok()) return hold.status();
  return std::optional<elastic::FenceHold>(std::move(hold).value());
}

CommitOutcome run_rank0(const CommitPlan& plan, elastic::Store& store, const std::atomic<bool>& cancelled,
                        std::chrono::milliseconds poll) {
  CommitOutcome out;
  const std::string& k = plan.key_prefix;
  storage::CheckpointDirectory directory(plan.root);
  // A partition that already knows it is stale writes nothing (the commit checks again).
  if (!plan.fence_dir.empty()) {
    StatusOr<std::int64_t> newest = elastic::GenerationFence(plan.fence_dir).current();
    if (newest.is_ok() && newest.value() > plan.generation) {
      out = fenced_outcome(plan, Status(StatusCode::kAborted, "generation " + std::to_string(plan.generation) +
                                                                  " is no longer current (generation " +
                                                                  std::to_string(newest.value()) + " formed)"));
      publish(store, k + "prepared", kFencedTag + out.error);
      publish(store, k + "result", kFencedTag + out.error);
      return out;
    }
  }
  std::filesystem::path tmp;
  try {
    tmp = directory.prepare_tmp(plan.step, plan.generation);
  } catch (const std::exception& e) {
    out.error = "checkpoint at step " + std::to_string(plan.step) +
                " not committed; the previous checkpoint is intact. Failed: " + rank_tag(0) +
                "cannot prepare the checkpoint directory: " + e.what();
    publish(store, k + "prepared", kErrorTag + out.error);
    publish(store, k + "result", kErrorTag + out.error);
    return out;
  }
  publish(store, k + "prepared", kOk);
  trace_point("save.prepared", plan.step);

  std::vector<std::string> reports(static_cast<std::size_t>(plan.world_size));
  reports[0] = write_my_shard(plan, tmp);
  trace_point("save.shard.written", plan.step);
  const auto deadline = Clock::now() + plan.timeout;
  std::string failures;
  PeerWait peers(store, cancelled, poll);
  for (int r = 1; r < plan.world_size && !cancelled.load() && !peers.superseded; ++r) {
    auto report = peers.get(k + "report/" + std::to_string(r), deadline);
    reports[static_cast<std::size_t>(r)] = report ? *report : kErrorTag + peers.why;
  }
  trace_point("save.reports.in", plan.step);
  if (peers.superseded) {
    remove_quietly(tmp);
    out.superseded = true;
    out.error = "checkpoint at step " + std::to_string(plan.step) + " not committed: " + rank_tag(0) + peers.why;
    publish(store, k + "result", kSupersededTag + out.error);
    return out;
  }

  std::vector<storage::ShardInfo> shards;
  std::optional<CommitOutcome> fenced;
  for (int r = 0; r < plan.world_size && failures.empty(); ++r) {
    const std::string& rep = reports[static_cast<std::size_t>(r)];
    if (rep.rfind("ok:", 0) == 0) {
      auto info = storage::shard_info_from_json(nlohmann::json::parse(rep.substr(3), nullptr, false));
      if (info.is_ok()) {
        shards.push_back(info.value());
        continue;
      }
      failures += " " + rank_tag(r) + info.status().to_string() + ";";
    } else {
      failures += " " + rank_tag(r) + (is_error(rep) ? rep.substr(6) : rep) + ";";
    }
  }
  if (failures.empty()) {
    try {
      storage::Manifest manifest = storage::make_manifest(plan.step, plan.epoch, plan.generation, shards);
      manifest.trainer_state = plan.trainer_state;
      manifest.arguments = plan.arguments;
      // The rename and `latest` happen under the fence, so no newer generation can form between
      // the check and the commit point.
      StatusOr<std::optional<elastic::FenceHold>> hold = hold_fence(plan);
      if (hold.status().code() == StatusCode::kAborted) {
        fenced = fenced_outcome(plan, hold.status());
      } else if (!hold.is_ok()) {
        failures = " " + rank_tag(0) + "cannot check the generation fence: " + hold.status().to_string();
      } else {
        const Status st = directory.commit(tmp, manifest);
        if (!st.is_ok()) failures = " " + rank_tag(0) + st.to_string();
      }
    } catch (const std::exception& e) {
      failures = " " + rank_tag(0) + e.what();
    }
  }
  if (fenced) {
    remove_quietly(tmp);
    publish(store, k + "result", kFencedTag + fenced->error);
    return *fenced;
  }
  if (!failures.empty()) {
    remove_quietly(tmp);
    out.error = "checkpoint at step " + std::to_string(plan.step) +
                " not committed; the previous checkpoint is intact. Failed:" + failures;
    publish(store, k + "result", kErrorTag + out.error);
    return out;
  }
  apply_retention(plan);
  out.committed = true;
  out.dir = directory.step_dir(plan.step);
  publish(store, k + "result", kOk);
  trace_point("save.result", plan.step);
  return out;
}

CommitOutcome run_other_rank(const CommitPlan& plan, elastic::Store& store, const std::atomic<bool>& cancelled,
                             std::chrono::milliseconds poll) {
  CommitOutcome out;
  const std::string& k = plan.key_prefix;
  const auto deadline = Clock::now() + plan.timeout;
  PeerWait rank0(store, cancelled, poll);
  auto prepared = rank0.get(k + "prepared", deadline);
  if (!prepared) {
    out.superseded = rank0.superseded;
    out.error = rank_tag(plan.rank) + rank0.why;
    try {
      publish(store, k + "report/" + std::to_string(plan.rank), kErrorTag + out.error);
    } catch (const std::exception&) {
      // The store is gone too; rank 0 will time out on this report.
    }
    return out;
  }
  if (is_fenced(*prepared)) {
    out.fenced = true;
    out.error = prepared->substr(7);
    return out;
  }
  if (is_error(*prepared)) {
    out.error = prepared->substr(6);
    return out;
  }
  const std::filesystem::path tmp = plan.root / storage::tmp_dir_name(plan.step, plan.generation);
  try {
    publish(store, k + "report/" + std::to_string(plan.rank), write_my_shard(plan, tmp));
    trace_point("save.reported", plan.step);
  } catch (const std::exception& e) {
    out.error = rank_tag(plan.rank) + "could not report its shard: " + e.what();
    return out;
  }
  auto result = rank0.get(k + "result", Clock::now() + plan.timeout);
  if (!result) {
    out.superseded = rank0.superseded;
    out.error = rank_tag(plan.rank) + rank0.why;
    return out;
  }
  if (is_fenced(*result)) {
    out.fenced = true;
    out.error = result->substr(7);
    return out;
  }
  if (is_superseded(*result)) {
    out.superseded = true;
    out.error = result->substr(std::string(kSupersededTag).size());
    return out;
  }
  if (is_error(*result)) {
    out.error = result->substr(6);
    return out;
  }
  out.committed = true;
  out.dir = storage::CheckpointDirectory(plan.root).step_dir(plan.step);
  trace_point("save.result", plan.step);
  return out;
}

}  // namespace

CommitOutcome run_commit(const CommitPlan& plan, elastic::Store& store, const std::atomic<bool>& cancelled,
                         std::chrono::milliseconds poll) {
  try {
    return plan.rank == 0 ? run_rank0(plan, store, cancelled, poll) : run_other_rank(plan, store, cancelled, poll);
  } catch (const std::exception& e) {
    CommitOutcome out;
    out.error = rank_tag(plan.rank) + "checkpoint at step " + std::to_string(plan.step) + " failed: " + e.what();
    return out;
  }
}

std::optional<std::int64_t> best_step(const std::filesystem::path& root, const std::string& metric,
                                      bool greater_is_better) {
  storage::CheckpointDirectory directory(root);
  std::optional<std::int64_t> best;
  double best_value = 0.0;
  for (std::int64_t step : directory.committed_steps()) {
    std::string text;
    try {
      text = files::read_all(directory.step_dir(step) / storage::kManifestFile);
    } catch (const StorageError&) {
      continue;
    }
    auto manifest = storage::parse_manifest(text, directory.step_dir(step).string());
    if (!manifest.is_ok()) continue;
    const nlohmann::json& metrics = manifest.value().trainer_state.value("metrics", nlohmann::json::object());
    if (!metrics.is_object() || !metrics.contains(metric) || !metrics[metric].is_number()) continue;
    const double value = metrics[metric].get<double>();
    if (!best || (greater_is_better ? value > best_value : value < best_value)) {
      best = step;
      best_value = value;
    }
  }
  return best;
}

}  // namespace tenax::sdk::detail
