#include "commit_protocol.h"

#include <algorithm>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

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

// The store's spelling of an outcome: "<tag><text>"; a bare "ok" is a success with no text.
constexpr const char* kOk = "ok";
constexpr std::pair<SaveOutcome, const char*> kTags[] = {{SaveOutcome::kCommitted, "ok:"},
                                                         {SaveOutcome::kFailed, "error:"},
                                                         {SaveOutcome::kFenced, "fenced:"},
                                                         {SaveOutcome::kSuperseded, "superseded:"}};

std::vector<char> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

std::string tagged(SaveOutcome outcome, const std::string& text) {
  for (const auto& [o, tag] : kTags) {
    if (o == outcome) return tag + text;
  }
  return kOk;
}

// A value another rank published ("ok" for "prepared" and a shard report's success, and for a
// committed "result"), parsed once where it is read. Text without a tag is a failure, as written.
struct Published {
  SaveOutcome outcome = SaveOutcome::kFailed;
  std::string text;  ///< after the tag: the why, or the shard report's JSON
};

Published parse_published(const std::string& value) {
  if (value == kOk) return {SaveOutcome::kCommitted, ""};
  for (const auto& [outcome, tag] : kTags) {
    if (value.rfind(tag, 0) == 0) return {outcome, value.substr(std::char_traits<char>::length(tag))};
  }
  return {SaveOutcome::kFailed, value};
}

CommitOutcome outcome_of(SaveOutcome outcome, std::string error) {
  CommitOutcome out;
  out.outcome = outcome;
  out.error = std::move(error);
  return out;
}

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
    if (!written.is_ok()) return tagged(SaveOutcome::kFailed, written.status().to_string());
    return tagged(SaveOutcome::kCommitted, storage::to_json(written.value()).dump());
  } catch (const std::exception& e) {
    return tagged(SaveOutcome::kFailed, e.what());
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
    logger("tenax.checkpoint")
        ->warn("retention could not prune old checkpoints under {}: {}", plan.root.string(), e.what());
  }
}

// A newer generation formed: this rank's part of a stale partition's save, which commits nothing.
CommitOutcome fenced_outcome(const CommitPlan& plan, const Status& fence) {
  return outcome_of(SaveOutcome::kFenced, fence.message() + ": this partition must not commit checkpoint step " +
                                              std::to_string(plan.step) + "; not moving latest");
}

// Rank 0's end of the protocol: `out` for every rank, under "<key>result".
CommitOutcome publish_result(elastic::Store& store, const CommitPlan& plan, CommitOutcome out) {
  publish(store, plan.key_prefix + "result", tagged(out.outcome, out.error));
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
      publish(store, k + "prepared", tagged(out.outcome, out.error));
      return publish_result(store, plan, out);
    }
  }
  std::filesystem::path tmp;
  try {
    tmp = directory.prepare_tmp(plan.step, plan.generation);
  } catch (const std::exception& e) {
    out.error = "checkpoint at step " + std::to_string(plan.step) +
                " not committed; the previous checkpoint is intact. Failed: " + rank_tag(0) +
                "cannot prepare the checkpoint directory: " + e.what();
    publish(store, k + "prepared", tagged(out.outcome, out.error));
    return publish_result(store, plan, out);
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
    reports[static_cast<std::size_t>(r)] = report ? *report : tagged(SaveOutcome::kFailed, peers.why);
  }
  trace_point("save.reports.in", plan.step);
  if (peers.superseded) {
    remove_quietly(tmp);
    return publish_result(store, plan,
                          outcome_of(SaveOutcome::kSuperseded, "checkpoint at step " + std::to_string(plan.step) +
                                                                   " not committed: " + rank_tag(0) + peers.why));
  }

  std::vector<storage::ShardInfo> shards;
  std::optional<CommitOutcome> fenced;
  for (int r = 0; r < plan.world_size && failures.empty(); ++r) {
    const Published report = parse_published(reports[static_cast<std::size_t>(r)]);
    if (report.outcome == SaveOutcome::kCommitted) {
      auto info = storage::shard_info_from_json(nlohmann::json::parse(report.text, nullptr, false));
      if (info.is_ok()) {
        shards.push_back(info.value());
        continue;
      }
      failures += " " + rank_tag(r) + info.status().to_string() + ";";
    } else {
      failures += " " + rank_tag(r) + report.text + ";";
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
    return publish_result(store, plan, *fenced);
  }
  if (!failures.empty()) {
    remove_quietly(tmp);
    return publish_result(store, plan,
                          outcome_of(SaveOutcome::kFailed, "checkpoint at step " + std::to_string(plan.step) +
                                                               " not committed; the previous checkpoint is intact. "
                                                               "Failed:" +
                                                               failures));
  }
  apply_retention(plan);
  out.outcome = SaveOutcome::kCommitted;
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
  const std::optional<std::string> prepared = rank0.get(k + "prepared", deadline);
  if (!prepared) {
    out.outcome = rank0.superseded ? SaveOutcome::kSuperseded : SaveOutcome::kFailed;
    out.error = rank_tag(plan.rank) + rank0.why;
    try {
      publish(store, k + "report/" + std::to_string(plan.rank), tagged(SaveOutcome::kFailed, out.error));
    } catch (const std::exception&) {
      // The store is gone too; rank 0 will time out on this report.
    }
    return out;
  }
  // Rank 0 could not prepare, or knew before the write that this partition is stale.
  if (Published ready = parse_published(*prepared); ready.outcome != SaveOutcome::kCommitted) {
    return outcome_of(ready.outcome, std::move(ready.text));
  }
  const std::filesystem::path tmp = plan.root / storage::tmp_dir_name(plan.step, plan.generation);
  try {
    publish(store, k + "report/" + std::to_string(plan.rank), write_my_shard(plan, tmp));
    trace_point("save.reported", plan.step);
  } catch (const std::exception& e) {
    out.error = rank_tag(plan.rank) + "could not report its shard: " + e.what();
    return out;
  }
  const std::optional<std::string> result = rank0.get(k + "result", Clock::now() + plan.timeout);
  if (!result) {
    out.outcome = rank0.superseded ? SaveOutcome::kSuperseded : SaveOutcome::kFailed;
    out.error = rank_tag(plan.rank) + rank0.why;
    return out;
  }
  Published published = parse_published(*result);
  if (published.outcome != SaveOutcome::kCommitted) return outcome_of(published.outcome, std::move(published.text));
  out.outcome = SaveOutcome::kCommitted;
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
    return outcome_of(SaveOutcome::kFailed,
                      rank_tag(plan.rank) + "checkpoint at step " + std::to_string(plan.step) + " failed: " + e.what());
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
