// The checkpoints root (<output_dir>/checkpoints): where a save writes before it commits, the
// commit itself, and which steps are committed (DESIGN.md 5).
//
// A step directory is committed when it holds manifest.json. Everything else (".tmp-*",
// ".old-*", step directories without a manifest) is garbage: ignored when loading and removed
// by remove_uncommitted().
//
// Collectives: none here. prepare_tmp empties the tmp directory, so call it on rank 0 and
// barrier before any rank writes (or on every rank, each before a barrier that precedes all
// writes); commit is called by rank 0 only, after every rank's shard is durable. remove_uncommitted must not run while
// a save is in flight. Thread-safety: the object is immutable; concurrent calls on the same root from different
// processes are the caller's to order.
//
//   CheckpointDirectory dir(output_dir / "checkpoints");
//   auto tmp = dir.prepare_tmp(step, generation);
//   ... every rank: write_shard(tmp / shard_file_name(rank, world), ...) ...
//   if (rank == 0) { Status s = dir.commit(tmp, make_manifest(step, epoch, generation, infos)); }
//   std::optional<std::int64_t> resume = dir.latest_step();
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/storage/manifest.h"

namespace tenax::storage {

/// Which committed checkpoints survive a prune: transformers' save_total_limit (its
/// _sorted_checkpoints and _rotate_checkpoints). The newest save_total_limit survive, the best
/// counted among them: the best and the newest always survive, so with a best older than the
/// newest, save_total_limit - 2 others do (and with a limit of 1, two survive: the best and the
/// newest). The checkpoint `latest` names is never removed either.
struct RetentionPolicy {
  /// How many committed checkpoints survive; 0 keeps all.
  int save_total_limit = 0;
  /// The best by metric_for_best_model, if one is known.
  std::optional<std::int64_t> best_step;
};

class CheckpointDirectory {
 public:
  /// `root` is <output_dir>/checkpoints; it need not exist yet.
  explicit CheckpointDirectory(std::filesystem::path root);

  /// The checkpoints root.
  const std::filesystem::path& root() const { return root_; }

  /// Creates root/.tmp-step-<step>-g<generation>/ (and root), removing stale contents left
  /// under the same name by an earlier attempt. Throws StorageError.
  std::filesystem::path prepare_tmp(std::int64_t step, std::int64_t generation) const;

  /// Rank 0 only. Checks that every shard in `manifest` is in `tmp_dir` with its recorded
  /// size, writes manifest.json there (atomic write + fsync), renames tmp_dir to
  /// step-<step> (an older directory of the same step is moved aside and deleted afterwards),
  /// fsyncs the root and atomically points `latest` at it. kFailedPrecondition on any failure.
  [[nodiscard]] Status commit(const std::filesystem::path& tmp_dir, const Manifest& manifest) const;

  /// Steps whose directory holds manifest.json, ascending.
  std::vector<std::int64_t> committed_steps() const;

  /// The step `latest` names if that one is committed, else the newest committed step.
  std::optional<std::int64_t> latest_step() const;

  /// ".tmp-*" and ".old-*" directories and step directories without a manifest.
  std::vector<std::filesystem::path> uncommitted_dirs() const;

  /// Deletes everything uncommitted_dirs() lists. Throws StorageError.
  void remove_uncommitted() const;

  /// Rank 0 only, right after a commit (so the newest checkpoint is never the one at risk):
  /// removes committed steps beyond `policy`, oldest first; never the newest, never the one
  /// `latest` names, never policy.best_step. Each is first renamed to ".old-step-*" (so a crash
  /// while deleting leaves garbage, never a half checkpoint that loads), then deleted.
  /// Returns the steps removed. Throws StorageError.
  std::vector<std::int64_t> prune(const RetentionPolicy& policy) const;

  /// root/step-<step> (whether or not it exists).
  std::filesystem::path step_dir(std::int64_t step) const;

 private:
  std::filesystem::path root_;
};

}  // namespace tenax::storage
