// End-to-end tests of `tenax ckpt inspect` and `tenax ckpt export`: the real binary on real
// checkpoints written with storage::write_shard + CheckpointDirectory::commit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "storage/storage_test_util.h"
#include "tenax/core/checksum.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/safetensors.h"

namespace tenax::storage {
namespace {

namespace fs = std::filesystem;
using testing::OwnedTensor;
using testing::pattern_tensor;

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The row of `text` whose first column is `first`, split at runs of two or more spaces.
std::vector<std::string> columns(const std::string& text, const std::string& first) {
  const std::size_t at = text.find("\n  " + first + " ");
  if (at == std::string::npos) return {};
  const std::string row = text.substr(at + 3, text.find('\n', at + 1) - at - 3);
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < row.size()) {
    std::size_t gap = row.find("  ", pos);
    if (gap == std::string::npos) gap = row.size();
    out.push_back(row.substr(pos, gap - pos));
    pos = row.find_first_not_of(' ', gap);
    if (pos == std::string::npos) break;
  }
  return out;
}

OwnedTensor blob(const std::string& name, const std::string& contents) {
  return OwnedTensor{name,
                     DType::kUInt8,
                     {static_cast<std::int64_t>(contents.size())},
                     std::vector<std::uint8_t>(contents.begin(), contents.end())};
}

struct CkptRun {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

std::string explain(const CkptRun& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout ---\n" + r.out + "--- stderr ---\n" + r.err;
}

class LauncherCkpt : public testing::TempDirTest {
 protected:
  // Runs `tenax ckpt ARGS...`, stdout and stderr captured apart.
  CkptRun ckpt(const std::vector<std::string>& args) const {
    std::string cmd = "timeout -k 10 300 " + quote(TENAX_BINARY) + " ckpt";
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " > " + quote((dir_ / "stdout").string()) + " 2> " + quote((dir_ / "stderr").string());
    const int status = std::system(cmd.c_str());
    CkptRun r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = testing::read_file(dir_ / "stdout");
    r.err = testing::read_file(dir_ / "stderr");
    return r;
  }

  // A committed 2-shard checkpoint of `tensors` with trainer state and arguments.
  fs::path checkpoint(const std::vector<OwnedTensor>& tensors) const {
    CheckpointDirectory dir(dir_ / "checkpoints");
    const fs::path tmp = dir.prepare_tmp(/*step=*/700, /*generation=*/3);
    std::vector<std::size_t> sizes;
    for (const auto& t : tensors) sizes.push_back(t.bytes.size());
    const std::vector<int> owner = plan_writes(sizes, 2);
    std::vector<ShardInfo> infos;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<TensorRef> mine;
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        if (owner[i] == rank) mine.push_back(tensors[i].ref());
      }
      auto info = write_shard(tmp / shard_file_name(rank, 2), mine);
      EXPECT_TRUE(info.is_ok()) << info.status().to_string();
      infos.push_back(info.value());
    }
    Manifest m = make_manifest(700, /*epoch=*/4, /*generation=*/3, infos);
    m.trainer_state = {{"global_step", 700}, {"best_metric", 0.25}, {"log_history", {1, 2}}};
    m.arguments = {{"learning_rate", 5e-5}, {"output_dir", "runs/x"}};
    const Status s = dir.commit(tmp, m);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return dir.step_dir(700);
  }

  // A small BERT-like model checkpoint: model weights of several dtypes, optimizer state and
  // the files a Hugging Face directory needs.
  std::vector<OwnedTensor> model_tensors() const {
    return {
        pattern_tensor("model/bert.embeddings.word_embeddings.weight", DType::kFloat32, {30, 8}, 1),
        pattern_tensor("model/bert.embeddings.position_ids", DType::kInt64, {1, 16}, 2),
        pattern_tensor("model/bert.pooler.dense.bias", DType::kBFloat16, {8}, 3),
        pattern_tensor("model/classifier.weight", DType::kFloat16, {2, 8}, 4),
        pattern_tensor("model/mask", DType::kUInt8, {3}, 5),
        pattern_tensor("optim/classifier.weight/exp_avg", DType::kFloat32, {2, 8}, 6),
        pattern_tensor("optim/classifier.weight/step", DType::kInt64, {}, 7),
        pattern_tensor("rng/rank0/cpu", DType::kUInt8, {40}, 8),
        blob("files/config.json", R"({"model_type": "bert", "hidden_size": 8})"),
        blob("files/vocab.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nhello\n"),
    };
  }

  std::vector<std::string> listing(const fs::path& dir) const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(LauncherCkpt, InspectPrintsTheManifestForHumans) {
  const auto tensors = model_tensors();
  const fs::path step = checkpoint(tensors);
  const CkptRun r = ckpt({"inspect", step.string()});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  const auto manifest = CheckpointReader::open(step).value().manifest();

  for (const char* line :
       {"step            700", "epoch           4", "world size      2", "generation      3", "format version  1"}) {
    EXPECT_TRUE(contains(r.out, line)) << line << "\n" << r.out;
  }
  EXPECT_EQ(columns(r.out, "FILE"), (std::vector<std::string>{"FILE", "BYTES", "XXH3"}));
  for (const auto& s : manifest.shards) {
    EXPECT_EQ(columns(r.out, s.file),
              (std::vector<std::string>{s.file, std::to_string(s.bytes), checksum_hex(s.checksum)}));
  }
  // One row per tensor, sorted by name, with dtype, shape, bytes and shard.
  EXPECT_EQ(columns(r.out, "NAME"), (std::vector<std::string>{"NAME", "DTYPE", "SHAPE", "BYTES", "SHARD"}));
  std::size_t last = 0;
  std::uint64_t total = 0;
  for (const auto& [name, e] : manifest.tensors) {
    const std::size_t at = r.out.find("\n  " + name + " ");
    ASSERT_NE(at, std::string::npos) << name << "\n" << r.out;
    EXPECT_GT(at, last) << name << " out of order";
    last = at;
    EXPECT_EQ(columns(r.out, name), (std::vector<std::string>{name, dtype_name(e.dtype), shape_text(e.shape),
                                                              std::to_string(e.nbytes), e.shard}));
    total += e.nbytes;
  }
  EXPECT_TRUE(contains(r.out, "total: " + std::to_string(tensors.size()) + " tensors, " + std::to_string(total) +
                                  " tensor bytes in 2 shards"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "trainer_state:\n  {\n    \"best_metric\": 0.25,")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"output_dir\": \"runs/x\"")) << r.out;
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST_F(LauncherCkpt, InspectJsonPrintsTheManifestAsStored) {
  const fs::path step = checkpoint(model_tensors());
  const CkptRun r = ckpt({"inspect", "--json", step.string()});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_EQ(r.out, testing::read_file(step / "manifest.json"));
  EXPECT_EQ(nlohmann::json::parse(r.out)["step"], 700);
}

TEST_F(LauncherCkpt, InspectExplainsPathsThatAreNotCheckpoints) {
  const fs::path step = checkpoint(model_tensors());
  const CkptRun missing = ckpt({"inspect", (dir_ / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2) << explain(missing);
  EXPECT_TRUE(contains(missing.err, (dir_ / "nope").string() + ": no such directory")) << missing.err;

  const CkptRun root = ckpt({"inspect", (dir_ / "checkpoints").string()});
  EXPECT_EQ(root.exit_code, 2) << explain(root);
  EXPECT_TRUE(contains(root.err, "no manifest.json")) << root.err;
  EXPECT_TRUE(contains(root.err, "tenax ckpt ls")) << root.err;

  const CkptRun file = ckpt({"inspect", (step / "manifest.json").string()});
  EXPECT_EQ(file.exit_code, 2) << explain(file);
  EXPECT_TRUE(contains(file.err, "not a directory")) << file.err;

  EXPECT_EQ(ckpt({"inspect"}).exit_code, 2);
  EXPECT_EQ(ckpt({"inspect", step.string(), "--yaml"}).exit_code, 2);
  EXPECT_EQ(ckpt({"inspect", step.string(), step.string()}).exit_code, 2);
}

TEST_F(LauncherCkpt, InspectOfACorruptCheckpointExitsOne) {
  const fs::path step = checkpoint(model_tensors());
  const std::string good = testing::read_file(step / "manifest.json");
  testing::write_file(step / "manifest.json", good.substr(0, good.size() / 2));
  const CkptRun torn = ckpt({"inspect", step.string()});
  EXPECT_EQ(torn.exit_code, 1) << explain(torn);
  EXPECT_TRUE(contains(torn.err, (step / "manifest.json").string())) << torn.err;
  EXPECT_TRUE(contains(torn.err, "corrupt")) << torn.err;
  EXPECT_EQ(ckpt({"inspect", "--json", step.string()}).exit_code, 1);

  testing::write_file(step / "manifest.json", good);
  fs::remove(step / shard_file_name(1, 2));
  const CkptRun lost = ckpt({"inspect", step.string()});
  EXPECT_EQ(lost.exit_code, 1) << explain(lost);
  EXPECT_TRUE(contains(lost.err, shard_file_name(1, 2))) << lost.err;
}

TEST_F(LauncherCkpt, ExportWritesAHuggingFaceModelDirectory) {
  const auto tensors = model_tensors();
  const fs::path step = checkpoint(tensors);
  const fs::path out = dir_ / "export" / "hf-model";  // parents created too
  const CkptRun r = ckpt({"export", step.string(), out.string()});
  ASSERT_EQ(r.exit_code, 0) << explain(r);
  EXPECT_TRUE(contains(r.out, "exported 5 tensors")) << r.out;
  EXPECT_EQ(listing(out), (std::vector<std::string>{"config.json", "model.safetensors", "vocab.txt"}));

  auto file = read_safetensors(out / "model.safetensors");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  EXPECT_EQ(file.value().metadata(), (std::map<std::string, std::string>{{"format", "pt"}}));
  std::size_t weights = 0;
  for (const auto& t : tensors) {
    if (t.name.rfind("model/", 0) == 0) {
      ++weights;
      const std::string hf_name = t.name.substr(6);  // "bert.embeddings..." as HF names it
      auto back = file.value().read(hf_name);
      ASSERT_TRUE(back.is_ok()) << hf_name << ": " << back.status().to_string();
      EXPECT_EQ(back.value().dtype, t.dtype) << hf_name;
      EXPECT_EQ(back.value().shape, t.shape) << hf_name;
      EXPECT_EQ(back.value().bytes, t.bytes) << hf_name;
    } else if (t.name.rfind("files/", 0) == 0) {
      EXPECT_EQ(testing::read_file(out / t.name.substr(6)), std::string(t.bytes.begin(), t.bytes.end()));
    }
  }
  EXPECT_EQ(file.value().tensors().size(), weights);  // no optim/, rng/ or files/ tensors

  // Another prefix picks other tensors; an existing empty directory is fine.
  fs::create_directories(dir_ / "optim-out");
  const CkptRun optim = ckpt({"export", "--prefix", "optim/", step.string(), (dir_ / "optim-out").string()});
  ASSERT_EQ(optim.exit_code, 0) << explain(optim);
  auto optim_file = read_safetensors(dir_ / "optim-out" / "model.safetensors");
  ASSERT_TRUE(optim_file.is_ok()) << optim_file.status().to_string();
  ASSERT_EQ(optim_file.value().tensors().size(), 2u);
  EXPECT_EQ(optim_file.value().tensors()[0].name, "classifier.weight/exp_avg");
}

TEST_F(LauncherCkpt, ExportRefusesANonEmptyOutputDirectoryWithoutForce) {
  const fs::path step = checkpoint(model_tensors());
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  testing::write_file(out / "README.md", "mine");
  const CkptRun refused = ckpt({"export", step.string(), out.string()});
  EXPECT_EQ(refused.exit_code, 2) << explain(refused);
  EXPECT_TRUE(contains(refused.err, out.string() + ": not empty")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "--force")) << refused.err;
  EXPECT_EQ(listing(out), std::vector<std::string>{"README.md"});

  const CkptRun forced = ckpt({"export", step.string(), out.string(), "--force"});
  ASSERT_EQ(forced.exit_code, 0) << explain(forced);
  EXPECT_EQ(listing(out), (std::vector<std::string>{"README.md", "config.json", "model.safetensors", "vocab.txt"}));
  EXPECT_EQ(testing::read_file(out / "README.md"), "mine");  // other files left alone

  testing::write_file(dir_ / "a-file", "x");
  EXPECT_EQ(ckpt({"export", step.string(), (dir_ / "a-file").string()}).exit_code, 2);
}

TEST_F(LauncherCkpt, ExportRefusesUnsafeFileNames) {
  for (const std::string name : {"files/sub/evil.txt", "files/..evil", "files/.bashrc", "files/model.safetensors"}) {
    SCOPED_TRACE(name);
    fs::remove_all(dir_ / "checkpoints");
    auto tensors = model_tensors();
    tensors.push_back(blob(name, "pwned"));
    const fs::path step = checkpoint(tensors);
    const fs::path out = dir_ / "out";
    const CkptRun r = ckpt({"export", step.string(), out.string()});
    EXPECT_EQ(r.exit_code, 1) << explain(r);
    EXPECT_TRUE(contains(r.err, "tensor '" + name + "': refusing to export it")) << r.err;
    EXPECT_FALSE(fs::exists(out)) << "nothing may be written";
  }
  // files/ tensors must be raw bytes.
  fs::remove_all(dir_ / "checkpoints");
  auto tensors = model_tensors();
  tensors.push_back(pattern_tensor("files/weights.bin", DType::kFloat32, {2}, 9));
  const CkptRun r = ckpt({"export", checkpoint(tensors).string(), (dir_ / "out").string()});
  EXPECT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_TRUE(contains(r.err, "must be uint8")) << r.err;
}

TEST_F(LauncherCkpt, ExportWritesNothingWhenVerificationFails) {
  const auto tensors = model_tensors();
  const fs::path step = checkpoint(tensors);
  // Damage optimizer state, which is not exported: the whole checkpoint must still verify.
  const OwnedTensor& victim = tensors[5];
  ASSERT_EQ(victim.name, "optim/classifier.weight/exp_avg");
  const auto manifest = CheckpointReader::open(step).value().manifest();
  const fs::path shard = step / manifest.tensors.at(victim.name).shard;
  std::string bytes = testing::read_file(shard);
  const std::size_t at = bytes.find(std::string(victim.bytes.begin(), victim.bytes.end()));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x01;
  testing::write_file(shard, bytes);

  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  const CkptRun r = ckpt({"export", step.string(), out.string()});
  EXPECT_EQ(r.exit_code, 1) << explain(r);
  EXPECT_TRUE(contains(r.err, "corrupt checkpoint, nothing exported")) << r.err;
  EXPECT_TRUE(contains(r.err, shard.string())) << r.err;
  EXPECT_TRUE(fs::is_empty(out));

  const CkptRun fresh = ckpt({"export", step.string(), (dir_ / "fresh").string()});
  EXPECT_EQ(fresh.exit_code, 1) << explain(fresh);
  EXPECT_FALSE(fs::exists(dir_ / "fresh"));
}

TEST_F(LauncherCkpt, ExportUsageErrorsExitTwo) {
  const fs::path step = checkpoint(model_tensors());
  EXPECT_EQ(ckpt({"export", step.string()}).exit_code, 2);
  EXPECT_EQ(ckpt({"export", step.string(), (dir_ / "o").string(), "--prefix"}).exit_code, 2);
  EXPECT_EQ(ckpt({"export", step.string(), (dir_ / "o").string(), "--bogus"}).exit_code, 2);
  const CkptRun no_match = ckpt({"export", step.string(), (dir_ / "o").string(), "--prefix", "encoder/"});
  EXPECT_EQ(no_match.exit_code, 2) << explain(no_match);
  EXPECT_TRUE(contains(no_match.err, "no tensor named encoder/*")) << no_match.err;
  const CkptRun not_ckpt = ckpt({"export", (dir_ / "checkpoints").string(), (dir_ / "o").string()});
  EXPECT_EQ(not_ckpt.exit_code, 2) << explain(not_ckpt);
  EXPECT_FALSE(fs::exists(dir_ / "o"));
}

TEST_F(LauncherCkpt, UsageNamesEverySubcommand) {
  const CkptRun r = ckpt({"--help"});
  EXPECT_EQ(r.exit_code, 0) << "help is not an error";
  for (const char* sub : {"ckpt ls", "ckpt verify", "ckpt inspect", "ckpt export", "ckpt diff"}) {
    EXPECT_TRUE(contains(r.out, sub)) << sub << "\n" << r.out;
  }
  const CkptRun none = ckpt({});
  EXPECT_EQ(none.exit_code, 2) << "a missing subcommand is a usage error";
  EXPECT_TRUE(contains(none.err, "ckpt export")) << none.err;
}

}  // namespace
}  // namespace tenax::storage
