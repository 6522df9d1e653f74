// `tenax ckpt export STEP_DIR OUT_DIR [--prefix model/] [--force]`: a checkpoint's model as a
// Hugging Face model directory.
//
//   OUT_DIR/model.safetensors   every tensor named <prefix><name>, saved as <name> (so
//                               "model/bert.pooler.dense.weight" → "bert.pooler.dense.weight"),
//                               metadata {"format": "pt"} as transformers' save_pretrained writes
//   OUT_DIR/<file>              every uint8 tensor named "files/<file>", its bytes as the file
//
// The "files/" convention: a checkpoint may carry the small files a model directory needs
// (config.json, vocab.txt, tokenizer_config.json, ...) as 1-D uint8 tensors named
// "files/config.json" etc.; export writes them back out byte for byte. The names are untrusted:
// one that is empty, holds '/' or "..", starts with '.', or is "model.safetensors" is refused.
//
// The whole checkpoint is verified first (every shard and tensor checksum); on any fault
// nothing is written. Files are written into OUT_DIR/.export-tmp, fsynced, then renamed into
// OUT_DIR. OUT_DIR is created if missing; a non-empty OUT_DIR is refused unless --force, which
// replaces the exported files and leaves every other file alone.
// Exit 0 on success, 1 for a corrupt or unexportable checkpoint or an I/O failure, 2 for usage
// errors (STEP_DIR not a checkpoint, OUT_DIR not empty, no tensor with the prefix). Thread-safety:
// writes to stdout/stderr; call from one thread.
#pragma once

#include <string>

namespace tenax::launcher {

/// What to export, and where.
struct ExportOptions {
  std::string step_dir;           ///< a committed step directory
  std::string out_dir;            ///< the model directory to write
  std::string prefix = "model/";  ///< tensors exported are those named prefix + HF name
  bool overwrite = false;         ///< --force: write into a non-empty out_dir
};

/// Name of the directory inside OUT_DIR where an export is staged before the renames.
inline constexpr const char* kExportStagingDir = ".export-tmp";

/// Runs the export; returns the process exit code. Progress and errors go to stdout/stderr.
int export_checkpoint(const ExportOptions& options);

}  // namespace tenax::launcher
