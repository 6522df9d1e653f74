// Op-level profile of a window of training steps, for bench/profile_finetune.sh: libtorch's
// autograd profiler runs from the start of step FIRST to the end of step LAST and writes a
// Chrome trace that bench/profile_summary.py splits by op and by phase. It is bench tooling,
// not a Trainer feature: off unless TENAX_PROFILE_TRACE names the trace file, so it costs
// `tenax train` nothing otherwise. The legacy profiler (RecordProfile) because it is the one API
// that both libtorch 1.13 and 2.x have; it records the ops of the thread that enabled it, which
// is where the Trainer runs forward, backward (CPU autograd runs on the calling thread) and the
// optimizer.
// Thread-safety: called from the training thread only, as every TrainerCallback.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/trainer_callback.h"

namespace tenax::train {

class ProfileSteps final : public sdk::TrainerCallback {
 public:
  /// From TENAX_PROFILE_TRACE (the trace file; unset or empty: no profiling, nullptr) and
  /// TENAX_PROFILE_STEPS ("FIRST:LAST", 1-based and inclusive; default 6:25, past the first
  /// steps' allocations). The window's wall time goes to TRACE.meta.json beside the trace.
  static std::shared_ptr<ProfileSteps> from_env() {
    const char* trace = std::getenv("TENAX_PROFILE_TRACE");
    if (trace == nullptr || *trace == '\0') return nullptr;
    std::int64_t first = 6, last = 25;
    if (const char* steps = std::getenv("TENAX_PROFILE_STEPS"); steps != nullptr && *steps != '\0') {
      const std::string s(steps);
      const auto colon = s.find(':');
      try {
        if (colon == std::string::npos) throw std::invalid_argument(s);
        first = std::stoll(s.substr(0, colon));
        last = std::stoll(s.substr(colon + 1));
      } catch (const std::exception&) {
        throw ConfigError("TENAX_PROFILE_STEPS: expected FIRST:LAST (e.g. 6:25), got '" + s + "'");
      }
      if (first < 1 || last < first) {
        throw ConfigError("TENAX_PROFILE_STEPS: need 1 <= FIRST <= LAST, got '" + s + "'");
      }
    }
    return std::make_shared<ProfileSteps>(trace, first, last);
  }

  ProfileSteps(std::string trace, std::int64_t first, std::int64_t last)
      : trace_(std::move(trace)), first_(first), last_(last) {}

  void on_step_begin(const sdk::TrainingArguments&, sdk::TrainerState& state, sdk::TrainerControl&) override {
    if (state.global_step + 1 != first_ || recording_ != nullptr) return;
    start_ = std::chrono::steady_clock::now();
    recording_ = std::make_unique<torch::autograd::profiler::RecordProfile>(trace_);
  }

  void on_step_end(const sdk::TrainingArguments&, sdk::TrainerState& state, sdk::TrainerControl&) override {
    if (state.global_step != last_ || recording_ == nullptr) return;
    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    recording_.reset();  // writes the trace
    std::ofstream(trace_ + ".meta.json") << "{\"system\":\"tenax\",\"first_step\":" << first_
                                         << ",\"last_step\":" << last_ << ",\"wall_s\":" << wall_s << "}\n";
    logger("tenax.train")->info("profile of steps {}..{} ({:.3f} s) written to {}", first_, last_, wall_s, trace_);
  }

 private:
  std::string trace_;
  std::int64_t first_, last_;
  std::chrono::steady_clock::time_point start_;
  std::unique_ptr<torch::autograd::profiler::RecordProfile> recording_;
};

}  // namespace tenax::train
