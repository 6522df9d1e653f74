// Batches of images: Example::input is one image's pixel_values, float [channels, height, width]
// (ViTImageProcessor::preprocess), Example::label an int64 scalar (or undefined). Output:
// Batch::pixel_values [B, channels, height, width] and Batch::labels [B].
// Thread-safety: a pure function.
//
//   Trainer trainer(model, args, images, context, tenax::sdk::image_collator());
#pragma once

#include <vector>

#include "tenax/sdk/data.h"

namespace tenax::sdk {

/// Stacks the examples' images into pixel_values and their labels into labels. Throws
/// tenax::Error for an empty batch, or images that are not [C, H, W] or differ in shape.
Batch stack_image_batch(const std::vector<Example>& examples);

/// stack_image_batch, for Trainer's collator argument.
Collator image_collator();

}  // namespace tenax::sdk
