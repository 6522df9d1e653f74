/* Tenax C API: embed fault-tolerant training in a simulation code (C, C++, Fortran via tenax.f90).
 *
 * The simulation owns its main loop. Between solver steps it hands Tenax one batch and asks for
 * one optimizer step (tenax_train_step) or one prediction (tenax_predict). Its own arrays (fields,
 * time) are registered once (tenax_register_state) and are saved and restored with the model, the
 * optimizer, the LR schedule and the RNG, atomically, in one sharded HDF5 checkpoint.
 *
 * Conventions, for every function:
 *   - It returns a tenax_status; TENAX_OK is 0. On any other status tenax_last_error() gives a
 *     message that names the argument, key, file or rank at fault and what to do. No C++ exception
 *     ever crosses this boundary and no call aborts the process for bad input.
 *   - "Collective" means every rank must make the call, in the same order (it communicates).
 *   - Handles are opaque; a NULL handle is an error (TENAX_ERR_INVALID_ARGUMENT), never a crash.
 *   - Strings are NUL-terminated UTF-8; the library copies what it keeps.
 *   - Thread-safety: one thread per context (the solver's); tenax_last_error() is per thread.
 *   - Enumerations are passed as int32_t (the enum named in a comment): a value outside the enum
 *     is an error naming the argument, as a C or Fortran caller may well pass one.
 *
 * Array orders: TENAX_ORDER_C is row-major with shape as C declares it (a[batch][features] is
 * {batch, features}); TENAX_ORDER_F is column-major with shape as Fortran declares it
 * (a(features, batch) is {features, batch}). A Fortran array is the C array of the reversed shape,
 * so the batch is the LAST Fortran dimension and nothing is copied for float32.
 *
 *   tenax_context* ctx; tenax_model* model; tenax_trainer* tr;
 *   int64_t widths[] = {2, 64, 1}, step = 0;
 *   tenax_init(&ctx);                                           // tenax run, srun or mpirun
 *   tenax_model_create_mlp(&model, widths, 3, "tanh", TENAX_LOSS_MSE);
 *   tenax_trainer_create(&tr, ctx, model, "surrogate.toml", NULL, 0);
 *   tenax_register_state(tr, "u", u, TENAX_FLOAT64, 2, shape, TENAX_ORDER_C, TENAX_PER_RANK);
 *   tenax_checkpoint_restore(tr, &step);                        // -1: nothing saved yet
 *   for (; step < nsteps; ++step) { solve(u); tenax_train_step(tr, &x, &y, &loss); ... }
 *
 * In-process recovery (`tenax run --recovery in-process`): a program that calls
 * tenax_enable_in_process_recovery and treats TENAX_RECOVERED as below keeps its process when a
 * peer dies: the call that noticed the loss heals the job (a warm spare or a new process takes the
 * dead rank's place and heals from a live peer's memory) and returns TENAX_RECOVERED. Every rank
 * then stands at the last completed optimizer step, and every registered array holds what it held
 * when that tenax_train_step was called (the survivors' arrays are put back in memory; the
 * replacement's come from the copy its peers keep). Go on as if that tenax_train_step had just
 * returned TENAX_OK: with state registered (the solver step among it), that is `continue` in the
 * solver loop:
 *   tenax_enable_in_process_recovery(tr);                       // before restore / first step
 *   if (tenax_checkpoint_restore(tr, &opt_step) == TENAX_RECOVERED) { ... }   // a replacement
 *   while (step < nsteps) {
 *     if (solve_and_train(...) == TENAX_RECOVERED) continue;    // u, t and step were put back
 *   }
 */
#ifndef TENAX_H
#define TENAX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(TENAX_C_API_BUILD)
#define TENAX_API __attribute__((visibility("default")))
#else
#define TENAX_API
#endif

/* The release of this header. tenax_version() says which library is loaded: a program can
 * compare the two (TENAX_VERSION_STRING is the start of that line after "tenax "). */
#define TENAX_VERSION_MAJOR 0
#define TENAX_VERSION_MINOR 1
#define TENAX_VERSION_PATCH 0
#define TENAX_VERSION_STRING "0.1.0"

/* The exit status that asks the launcher / batch script for a requeue: a preemption was
 * handled and the checkpoint is saved. */
#define TENAX_EXIT_PREEMPTED 3
#define TENAX_MAX_DIMS 8

typedef enum tenax_status {
  TENAX_OK = 0,
  TENAX_ERR_INVALID_ARGUMENT = 1, /* NULL pointer, wrong dtype / shape / size, duplicate name */
  TENAX_ERR_NOT_INITIALIZED = 2,  /* a handle used after it was freed / finalized */
  TENAX_ERR_CONFIG = 3,           /* unknown key, bad value, missing or unreadable config file */
  TENAX_ERR_IO = 4,               /* a model or checkpoint file that is missing, corrupt or mismatched */
  TENAX_ERR_PEER = 5,             /* a rank was lost or timed out, or a newer generation formed:
                                     end the process with a non-zero status; the launcher or a
                                     requeue resumes from the last checkpoint */
  TENAX_ERR_INTERNAL = 6,         /* anything else (a libtorch error, out of memory): the message says */
  TENAX_RECOVERED = 7             /* not an error, only after tenax_enable_in_process_recovery: a peer
                                     was lost and the job healed in process. The call did not
                                     complete (a step not taken, a save not made); every rank stands
                                     at the last completed optimizer step (tenax_optimizer_step) with
                                     its registered arrays as they were when that tenax_train_step
                                     was called: go on from there (see the top of this file) */
} tenax_status;

typedef enum tenax_dtype { TENAX_FLOAT32 = 0, TENAX_FLOAT64 = 1, TENAX_INT64 = 2 } tenax_dtype;
typedef enum tenax_order { TENAX_ORDER_C = 0, TENAX_ORDER_F = 1 } tenax_order;
/* Replicated state is identical on every rank (saved once); per-rank state is each rank's own
 * piece (its subdomain), restored to the same rank. */
typedef enum tenax_scope { TENAX_REPLICATED = 0, TENAX_PER_RANK = 1 } tenax_scope;
typedef enum tenax_loss {
  TENAX_LOSS_MSE = 0,          /* mean squared error against a float label of the output's shape */
  TENAX_LOSS_CROSS_ENTROPY = 1 /* class logits against int64 class labels of shape {batch} */
} tenax_loss;
typedef enum tenax_reduce_op { TENAX_SUM = 0, TENAX_MAX = 1, TENAX_MIN = 2 } tenax_reduce_op;

/* A view of the caller's memory; Tenax never frees or keeps `data` past the call (except
 * tenax_register_state, which keeps the pointer: the array must outlive the trainer). */
typedef struct tenax_array {
  void* data;
  int32_t dtype;    /* tenax_dtype */
  int32_t order;    /* tenax_order */
  int32_t ndim;     /* 1..TENAX_MAX_DIMS */
  int32_t reserved; /* 0 */
  int64_t shape[TENAX_MAX_DIMS];
} tenax_array;

typedef struct tenax_context tenax_context;
typedef struct tenax_model tenax_model;
typedef struct tenax_trainer tenax_trainer;

/* The message of the last failed call on this thread ("" if none). Valid until the next call. */
TENAX_API const char* tenax_last_error(void);
/* A short constant name for a status ("TENAX_ERR_CONFIG"). */
TENAX_API const char* tenax_status_name(int32_t status /* tenax_status */);
/* This library's build: "tenax 0.1.0 (commit 00c7bb9d1e2f, tree clean, flavour cpu, libtorch
 * 1.13.0, RelWithDebInfo)", the line `tenax --version` prints; the version in it is the
 * library's TENAX_VERSION_STRING. A constant string; never NULL. */
TENAX_API const char* tenax_version(void);

/* ---- Context: who this process is, and its collectives ---------------------------------- */

/* Collective. Reads the launch from the environment and joins the other ranks:
 *   - under `tenax run` (RANK, WORLD_SIZE, TENAX_RDZV_ENDPOINT): the agent's rendezvous; a rank
 *     that dies is restarted by the agent and the job resumes from the last checkpoint;
 *   - under plain `srun` (SLURM_PROCID, SLURM_NTASKS) or `mpirun` (OMPI_COMM_WORLD_RANK / PMI_RANK):
 *     rank 0 hosts the key-value service that bootstraps the communicator (TENAX_RDZV_ENDPOINT
 *     names a `tenax rdzv` instead); recovery is a Slurm requeue;
 *   - with none of these: a single process (world size 1).
 * Gradients are averaged by the build's communicator, as TENAX_BACKEND (auto|gloo|tcp|nccl|mpi)
 * picks: by default NCCL in the CUDA build when the process sees a GPU, else Gloo in the CPU build
 * and Tenax's TCP ring in the CUDA build. */
TENAX_API tenax_status tenax_init(tenax_context** ctx);
/* Collective over `comm`. As tenax_init, but the ranks are those of the caller's MPI communicator
 * (a Fortran handle, MPI_Fint; from C: MPI_Comm_c2f(comm)) and gradients are averaged with
 * MPI_Allreduce on a duplicate of it, so Tenax's traffic never mixes with the solver's. Needs a
 * libtenax built with MPI (TENAX_ERR_CONFIG otherwise) and MPI already initialised. */
TENAX_API tenax_status tenax_init_mpi(tenax_context** ctx, int32_t fortran_comm);
/* Collective. Waits for peers (bounded), frees the context and sets *ctx to NULL. Free the
 * trainers that use it first. Safe on NULL *ctx. */
TENAX_API tenax_status tenax_finalize(tenax_context** ctx);
TENAX_API tenax_status tenax_rank(const tenax_context* ctx, int32_t* rank);
TENAX_API tenax_status tenax_world_size(const tenax_context* ctx, int32_t* world_size);
/* Collective: in-place reduction of `count` elements of `dtype` over every rank. */
TENAX_API tenax_status tenax_allreduce(tenax_context* ctx, void* data, int64_t count, int32_t dtype /* tenax_dtype */,
                                       int32_t op /* tenax_reduce_op */);
/* Collective: `bytes_per_rank` bytes from every rank into `out` (world size x bytes_per_rank, in
 * rank order). For a solver without MPI of its own (a halo exchange, a residual). */
TENAX_API tenax_status tenax_allgather(tenax_context* ctx, const void* in, void* out, int64_t bytes_per_rank);

/* ---- Models --------------------------------------------------------------------------------- */

/* Not collective. A multilayer perceptron: Linear layers widths[0] -> widths[1] -> ... ->
 * widths[n-1] (n >= 2) with `activation` ("relu", "tanh" or "gelu") between them, float32,
 * initialised from the trainer's seed when the trainer is created. */
TENAX_API tenax_status tenax_model_create_mlp(tenax_model** model, const int64_t* widths, int32_t n_widths,
                                              const char* activation, int32_t loss /* tenax_loss */);
/* Not collective. A TorchScript module saved by torch.jit.script(m).save(path) (or
 * torch::jit::Module::save): forward(input) -> output; trained by libtorch's torch::jit. Its
 * floating-point parameters are trained; they are broadcast from rank 0 at the first step. */
TENAX_API tenax_status tenax_model_load_torchscript(tenax_model** model, const char* path,
                                                    int32_t loss /* tenax_loss */);
/* Not collective. A Hugging Face BERT directory (config.json, model.safetensors) with a sequence
 * classification head of `num_labels` classes: input int64 token ids {batch, seq}, label int64
 * {batch}; cross-entropy loss. */
TENAX_API tenax_status tenax_model_load_bert(tenax_model** model, const char* directory, int64_t num_labels);
/* Not collective: the model description from the [model] table of a TOML file plus "key=value"
 * overrides: type = "mlp" (widths, activation, loss), "torchscript" (path, loss) or "bert"
 * (path, num_labels). Unknown keys are TENAX_ERR_CONFIG naming the key. */
TENAX_API tenax_status tenax_model_create_from_config(tenax_model** model, const char* toml_path,
                                                      const char* const* overrides, int32_t n_overrides);
/* Frees the model and sets *model to NULL (a trainer keeps its own reference). Safe on NULL. */
TENAX_API tenax_status tenax_model_free(tenax_model** model);

/* ---- Trainer: one optimizer step at a time ------------------------------------------------- */

/* Collective. The training configuration: TrainingArguments' names (output_dir, learning_rate,
 * max_steps, lr_scheduler_type, max_grad_norm, seed, logging_steps, report_to, save_total_limit,
 * ...) from the TOML file `toml_path` (NULL: defaults only) then "key=value" overrides. An unknown
 * key or bad value is TENAX_ERR_CONFIG naming the key (and file). max_steps sets the LR
 * schedule's length. per_device_train_batch_size, when given, is checked at every step (a batch
 * holds per_device_train_batch_size x gradient_accumulation_steps rows). What an embedded trainer
 * cannot do is TENAX_ERR_CONFIG naming the key, never ignored: the data order (num_train_epochs,
 * data_seed, ignore_data_skip, dataloader_drop_last, group_by_length, include_num_input_tokens_seen), evaluation
 * (eval_strategy other than "no", eval_steps, eval_on_start, metric_for_best_model, greater_is_better,
 * load_best_model_at_end, per_device_eval_batch_size), scheduled saves (save_strategy other than "no", save_steps) and
 * callbacks (restore_callback_states_from_checkpoint). The model's parameters are made identical on every rank (rank
 * 0's). */
TENAX_API tenax_status tenax_trainer_create(tenax_trainer** trainer, tenax_context* ctx, tenax_model* model,
                                            const char* toml_path, const char* const* overrides, int32_t n_overrides);
/* Collective. Waits for a checkpoint in flight, then frees the trainer and sets *trainer to NULL. */
TENAX_API tenax_status tenax_trainer_free(tenax_trainer** trainer);

/* Not collective (but every rank registers the same replicated names). Registers the caller's
 * array `name` to be saved in every checkpoint and restored in place by tenax_checkpoint_restore.
 * The memory must stay valid until the trainer is freed. A name registered twice, an empty name
 * or a registration after the first step / restore is TENAX_ERR_INVALID_ARGUMENT. */
TENAX_API tenax_status tenax_register_state(tenax_trainer* trainer, const char* name, const tenax_array* array,
                                            int32_t scope /* tenax_scope */);

/* Not collective (every rank calls it), before tenax_checkpoint_restore and the first step: this
 * program handles TENAX_RECOVERED from every collective call of this trainer and of its context
 * (tenax_train_step, tenax_checkpoint_save/_wait/_restore, tenax_preemption_requested,
 * tenax_allreduce, tenax_allgather). Under `tenax run --recovery in-process` a lost peer is then
 * healed in process; otherwise the call changes nothing. Without it such a job says at the start
 * that it cannot heal in process, and a lost peer restarts every worker from the newest checkpoint
 * (a program that did not expect TENAX_RECOVERED is never handed one).
 * The price, paid at every tenax_train_step: every rank's registered arrays are copied to every
 * rank (one allgather of world size x the registered bytes, and as much host memory), since a
 * rank's piece of the domain lives nowhere else; docs/in-process-recovery.md says what it costs.
 * A second trainer of the same context, or a call after the first step, is
 * TENAX_ERR_INVALID_ARGUMENT. */
TENAX_API tenax_status tenax_enable_in_process_recovery(tenax_trainer* trainer);

/* Collective. Restores the newest committed checkpoint under output_dir that verifies (falling
 * back to older ones): model, optimizer, LR schedule position, this rank's RNG and every
 * registered array. *step is the step given to tenax_checkpoint_save, or -1 when there is none
 * (nothing is changed then). Call it once, after registering state and before the first step:
 * the first tenax_train_step, tenax_checkpoint_save or tenax_preemption_requested starts the run
 * without a restore. A restore that fails (a checkpoint of another model, a state array of
 * another shape: TENAX_ERR_IO) leaves the trainer unusable: free it; the checkpoints are kept.
 * In a process that replaces a lost rank (in-process recovery) nothing is read from disk: the
 * model, optimizer, schedule, RNG and registered arrays come from live peers, the call returns
 * TENAX_RECOVERED and *step is the optimizer step healed to. */
TENAX_API tenax_status tenax_checkpoint_restore(tenax_trainer* trainer, int64_t* step);

/* Collective. One optimizer step on this rank's batch: forward, loss, backward, gradient average
 * over ranks, clipping (max_grad_norm), AdamW, LR schedule, logging (logging_steps). `input` is
 * {batch, features...} (C order), `label` as the loss needs; float64 is converted to the model's
 * float32. *loss (may be NULL) gets this rank's loss. With gradient_accumulation_steps = k the
 * batch is cut into k micro-batches along its batch dimension (which k must divide). */
TENAX_API tenax_status tenax_train_step(tenax_trainer* trainer, const tenax_array* input, const tenax_array* label,
                                        double* loss);
/* Not collective. The model's output for `input` (eval mode, no gradients) into `output`, whose
 * shape must be the output's ({batch, outputs}; reversed for TENAX_ORDER_F) and dtype float32 or
 * float64. */
TENAX_API tenax_status tenax_predict(tenax_trainer* trainer, const tenax_array* input, tenax_array* output);

/* Collective, asynchronous. Saves model, optimizer, schedule, RNG and registered state, labelled
 * `step` (the solver's step): the arrays are copied before the call returns (the solver may
 * overwrite them at once); the files are written and committed in the background, and the
 * previous save must have committed first (its failure is reported here). Steps must increase. */
TENAX_API tenax_status tenax_checkpoint_save(tenax_trainer* trainer, int64_t step);
/* Collective. Waits until the save in flight is committed (or failed: its error is returned). */
TENAX_API tenax_status tenax_checkpoint_wait(tenax_trainer* trainer);

/* Collective (one small allreduce): *requested = the signal (SIGUSR1, SIGTERM) that any rank
 * received, or 0. Every rank gets the same answer at the same call, so all stop at the same
 * solver step: then tenax_checkpoint_save, tenax_checkpoint_wait, free, finalize and exit
 * TENAX_EXIT_PREEMPTED. */
TENAX_API tenax_status tenax_preemption_requested(tenax_trainer* trainer, int32_t* requested);

/* Not collective (rank 0 writes): `n` named values at `step` to the metric sinks of report_to
 * (JSONL metrics file, TensorBoard event file) beside the training loss. */
TENAX_API tenax_status tenax_log_metrics(tenax_trainer* trainer, int64_t step, const char* const* names,
                                         const double* values, int32_t n);
/* The optimizer steps taken so far (restored by tenax_checkpoint_restore). */
TENAX_API tenax_status tenax_optimizer_step(const tenax_trainer* trainer, int64_t* step);

#ifdef __cplusplus
}
#endif

#endif /* TENAX_H */
