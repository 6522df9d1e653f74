#include "tenax/storage/checkpoint_directory.h"

#include <algorithm>
#include <system_error>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/core/trace_point.h"
#include "tenax/storage/layout.h"

namespace tenax::storage {
namespace fs = std::filesystem;
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(fs::symlink_status(p, ec)) && !ec;
}

bool has_manifest(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kManifestFile, ec) && !ec;
}

// Sub-directories of root; empty when root does not exist. Throws StorageError otherwise.
std::vector<fs::path> list_dirs(const fs::path& root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  fs::directory_iterator it(root, ec);
  if (ec) throw StorageError("cannot list " + root.string() + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (is_dir(it->path())) out.push_back(it->path());
  }
  if (ec) throw StorageError("cannot list " + root.string() + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

void remove_tree(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
  if (ec) throw StorageError("cannot remove " + p.string() + ": " + ec.message());
}

std::string trim(std::string s) {
  const char* ws = " \t\r\n";
  s.erase(0, s.find_first_not_of(ws));
  const auto end = s.find_last_not_of(ws);
  s.erase(end == std::string::npos ? 0 : end + 1);
  return s;
}

// Refuses a commit whose shards are not all in place: a bug or a lost rank, never a checkpoint.
void check_shards_present(const fs::path& tmp_dir, const Manifest& manifest) {
  for (const ShardSummary& shard : manifest.shards) {
    const fs::path file = tmp_dir / shard.file;
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) throw StorageError("shard " + file.string() + " is missing: " + ec.message());
    if (size != shard.bytes) {
      throw StorageError("shard " + file.string() + " has " + std::to_string(size) + " bytes but its rank reported " +
                         std::to_string(shard.bytes));
    }
  }
}

}  // namespace

CheckpointDirectory::CheckpointDirectory(fs::path root) : root_(std::move(root)) {}

fs::path CheckpointDirectory::step_dir(std::int64_t step) const { return root_ / step_dir_name(step); }

fs::path CheckpointDirectory::prepare_tmp(std::int64_t step, std::int64_t generation) const {
  const fs::path tmp = root_ / tmp_dir_name(step, generation);
  remove_tree(tmp);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) throw StorageError("cannot create " + tmp.string() + ": " + ec.message());
  return tmp;
}

Status CheckpointDirectory::commit(const fs::path& tmp_dir, const Manifest& manifest) const {
  const fs::path target = step_dir(manifest.step);
  try {
    if (!is_dir(tmp_dir)) throw StorageError(tmp_dir.string() + " is not a directory");
    check_shards_present(tmp_dir, manifest);

    // 1. The manifest, durable inside the tmp dir (atomic_write fsyncs file and directory).
    files::atomic_write(tmp_dir / kManifestFile, manifest_to_string(manifest));
    files::fsync_dir(tmp_dir);
    trace_point("save.manifest.written", manifest.step);

    // 2. A directory cannot be renamed over a non-empty one: an earlier save of this step
    //    (by an older generation) is moved aside first and deleted once the new one is in place.
    fs::path aside;
    if (fs::exists(target)) {
      aside = root_ / (".old-" + step_dir_name(manifest.step) + "-g" + std::to_string(manifest.generation));
      remove_tree(aside);
      files::durable_rename(target, aside);
    }

    // 3. The commit point: rename + fsync of the root.
    files::durable_rename(tmp_dir, target);
    trace_point("save.renamed", manifest.step);

    // 4. `latest`, atomically (tmp + fsync + rename + fsync root).
    files::atomic_write(root_ / kLatestFile, step_dir_name(manifest.step));
    trace_point("save.latest.written", manifest.step);

    if (!aside.empty()) remove_tree(aside);
  } catch (const StorageError& e) {
    return Status(StatusCode::kFailedPrecondition, "commit of " + target.string() + " failed: " + e.what());
  } catch (const fs::filesystem_error& e) {
    return Status(StatusCode::kFailedPrecondition, "commit of " + target.string() + " failed: " + e.what());
  }
  logger("tenax.storage")->info("committed checkpoint {}", target.string());
  return Status::ok();
}

std::vector<std::int64_t> CheckpointDirectory::committed_steps() const {
  std::vector<std::int64_t> steps;
  for (const fs::path& dir : list_dirs(root_)) {
    const auto step = parse_step_dir_name(dir.filename().string());
    if (step && has_manifest(dir)) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<std::int64_t> CheckpointDirectory::latest_step() const {
  const std::vector<std::int64_t> steps = committed_steps();
  if (steps.empty()) return std::nullopt;
  std::error_code ec;
  if (fs::is_regular_file(root_ / kLatestFile, ec)) {
    try {
      const auto named = parse_step_dir_name(trim(files::read_all(root_ / kLatestFile)));
      if (named && std::binary_search(steps.begin(), steps.end(), *named)) return named;
    } catch (const StorageError& e) {
      logger("tenax.storage")->warn("ignoring unreadable {}: {}", (root_ / kLatestFile).string(), e.what());
    }
  }
  return steps.back();
}

std::vector<fs::path> CheckpointDirectory::uncommitted_dirs() const {
  std::vector<fs::path> out;
  for (const fs::path& dir : list_dirs(root_)) {
    const std::string name = dir.filename().string();
    if (starts_with(name, ".tmp-step-") || starts_with(name, ".old-step-") ||
        (parse_step_dir_name(name) && !has_manifest(dir))) {
      out.push_back(dir);
    }
  }
  return out;
}

std::vector<std::int64_t> CheckpointDirectory::prune(const RetentionPolicy& policy) const {
  std::vector<std::int64_t> removed;
  if (policy.save_total_limit <= 0) return removed;
  // transformers' order: oldest first, the best moved to just before the newest; the last
  // `limit` of it survive (a limit of 1 keeps 2 when the best is not the newest).
  std::vector<std::int64_t> order = committed_steps();
  if (order.size() <= static_cast<std::size_t>(policy.save_total_limit)) return removed;
  std::size_t limit = static_cast<std::size_t>(policy.save_total_limit);
  const auto best = policy.best_step ? std::find(order.begin(), order.end(), *policy.best_step) : order.end();
  if (best != order.end() && best + 1 != order.end()) {
    std::rotate(best, best + 1, order.end() - 1);
    if (limit == 1) limit = 2;
  }
  const std::optional<std::int64_t> latest = latest_step();
  for (std::size_t i = 0; i + limit < order.size(); ++i) {
    const std::int64_t step = order[i];
    if (step == latest) continue;
    const fs::path aside = root_ / (".old-" + step_dir_name(step) + "-pruned");
    remove_tree(aside);
    files::durable_rename(step_dir(step), aside);
    remove_tree(aside);
    removed.push_back(step);
  }
  if (!removed.empty()) {
    logger("tenax.storage")
        ->info("retention (save_total_limit {}): removed {} older checkpoint(s)", policy.save_total_limit,
               removed.size());
  }
  return removed;
}

void CheckpointDirectory::remove_uncommitted() const {
  // A re-save of a step moves the committed one aside (".old-step-N-gG") before renaming the
  // new one in: a process killed between the two renames left no step-N, and `latest` may name
  // it. The aside copy is still a whole committed checkpoint: put it back before anything is
  // deleted (the new save never reached its commit point). Without this the recovery deleted
  // both copies, and with save_total_limit 1 every checkpoint of the job was gone.
  for (const fs::path& dir : list_dirs(root_)) {
    const std::string name = dir.filename().string();
    if (!starts_with(name, ".old-step-") || !has_manifest(dir)) continue;
    const auto dash = name.find("-g", 5);
    const auto step = parse_step_dir_name(name.substr(5, dash == std::string::npos ? std::string::npos : dash - 5));
    if (!step || fs::exists(step_dir(*step))) continue;
    logger("tenax.storage")
        ->warn(
            "restoring {} as {}: a re-save of that step was cut off between setting the committed one aside "
            "and committing its own",
            dir.string(), step_dir(*step).string());
    files::durable_rename(dir, step_dir(*step));
  }
  // atomic_write's temporaries of `latest` ("latest.tmp.<pid>") left by a killed writer.
  std::error_code ec;
  for (fs::directory_iterator it(root_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (starts_with(name, (std::string(kLatestFile) + ".tmp.").c_str()) && it->is_regular_file(ec)) {
      std::error_code removed;
      fs::remove(it->path(), removed);
    }
  }
  for (const fs::path& dir : uncommitted_dirs()) {
    logger("tenax.storage")->info("removing uncommitted checkpoint directory {}", dir.string());
    remove_tree(dir);
  }
}

}  // namespace tenax::storage
