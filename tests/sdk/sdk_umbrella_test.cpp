// The C++ SDK's installed surface: tenax/sdk.h includes every header installed under
// tenax/sdk/ (so that a program needs only it), and compiles on its own: this unit includes
// nothing of Tenax but it, and its target sees only the installed include directories.
#include "tenax/sdk.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <type_traits>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

// The headers a file includes with #include "...", as written.
std::set<std::string> quoted_includes(const fs::path& file) {
  std::ifstream in(file);
  EXPECT_TRUE(in) << "cannot read " << file;
  std::set<std::string> names;
  const std::string directive = "#include \"";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(directive, 0) != 0) continue;
    const auto end = line.find('"', directive.size());
    if (end != std::string::npos) names.insert(line.substr(directive.size(), end - directive.size()));
  }
  return names;
}

TEST(SdkPublicHeaders, UmbrellaIncludesEveryInstalledSdkHeader) {
  const fs::path include_dir = fs::path(TENAX_SOURCE_DIR) / "sdk" / "include";
  const std::set<std::string> included = quoted_includes(include_dir / "tenax" / "sdk.h");
  int installed = 0;
  for (const auto& entry : fs::recursive_directory_iterator(include_dir / "tenax" / "sdk")) {
    if (entry.path().extension() != ".h") continue;
    ++installed;
    const std::string name = fs::relative(entry.path(), include_dir).generic_string();
    EXPECT_EQ(included.count(name), 1u)
        << name << " is installed but tenax/sdk.h does not include it: add it to the umbrella, or move it to "
        << "sdk/src if no program calls it";
  }
  EXPECT_GT(installed, 0) << "no headers under " << include_dir;
}

TEST(SdkPublicHeaders, UmbrellaAloneDeclaresWhatATrainingProgramUses) {
  // Compiles only because tenax/sdk.h brings each of these in by itself.
  static_assert(std::is_class_v<tenax::sdk::Trainer>);
  static_assert(std::is_class_v<tenax::sdk::TrainingArguments>);
  static_assert(std::is_class_v<tenax::sdk::TrainerCallback>);
  static_assert(std::is_class_v<tenax::sdk::ResumableSampler>);
  static_assert(std::is_class_v<tenax::sdk::GradSync>);
  static_assert(std::is_class_v<tenax::sdk::AutocastGuard>);
  static_assert(std::is_class_v<tenax::sdk::PreemptionSignals>);
  static_assert(std::is_class_v<tenax::elastic::WorkerContext>);
  tenax::sdk::TrainingArguments args;
  args.output_dir = "unused";
  EXPECT_NO_THROW(args.validate());
}

}  // namespace
