#include "ckpt_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ckpt_export.h"
#include "ckpt_inspect.h"
#include "tenax/core/checksum.h"
#include "tenax/core/exit_codes.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"

namespace tenax::launcher {
namespace {

int list(const std::string& root) {
  storage::CheckpointDirectory dir(root);
  const auto steps = dir.committed_steps();
  const auto latest = dir.latest_step();
  if (steps.empty()) std::cout << "no committed checkpoint in " << root << "\n";
  for (auto step : steps) {
    auto reader = storage::CheckpointReader::open(dir.step_dir(step));
    std::cout << storage::step_dir_name(step);
    if (latest && *latest == step) std::cout << "  (latest)";
    if (reader.is_ok()) {
      std::uint64_t bytes = 0;
      for (const auto& s : reader.value().manifest().shards) bytes += s.bytes;
      std::cout << "  world " << reader.value().manifest().world_size << ", "
                << reader.value().manifest().tensors.size() << " tensors, " << bytes << " bytes";
    } else {
      std::cout << "  UNREADABLE: " << reader.status().to_string();
    }
    std::cout << "\n";
  }
  for (const auto& p : dir.uncommitted_dirs()) std::cout << "uncommitted (ignored on load): " << p.string() << "\n";
  return kExitDone;
}

int verify(const std::string& step_dir) {
  auto reader = storage::CheckpointReader::open(step_dir);
  if (!reader.is_ok()) {
    std::cout << step_dir << ": FAILED: " << reader.status().to_string() << "\n";
    return kExitFailure;
  }
  Status st = reader.value().verify_all();
  if (!st.is_ok()) {
    std::cout << step_dir << ": FAILED: " << st.to_string() << "\n";
    return kExitFailure;
  }
  std::cout << step_dir << ": OK (" << reader.value().manifest().tensors.size() << " tensors in "
            << reader.value().manifest().shards.size() << " shards verified)\n";
  return kExitDone;
}

int diff(const std::string& a, const std::string& b, const std::string& prefix) {
  auto ra = storage::CheckpointReader::open(a);
  auto rb = storage::CheckpointReader::open(b);
  if (!ra.is_ok() || !rb.is_ok()) {
    std::cout << "cannot open: " << (ra.is_ok() ? rb.status() : ra.status()).to_string() << "\n";
    return kExitFailure;
  }
  int compared = 0, different = 0;
  for (const auto& [name, entry] : ra.value().manifest().tensors) {
    if (name.rfind(prefix, 0) != 0) continue;
    ++compared;
    if (!rb.value().contains(name)) {
      std::cout << "only in " << a << ": " << name << "\n";
      ++different;
      continue;
    }
    auto ta = ra.value().read(name);
    auto tb = rb.value().read(name);
    if (!ta.is_ok() || !tb.is_ok()) {
      std::cout << name << ": unreadable: " << (ta.is_ok() ? tb.status() : ta.status()).to_string() << "\n";
      ++different;
      continue;
    }
    if (ta.value().dtype != tb.value().dtype || ta.value().shape != tb.value().shape ||
        ta.value().bytes != tb.value().bytes) {
      std::cout << name << ": differs\n";
      ++different;
    }
  }
  for (const auto& [name, entry] : rb.value().manifest().tensors) {
    if (name.rfind(prefix, 0) == 0 && !ra.value().contains(name)) {
      std::cout << "only in " << b << ": " << name << "\n";
      ++different;
    }
  }
  if (compared == 0) {
    std::cout << "no tensor named " << prefix << "* in " << a << "\n";
    return kExitFailure;
  }
  if (different == 0) {
    std::cout << "bit-identical: " << compared << " tensors named " << prefix << "*\n";
    return kExitDone;
  }
  std::cout << different << " of " << compared << " tensors named " << prefix << "* differ\n";
  return kExitFailure;
}

// "tenax ckpt export STEP_DIR OUT_DIR [--prefix PREFIX] [--force]", from the declaration.
std::string usage_line(const CLI::App& sub) {
  std::string line = fmt::format("{} {}", sub.get_parent()->get_name(), sub.get_name());
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_positional()) line += fmt::format(" {}", opt->get_name());
  }
  for (const CLI::Option* opt : sub.get_options()) {
    if (opt->get_positional() || opt == sub.get_help_ptr()) continue;
    line += opt->get_items_expected_max() > 0 ? fmt::format(" [{} {}]", opt->get_name(), opt->get_type_name())
                                              : fmt::format(" [{}]", opt->get_name());
  }
  return line;
}

// `tenax ckpt --help` opens with one usage line per subcommand; `tenax ckpt SUB --help` with its own.
class CkptFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string) const override {
    if (app->get_parent() != nullptr) return fmt::format("Usage: {}\n", usage_line(*app));
    std::string out;
    for (const CLI::App* sub : app->get_subcommands({})) {
      out += fmt::format("{} {}\n", out.empty() ? "Usage:" : "      ", usage_line(*sub));
    }
    return out;
  }
};

}  // namespace

int run_ckpt_command(int argc, char** argv) {
  CLI::App app("", "tenax ckpt");
  const auto formatter = std::make_shared<CkptFormatter>();
  app.formatter(formatter);  // the subcommands inherit it
  app.set_help_flag("-h,--help", "show this help");
  app.require_subcommand(1);
  int exit_code = kExitDone;
  std::string dir, step_dir, out_dir, other_dir;
  std::string prefix = "model/";
  bool json = false, force = false;

  app.add_subcommand("ls", "committed steps under CHECKPOINTS_DIR, `latest`, and leftovers")
      ->callback([&] { exit_code = list(dir); })
      ->add_option("CHECKPOINTS_DIR", dir, "a run's checkpoints directory")
      ->required();
  app.add_subcommand("verify", "check the manifest and every checksum of one checkpoint (exit 1 on a fault)")
      ->callback([&] { exit_code = verify(step_dir); })
      ->add_option("STEP_DIR", step_dir, "one checkpoint: CHECKPOINTS_DIR/step-N")
      ->required();
  CLI::App* inspect =
      app.add_subcommand("inspect", "show step, world, shards, tensors and trainer state; --json: manifest.json");
  inspect->add_option("STEP_DIR", step_dir, "one checkpoint: CHECKPOINTS_DIR/step-N")->required();
  inspect->add_flag("--json", json, "print manifest.json as stored");
  inspect->callback(
      [&] { exit_code = inspect_checkpoint(step_dir, json ? InspectFormat::kJson : InspectFormat::kText); });
  CLI::App* exporter =
      app.add_subcommand("export",
                         "verify, then write OUT_DIR/model.safetensors from tensors named PREFIX*\n"
                         "(default model/, stripped) plus each uint8 tensor files/NAME as OUT_DIR/NAME;\n"
                         "a non-empty OUT_DIR needs --force");
  exporter->add_option("STEP_DIR", step_dir, "the checkpoint to export")->required();
  exporter->add_option("OUT_DIR", out_dir, "the model directory to write")->required();
  exporter->add_option("--prefix", prefix, "the tensors to export (default model/)")->type_name("PREFIX");
  exporter->add_flag("--force", force, "replace the exported files in a non-empty OUT_DIR");
  exporter->callback([&] {
    ExportOptions options;
    options.step_dir = step_dir;
    options.out_dir = out_dir;
    options.prefix = prefix;
    options.overwrite = force;
    exit_code = export_checkpoint(options);
  });
  CLI::App* differ = app.add_subcommand("diff", "compare the tensors named PREFIX* (default model/) byte for byte");
  differ->add_option("STEP_DIR_A", step_dir, "one checkpoint")->required();
  differ->add_option("STEP_DIR_B", other_dir, "the other")->required();
  differ->add_option("--prefix", prefix, "the tensors to compare (default model/)")->type_name("PREFIX");
  differ->callback([&] { exit_code = diff(step_dir, other_dir, prefix); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitDone;
  } catch (const CLI::ParseError& e) {
    std::cerr << fmt::format("tenax ckpt: {}\n", e.what()) << formatter->make_usage(&app, "");
    return kExitUsage;
  }
  return exit_code;
}

}  // namespace tenax::launcher
