#include "resume_choice.h"

#include <algorithm>
#include <cctype>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string steps_text(const std::vector<std::int64_t>& steps) {
  std::string out;
  for (std::int64_t s : steps) out += (out.empty() ? "" : ", ") + std::to_string(s);
  return out;
}

}  // namespace

ResumeChoice choose_resume(const std::string& resume_from_checkpoint, const std::filesystem::path& checkpoints,
                           const std::vector<std::int64_t>& committed_steps,
                           const std::function<std::filesystem::path(std::int64_t)>& step_dir) {
  namespace fs = std::filesystem;
  const std::string word = lower(resume_from_checkpoint);
  if (word.empty() || word == "true") return {};
  if (word == "false") {
    if (committed_steps.empty()) return {};
    throw ConfigError("TrainingArguments.resume_from_checkpoint: false asks for a start from scratch, but " +
                      checkpoints.string() + " holds committed checkpoints (newest: step " +
                      std::to_string(committed_steps.back()) +
                      "), which a restart of this run must resume from; give a new output_dir, or move " +
                      checkpoints.string() + " aside");
  }
  const fs::path given = fs::weakly_canonical(fs::absolute(resume_from_checkpoint));
  // One of output_dir's own checkpoints?
  for (std::size_t i = 0; i < committed_steps.size(); ++i) {
    if (fs::weakly_canonical(fs::absolute(step_dir(committed_steps[i]))) != given) continue;
    if (i + 1 == committed_steps.size()) return {};
    const std::vector<std::int64_t> newer(committed_steps.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                          committed_steps.end());
    throw ConfigError("TrainingArguments.resume_from_checkpoint: " + resume_from_checkpoint + " is step " +
                      std::to_string(committed_steps[i]) +
                      " of this output_dir, which holds newer checkpoints (steps " + steps_text(newer) +
                      "): the rerun steps would be saved over them, and a restart would resume from the newest. Move "
                      "the newer step directories aside first, or resume into a new output_dir");
  }
  if (fs::weakly_canonical(fs::absolute(checkpoints)) == given.parent_path()) {
    throw ConfigError("TrainingArguments.resume_from_checkpoint: " + resume_from_checkpoint +
                      " is not a committed checkpoint of this output_dir (committed steps: " +
                      (committed_steps.empty() ? std::string("none") : steps_text(committed_steps)) +
                      "); `tenax ckpt ls " + checkpoints.string() + "` lists them");
  }
  if (!committed_steps.empty()) {
    ResumeChoice newest;
    newest.note = "resume_from_checkpoint " + resume_from_checkpoint + " is not followed: " + checkpoints.string() +
                  " already holds this run's checkpoints (newest: step " + std::to_string(committed_steps.back()) +
                  "), and a restarted run goes on from its own newest";
    return newest;
  }
  if (!fs::is_directory(given)) {
    throw ConfigError("TrainingArguments.resume_from_checkpoint: " + resume_from_checkpoint +
                      " is not a directory; give a checkpoint's step directory (<output_dir>/checkpoints/step-N, as "
                      "`tenax ckpt ls` lists them)");
  }
  return {ResumeChoice::From::kGiven, given, ""};
}

}  // namespace tenax::sdk::detail
