// Which checkpoint a run starts from: TrainingArguments::resume_from_checkpoint against what
// output_dir holds. A pure decision (tested by table, resume_choice_test.cpp); the Trainer reads
// the directory and loads what it says.
//
// The rule that makes it safe under restarts: once output_dir holds this run's own committed
// checkpoints, a restart resumes from the newest of them, whatever the argument says. So a path
// elsewhere only starts a run (a warm start into a new output_dir; a failure before the first
// save starts from it again), and nothing makes a restart go back in time or start over:
//   ""  or "true"   the newest committed checkpoint in output_dir, if any (transformers' True)
//   "false"         start from scratch: only where output_dir holds no checkpoint (refused
//                   otherwise: a restart could not tell it from a new run)
//   a step directory of output_dir   the newest one, or refused when newer ones exist (they would
//                   be overwritten by the rerun steps and a restart would take them)
//   another step directory   used when output_dir holds none yet; else the newest in output_dir,
//                   with a note
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace tenax::sdk::detail {

struct ResumeChoice {
  enum class From : std::uint8_t { kNewest, kGiven };
  From from = From::kNewest;
  std::filesystem::path dir;  ///< kGiven: the step directory to load
  std::string note;           ///< for the log, when the argument was not followed as written
};

/// `checkpoints` is output_dir's checkpoint directory, `committed_steps` its committed steps in
/// increasing order, `step_dir(s)` the directory of step s. Throws ConfigError naming
/// resume_from_checkpoint when the argument cannot be followed safely.
ResumeChoice choose_resume(const std::string& resume_from_checkpoint, const std::filesystem::path& checkpoints,
                           const std::vector<std::int64_t>& committed_steps,
                           const std::function<std::filesystem::path(std::int64_t)>& step_dir);

}  // namespace tenax::sdk::detail
