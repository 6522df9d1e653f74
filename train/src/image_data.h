// The data of a `tenax train` image job: image folders (ROOT/CLASS/IMAGE.png|jpg) for each split,
// the classes from the training folder (or data.label_names), or MNIST-style IDX files (each
// split's *-images-idx3-ubyte with its *-labels-idx1-ubyte; classes 0..N-1, named by
// data.label_names or by number); the model directory's image
// processor (preprocessor_config.json: size, rescale, mean, std) for every split, and
// run_image_classification.py's augmentation of the training split (RandomResizedCrop with
// data.crop_scale_* and data.crop_ratio_*, a horizontal flip with data.flip_probability) drawn
// from (seed, epoch, index). Errors are ConfigError naming the folder or file.
#pragma once

#include "job_data.h"
#include "job_options.h"
#include "tenax/sdk/vision/vit_image_processor.h"

namespace tenax::train {

JobData load_image_data(const JobOptions& options, const sdk::ViTImageProcessor& processor);

}  // namespace tenax::train
