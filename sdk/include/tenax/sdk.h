// Umbrella header of the Tenax C++ SDK: every installed tenax/sdk/ header, grouped by what a
// program does with it. A training program includes this one header; tests/sdk's
// SdkPublicHeaders checks that nothing installed under tenax/sdk/ is missing from it (and
// compiles a unit that includes only it). The C API for C and Fortran programs is <tenax.h>.
//
//   #include <tenax/sdk.h>
//   auto context = tenax::elastic::WorkerContext::from_env();
//   tenax::sdk::Trainer trainer(model, args, train_data, context);
//   trainer.train();
#pragma once

// The process in its job: rank, world, collectives (set up by `tenax run`, srun or mpirun).
#include "tenax/elastic/worker_context.h"

// The Trainer, its arguments and its hooks.
#include "tenax/sdk/prediction.h"
#include "tenax/sdk/recovered_error.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/choice.h"
#include "tenax/sdk/training_arguments.h"
#include "tenax/sdk/training_arguments_io.h"
#include "tenax/sdk/user_state.h"

// Callbacks shipped with it.
#include "tenax/sdk/callbacks/default_callbacks.h"
#include "tenax/sdk/callbacks/early_stopping.h"
#include "tenax/sdk/callbacks/fault_drills.h"
#include "tenax/sdk/callbacks/jsonl_metrics.h"
#include "tenax/sdk/callbacks/progress_bar.h"
#include "tenax/sdk/callbacks/tensorboard.h"
#include "tenax/sdk/tensorboard/event_file_writer.h"

// Models.
#include "tenax/sdk/model.h"
#include "tenax/sdk/models/auto_model.h"
#include "tenax/sdk/models/bert.h"
#include "tenax/sdk/models/bert_config.h"
#include "tenax/sdk/models/distilbert.h"
#include "tenax/sdk/models/distilbert_config.h"
#include "tenax/sdk/models/pretrained_config.h"
#include "tenax/sdk/models/pretrained_model.h"
#include "tenax/sdk/models/vit.h"
#include "tenax/sdk/models/vit_config.h"

// Data: datasets, the resumable sampler, collators, text and images.
#include "tenax/sdk/data.h"
#include "tenax/sdk/idx_image_dataset.h"
#include "tenax/sdk/image_folder_dataset.h"
#include "tenax/sdk/image_collator.h"
#include "tenax/sdk/sampler.h"
#include "tenax/sdk/text/bert_tokenizer.h"
#include "tenax/sdk/text/vocab.h"
#include "tenax/sdk/text_collator.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/text_targets.h"
#include "tenax/sdk/tokenized_text_dataset.h"
#include "tenax/sdk/vision/idx_file.h"
#include "tenax/sdk/vision/image.h"
#include "tenax/sdk/vision/image_transforms.h"
#include "tenax/sdk/vision/vit_image_processor.h"

// Evaluation.
#include "tenax/sdk/metrics.h"

// The pieces the Trainer is made of, for a hand-written loop without it
// (examples/handwritten_loop): gradient sync, checkpoints, optimizer and schedule, mixed
// precision and loss scaling, activation checkpointing, determinism, preemption.
#include "tenax/sdk/activation_checkpoint.h"
#include "tenax/sdk/adafactor.h"
#include "tenax/sdk/autocast.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/loss_scale.h"
#include "tenax/sdk/save_outcome.h"
#include "tenax/sdk/determinism.h"
#include "tenax/sdk/grad_sync.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/sdk/preemption.h"
#include "tenax/sdk/state_capture.h"
