#include "hf_field_table.h"

#include <algorithm>

namespace tenax::sdk {
namespace {

// The reasons repeated by several fields.
constexpr std::string_view kHub =
    "Tenax does not upload to the Hugging Face Hub (compute nodes are usually offline): the final model is a "
    "Hugging Face directory under output_dir; upload it from a login node with `huggingface-cli upload`";
constexpr std::string_view kTrackers =
    "used only by experiment trackers Tenax does not report to; report_to takes jsonl and tensorboard";
constexpr std::string_view kFsdp =
    "fully sharded data parallelism is not available: every rank holds the whole model and optimizer (DDP)";
constexpr std::string_view kPython =
    "Python machinery with no counterpart in libtorch's C++ API (TorchScript tracing, TorchDynamo, IPEX)";
constexpr std::string_view kApex =
    "a setting of NVIDIA Apex, a Python package; Tenax's mixed precision is libtorch's autocast: bf16 = true or fp16 = "
    "true";
constexpr std::string_view kTpu = "TPUs need XLA, which libtorch's C++ API does not offer";
constexpr std::string_view kWorkers =
    "batches are loaded by the trainer's own threads (dataloader_num_workers), not by DataLoader worker processes";
constexpr std::string_view kGeneration =
    "no generation: Tenax's model families (BERT, DistilBERT, ViT) are encoders; Seq2SeqTrainer has no counterpart";
constexpr std::string_view kCheckpointing =
    "Tenax's activation checkpointing is gradient_checkpointing = true (each encoder layer recomputed in backward)";

// One entry a line or two, as a table reads best (clang-format would give each field a line).
// clang-format off
const std::vector<HfField> kTable = {
    // transformers 4.44's TrainingArguments, in its order (the fields Tenax honours are for_each_field's).
    {"overwrite_output_dir", "", {"false"},
     "Tenax resumes from the newest verified checkpoint in output_dir and never deletes one to start over; to start "
     "fresh, give a new output_dir"},
    {"do_train", "", {"*"},
     "a switch for the example scripts (transformers' Trainer ignores it too): a Tenax program trains when it calls "
     "train()"},
    {"do_eval", "", {"*"},
     "a switch for the example scripts (transformers' Trainer ignores it too): evaluation runs on eval_strategy's "
     "schedule or when the program calls evaluate()"},
    {"do_predict", "", {"*"},
     "a switch for the example scripts (transformers' Trainer ignores it too): a Tenax program predicts when it calls "
     "predict()"},
    {"prediction_loss_only", "", {"false"},
     "evaluate() and predict() always gather logits and labels for compute_metrics; returning the loss alone is not "
     "available"},
    {"per_gpu_train_batch_size", "per_device_train_batch_size", {},
     "transformers' deprecated name for per_device_train_batch_size"},
    {"per_gpu_eval_batch_size", "per_device_eval_batch_size", {},
     "transformers' deprecated name for per_device_eval_batch_size"},
    {"eval_accumulation_steps", "", {"*"},
     "predictions already leave the device after every evaluation batch (as with eval_accumulation_steps = 1), so "
     "any value gives the same metrics"},
    {"eval_delay", "", {"0"},
     "delaying the first evaluation is not available: evaluation follows eval_strategy and eval_steps from the start"},
    {"torch_empty_cache_steps", "", {},
     "emptying the CUDA caching allocator every N steps is not available (it only slows training)"},
    {"log_level", "", {"passive"},
     "the log level is the environment's: TENAX_LOG_LEVEL=debug|info|warn|error (the default, info, on rank 0)"},
    {"log_level_replica", "", {"passive", "warning"},
     "ranks other than 0 log warnings and errors; TENAX_LOG_LEVEL=debug|info|warn|error sets rank 0's level"},
    {"log_on_each_node", "", {"false"},
     "only rank 0 logs information; the other ranks, on every node, log warnings and errors"},
    {"logging_first_step", "", {"false"},
     "logging the first step is not available: the first log is at logging_steps"},
    {"logging_nan_inf_filter", "", {"false"},
     "Tenax logs every loss as computed, nan and inf included; a filter is not available"},
    {"save_safetensors", "", {"true"},
     "the final model is always model.safetensors (checkpoints are Tenax's HDF5 format, docs/checkpoints.md); "
     "pytorch_model.bin is not written"},
    {"save_on_each_node", "", {"false"},
     "checkpoints need a file system that every node shares (docs/checkpoints.md): each rank writes its own shard "
     "of one checkpoint"},
    {"no_cuda", "use_cpu", {}, "transformers' deprecated name for use_cpu"},
    {"use_mps_device", "", {"false"}, "Apple's MPS devices are not a target of Tenax"},
    {"jit_mode_eval", "", {"false"}, kPython},
    {"use_ipex", "", {"false"}, kPython},
    {"fp16_opt_level", "", {"O1"}, kApex},
    {"half_precision_backend", "", {"auto"}, "one backend: libtorch's autocast (bf16 = true or fp16 = true)"},
    {"bf16_full_eval", "", {"false"},
     "evaluating with the model cast to bfloat16 is not available: evaluation runs under the training precision"},
    {"fp16_full_eval", "", {"false"},
     "evaluating with the model cast to float16 is not available: evaluation runs under the training precision"},
    {"tf32", "", {"false"},
     "a TF32 switch is not available: CUDA matmuls follow libtorch's default (TF32 off), and CPUs have no TF32"},
    {"local_rank", "", {"-1"},
     "the launcher gives each worker its rank (tenax run, srun and mpirun set LOCAL_RANK); a config cannot choose it"},
    {"ddp_backend", "", {},
     "the communicator is chosen by the environment: TENAX_BACKEND=gloo|tcp|nccl|mpi (default: NCCL on GPUs, Gloo on "
     "CPUs, Tenax's TCP ring where the build has no Gloo)"},
    {"tpu_num_cores", "", {}, kTpu},
    {"tpu_metrics_debug", "", {"false"}, kTpu},
    {"debug", "", {"", "[]"},
     "transformers' underflow/overflow detector and TPU metrics are not available; TENAX_LOG_LEVEL=debug logs the "
     "runtime's decisions"},
    {"past_index", "", {"-1"}, "no model family here keeps past memories (XLNet, Transformer-XL)"},
    {"run_name", "", {"*"}, kTrackers},
    {"remove_unused_columns", "", {"*"},
     "a Batch has typed fields that the collator fills: there are no dataset columns to remove"},
    {"label_names", "", {},
     "a batch has one label tensor (Batch::labels); several label columns are not available"},
    {"fsdp", "", {"", "[]", "false"}, kFsdp},
    {"fsdp_min_num_params", "", {"0"}, kFsdp},
    {"fsdp_config", "", {}, kFsdp},
    {"fsdp_transformer_layer_cls_to_wrap", "", {}, kFsdp},
    {"accelerator_config", "", {}, "Accelerate's settings: Tenax does not use Accelerate"},
    {"deepspeed", "", {},
     "DeepSpeed is a Python library configured by its JSON file; Tenax shards nothing yet: every rank holds the "
     "whole model and optimizer (DDP)"},
    {"optim_args", "", {},
     "each optimizer takes the arguments transformers' Trainer gives it (AdamW: adam_beta1, adam_beta2, "
     "adam_epsilon; all: learning_rate, weight_decay); other arguments are not available"},
    {"adafactor", "", {"false"}, "deprecated by transformers: set optim = \"adafactor\""},
    {"length_column_name", "", {"length"},
     "group_by_length reads each sample's length from the dataset (Dataset::length), not from a column"},
    {"ddp_find_unused_parameters", "", {"*"},
     "nothing to find: a parameter without a gradient contributes zeros to the gradient allreduce"},
    {"ddp_broadcast_buffers", "", {"false"},
     "buffers are not broadcast: every rank builds the same buffers from the same model and seed"},
    {"dataloader_pin_memory", "", {"true"},
     "batches bound for a GPU are always copied from pinned memory, asynchronously; CPU training copies nothing"},
    {"dataloader_persistent_workers", "", {"false"}, kWorkers},
    {"skip_memory_metrics", "", {"true"}, "memory metrics are not collected"},
    {"use_legacy_prediction_loop", "", {"false"}, "Tenax has one prediction loop"},
    {"push_to_hub", "", {"false"}, kHub},
    {"hub_model_id", "", {}, kHub},
    {"hub_strategy", "", {"every_save"}, kHub},
    {"hub_token", "", {}, kHub},
    {"hub_private_repo", "", {}, kHub},
    {"hub_always_push", "", {"false"}, kHub},
    {"include_inputs_for_metrics", "", {"false"},
     "compute_metrics receives logits and labels; the inputs are not gathered for it"},
    {"eval_do_concat_batches", "", {"true"},
     "the predictions of every batch and rank are concatenated, in dataset order, before compute_metrics"},
    {"fp16_backend", "", {"auto"}, kApex},
    {"evaluation_strategy", "eval_strategy", {}, "transformers' deprecated name for eval_strategy"},
    {"push_to_hub_model_id", "", {}, kHub},
    {"push_to_hub_organization", "", {}, kHub},
    {"push_to_hub_token", "", {}, kHub},
    {"mp_parameters", "", {""}, "SageMaker's model-parallel settings: SageMaker is not a target of Tenax"},
    {"auto_find_batch_size", "", {"false"},
     "searching for a batch size that fits in memory is not available: set per_device_train_batch_size"},
    {"torchdynamo", "", {}, kPython},
    {"ray_scope", "", {"last"}, "a setting of Ray Tune's hyperparameter search, which Tenax does not run"},
    {"ddp_timeout", "", {},
     "a collective waits at most 120 s, and a lost peer releases it sooner: the agents declare the loss "
     "(docs/in-process-recovery.md); the wait is not configurable"},
    {"torch_compile", "", {"false"}, kPython},
    {"torch_compile_backend", "", {}, kPython},
    {"torch_compile_mode", "", {}, kPython},
    {"dispatch_batches", "", {}, "Accelerate's dispatch of an IterableDataset: each Tenax rank loads its own batches"},
    {"split_batches", "", {"false"},
     "each rank loads its own per_device_train_batch_size samples; splitting one batch across ranks is not available"},
    {"include_tokens_per_second", "", {"false"},
     "tokens per second are not measured; the progress bar and the logs give samples per second"},
    {"neftune_noise_alpha", "", {}, "NEFTune's embedding noise is not available"},
    {"optim_target_modules", "", {}, "GaLore and the optimizers that target modules are not available"},
    {"batch_eval_metrics", "", {"false"},
     "compute_metrics is called once, on the predictions gathered from every batch and rank"},
    {"eval_use_gather_object", "", {"false"}, "predictions are tensors, gathered as tensors"},
    // Fields of transformers 5.23 that 4.44 has not.
    {"average_tokens_across_devices", "", {"*"},
     "the classification losses here average over samples, whose count every rank shares: there are no tokens to "
     "count across devices"},
    {"activation_checkpointing", "", {"false"}, kCheckpointing},
    {"activation_checkpointing_kwargs", "", {}, kCheckpointing},
    {"use_liger_kernel", "", {"false"}, "Liger's Triton kernels are a Python package"},
    {"liger_kernel_config", "", {}, "Liger's Triton kernels are a Python package"},
    {"use_cache", "", {"false"}, "no model family here keeps a key/value cache"},
    {"project", "", {"*"}, kTrackers},
    {"trackio_space_id", "", {}, kTrackers},
    {"trackio_bucket_id", "", {}, kTrackers},
    {"trackio_static_space_id", "", {}, kTrackers},
    {"include_for_metrics", "", {"", "[]"},
     "compute_metrics receives logits and labels; inputs and losses are not gathered for it"},
    {"enable_jit_checkpoint", "handle_preemption_signals", {},
     "transformers' name for a save on SIGTERM: Tenax's handle_preemption_signals (on by default) stops every rank "
     "at the same step on SIGTERM or SIGUSR1, saves and exits 3 to be requeued"},
    {"hub_revision", "", {}, kHub},
    {"parallelism_config", "", {}, "Accelerate's parallelism settings: Tenax runs data parallelism only"},
    {"dataloader_multiprocessing_context", "", {}, kWorkers},
    {"dataloader_in_order", "", {"true"}, "batches come in the sampler's order, always"},
    {"train_sampling_strategy", "", {"random"},
     "the sampler is a seeded random permutation per epoch (restored exactly on resume); the other strategies are "
     "not available yet"},
    {"ddp_static_graph", "", {"*"},
     "Tenax's gradient allreduce needs no static-graph hint: its buckets are fixed once, from the parameters"},
    // Seq2SeqTrainingArguments (both versions).
    {"sortish_sampler", "", {"false"}, kGeneration},
    {"predict_with_generate", "", {"false"}, kGeneration},
    {"generation_max_length", "", {}, kGeneration},
    {"generation_num_beams", "", {}, kGeneration},
    {"generation_config", "", {}, kGeneration},
};
// clang-format on

}  // namespace

const std::vector<HfField>& hf_field_table() { return kTable; }

const HfField* find_hf_field(std::string_view name) {
  const auto it = std::find_if(kTable.begin(), kTable.end(), [&](const HfField& f) { return f.name == name; });
  return it == kTable.end() ? nullptr : &*it;
}

}  // namespace tenax::sdk
