// Full determinism, as transformers' enable_full_determinism: deterministic algorithms in
// every op that has one (an op without one raises instead of silently varying), cuDNN
// deterministic and not benchmarking, and cuBLAS's workspace pinned (CUBLAS_WORKSPACE_CONFIG,
// unless the environment already sets it; it must be set before CUDA starts). These are
// process-wide torch settings: the Trainer applies them when TrainingArguments.full_determinism
// is set, before anything runs.
#pragma once

namespace tenax::sdk {

void enable_full_determinism();

}  // namespace tenax::sdk
