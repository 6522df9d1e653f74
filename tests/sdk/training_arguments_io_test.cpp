#include "tenax/sdk/training_arguments_io.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config_error.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

namespace fs = std::filesystem;

// A program's own options, with a field of every type the parser reads.
struct ProgramOptions {
  std::string data_dir = "data";
  std::int64_t max_length = 64;
  double dropout = 0.1;
  bool verbose = false;
  std::uint64_t shard_seed = 1;
  std::vector<std::string> tags;

  template <typename Field>
  void for_each_own_field(Field&& field) {
    field("data_dir", data_dir);
    field("max_length", max_length);
    field("dropout", dropout);
    field("verbose", verbose);
    field("shard_seed", shard_seed);
    field("tags", tags);
  }
};

// A parser over `args` and `program`, the latter in the [program] table.
ArgumentParser parser_for(TrainingArguments& args, ProgramOptions& program) {
  ArgumentParser parser(args);
  parser.add_section("program", [&program](auto&& field) { program.for_each_own_field(field); });
  return parser;
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tenax-args-io-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

using test_support::config_error;
using test_support::contains;

TEST(SdkArgumentParser, TomlSetsEveryFieldType) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  parser.load_toml(R"(
output_dir = "runs/x"            # string
learning_rate = 3e-5             # double
num_train_epochs = 2             # double from an integer
max_steps = 120                  # int64
seed = 7                         # uint64
bf16 = true                      # bool
report_to = ["jsonl"]            # list of strings
lr_scheduler_type = "polynomial"

[lr_scheduler_kwargs]
power = 2.0
lr_end = 1e-8

[program]
data_dir = "elsewhere"
max_length = 128
dropout = 0
verbose = true
shard_seed = 9
tags = ["a", "b"]
)",
                   "cfg.toml");
  EXPECT_EQ(args.output_dir, "runs/x");
  EXPECT_EQ(args.learning_rate, 3e-5);
  EXPECT_EQ(args.num_train_epochs, 2.0);
  EXPECT_EQ(args.max_steps, 120);
  EXPECT_EQ(args.seed, 7u);
  EXPECT_TRUE(args.bf16);
  EXPECT_EQ(args.report_to, std::vector<std::string>{"jsonl"});
  EXPECT_EQ(args.lr_scheduler_type, "polynomial");
  EXPECT_EQ(args.lr_scheduler_kwargs.power, 2.0);
  EXPECT_EQ(args.lr_scheduler_kwargs.lr_end, 1e-8);
  EXPECT_EQ(args.logging_steps, TrainingArguments().logging_steps) << "keys not in the file keep their values";
  EXPECT_EQ(program.data_dir, "elsewhere");
  EXPECT_EQ(program.max_length, 128);
  EXPECT_EQ(program.dropout, 0.0);
  EXPECT_TRUE(program.verbose);
  EXPECT_EQ(program.shard_seed, 9u);
  EXPECT_EQ(program.tags, (std::vector<std::string>{"a", "b"}));
}

TEST(SdkArgumentParser, ToTomlRoundTripsEveryField) {
  TrainingArguments args;
  ProgramOptions program;
  args.output_dir = "runs/\"quoted\" dir";
  args.learning_rate = 1.0 / 3.0;  // needs all 17 digits
  args.num_train_epochs = 1.0;
  args.max_steps = -1;
  args.seed = 1234567890123ull;
  args.bf16 = true;
  args.save_async = false;
  args.report_to = {};
  args.lr_scheduler_kwargs.power = 3.5;
  program.data_dir = "d";
  program.max_length = 33;
  program.dropout = 1e-300;
  program.verbose = true;
  program.shard_seed = 5;
  program.tags = {"x,y", "z"};
  const std::string text = parser_for(args, program).to_toml();

  TrainingArguments args2;
  ProgramOptions program2;
  parser_for(args2, program2).load_toml(text, "printed");
  EXPECT_EQ(args2.to_json(), args.to_json()) << text;
  EXPECT_EQ(program2.data_dir, program.data_dir);
  EXPECT_EQ(program2.max_length, program.max_length);
  EXPECT_EQ(program2.dropout, program.dropout);
  EXPECT_EQ(program2.verbose, program.verbose);
  EXPECT_EQ(program2.shard_seed, program.shard_seed);
  EXPECT_EQ(program2.tags, program.tags);
  EXPECT_TRUE(contains(text, "[lr_scheduler_kwargs]\n")) << text;
  EXPECT_TRUE(contains(text, "[program]\n")) << text;
}

TEST(SdkArgumentParser, GreaterIsBetterIsUnsetUntilTheFileOrTheCommandLineSetsIt) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  const std::string printed = parser.to_toml();
  EXPECT_TRUE(contains(printed, "# greater_is_better unset")) << printed;
  EXPECT_FALSE(contains(printed, "greater_is_better = ")) << printed;
  parser.load_toml("greater_is_better = false\nmetric_for_best_model = \"accuracy\"\n", "cfg.toml");
  ASSERT_TRUE(args.greater_is_better.has_value());
  EXPECT_FALSE(*args.greater_is_better) << "the user's false stands, even for an accuracy";
  EXPECT_TRUE(contains(parser.to_toml(), "greater_is_better = false\n"));
  parser.apply_overrides({"--greater-is-better"});
  EXPECT_EQ(args.greater_is_better, std::optional<bool>(true));
  parser.apply_overrides({"--greater_is_better", "no"});
  EXPECT_EQ(args.greater_is_better, std::optional<bool>(false));
  EXPECT_TRUE(contains(config_error([&] { parser.load_toml("greater_is_better = \"yes\"\n", "cfg.toml"); }),
                       "'greater_is_better' must be a boolean"));
}

TEST(SdkArgumentParser, UnknownKeyNamesFileLineKeyAndClosestName) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  const fs::path file = write_file("unknown.toml", "output_dir = \"x\"\n\nlearnin_rate = 1e-4\n");
  const std::string top = config_error([&] { parser.load_toml_file(file); });
  EXPECT_TRUE(contains(top, file.string() + ":3:")) << top;
  EXPECT_TRUE(contains(top, "'learnin_rate'")) << top;
  EXPECT_TRUE(contains(top, "did you mean 'learning_rate'")) << top;

  const std::string nested = config_error([&] { parser.load_toml("[program]\nmax_lenght = 3\n", "p.toml"); });
  EXPECT_TRUE(contains(nested, "p.toml:2:")) << nested;
  EXPECT_TRUE(contains(nested, "'program.max_lenght'")) << nested;
  EXPECT_TRUE(contains(nested, "'program.max_length'")) << nested;

  const std::string table = config_error([&] { parser.load_toml("[programme]\nmax_length = 3\n", "t.toml"); });
  EXPECT_TRUE(contains(table, "t.toml:1:")) << table;
  EXPECT_TRUE(contains(table, "'programme'")) << table;
  EXPECT_TRUE(contains(table, "did you mean 'program'")) << table;

  const std::string far = config_error([&] { parser.load_toml("zzz = 1\n", "f.toml"); });
  EXPECT_TRUE(contains(far, "unknown key 'zzz'")) << far;
  EXPECT_FALSE(contains(far, "did you mean")) << "no suggestion when nothing is close: " << far;
}

TEST(SdkArgumentParser, WrongTypeNamesKeyExpectedTypeAndLine) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  struct Case {
    std::string toml, expected[3];
  };
  const Case cases[] = {
      {"\nmax_steps = \"ten\"\n", {"w.toml:2:", "'max_steps'", "must be an integer, got a string"}},
      {"max_steps = 10.0\n", {"w.toml:1:", "'max_steps'", "integer, got a float"}},
      {"learning_rate = true\n", {"w.toml:1:", "'learning_rate'", "number, got a boolean"}},
      {"seed = -1\n", {"w.toml:1:", "'seed'", "non-negative integer, got -1"}},
      {"bf16 = \"yes\"\n", {"w.toml:1:", "'bf16'", "boolean, got a string"}},
      {"\n\nreport_to = [\"jsonl\", 3]\n", {"w.toml:3:", "'report_to'", "item 1 is an integer"}},
      {"report_to = \"jsonl\"\n", {"w.toml:1:", "'report_to'", "list of strings, got a string"}},
      {"lr_scheduler_kwargs = 3\n", {"w.toml:1:", "'lr_scheduler_kwargs'", "must be a table"}},
      {"[program]\nverbose = 1\n", {"w.toml:2:", "'program.verbose'", "boolean, got an integer"}},
      {"max_steps = \n", {"w.toml:1:", "not valid TOML", ""}},
  };
  for (const Case& c : cases) {
    const std::string error = config_error([&] { parser.load_toml(c.toml, "w.toml"); });
    for (const std::string& e : c.expected) EXPECT_TRUE(contains(error, e)) << c.toml << " -> " << error;
  }
  EXPECT_TRUE(contains(config_error([&] { parser.load_toml_file("/nonexistent/cfg.toml"); }), "/nonexistent/cfg.toml"));
}

TEST(SdkArgumentParser, CommandLineBeatsTheFileWhichBeatsTheDefaults) {
  TrainingArguments args;
  ProgramOptions program;
  args.logging_steps = 3;  // the program's default
  const fs::path file = write_file("precedence.toml",
                                   "output_dir = \"from-file\"\nmax_steps = 100\nlearning_rate = 1e-4\n"
                                   "[program]\nmax_length = 32\n");
  // --config comes last on purpose: the file is read first whatever the order.
  parser_for(args, program).parse({"--max_steps", "7", "--max-length", "16", "--config", file.string()});
  EXPECT_EQ(args.max_steps, 7);
  EXPECT_EQ(program.max_length, 16);
  EXPECT_EQ(args.learning_rate, 1e-4);
  EXPECT_EQ(args.output_dir, "from-file");
  EXPECT_EQ(args.logging_steps, 3);

  const std::string twice = config_error([&] {
    parser_for(args, program).parse({"--config", file.string(), "--config=" + file.string()});
  });
  EXPECT_TRUE(contains(twice, "--config is given twice")) << twice;
}

// A program that honours only some keys (the C API's embedded trainer) refuses the others by
// what the parser saw set, whatever the value.
TEST(SdkArgumentParser, SetKeysAreWhatTheFileAndTheCommandLineNamed) {
  TrainingArguments args;
  ArgumentParser parser(args);
  EXPECT_TRUE(parser.set_keys().empty());
  parser.load_toml("num_train_epochs = 3.0\nevaluation_strategy = \"no\"\n[lr_scheduler_kwargs]\npower = 2.0\n",
                   "job.toml");
  parser.apply_overrides({"--data-seed", "4", "--per_gpu_train_batch_size=2"});
  EXPECT_EQ(parser.set_keys(), (std::set<std::string>{"num_train_epochs", "lr_scheduler_kwargs.power", "eval_strategy",
                                                      "data_seed", "per_device_train_batch_size"}))
      << "a default value set explicitly counts; an old spelling counts under its key";
  EXPECT_EQ(args.data_seed, 4);
}

TEST(SdkArgumentParser, FlagFormsDashesBooleansAndLists) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  parser.apply_overrides({"--learning-rate",
                          "3e-5",
                          "--warmup_steps=4",
                          "--bf16",
                          "--full-determinism",
                          "false",
                          "--save_async=false",
                          "--disable_tqdm",
                          "--report_to",
                          "jsonl, tensorboard",
                          "--lr_scheduler_kwargs.power",
                          "2",
                          "--max_steps",
                          "-1",
                          "--seed",
                          "18446744073709551615",
                          "--verbose",
                          "--tags=a,b",
                          "--data-dir",
                          "--not-a-flag-but-a-value"});
  EXPECT_EQ(args.learning_rate, 3e-5);
  EXPECT_EQ(args.warmup_steps, 4);
  EXPECT_TRUE(args.bf16);
  EXPECT_FALSE(args.full_determinism);
  EXPECT_FALSE(args.save_async);
  EXPECT_TRUE(args.disable_tqdm);
  EXPECT_EQ(args.report_to, (std::vector<std::string>{"jsonl", "tensorboard"}));
  EXPECT_EQ(args.lr_scheduler_kwargs.power, 2.0);
  EXPECT_EQ(args.max_steps, -1);
  EXPECT_EQ(args.seed, 18446744073709551615ull);
  EXPECT_TRUE(program.verbose);
  EXPECT_EQ(program.tags, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(program.data_dir, "--not-a-flag-but-a-value");
  parser.apply_overrides({"--report_to="});
  EXPECT_TRUE(args.report_to.empty());
}

TEST(SdkArgumentParser, BadFlagsNameTheFlag) {
  TrainingArguments args;
  ProgramOptions program;
  ArgumentParser parser = parser_for(args, program);
  const auto error = [&](std::vector<std::string> flags) {
    return config_error([&] { parser.apply_overrides(flags); });
  };
  std::string e = error({"--learnin-rate", "1"});
  EXPECT_TRUE(contains(e, "--learnin-rate: unknown option")) << e;
  EXPECT_TRUE(contains(e, "did you mean '--learning_rate'")) << e;
  e = error({"--epochs", "1"});
  EXPECT_TRUE(contains(e, "'--num_train_epochs'")) << e;
  e = error({"--max_steps", "ten"});
  EXPECT_TRUE(contains(e, "--max_steps 'ten' is not an integer")) << e;
  e = error({"--max_steps", "99999999999999999999"});
  EXPECT_TRUE(contains(e, "--max_steps")) << e;
  e = error({"--seed", "-1"});
  EXPECT_TRUE(contains(e, "--seed '-1' is not a non-negative integer")) << e;
  e = error({"--learning_rate", "fast"});
  EXPECT_TRUE(contains(e, "--learning_rate 'fast' is not a number")) << e;
  e = error({"--bf16=maybe"});
  EXPECT_TRUE(contains(e, "--bf16 'maybe' is not a boolean")) << e;
  e = error({"--output_dir"});
  EXPECT_TRUE(contains(e, "--output_dir needs a value")) << e;
  e = error({"runs/x"});
  EXPECT_TRUE(contains(e, "unexpected argument 'runs/x'")) << e;
}

// `tenax train job.toml seed=3`: key=value where an option is expected; a flag's own value is
// taken as it stands, '=' and all.
TEST(SdkArgumentParser, KeyEqualsValueIsAnOptionAndAFlagsValueMayHoldAnEqualsSign) {
  TrainingArguments args;
  ArgumentParser parser(args);
  parser.apply_overrides({"seed=3", "--output_dir", "runs/a=b", "--bf16", "max_steps=7", "logging_dir=x=y"});
  EXPECT_EQ(args.seed, 3u);
  EXPECT_EQ(args.output_dir, "runs/a=b");
  EXPECT_TRUE(args.bf16);
  EXPECT_EQ(args.max_steps, 7);
  EXPECT_EQ(args.logging_dir, "x=y");
}

TEST(SdkArgumentParser, ParseValidatesAndTheErrorNamesTheField) {
  TrainingArguments args;
  ProgramOptions program;
  std::string e = config_error([&] {
    parser_for(args, program).parse({"--warmup_ratio", "1.5", "--output_dir", "x"});
  });
  EXPECT_TRUE(contains(e, "TrainingArguments.warmup_ratio")) << e;
  TrainingArguments fresh;
  e = config_error([&] { parser_for(fresh, program).parse({}); });
  EXPECT_TRUE(contains(e, "TrainingArguments.output_dir")) << e;
  const fs::path file = write_file("invalid.toml", "output_dir = \"x\"\non_save_error = \"retry\"\n");
  e = config_error([&] { parser_for(fresh, program).parse({"--config", file.string()}); });
  EXPECT_TRUE(contains(e, "TrainingArguments.on_save_error")) << e;
  TrainingArguments valid;
  EXPECT_EQ(config_error([&] { parser_for(valid, program).parse({"--output_dir", "x"}); }), "");
}

TEST(SdkArgumentParser, ASectionMayNotShadowAField) {
  TrainingArguments args;
  std::int64_t x = 0;
  ArgumentParser parser(args);
  EXPECT_THROW(parser.add_section("lr_scheduler_kwargs", [&](auto&& field) { field("x", x); }), std::logic_error);
  EXPECT_THROW(parser.add_section("mine", [&](auto&& field) { field("seed", x); }), std::logic_error);
  EXPECT_NO_THROW(parser.add_section("mine", [&](auto&& field) { field("x", x); }));
}

TEST(SdkArgumentParser, ClosestName) {
  const std::vector<std::string> known = {"learning_rate", "num_train_epochs", "seed", "save_steps"};
  EXPECT_EQ(closest_name("learnig_rate", known), "learning_rate");
  EXPECT_EQ(closest_name("epochs", known), "num_train_epochs");
  EXPECT_EQ(closest_name("save_step", known), "save_steps");
  EXPECT_EQ(closest_name("xyzzy_plugh", known), "");
}

}  // namespace
}  // namespace tenax::sdk
