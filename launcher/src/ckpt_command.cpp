#include "ckpt_command.h"

#include <cstdint>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ckpt_export.h"
#include "ckpt_inspect.h"
#include "tenax/core/checksum.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"

namespace tenax::launcher {
namespace {

constexpr const char* kUsage =
    "usage: tenax ckpt ls CHECKPOINTS_DIR\n"
    "       tenax ckpt verify STEP_DIR\n"
    "       tenax ckpt inspect STEP_DIR [--json]\n"
    "       tenax ckpt export STEP_DIR OUT_DIR [--prefix PREFIX] [--force]\n"
    "       tenax ckpt diff STEP_DIR_A STEP_DIR_B [--prefix PREFIX]\n"
    "\n"
    "  ls       committed steps under CHECKPOINTS_DIR, `latest`, and leftovers\n"
    "  verify   check the manifest and every checksum of one checkpoint (exit 1 on a fault)\n"
    "  inspect  show step, world, shards, tensors and trainer state; --json: manifest.json\n"
    "  export   verify, then write OUT_DIR/model.safetensors from tensors named PREFIX*\n"
    "           (default model/, stripped) plus each uint8 tensor files/NAME as OUT_DIR/NAME;\n"
    "           a non-empty OUT_DIR needs --force\n"
    "  diff     compare the tensors named PREFIX* (default model/) byte for byte\n";

int usage(const std::string& message) {
  std::cerr << "tenax ckpt: " << message << "\n" << kUsage;
  return 2;
}

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
  return 0;
}

int verify(const std::string& step_dir) {
  auto reader = storage::CheckpointReader::open(step_dir);
  if (!reader.is_ok()) {
    std::cout << step_dir << ": FAILED: " << reader.status().to_string() << "\n";
    return 1;
  }
  Status st = reader.value().verify_all();
  if (!st.is_ok()) {
    std::cout << step_dir << ": FAILED: " << st.to_string() << "\n";
    return 1;
  }
  std::cout << step_dir << ": OK (" << reader.value().manifest().tensors.size() << " tensors in "
            << reader.value().manifest().shards.size() << " shards verified)\n";
  return 0;
}

int diff(const std::string& a, const std::string& b, const std::string& prefix) {
  auto ra = storage::CheckpointReader::open(a);
  auto rb = storage::CheckpointReader::open(b);
  if (!ra.is_ok() || !rb.is_ok()) {
    std::cout << "cannot open: " << (ra.is_ok() ? rb.status() : ra.status()).to_string() << "\n";
    return 1;
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
    return 1;
  }
  if (different == 0) {
    std::cout << "bit-identical: " << compared << " tensors named " << prefix << "*\n";
    return 0;
  }
  std::cout << different << " of " << compared << " tensors named " << prefix << "* differ\n";
  return 1;
}

// Splits `args` (after the subcommand) into positionals and the flags it allows; a flag in
// `with_value` takes the next argument. False (with `error` set) on an unknown or
// incomplete flag.
bool split_args(const std::vector<std::string>& args, const std::set<std::string>& switches,
                const std::set<std::string>& with_value, std::vector<std::string>& positional,
                std::map<std::string, std::string>& flags, std::string& error) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0) {
      positional.push_back(a);
    } else if (switches.count(a) != 0) {
      flags[a] = "";
    } else if (with_value.count(a) != 0) {
      if (i + 1 >= args.size()) {
        error = a + " needs a value";
        return false;
      }
      flags[a] = args[++i];
    } else {
      error = "unknown option '" + a + "' for '" + args[0] + "'";
      return false;
    }
  }
  return true;
}

int inspect_command(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  std::string error;
  if (!split_args(args, {"--json"}, {}, positional, flags, error)) return usage(error);
  if (positional.size() != 1) return usage("inspect takes one STEP_DIR");
  return inspect_checkpoint(positional[0],
                            flags.count("--json") ? InspectFormat::kJson : InspectFormat::kText);
}

int export_command(const std::vector<std::string>& args) {
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  std::string error;
  if (!split_args(args, {"--force"}, {"--prefix"}, positional, flags, error)) return usage(error);
  if (positional.size() != 2) return usage("export takes STEP_DIR and OUT_DIR");
  ExportOptions options;
  options.step_dir = positional[0];
  options.out_dir = positional[1];
  if (flags.count("--prefix")) options.prefix = flags["--prefix"];
  options.overwrite = flags.count("--force") != 0;
  return export_checkpoint(options);
}

}  // namespace

int run_ckpt_command(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  if (args.empty()) return usage("which subcommand?");
  const std::string sub = args[0];
  if (sub == "ls" && args.size() == 2) return list(args[1]);
  if (sub == "verify" && args.size() == 2) return verify(args[1]);
  if (sub == "inspect") return inspect_command(args);
  if (sub == "export") return export_command(args);
  if (sub == "diff" && (args.size() == 3 || (args.size() == 5 && args[3] == "--prefix"))) {
    return diff(args[1], args[2], args.size() == 5 ? args[4] : "model/");
  }
  return usage("bad arguments for '" + sub + "'");
}

}  // namespace tenax::launcher
