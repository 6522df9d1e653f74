// Trainer's reports for people and scripts, with transformers' names and files: log_metrics
// (an aligned block in the log), save_metrics (<split>_results.json, all_results.json) and
// save_state (trainer_state.json). Rank 0 writes; the files are replaced atomically, so a reader
// (a workflow's next stage) never sees half of one.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// transformers' metrics_format: runtimes as its _secs_to_timedelta prints them (h:mm:ss and the
// fraction cut to 2 digits), everything else rounded to 4 decimals; integers stay integers.
std::string formatted(const std::string& key, double value) {
  if (ends_with(key, "_runtime") && std::isfinite(value) && value >= 0) {
    const auto seconds = static_cast<std::int64_t>(value);
    const auto centis =
        static_cast<std::int64_t>((value - static_cast<double>(seconds)) * 100);  // cut, as Python's int()
    return fmt::format("{}:{:02}:{:02}.{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60, centis);
  }
  if (std::isfinite(value) && value == std::floor(value) && std::abs(value) < 1e15) {
    return fmt::format("{}", static_cast<std::int64_t>(value));
  }
  return fmt::format("{}", std::round(value * 1e4) / 1e4);
}

nlohmann::json as_json(const Logs& metrics) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : metrics) out[key] = value;
  return out;
}

}  // namespace

std::map<std::string, double> TrainOutput::metrics() const {
  return {{"train_runtime", train_runtime_s},
          {"train_samples_per_second", train_samples_per_second},
          {"train_loss", training_loss}};
}

void Trainer::log_metrics(const std::string& split, const Logs& metrics) const {
  if (context_.rank() != 0 || metrics.empty()) return;
  std::size_t key_width = 0, value_width = 0;
  std::map<std::string, std::string> shown;
  for (const auto& [key, value] : metrics) {
    shown[key] = formatted(key, value);
    key_width = std::max(key_width, key.size());
    value_width = std::max(value_width, shown[key].size());
  }
  std::string block = fmt::format("***** {} metrics *****", split);
  for (const auto& [key, text] : shown) block += fmt::format("\n  {:<{}} = {:>{}}", key, key_width, text, value_width);
  logger("tenax.trainer")->info("{}", block);
}

void Trainer::save_metrics(const std::string& split, const Logs& metrics, bool combined) const {
  if (context_.rank() != 0) return;
  const std::filesystem::path dir = args_.output_dir;
  std::filesystem::create_directories(dir);
  files::atomic_write(dir / (split + "_results.json"), as_json(metrics).dump(4) + "\n");
  if (!combined) return;
  const std::filesystem::path all = dir / "all_results.json";
  nlohmann::json merged = nlohmann::json::object();
  if (std::filesystem::exists(all)) {
    merged = nlohmann::json::parse(files::read_all(all), nullptr, /*allow_exceptions=*/false);
    if (!merged.is_object()) {
      throw StorageError(all.string() + " is not a JSON object; move it aside (save_metrics merges into it)");
    }
  }
  merged.update(as_json(metrics));
  files::atomic_write(all, merged.dump(4) + "\n");
}

void Trainer::save_state() const {
  if (context_.rank() != 0) return;
  std::filesystem::create_directories(args_.output_dir);
  files::atomic_write(std::filesystem::path(args_.output_dir) / "trainer_state.json", state_.to_json().dump(2) + "\n");
}

void Trainer::report_data_wait(double waited_seconds, double train_seconds) const {
  if (train_seconds <= 0) return;
  const double share = 100.0 * waited_seconds / train_seconds;
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  // A tenth of the loop spent waiting is where more loading threads start to pay.
  const bool slow = share > 10.0;
  log->log(slow ? spdlog::level::warn : spdlog::level::info,
           "data path: the training loop waited {:.2f} s for batches, {:.1f} % of {:.1f} s (dataloader_num_workers = "
           "{}){}",
           waited_seconds, share, train_seconds, args_.dataloader_num_workers,
           slow ? "; loading sets the step rate: raise dataloader_num_workers" : "");
}

}  // namespace tenax::sdk
