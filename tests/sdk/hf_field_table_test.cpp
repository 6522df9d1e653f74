// transformers' TrainingArguments, field by field: each is a Tenax key, an old spelling read as
// one, or answered by sdk/src/hf_field_table.h (accepted when it asks for what Tenax does, else
// refused with a reason). The field lists are goldens of the pinned releases
// (tools/goldens/training_argument_fields.py).
#include "hf_field_table.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "config_error.h"
#include "tenax/core/error.h"
#include "tenax/sdk/training_arguments_io.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

struct PinnedFields {
  std::string version;
  std::vector<std::string> fields;  // TrainingArguments', then Seq2SeqTrainingArguments' own
};

std::vector<PinnedFields> pinned_releases() {
  std::vector<PinnedFields> out;
  for (const auto& entry : fs::directory_iterator(TENAX_SDK_GOLDENS_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("hf_training_argument_fields-", 0) != 0) continue;
    const auto golden = nlohmann::json::parse(std::ifstream(entry.path()));
    PinnedFields release{golden.at("transformers").get<std::string>(), {}};
    for (const char* list : {"TrainingArguments", "Seq2SeqTrainingArguments"}) {
      for (const auto& field : golden.at(list)) release.fields.push_back(field.get<std::string>());
    }
    out.push_back(std::move(release));
  }
  return out;
}

// Tenax's keys as transformers spells them: the top-level name of each for_each_field key.
std::set<std::string> tenax_keys() {
  std::set<std::string> out;
  TrainingArguments args;
  for_each_field(args, [&](const char* name, auto&) {
    const std::string key(name);
    out.insert(key.substr(0, key.find('.')));
  });
  return out;
}

// The error of reading `toml` (as job.toml), or of applying `flags`, into fresh arguments.
std::string toml_error(const std::string& toml) {
  TrainingArguments args;
  ArgumentParser parser(args);
  return test_support::config_error([&] { parser.load_toml(toml, "job.toml"); });
}

std::string flag_error(const std::vector<std::string>& flags) {
  TrainingArguments args;
  ArgumentParser parser(args);
  return test_support::config_error([&] { parser.apply_overrides(flags); });
}

using test_support::contains;

TEST(SdkHfFieldTable, EveryFieldOfThePinnedTransformersIsAKeyOrAnswered) {
  const auto releases = pinned_releases();
  ASSERT_GE(releases.size(), 2u) << "the goldens of transformers 4.44.2 and 5.23.0 are missing";
  const auto keys = tenax_keys();
  for (const PinnedFields& release : releases) {
    for (const std::string& field : release.fields) {
      const bool key = keys.count(field) > 0;
      const bool answered = find_hf_field(field) != nullptr;
      EXPECT_TRUE(key || answered) << "transformers " << release.version << "'s field '" << field
                                   << "' is neither a Tenax key nor in sdk/src/hf_field_table.cpp: answer it there";
      EXPECT_FALSE(key && answered) << "'" << field << "' is a Tenax key: its table entry would never be read";
    }
  }
}

TEST(SdkHfFieldTable, EveryEntryIsAFieldOfAPinnedReleaseWithAReasonAndAValidAlias) {
  std::set<std::string> pinned;
  for (const PinnedFields& release : pinned_releases()) pinned.insert(release.fields.begin(), release.fields.end());
  TrainingArguments args;
  ArgumentParser parser(args);
  for (const HfField& f : hf_field_table()) {
    const std::string name(f.name);
    EXPECT_TRUE(pinned.count(name)) << name << " is in no pinned transformers: a stale entry";
    EXPECT_FALSE(f.reason.empty()) << name;
    EXPECT_NE(f.reason.back(), '.') << name << ": reasons are completed by the messages";
    if (!f.alias_of.empty()) {
      EXPECT_TRUE(f.accepted.empty()) << name << ": an alias takes the values of its key";
      EXPECT_TRUE(tenax_keys().count(std::string(f.alias_of))) << name << " is an alias of no key";
    }
  }
}

TEST(SdkHfFieldTable, AValueThatAsksForWhatTenaxDoesIsAcceptedWithANote) {
  TrainingArguments args;
  ArgumentParser parser(args);
  // A TOML table is read in key order, so the notes are looked for, not indexed.
  const auto noted = [&](const std::string& text) {
    return std::any_of(parser.notes().begin(), parser.notes().end(),
                       [&](const std::string& line) { return contains(line, text); });
  };
  parser.load_toml(
      "push_to_hub = false\nadafactor = false\neval_delay = 0.0\nrun_name = \"cola\"\n"
      "eval_accumulation_steps = 4\n",
      "job.toml");
  EXPECT_EQ(parser.notes().size(), 5u);
  EXPECT_TRUE(noted("job.toml:5: 'eval_accumulation_steps = 4' changes nothing in Tenax: predictions already leave"));
  EXPECT_TRUE(
      noted("job.toml:1: 'push_to_hub = false' changes nothing in Tenax: Tenax does not upload to the Hugging "
            "Face Hub"));
  EXPECT_TRUE(noted("job.toml:2: 'adafactor = false' changes nothing in Tenax"));
  EXPECT_TRUE(noted("job.toml:3: 'eval_delay = 0.0' changes nothing")) << "the same number as the accepted 0";
  EXPECT_TRUE(noted("job.toml:4: 'run_name = \"cola\"' changes nothing")) << "any value of run_name";

  parser.apply_overrides({"--push_to_hub", "False", "--do_train", "--do_eval", "--hub_strategy=every_save"});
  EXPECT_EQ(parser.notes().size(), 9u);
  EXPECT_EQ(parser.notes()[5].rfind("'--push_to_hub False' changes nothing in Tenax", 0), 0u) << parser.notes()[5];
  EXPECT_EQ(parser.notes()[6].rfind("'--do_train' changes nothing in Tenax", 0), 0u) << parser.notes()[6];
  EXPECT_TRUE(noted("'--hub_strategy every_save' changes nothing"));
}

TEST(SdkHfFieldTable, AnyOtherValueIsRefusedWithTheReasonAndWhatIsAccepted) {
  const std::string hub = toml_error("output_dir = \"x\"\npush_to_hub = true\n");
  EXPECT_TRUE(contains(hub, "job.toml:2: 'push_to_hub = true' is not available in Tenax: Tenax does not upload"))
      << hub;
  EXPECT_TRUE(contains(hub, "huggingface-cli upload")) << "the way to get the effect: " << hub;
  EXPECT_TRUE(contains(hub, "(accepted here: false)")) << hub;

  const std::string adafactor = toml_error("adafactor = true\n");
  EXPECT_TRUE(contains(adafactor, "set optim = \"adafactor\"")) << adafactor;
  EXPECT_TRUE(contains(adafactor, "(accepted here: false)")) << adafactor;

  const std::string flag = flag_error({"--push_to_hub"});
  EXPECT_TRUE(contains(flag, "'--push_to_hub' is not available in Tenax")) << "a bare flag is true: " << flag;
  const std::string fsdp = toml_error("fsdp_config = { min_num_params = 1 }\n");
  EXPECT_TRUE(contains(fsdp, "'fsdp_config = {...}' is not available in Tenax: fully sharded")) << fsdp;
}

// transformers' fields used to get a "did you mean" of another meaning: fp16 -> bf16 (now
// honoured), eval_accumulation_steps -> gradient_accumulation_steps (now accepted: test below),
// hub_strategy -> eval_strategy.
TEST(SdkHfFieldTable, ATransformersFieldGetsItsReasonNotASuggestionOfAnotherMeaning) {
  for (const auto& [toml, reason] : std::vector<std::pair<std::string, std::string>>{
           {"fp16_full_eval = true\n", "evaluating with the model cast to float16 is not available"},
           {"hub_strategy = \"end\"\n", "Tenax does not upload to the Hugging Face Hub"},
           {"deepspeed = \"ds.json\"\n", "DeepSpeed is a Python library"}}) {
    const std::string e = toml_error(toml);
    EXPECT_TRUE(contains(e, reason)) << toml << " -> " << e;
    EXPECT_FALSE(contains(e, "did you mean")) << toml << " -> " << e;
    EXPECT_FALSE(contains(e, "unknown")) << toml << " -> " << e;
  }
  const std::string typo = toml_error("push_to_hb = false\n");
  EXPECT_TRUE(contains(typo, "unknown key 'push_to_hb' (did you mean 'push_to_hub'?)")) << typo;
  const std::string flag_typo = flag_error({"--fp61", "true"});
  EXPECT_TRUE(contains(flag_typo, "--fp61: unknown option (did you mean '--fp16'?)")) << flag_typo;
}

TEST(SdkHfFieldTable, AnOldSpellingIsReadAsItsTenaxKeyWithANote) {
  TrainingArguments args;
  ArgumentParser parser(args);
  parser.load_toml("evaluation_strategy = \"epoch\"\nno_cuda = true\n", "job.toml");
  EXPECT_EQ(args.eval_strategy.name(), "epoch");
  EXPECT_TRUE(args.use_cpu);
  ASSERT_EQ(parser.notes().size(), 2u);
  EXPECT_TRUE(contains(parser.notes()[0], "job.toml:1: 'evaluation_strategy' is read as 'eval_strategy'"))
      << parser.notes()[0];

  parser.apply_overrides({"--per_gpu_train_batch_size", "4", "--evaluation-strategy=steps"});
  EXPECT_EQ(args.per_device_train_batch_size, 4);
  EXPECT_EQ(args.eval_strategy.name(), "steps");
  EXPECT_TRUE(contains(parser.notes()[2], "--per_gpu_train_batch_size is read as --per_device_train_batch_size"))
      << parser.notes()[2];
  const std::string wrong_type = toml_error("evaluation_strategy = 1\n");
  EXPECT_TRUE(contains(wrong_type, "'evaluation_strategy' must be a string")) << wrong_type;
}

// A command line written for transformers' HfArgumentParser says True and False.
TEST(SdkHfFieldTable, BooleansAreReadInTransformersSpellings) {
  TrainingArguments args;
  ArgumentParser parser(args);
  parser.apply_overrides({"--bf16", "True", "--full_determinism", "y", "--disable_tqdm=FALSE"});
  EXPECT_TRUE(args.bf16);
  EXPECT_TRUE(args.full_determinism);
  EXPECT_FALSE(args.disable_tqdm);
  EXPECT_TRUE(contains(flag_error({"--bf16=maybe"}), "--bf16 'maybe' is not a boolean"))
      << flag_error({"--bf16=maybe"});
}

// docs/training-arguments.md is the table for users: every field of every pinned release has a row.
TEST(SdkHfFieldTable, TheGuideHasARowForEveryField) {
  std::ifstream in(fs::path(TENAX_SOURCE_DIR) / "docs" / "training-arguments.md");
  ASSERT_TRUE(in) << "docs/training-arguments.md is missing";
  std::stringstream text;
  text << in.rdbuf();
  for (const PinnedFields& release : pinned_releases()) {
    for (const std::string& field : release.fields) {
      EXPECT_TRUE(contains(text.str(), "| `" + field + "` |"))
          << "docs/training-arguments.md has no row for transformers " << release.version << "'s '" << field << "'";
    }
  }
}

}  // namespace
}  // namespace tenax::sdk
