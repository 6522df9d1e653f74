// `tenax ckpt ls | verify | inspect | export | diff`: look at checkpoints from the shell.
//
//   tenax ckpt ls OUTPUT_DIR/checkpoints          committed steps, `latest`, leftovers
//   tenax ckpt verify STEP_DIR                    manifest + every checksum; exit 1 on a fault
//   tenax ckpt inspect STEP_DIR [--json]          the manifest, for humans (ckpt_inspect.h)
//   tenax ckpt export STEP_DIR OUT_DIR [--prefix model/] [--force]
//                                                 a Hugging Face model directory (ckpt_export.h)
//   tenax ckpt diff STEP_DIR_A STEP_DIR_B [--prefix model/]
//                                                 byte-for-byte comparison; exit 1 if different
// Output goes to stdout (it is the command's product); exit 2 for usage errors.
#pragma once

namespace tenax::launcher {

/// argv[0] is "ckpt". Returns the process exit code.
int run_ckpt_command(int argc, char** argv);

}  // namespace tenax::launcher
