// Umbrella header of the Tenax SDK: everything a training program needs.
#pragma once

#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/data.h"
#include "tenax/sdk/grad_sync.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/metrics.h"
#include "tenax/sdk/model.h"
#include "tenax/sdk/sampler.h"
#include "tenax/sdk/state_capture.h"
#include "tenax/sdk/text/bert_tokenizer.h"
#include "tenax/sdk/text_collator.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/tokenized_text_dataset.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/training_arguments.h"
