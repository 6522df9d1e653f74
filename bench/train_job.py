#!/usr/bin/python3
"""The Rotten Tomatoes job of `tenax train` (train/jobs/rotten_tomatoes.toml, `make demo`'s) as the
benches run it, and the figures they read back from the files it writes in its output_dir.

  command(build, keys, assets): argv of `BUILD/launcher/tenax train JOB KEY=VALUE...`: the job
      file, its model and data taken from ASSETS (TENAX_ASSETS, default the repository's
      .assets/, where tools/fetch_assets.sh puts them) instead of .assets/ under the working
      directory, then KEYS (the bench's own, which win).
  results(output_dir): a bench's figures, from transformers' files that `tenax train` writes
      (rank 0, after training, whatever the number of ranks):
        train_samples_per_second   train_results.json (global_step x global batch / train_runtime)
        train_runtime_s            train_results.json's train_runtime (the training loop, final
                                   checkpoint included)
        test_accuracy, test_f1, test_matthews_correlation
                                   test_results.json (data.test_file; F1 of label id 1, "rotten")
        eval_runtime_s             test_results.json's test_runtime (predicting the test split)
        eval_accuracy              eval_results.json (data.validation_file)
        global_step, world_size    trainer_state.json

    python3 bench/train_job.py results OUTPUT_DIR    prints results() as one JSON line (for the
                                                     shell benches)
"""
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOB = os.path.join(REPO, "train", "jobs", "rotten_tomatoes.toml")


def assets_dir():
    return os.environ.get("TENAX_ASSETS") or os.path.join(REPO, ".assets")


def asset_keys(assets=None):
    """The job's model and data keys, pointing into `assets`."""
    assets = assets or assets_dir()
    data = os.path.join(assets, "data", "rotten_tomatoes")
    return [f"model.model_name_or_path={os.path.join(assets, 'all-minilm-l6-v2')}",
            f"data.train_file={os.path.join(data, 'train.csv')}",
            f"data.validation_file={os.path.join(data, 'validation.csv')}",
            f"data.test_file={os.path.join(data, 'test.csv')}"]


def command(build, keys, assets=None):
    return [os.path.join(build, "launcher", "tenax"), "train", JOB, *asset_keys(assets), *keys]


def results(output_dir):
    def read(name):
        with open(os.path.join(output_dir, name)) as f:
            return json.load(f)
    train, test, state = read("train_results.json"), read("test_results.json"), read("trainer_state.json")
    evaluation = read("eval_results.json") if os.path.exists(os.path.join(output_dir, "eval_results.json")) else {}
    return {"train_samples_per_second": train["train_samples_per_second"],
            "train_runtime_s": train["train_runtime"],
            "test_accuracy": test["test_accuracy"],
            "test_f1": test.get("test_f1"),
            "test_matthews_correlation": test.get("test_matthews_correlation"),
            "eval_runtime_s": test["test_runtime"],
            "eval_accuracy": evaluation.get("eval_accuracy"),
            "global_step": state["global_step"],
            "world_size": state.get("world_size")}


def main(argv):
    if len(argv) != 3 or argv[1] != "results":
        sys.exit("usage: train_job.py results OUTPUT_DIR")
    try:
        print(json.dumps(results(argv[2])))
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"train_job: {argv[2]}: no results of a finished `tenax train` job ({e})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
