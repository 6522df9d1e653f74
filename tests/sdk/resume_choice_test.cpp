// resume_from_checkpoint against what output_dir holds (sdk/src/resume_choice.h), by table.
#include "resume_choice.h"

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config_error.h"
#include "support/temp_dir.h"

namespace tenax::sdk::detail {
namespace {

namespace fs = std::filesystem;
using test_support::config_error;
using test_support::contains;

struct Case {
  const char* what;
  std::string argument;                 // "{ours}" / "{other}" stand for a directory of this test
  std::vector<std::int64_t> committed;  // output_dir's committed steps
  ResumeChoice::From from;
  const char* note_or_error;  // "" : neither; else a part of the note (success) or of the error
  bool refused;
};

TEST(SdkResumeChoice, FollowsTheArgumentOnlyWhereARestartCannotGoBackInTime) {
  const fs::path root = tenax::testing::fresh_dir("resume-choice", "table");
  const fs::path checkpoints = root / "run" / "checkpoints";
  const fs::path other = root / "other" / "checkpoints" / "step-000000040";
  fs::create_directories(other);
  const auto step_dir = [&](std::int64_t s) { return checkpoints / ("step-" + std::to_string(s)); };
  const std::vector<Case> cases = {
      {"unset: the newest", "", {20, 40}, ResumeChoice::From::kNewest, "", false},
      {"true: the newest", "True", {20, 40}, ResumeChoice::From::kNewest, "", false},
      {"false in an empty output_dir", "false", {}, ResumeChoice::From::kNewest, "", false},
      {"false where checkpoints are", "false", {20}, ResumeChoice::From::kNewest, "a start from scratch", true},
      {"our newest", "{ours}40", {20, 40}, ResumeChoice::From::kNewest, "", false},
      {"our older one",
       "{ours}20",
       {20, 40, 60},
       ResumeChoice::From::kNewest,
       "newer checkpoints (steps 40, 60)",
       true},
      {"no such step of ours", "{ours}30", {20, 40}, ResumeChoice::From::kNewest, "not a committed checkpoint", true},
      {"another run's, to start", "{other}", {}, ResumeChoice::From::kGiven, "", false},
      {"another run's after our first save", "{other}", {20}, ResumeChoice::From::kNewest, "is not followed", false},
      {"a path that is not there", "/nonexistent/step-5", {}, ResumeChoice::From::kNewest, "is not a directory", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::string argument = c.argument;
    if (argument.rfind("{ours}", 0) == 0) argument = step_dir(std::stoll(argument.substr(6))).string();
    if (argument == "{other}") argument = other.string();
    ResumeChoice choice;
    const std::string error =
        config_error([&] { choice = choose_resume(argument, checkpoints, c.committed, step_dir); });
    if (c.refused) {
      EXPECT_TRUE(contains(error, "TrainingArguments.resume_from_checkpoint")) << error;
      EXPECT_TRUE(contains(error, c.note_or_error)) << error;
      continue;
    }
    ASSERT_EQ(error, "");
    EXPECT_EQ(choice.from, c.from);
    if (c.from == ResumeChoice::From::kGiven) {
      EXPECT_EQ(choice.dir, fs::weakly_canonical(other));
    }
    EXPECT_TRUE(std::string(c.note_or_error).empty() ? choice.note.empty() : contains(choice.note, c.note_or_error))
        << choice.note;
  }
}

}  // namespace
}  // namespace tenax::sdk::detail
