// One node's generations: numbered above the job's GenerationFence and recorded in it before
// their workers start (as the rendezvous does for multi-node jobs), so that a rerun in the same
// directory goes on above the last run's numbers, whose checkpoints its workers could otherwise
// not commit. The workers' store is the agent's own key-value service.
#include <filesystem>

#include "free_port.h"
#include "generation_claim.h"
#include "generation_source.h"
#include "tenax/core/error.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/kv_service.h"

namespace tenax::launcher {
namespace {

class LocalGenerations final : public GenerationSource {
 public:
  LocalGenerations(const RunOptions& options, elastic::KvService& service, const std::filesystem::path& control_dir,
                   std::shared_ptr<spdlog::logger> log)
      : options_(options), service_(service), fence_(control_dir), log_(std::move(log)) {}

  // One node declares each generation at once: there is no wait for local_work_done to end.
  std::variant<GenerationPlan, Stop> next(int restarts, const std::function<bool()>& /*local_work_done*/) override {
    GenerationPlan plan;
    plan.generation = static_cast<int>(advance_fence_from(fence_, next_generation_));
    plan.world_size = options_.nproc_per_node;
    plan.master_port = pick_free_port();
    plan.store_endpoint = service_.endpoint();
    plan.restart_count = restarts;
    return plan;
  }

  std::optional<Stop> report(const Decision& decision, const GenerationPlan& plan) override {
    if (decision.action != RunAction::kRestart) return std::nullopt;
    const std::string old_prefix = "gen/" + std::to_string(plan.generation) + "/";
    try {
      service_.drop_prefix(old_prefix);
    } catch (const Error& e) {
      log_->warn("could not drop the keys of generation {} ({}): {}", plan.generation, old_prefix, e.what());
    }
    next_generation_ = plan.generation + 1;
    return std::nullopt;
  }

  void close(const Stop&) override {}
  std::string endpoint() const override { return service_.endpoint(); }

 private:
  const RunOptions& options_;
  elastic::KvService& service_;
  const elastic::GenerationFence fence_;
  std::shared_ptr<spdlog::logger> log_;
  int next_generation_ = 0;
};

}  // namespace

std::unique_ptr<GenerationSource> local_generations(const RunOptions& options, elastic::KvService& service,
                                                    const std::filesystem::path& control_dir,
                                                    std::shared_ptr<spdlog::logger> log) {
  return std::make_unique<LocalGenerations>(options, service, control_dir, std::move(log));
}

}  // namespace tenax::launcher
