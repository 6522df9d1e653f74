/* The C API from C: libtenax alone, no C++ (C99).
 *
 *   capi_test PART WORK_DIR TORCHSCRIPT_DIR
 *
 * PART is one of mlp, orders, float64, state, torchscript, bad_input, config, metrics,
 * preemption, recovery_arguments (one process), bert (TORCHSCRIPT_DIR is then the assets directory
 * holding all-minilm-l6-v2), two_ranks (under `tenax run --nproc-per-node 2` or `mpirun -n 2`) or
 * recovery (under `tenax run --nproc-per-node 2 --recovery in-process`). Each
 * part works in a fresh directory made under WORK_DIR. Exit status 0 when every CHECK held. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "tenax.h"

enum { kRows = 32, kFeatures = 2 };

static char work_dir[4096];
static char scripts_dir[4096];

static tenax_array array2(void* data, tenax_dtype dtype, tenax_order order, int64_t d0, int64_t d1) {
  tenax_array a;
  memset(&a, 0, sizeof a);
  a.data = data;
  a.dtype = dtype;
  a.order = order;
  a.ndim = 2;
  a.shape[0] = d0;
  a.shape[1] = d1;
  return a;
}

/* y = sin(2 x0) + x1 / 2 on kRows points; `shift` gives another rank other data. */
static void make_data(float x[kRows][kFeatures], float y[kRows][1], int shift) {
  int i;
  for (i = 0; i < kRows; ++i) {
    x[i][0] = -1.0f + 2.0f * (float)((i + 5 * shift) % kRows) / (float)(kRows - 1);
    x[i][1] = (float)sin(3.0 * (i + shift));
    y[i][0] = (float)sin(2.0 * x[i][0]) + 0.5f * x[i][1];
  }
}

/* A fresh directory under work_dir (prefix names the part). */
static void fresh_dir(const char* prefix, char* out, size_t size) {
  snprintf(out, size, "%s/%s-XXXXXX", work_dir, prefix);
  if (mkdtemp(out) == NULL) {
    perror("mkdtemp");
    exit(2);
  }
}

static tenax_model* make_mlp(void) {
  const int64_t widths[] = {kFeatures, 16, 1};
  tenax_model* model = NULL;
  CHECK_OK(tenax_model_create_mlp(&model, widths, 3, "tanh", TENAX_LOSS_MSE));
  return model;
}

/* A trainer writing under `dir`, with the settings every part shares. */
static tenax_trainer* make_trainer(tenax_context* ctx, tenax_model* model, const char* dir) {
  char output_dir[4200];
  const char* overrides[7];
  tenax_trainer* trainer = NULL;
  snprintf(output_dir, sizeof output_dir, "output_dir=%s", dir);
  overrides[0] = output_dir;
  overrides[1] = "learning_rate=0.01";
  overrides[2] = "max_steps=1000";
  overrides[3] = "disable_tqdm=true";
  overrides[4] = "save_strategy=no";
  overrides[5] = "report_to=jsonl";
  overrides[6] = "seed=7";
  CHECK_OK(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 7));
  return trainer;
}

/* ---- parts ---------------------------------------------------------------------------------- */

static void part_mlp(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], out[kRows][1];
  char dir[4200];
  double first = 0.0, last = 0.0, loss = 0.0;
  int64_t steps = -1;
  int step;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output = array2(out, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  fresh_dir("mlp", dir, sizeof dir);
  make_data(x, y, 0);
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_predict(trainer, &in, &output)); /* before any step: the seeded initial model */
  for (step = 0; step < 150; ++step) {
    CHECK_OK(tenax_train_step(trainer, &in, &label, &loss));
    if (step == 0) first = loss;
  }
  last = loss;
  printf("  MLP loss: step 1 %.5f, step 150 %.5f\n", first, last);
  CHECK(isfinite(first) && isfinite(last));
  CHECK(last < 0.25 * first);
  CHECK_OK(tenax_optimizer_step(trainer, &steps));
  CHECK(steps == 150);
  CHECK(strcmp(tenax_last_error(), "") == 0); /* a call that succeeds leaves no message */

  /* The prediction has the output's shape, and fits the data about as the loss says. */
  CHECK_OK(tenax_predict(trainer, &in, &output));
  {
    double mse = 0.0;
    int i;
    for (i = 0; i < kRows; ++i) mse += (out[i][0] - y[i][0]) * (out[i][0] - y[i][0]);
    mse /= kRows;
    printf("  MLP prediction MSE %.5f\n", mse);
    CHECK(mse < 0.25 * first);
  }
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK(trainer == NULL);
  CHECK_OK(tenax_model_free(&model));
  CHECK(model == NULL);
}

/* The same run with C-order arrays and with Fortran-order ones gives the same losses and
 * predictions, bit for bit. The Fortran array x(features, batch) is filled by its own index
 * rule, element (f, b) at f + features * b (0-based), and y(1, batch) alike. */
static void part_orders(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], xf[kFeatures * kRows], yf[kRows], out_c[kRows][1], out_f[kRows];
  char dir_c[4200], dir_f[4200];
  tenax_model* model_c = make_mlp();
  tenax_model* model_f = make_mlp();
  tenax_trainer *trainer_c, *trainer_f;
  tenax_array in_c = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label_c = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array in_f = array2(xf, TENAX_FLOAT32, TENAX_ORDER_F, kFeatures, kRows); /* x(features, batch) */
  tenax_array label_f = array2(yf, TENAX_FLOAT32, TENAX_ORDER_F, 1, kRows);
  tenax_array output_c = array2(out_c, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output_f = array2(out_f, TENAX_FLOAT32, TENAX_ORDER_F, 1, kRows);
  int i, j, step;
  make_data(x, y, 0);
  for (i = 0; i < kRows; ++i) {
    for (j = 0; j < kFeatures; ++j) xf[j + kFeatures * i] = x[i][j];
    yf[i] = y[i][0];
  }
  fresh_dir("orders-c", dir_c, sizeof dir_c);
  fresh_dir("orders-f", dir_f, sizeof dir_f);
  trainer_c = make_trainer(ctx, model_c, dir_c);
  trainer_f = make_trainer(ctx, model_f, dir_f);
  for (step = 0; step < 10; ++step) {
    double loss_c = -1.0, loss_f = -2.0;
    CHECK_OK(tenax_train_step(trainer_c, &in_c, &label_c, &loss_c));
    CHECK_OK(tenax_train_step(trainer_f, &in_f, &label_f, &loss_f));
    CHECK(loss_c == loss_f);
  }
  CHECK_OK(tenax_predict(trainer_c, &in_c, &output_c));
  CHECK_OK(tenax_predict(trainer_f, &in_f, &output_f));
  CHECK(memcmp(out_c, out_f, sizeof out_f) == 0);
  /* A Fortran array declared the C way round, x(batch, features), is refused by name. */
  in_f.shape[0] = kRows;
  in_f.shape[1] = kFeatures;
  CHECK_FAILS(tenax_train_step(trainer_f, &in_f, &label_f, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: shape");
  CHECK_OK(tenax_trainer_free(&trainer_c));
  CHECK_OK(tenax_trainer_free(&trainer_f));
  CHECK_OK(tenax_model_free(&model_c));
  CHECK_OK(tenax_model_free(&model_f));
}

/* float64 arrays are converted to the model's float32: the same run as with float32 arrays
 * holding the same values; predictions may go into a float64 output. */
static void part_float64(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], out32[kRows][1];
  static double xd[kRows][kFeatures], yd[kRows][1], out64[kRows][1];
  char dir32[4200], dir64[4200];
  tenax_model* model32 = make_mlp();
  tenax_model* model64 = make_mlp();
  tenax_trainer *trainer32, *trainer64;
  tenax_array in32 = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label32 = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array in64 = array2(xd, TENAX_FLOAT64, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label64 = array2(yd, TENAX_FLOAT64, TENAX_ORDER_C, kRows, 1);
  tenax_array output32 = array2(out32, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output64 = array2(out64, TENAX_FLOAT64, TENAX_ORDER_C, kRows, 1);
  int i, step;
  make_data(x, y, 0);
  for (i = 0; i < kRows; ++i) {
    xd[i][0] = x[i][0];
    xd[i][1] = x[i][1];
    yd[i][0] = y[i][0];
  }
  fresh_dir("f32", dir32, sizeof dir32);
  fresh_dir("f64", dir64, sizeof dir64);
  trainer32 = make_trainer(ctx, model32, dir32);
  trainer64 = make_trainer(ctx, model64, dir64);
  for (step = 0; step < 10; ++step) {
    double loss32 = -1.0, loss64 = -2.0;
    CHECK_OK(tenax_train_step(trainer32, &in32, &label32, &loss32));
    CHECK_OK(tenax_train_step(trainer64, &in64, &label64, &loss64));
    CHECK(loss32 == loss64);
  }
  CHECK_OK(tenax_predict(trainer32, &in32, &output32));
  CHECK_OK(tenax_predict(trainer64, &in64, &output64));
  for (i = 0; i < kRows; ++i) CHECK(out64[i][0] == (double)out32[i][0]);
  CHECK_OK(tenax_trainer_free(&trainer32));
  CHECK_OK(tenax_trainer_free(&trainer64));
  CHECK_OK(tenax_model_free(&model32));
  CHECK_OK(tenax_model_free(&model64));
}

/* Registered arrays are saved with the model and restored in place: the values of the save,
 * not of later changes (the save copies them before it returns). */
static void part_state(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], out_saved[kRows][1], out_restored[kRows][1];
  static double field[4][3], field_saved[4][3];
  static double field_f[3][5], field_f_saved[3][5]; /* a Fortran array u(5, 3) */
  static int64_t counter[1], counter_saved[1];
  char dir[4200];
  int64_t step = 123, optimizer_steps = -1;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output = array2(out_saved, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array field_array = array2(field, TENAX_FLOAT64, TENAX_ORDER_C, 4, 3);
  tenax_array field_f_array = array2(field_f, TENAX_FLOAT64, TENAX_ORDER_F, 5, 3);
  tenax_array counter_array = array2(counter, TENAX_INT64, TENAX_ORDER_C, 1, 1);
  int i, j, s;
  counter_array.ndim = 1;
  make_data(x, y, 0);
  for (i = 0; i < 4; ++i)
    for (j = 0; j < 3; ++j) field[i][j] = 1.0 / (1 + i + 10 * j);
  for (i = 0; i < 3; ++i)
    for (j = 0; j < 5; ++j) field_f[i][j] = -0.25 * i + j;
  counter[0] = 41;
  fresh_dir("state", dir, sizeof dir);

  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_PER_RANK));
  CHECK_OK(tenax_register_state(trainer, "field_f", &field_f_array, TENAX_PER_RANK));
  CHECK_OK(tenax_register_state(trainer, "counter", &counter_array, TENAX_REPLICATED));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == -1); /* nothing saved yet */
  for (s = 0; s < 3; ++s) CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_checkpoint_save(trainer, 30));
  memcpy(field_saved, field, sizeof field);
  memcpy(field_f_saved, field_f, sizeof field_f);
  memcpy(counter_saved, counter, sizeof counter);
  CHECK_OK(tenax_predict(trainer, &in, &output));
  /* The solver goes on at once, overwriting its arrays while the save is written. */
  for (i = 0; i < 4; ++i)
    for (j = 0; j < 3; ++j) field[i][j] = 99.0;
  field_f[2][4] = -7.0;
  counter[0] = 1000;
  CHECK_OK(tenax_checkpoint_wait(trainer));
  for (s = 0; s < 2; ++s) CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_FAILS(tenax_checkpoint_save(trainer, 30), TENAX_ERR_INVALID_ARGUMENT, "step");
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));

  /* A new process would start here: a fresh model and trainer, the arrays registered again. */
  model = make_mlp();
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_PER_RANK));
  CHECK_OK(tenax_register_state(trainer, "field_f", &field_f_array, TENAX_PER_RANK));
  CHECK_OK(tenax_register_state(trainer, "counter", &counter_array, TENAX_REPLICATED));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == 30);
  CHECK(memcmp(field, field_saved, sizeof field) == 0);
  CHECK(memcmp(field_f, field_f_saved, sizeof field_f) == 0);
  CHECK(counter[0] == 41);
  CHECK_OK(tenax_optimizer_step(trainer, &optimizer_steps));
  CHECK(optimizer_steps == 3);
  output.data = out_restored;
  CHECK_OK(tenax_predict(trainer, &in, &output));
  CHECK(memcmp(out_saved, out_restored, sizeof out_saved) == 0); /* the model of step 30 */
  CHECK_FAILS(tenax_checkpoint_restore(trainer, &step), TENAX_ERR_INVALID_ARGUMENT, "once");
  CHECK_FAILS(tenax_checkpoint_save(trainer, 30), TENAX_ERR_INVALID_ARGUMENT, "step");
  CHECK_OK(tenax_checkpoint_save(trainer, 31));
  CHECK_OK(tenax_trainer_free(&trainer)); /* waits for the save in flight */
  CHECK_OK(tenax_model_free(&model));
}

static void torchscript_path(const char* name, char* out, size_t size) {
  snprintf(out, size, "%s/%s", scripts_dir, name);
}

static void part_torchscript(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], out[kRows][1];
  char dir[4200], path[4200];
  double first = 0.0, loss = 0.0;
  tenax_model* model = NULL;
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output = array2(out, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  int step;
  make_data(x, y, 0);
  torchscript_path("net.pt", path, sizeof path);
  CHECK_OK(tenax_model_load_torchscript(&model, path, TENAX_LOSS_MSE));
  fresh_dir("torchscript", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  for (step = 0; step < 150; ++step) {
    CHECK_OK(tenax_train_step(trainer, &in, &label, &loss));
    if (step == 0) first = loss;
  }
  printf("  TorchScript loss: step 1 %.5f, step 150 %.5f\n", first, loss);
  CHECK(loss < 0.25 * first);
  CHECK_OK(tenax_predict(trainer, &in, &output));
  /* Saved and restored under PyTorch's names (fc1.weight ...): a second trainer gets the model. */
  CHECK_OK(tenax_checkpoint_save(trainer, 1));
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
  {
    static float again[kRows][1];
    int64_t step_restored = -1;
    CHECK_OK(tenax_model_load_torchscript(&model, path, TENAX_LOSS_MSE));
    trainer = make_trainer(ctx, model, dir);
    CHECK_OK(tenax_checkpoint_restore(trainer, &step_restored));
    CHECK(step_restored == 1);
    output.data = again;
    CHECK_OK(tenax_predict(trainer, &in, &output));
    CHECK(memcmp(out, again, sizeof out) == 0);
    CHECK_OK(tenax_trainer_free(&trainer));
    CHECK_OK(tenax_model_free(&model));
  }
}

/* Issue 11, point 6: every bad input is a status and a message naming the argument; nothing
 * crashes, and the checkpoint saved before the bad calls is still restored afterwards. */
static void part_bad_input(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], out[kRows][1], wide[kRows][3];
  static int64_t classes[kRows];
  static double field[8], field_saved[8];
  char dir[4200], path[4200];
  int64_t step = -1;
  int i;
  const int64_t widths[] = {kFeatures, 4, 1};
  tenax_model* model = make_mlp();
  tenax_model* other = NULL;
  tenax_trainer* trainer;
  tenax_trainer* freed;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array output = array2(out, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array bad;
  tenax_array field_array = array2(field, TENAX_FLOAT64, TENAX_ORDER_C, 8, 1);
  field_array.ndim = 1;
  make_data(x, y, 0);
  for (i = 0; i < 8; ++i) field[i] = i * 0.5;
  fresh_dir("bad", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_REPLICATED));
  CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_checkpoint_save(trainer, 5));
  CHECK_OK(tenax_checkpoint_wait(trainer));
  memcpy(field_saved, field, sizeof field);

  /* Arrays. */
  bad = in;
  bad.dtype = 7;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: dtype 7");
  bad = in;
  bad.order = 2;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: order 2");
  bad = array2(wide, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 3);
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: shape {32, 3}");
  bad = label;
  bad.shape[0] = kRows - 1;
  CHECK_FAILS(tenax_train_step(trainer, &in, &bad, NULL), TENAX_ERR_INVALID_ARGUMENT, "label");
  bad = array2(classes, TENAX_INT64, TENAX_ORDER_C, kRows, 1);
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: dtype TENAX_INT64");
  bad = in;
  bad.shape[1] = 0;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: shape[1] is 0");
  bad = in;
  bad.shape[0] = -4;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: shape[0] is -4");
  bad = in;
  bad.ndim = 0;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: ndim 0");
  bad = in;
  bad.ndim = TENAX_MAX_DIMS + 1;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: ndim 9");
  bad = in;
  bad.data = NULL;
  CHECK_FAILS(tenax_train_step(trainer, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: data is NULL");
  CHECK_FAILS(tenax_train_step(trainer, NULL, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input");
  CHECK_FAILS(tenax_train_step(trainer, &in, NULL, NULL), TENAX_ERR_INVALID_ARGUMENT, "label");
  bad = array2(out, TENAX_FLOAT32, TENAX_ORDER_C, 1, kRows);
  CHECK_FAILS(tenax_predict(trainer, &in, &bad), TENAX_ERR_INVALID_ARGUMENT, "output: shape {1, 32}");
  bad = array2(classes, TENAX_INT64, TENAX_ORDER_C, kRows, 1);
  CHECK_FAILS(tenax_predict(trainer, &in, &bad), TENAX_ERR_INVALID_ARGUMENT, "output: dtype TENAX_INT64");
  CHECK_OK(tenax_predict(trainer, &in, &output)); /* the trainer still works */

  /* Handles. */
  CHECK_FAILS(tenax_train_step(NULL, &in, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "trainer: NULL");
  CHECK_FAILS(tenax_optimizer_step(trainer, NULL), TENAX_ERR_INVALID_ARGUMENT, "step: NULL");
  CHECK_FAILS(tenax_rank(NULL, NULL), TENAX_ERR_INVALID_ARGUMENT, "rank");
  CHECK_FAILS(tenax_trainer_create(&freed, NULL, model, NULL, NULL, 0), TENAX_ERR_INVALID_ARGUMENT, "ctx: NULL");
  CHECK(freed == NULL);
  CHECK_FAILS(tenax_model_create_mlp(&other, widths, 3, "swish", TENAX_LOSS_MSE), TENAX_ERR_INVALID_ARGUMENT,
              "activation: 'swish'");
  CHECK_FAILS(tenax_model_create_mlp(&other, widths, 1, "tanh", TENAX_LOSS_MSE), TENAX_ERR_INVALID_ARGUMENT,
              "n_widths");
  CHECK_FAILS(tenax_model_create_mlp(&other, widths, 3, "tanh", (tenax_loss)9), TENAX_ERR_INVALID_ARGUMENT, "loss: 9");
  CHECK(other == NULL);

  /* State. */
  CHECK_FAILS(tenax_register_state(trainer, "field", &field_array, TENAX_REPLICATED), TENAX_ERR_INVALID_ARGUMENT,
              "name: 'field'");
  CHECK_FAILS(tenax_register_state(trainer, "late", &field_array, TENAX_REPLICATED), TENAX_ERR_INVALID_ARGUMENT,
              "name: 'late' registered after");
  CHECK_FAILS(tenax_checkpoint_save(trainer, 5), TENAX_ERR_INVALID_ARGUMENT, "step: 5");
  CHECK_FAILS(tenax_checkpoint_save(trainer, -1), TENAX_ERR_INVALID_ARGUMENT, "step: -1");

  /* TorchScript files: missing, corrupt, without forward, not fitting the input. */
  torchscript_path("missing.pt", path, sizeof path);
  CHECK_FAILS(tenax_model_load_torchscript(&other, path, TENAX_LOSS_MSE), TENAX_ERR_IO, path);
  torchscript_path("corrupt.pt", path, sizeof path);
  CHECK_FAILS(tenax_model_load_torchscript(&other, path, TENAX_LOSS_MSE), TENAX_ERR_IO, path);
  torchscript_path("no_forward.pt", path, sizeof path);
  CHECK_FAILS(tenax_model_load_torchscript(&other, path, TENAX_LOSS_MSE), TENAX_ERR_IO, "no forward");
  CHECK_FAILS(tenax_model_load_torchscript(&other, NULL, TENAX_LOSS_MSE), TENAX_ERR_INVALID_ARGUMENT, "path: NULL");
  CHECK(other == NULL);
  torchscript_path("net.pt", path, sizeof path);
  CHECK_OK(tenax_model_load_torchscript(&other, path, TENAX_LOSS_MSE));
  {
    char other_dir[4200];
    tenax_trainer* scripted;
    fresh_dir("bad-ts", other_dir, sizeof other_dir);
    scripted = make_trainer(ctx, other, other_dir);
    bad = array2(wide, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 3); /* net.pt takes 2 features */
    CHECK_FAILS(tenax_train_step(scripted, &bad, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input");
    CHECK_FAILS(tenax_predict(scripted, &bad, &output), TENAX_ERR_INVALID_ARGUMENT, "input");
    CHECK_OK(tenax_train_step(scripted, &in, &label, NULL));
    CHECK_OK(tenax_trainer_free(&scripted));
  }
  CHECK_OK(tenax_model_free(&other));

  /* A handle used after its free (the caller kept a copy of the pointer). */
  freed = trainer;
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK(trainer == NULL);
  CHECK_FAILS(tenax_train_step(freed, &in, &label, NULL), TENAX_ERR_NOT_INITIALIZED, "trainer: not a live");
  CHECK_FAILS(tenax_trainer_free(&freed), TENAX_ERR_NOT_INITIALIZED, "trainer");
  CHECK_OK(tenax_trainer_free(&trainer)); /* NULL: nothing to do */
  other = model;
  CHECK_OK(tenax_model_free(&model));
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, other, NULL, NULL, 0), TENAX_ERR_NOT_INITIALIZED, "model");

  /* A context used after its finalize; a context finalized under a live trainer. */
  {
    tenax_context* second = NULL;
    tenax_context* kept;
    int32_t rank = -1;
    tenax_model* small = make_mlp();
    tenax_trainer* using_second;
    char second_dir[4200];
    CHECK_OK(tenax_init(&second));
    fresh_dir("bad-ctx", second_dir, sizeof second_dir);
    using_second = make_trainer(second, small, second_dir);
    CHECK_FAILS(tenax_finalize(&second), TENAX_ERR_INVALID_ARGUMENT, "ctx: 1 trainer(s)");
    CHECK_OK(tenax_trainer_free(&using_second));
    kept = second;
    CHECK_OK(tenax_finalize(&second));
    CHECK(second == NULL);
    CHECK_FAILS(tenax_rank(kept, &rank), TENAX_ERR_NOT_INITIALIZED, "ctx: not a live tenax_context");
    CHECK_FAILS(tenax_trainer_create(&using_second, kept, small, NULL, NULL, 0), TENAX_ERR_NOT_INITIALIZED, "ctx");
    CHECK_OK(tenax_model_free(&small));
  }

  /* Restores that do not fit what was saved: another model, another state array. */
  {
    const int64_t narrow[] = {kFeatures, 8, 1};
    static double short_field[4];
    tenax_array short_array = array2(short_field, TENAX_FLOAT64, TENAX_ORDER_C, 4, 1);
    short_array.ndim = 1;
    CHECK_OK(tenax_model_create_mlp(&other, narrow, 3, "tanh", TENAX_LOSS_MSE));
    trainer = make_trainer(ctx, other, dir);
    CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_REPLICATED));
    CHECK_FAILS(tenax_checkpoint_restore(trainer, &step), TENAX_ERR_IO, "layers");
    CHECK_FAILS(tenax_train_step(trainer, &in, &label, NULL), TENAX_ERR_NOT_INITIALIZED, "free it");
    CHECK_OK(tenax_trainer_free(&trainer));
    CHECK_OK(tenax_model_free(&other));
    model = make_mlp();
    trainer = make_trainer(ctx, model, dir);
    CHECK_OK(tenax_register_state(trainer, "field", &short_array, TENAX_REPLICATED));
    CHECK_FAILS(tenax_checkpoint_restore(trainer, &step), TENAX_ERR_IO, "field");
    CHECK_OK(tenax_trainer_free(&trainer));
    CHECK_OK(tenax_model_free(&model));
  }

  /* Nothing saved was lost: the checkpoint of step 5 comes back. */
  for (i = 0; i < 8; ++i) field[i] = -1.0;
  model = make_mlp();
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_REPLICATED));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == 5);
  CHECK(memcmp(field, field_saved, sizeof field) == 0);
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
}

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(2);
  }
  fputs(text, f);
  fclose(f);
}

/* Configuration: TrainingArguments and [model] from TOML and key=value overrides. */
static void part_config(tenax_context* ctx) {
  char dir[4200], toml[4300], text[8600], output_dir[4300];
  const char* overrides[4];
  tenax_model* model = NULL;
  tenax_trainer* trainer = NULL;
  int64_t step = 0;
  fresh_dir("config", dir, sizeof dir);
  snprintf(toml, sizeof toml, "%s/run.toml", dir);
  snprintf(output_dir, sizeof output_dir, "output_dir=%s/out", dir);

  /* One file for both: the trainer skips [model], the model reads only [model]. */
  snprintf(text, sizeof text,
           "learning_rate = 0.001\nmax_steps = 100\ndisable_tqdm = true\nreport_to = [\"none\"]\n"
           "output_dir = \"%s/out\"\n\n[model]\ntype = \"mlp\"\nwidths = [2, 8, 1]\nactivation = \"relu\"\n"
           "loss = \"mse\"\n",
           dir);
  write_file(toml, text);
  overrides[0] = "activation=gelu";
  CHECK_OK(tenax_model_create_from_config(&model, toml, overrides, 1));
  CHECK_OK(tenax_trainer_create(&trainer, ctx, model, toml, NULL, 0));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == -1);
  CHECK_OK(tenax_trainer_free(&trainer));

  /* gradient_accumulation_steps = 2: one call is one optimizer step over two micro-batches. */
  {
    static float x[kRows][kFeatures], y[kRows][1];
    tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
    tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
    int64_t optimizer_steps = -1;
    make_data(x, y, 0);
    overrides[0] = "gradient_accumulation_steps=2";
    CHECK_OK(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 1));
    CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
    CHECK_OK(tenax_optimizer_step(trainer, &optimizer_steps));
    CHECK(optimizer_steps == 1);
    in.shape[0] = label.shape[0] = kRows - 1; /* 31 rows do not split in two */
    CHECK_FAILS(tenax_train_step(trainer, &in, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input: a batch of 31");
    CHECK_OK(tenax_trainer_free(&trainer));
  }

  /* per_device_train_batch_size, when set, is every step's rows per micro-batch (it is recorded
   * as the global batch that an elastic resume keeps). */
  {
    static float x[kRows][kFeatures], y[kRows][1];
    tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
    tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
    make_data(x, y, 0);
    overrides[0] = "per_device_train_batch_size=16";
    overrides[1] = "gradient_accumulation_steps=2";
    CHECK_OK(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 2));
    CHECK_OK(tenax_train_step(trainer, &in, &label, NULL)); /* 32 = 16 x 2 */
    overrides[0] = "per_device_train_batch_size=8";
    CHECK_OK(tenax_trainer_free(&trainer));
    CHECK_OK(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 2));
    CHECK_FAILS(tenax_train_step(trainer, &in, &label, NULL), TENAX_ERR_INVALID_ARGUMENT,
                "per_device_train_batch_size 8 x gradient_accumulation_steps 2 = 16 rows");
    CHECK_OK(tenax_trainer_free(&trainer));
  }

  /* What an embedded trainer cannot do is refused, naming the key, not ignored; a value that
   * asks for nothing is accepted. */
  {
    static const char* const refused[][2] = {
        {"num_train_epochs=5", "num_train_epochs: not available to an embedded trainer"},
        {"per_device_eval_batch_size=4", "tenax_predict runs on the batch it is given"},
        {"eval_strategy=steps", "does not evaluate"},
        {"eval_steps=10", "eval_steps: not available"},
        {"eval_on_start=true", "eval_on_start: not available"},
        {"metric_for_best_model=eval_loss", "metric_for_best_model: not available"},
        {"save_steps=10", "tenax_checkpoint_save"},
        {"data_seed=3", "no data order to seed"},
        {"ignore_data_skip=true", "no data order to start again"},
        {"dataloader_drop_last=false", "dataloader_drop_last: not available"},
        {"group_by_length=true", "no data order to group"},
        {"include_num_input_tokens_seen=true", "not tokens"},
    };
    size_t i;
    for (i = 0; i < sizeof refused / sizeof refused[0]; ++i) {
      overrides[0] = refused[i][0];
      CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 1), TENAX_ERR_CONFIG, refused[i][1]);
      CHECK(trainer == NULL);
    }
    overrides[0] = "eval_strategy=no";
    overrides[1] = "eval_on_start=false";
    overrides[2] = "group_by_length=false";
    overrides[3] = "optim=adafactor"; /* every optimizer of the Trainer's is the C API's too */
    CHECK_OK(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 4));
    CHECK_OK(tenax_trainer_free(&trainer));
  }

  /* Unknown keys, in the file and in the overrides, are named. */
  overrides[0] = output_dir;
  overrides[1] = "learnin_rate=0.1";
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 2), TENAX_ERR_CONFIG, "learnin_rate");
  CHECK(trainer == NULL);
  overrides[1] = "learning_rate";
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 2), TENAX_ERR_CONFIG, "overrides[1]");
  overrides[1] = "max_steps=many";
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 2), TENAX_ERR_CONFIG, "max_steps");
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, NULL, 0), TENAX_ERR_CONFIG, "output_dir");
  snprintf(text, sizeof text, "%s/missing.toml", dir);
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, text, NULL, 0), TENAX_ERR_CONFIG, text);
  write_file(toml, "learning_rate = 0.001\nwarmup_stepz = 3\n");
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 1), TENAX_ERR_CONFIG, "warmup_stepz");
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, toml, overrides, 1), TENAX_ERR_CONFIG, toml);
  CHECK_OK(tenax_model_free(&model));

  write_file(toml, "[model]\ntype = \"mlp\"\nwidths = [2, 8, 1]\nactivaton = \"relu\"\n");
  CHECK_FAILS(tenax_model_create_from_config(&model, toml, NULL, 0), TENAX_ERR_CONFIG, "activaton");
  CHECK_FAILS(tenax_model_create_from_config(&model, toml, NULL, 0), TENAX_ERR_CONFIG, toml);
  write_file(toml, "[model]\ntype = \"mlp\"\nwidths = [2, 8, 1]\n");
  overrides[0] = "depth=3";
  CHECK_FAILS(tenax_model_create_from_config(&model, toml, overrides, 1), TENAX_ERR_CONFIG, "depth");
  overrides[0] = "type=torchscript";
  CHECK_FAILS(tenax_model_create_from_config(&model, toml, overrides, 1), TENAX_ERR_CONFIG, "path");
  write_file(toml, "[model]\ntype = \"torchscript\"\nloss = \"mse\"\n");
  snprintf(text, sizeof text, "path=%s/net.pt", scripts_dir);
  overrides[0] = text;
  CHECK_OK(tenax_model_create_from_config(&model, toml, overrides, 1));
  CHECK_OK(tenax_model_free(&model));
  CHECK(model == NULL);
}

/* tenax_log_metrics reaches the JSONL sink beside the trainer's own loss. */
static void part_metrics(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1];
  char dir[4200], path[4300], line[4096];
  const char* names[2] = {"residual", "energy"};
  const double values[2] = {0.125, 3.5};
  int found = 0;
  FILE* f;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  make_data(x, y, 0);
  fresh_dir("metrics", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_log_metrics(trainer, 17, names, values, 2));
  CHECK_FAILS(tenax_log_metrics(trainer, 17, NULL, values, 2), TENAX_ERR_INVALID_ARGUMENT, "names");
  names[1] = "residual";
  CHECK_FAILS(tenax_log_metrics(trainer, 17, names, values, 2), TENAX_ERR_INVALID_ARGUMENT, "names[1]");
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
  snprintf(path, sizeof path, "%s/runs/metrics.jsonl", dir);
  f = fopen(path, "r");
  CHECK(f != NULL);
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (strstr(line, "\"step\":17") && strstr(line, "\"residual\":0.125") && strstr(line, "\"energy\":3.5")) ++found;
  }
  if (f != NULL) fclose(f);
  CHECK(found == 1);
}

/* A preemption signal reaches the solver's poll; it then saves at its own step. */
static void part_preemption(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1];
  char dir[4200];
  int32_t requested = -1;
  int64_t step = -1;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  make_data(x, y, 0);
  fresh_dir("preemption", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_preemption_requested(trainer, &requested));
  CHECK(requested == 0);
  raise(SIGUSR1); /* what Slurm's --signal or the agent sends */
  CHECK_OK(tenax_preemption_requested(trainer, &requested));
  CHECK(requested == SIGUSR1);
  CHECK_OK(tenax_checkpoint_save(trainer, 7));
  CHECK_OK(tenax_checkpoint_wait(trainer));
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
  model = make_mlp();
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == 7);
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
}

/* A Hugging Face BERT directory: int64 token ids in, class logits out (scripts_dir holds the
 * assets here). */
static void part_bert(tenax_context* ctx) {
  static int64_t ids[4][8], labels[4] = {0, 1, 0, 1};
  static float logits[4][2], x[4][8];
  char dir[4200], path[4200];
  double loss = -1.0;
  int i, j, s;
  tenax_model* model = NULL;
  tenax_trainer* trainer;
  tenax_array in = array2(ids, TENAX_INT64, TENAX_ORDER_C, 4, 8);
  tenax_array label = array2(labels, TENAX_INT64, TENAX_ORDER_C, 4, 1);
  tenax_array output = array2(logits, TENAX_FLOAT32, TENAX_ORDER_C, 4, 2);
  tenax_array floats = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, 4, 8);
  label.ndim = 1;
  for (i = 0; i < 4; ++i) {
    ids[i][0] = 101; /* [CLS] ... [SEP] */
    for (j = 1; j < 7; ++j) ids[i][j] = 1996 + 37 * i + j;
    ids[i][7] = 102;
  }
  snprintf(path, sizeof path, "%s/all-minilm-l6-v2", scripts_dir);
  CHECK_FAILS(tenax_model_load_bert(&model, path, 1), TENAX_ERR_INVALID_ARGUMENT, "num_labels");
  snprintf(dir, sizeof dir, "%s/no-such-model", scripts_dir);
  CHECK(tenax_model_load_bert(&model, dir, 2) != TENAX_OK && strstr(tenax_last_error(), dir) != NULL);
  CHECK_OK(tenax_model_load_bert(&model, path, 2));
  fresh_dir("bert", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  for (s = 0; s < 3; ++s) CHECK_OK(tenax_train_step(trainer, &in, &label, &loss));
  CHECK(isfinite(loss) && loss > 0.0);
  CHECK_OK(tenax_predict(trainer, &in, &output));
  CHECK(isfinite(logits[0][0]) && isfinite(logits[3][1]));
  CHECK_FAILS(tenax_train_step(trainer, &floats, &label, NULL), TENAX_ERR_INVALID_ARGUMENT, "input");
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
}

/* Two ranks, different data: gradient averaging keeps the replicas identical, and per-rank
 * state comes back to its own rank. */
static void part_two_ranks(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], probe_x[4][kFeatures], probe[4][1], all[2][4][1];
  static char dir[4200], dirs[2][4200];
  double field[3], field_saved[3];
  int32_t rank = -1, world = -1;
  int64_t sum[1], step = -1;
  int s, i;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array probe_in = array2(probe_x, TENAX_FLOAT32, TENAX_ORDER_C, 4, kFeatures);
  tenax_array probe_out = array2(probe, TENAX_FLOAT32, TENAX_ORDER_C, 4, 1);
  tenax_array field_array = array2(field, TENAX_FLOAT64, TENAX_ORDER_C, 3, 1);
  field_array.ndim = 1;
  CHECK_OK(tenax_rank(ctx, &rank));
  CHECK_OK(tenax_world_size(ctx, &world));
  CHECK(world == 2);
  if (world != 2) return;
  sum[0] = rank + 1;
  CHECK_OK(tenax_allreduce(ctx, sum, 1, TENAX_INT64, TENAX_SUM));
  CHECK(sum[0] == 3);

  /* Rank 0 makes the directory; allgather tells rank 1 its name. */
  if (rank == 0) fresh_dir("two-ranks", dir, sizeof dir);
  CHECK_OK(tenax_allgather(ctx, dir, dirs, sizeof dir));
  for (i = 0; i < 3; ++i) field[i] = 10.0 * rank + i;
  memcpy(field_saved, field, sizeof field);

  make_data(x, y, rank); /* each rank its own data */
  for (i = 0; i < 4; ++i) {
    probe_x[i][0] = 0.25f * i - 0.5f;
    probe_x[i][1] = 0.1f * i;
  }
  trainer = make_trainer(ctx, model, dirs[0]);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_PER_RANK));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == -1);
  for (s = 0; s < 20; ++s) CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_predict(trainer, &probe_in, &probe_out));
  CHECK_OK(tenax_allgather(ctx, probe, all, sizeof probe));
  CHECK(memcmp(all[0], all[1], sizeof probe) == 0);
  printf("  rank %d: prediction at the probe %.6f %.6f %.6f %.6f (rank 0: %.6f ...)\n", rank, probe[0][0], probe[1][0],
         probe[2][0], probe[3][0], all[0][0][0]);
  CHECK_OK(tenax_checkpoint_save(trainer, 20));
  for (i = 0; i < 3; ++i) field[i] = -1.0;
  CHECK_OK(tenax_trainer_free(&trainer));

  trainer = make_trainer(ctx, model, dirs[0]);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_PER_RANK));
  CHECK_OK(tenax_checkpoint_restore(trainer, &step));
  CHECK(step == 20);
  CHECK(memcmp(field, field_saved, sizeof field) == 0);
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
}

/* TENAX_RECOVERED is a status of its own, named, and never an error code; asking for in-process
 * recovery is checked like any other argument, and outside `tenax run --recovery in-process` it
 * changes nothing (the steps are those of a run without it). */
static void part_recovery_arguments(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1];
  char dir[4200];
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_trainer* second;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  int s;
  CHECK(TENAX_RECOVERED == 7);
  CHECK(strcmp(tenax_status_name(TENAX_RECOVERED), "TENAX_RECOVERED") == 0);
  CHECK(strcmp(tenax_status_name(TENAX_ERR_INTERNAL), "TENAX_ERR_INTERNAL") == 0);
  CHECK(strcmp(tenax_status_name(8), "TENAX_ERR_UNKNOWN") == 0);
  CHECK_FAILS(tenax_enable_in_process_recovery(NULL), TENAX_ERR_INVALID_ARGUMENT, "trainer");
  make_data(x, y, 0);
  fresh_dir("recovery-arguments", dir, sizeof dir);
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_enable_in_process_recovery(trainer));
  CHECK_OK(tenax_enable_in_process_recovery(trainer)); /* the same trainer again: harmless */
  second = make_trainer(ctx, model, dir);
  CHECK_FAILS(tenax_enable_in_process_recovery(second), TENAX_ERR_INVALID_ARGUMENT, "another trainer");
  CHECK_OK(tenax_trainer_free(&second));
  for (s = 0; s < 3; ++s) CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_FAILS(tenax_enable_in_process_recovery(trainer), TENAX_ERR_INVALID_ARGUMENT, "after the first step");
  CHECK_OK(tenax_trainer_free(&trainer));
  /* Freed, it no longer holds the context's recovery: another trainer may take it. */
  second = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_enable_in_process_recovery(second));
  CHECK_OK(tenax_trainer_free(&second));
  CHECK_OK(tenax_model_free(&model));
}

/* Under `tenax run --nproc-per-node 2 --recovery in-process`: rank 1 SIGKILLs itself at solver
 * step 8 of the first generation, before that step's tenax_train_step. Rank 0 keeps its process:
 * its tenax_train_step returns TENAX_RECOVERED with its registered arrays put back to the last
 * completed step (7); the replacement's tenax_checkpoint_restore returns TENAX_RECOVERED with
 * optimizer step 7 and rank 1's field of step 7, which only rank 0's copy held. Both go on and
 * end where an uninterrupted run ends: every field where 20 solver steps put it, the same model on
 * both ranks. A job that fell back to restarting from disk would fail here (restore says OK). */
static void part_recovery(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1], probe_x[4][kFeatures], probe[4][1], all[2][4][1];
  static char dir[4200];
  double field[3];
  int64_t step = 0, healed = -2, optimizer_step = -1;
  int32_t rank = -1, world = -1;
  int recoveries = 0, i;
  const char* restarts = getenv("TENAX_RESTART_COUNT");
  const int first_generation = restarts == NULL || strcmp(restarts, "0") == 0;
  tenax_model* model = make_mlp();
  tenax_trainer* trainer;
  tenax_status status;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  tenax_array probe_in = array2(probe_x, TENAX_FLOAT32, TENAX_ORDER_C, 4, kFeatures);
  tenax_array probe_out = array2(probe, TENAX_FLOAT32, TENAX_ORDER_C, 4, 1);
  tenax_array field_array = array2(field, TENAX_FLOAT64, TENAX_ORDER_C, 3, 1);
  tenax_array step_array = array2(&step, TENAX_INT64, TENAX_ORDER_C, 1, 1);
  field_array.ndim = 1;
  step_array.ndim = 1;
  CHECK_OK(tenax_rank(ctx, &rank));
  CHECK_OK(tenax_world_size(ctx, &world));
  CHECK(world == 2);
  if (world != 2) return;
  /* No collective before the restore: a replacement starts here while its peer is mid-loop. */
  snprintf(dir, sizeof dir, "%s/recovery", work_dir);
  mkdir(dir, 0700);
  for (i = 0; i < 3; ++i) field[i] = 100.0 * rank + i;
  for (i = 0; i < 4; ++i) {
    probe_x[i][0] = 0.25f * i - 0.5f;
    probe_x[i][1] = 0.1f * i;
  }
  trainer = make_trainer(ctx, model, dir);
  CHECK_OK(tenax_register_state(trainer, "field", &field_array, TENAX_PER_RANK));
  CHECK_OK(tenax_register_state(trainer, "step", &step_array, TENAX_REPLICATED));
  CHECK_OK(tenax_enable_in_process_recovery(trainer));
  status = tenax_checkpoint_restore(trainer, &healed);
  if (first_generation) {
    CHECK(status == TENAX_OK);
    CHECK(healed == -1);
  } else {
    CHECK(status == TENAX_RECOVERED);
    CHECK(strstr(tenax_last_error(), "healed from a live peer") != NULL);
    CHECK(healed == 7);
    CHECK(step == 7);
    for (i = 0; i < 3; ++i) CHECK(field[i] == 100.0 * rank + i + 7.0 * (rank + 1));
    printf("  rank %d replaces the lost rank: %s -> optimizer step %lld, solver step %lld, field %.1f %.1f %.1f\n",
           rank, tenax_status_name(status), (long long)healed, (long long)step, field[0], field[1], field[2]);
  }
  while (step < 20) {
    for (i = 0; i < 3; ++i) field[i] += rank + 1; /* the solver's step */
    ++step;
    if (rank == 1 && step == 8 && first_generation) {
      fflush(stdout);
      raise(SIGKILL);
    }
    make_data(x, y, rank + (int)step);
    status = tenax_train_step(trainer, &in, &label, NULL);
    if (status == TENAX_RECOVERED) {
      ++recoveries;
      CHECK(strstr(tenax_last_error(), "optimizer step 7") != NULL);
      CHECK_OK(tenax_optimizer_step(trainer, &optimizer_step));
      CHECK(optimizer_step == 7);
      CHECK(step == 7); /* put back: the step of the last completed tenax_train_step */
      for (i = 0; i < 3; ++i) CHECK(field[i] == 100.0 * rank + i + 7.0 * (rank + 1));
      printf("  rank %d kept its process: %s (%s)\n", rank, tenax_status_name(status), tenax_last_error());
      continue;
    }
    if (status != TENAX_OK) {
      fprintf(stderr, "tenax_train_step at step %lld: %s: %s\n", (long long)step, tenax_status_name(status),
              tenax_last_error());
      ++failures;
      return;
    }
  }
  CHECK(recoveries == (first_generation ? 1 : 0));
  CHECK_OK(tenax_optimizer_step(trainer, &optimizer_step));
  CHECK(optimizer_step == 20);
  for (i = 0; i < 3; ++i) CHECK(field[i] == 100.0 * rank + i + 20.0 * (rank + 1));
  CHECK_OK(tenax_predict(trainer, &probe_in, &probe_out));
  CHECK_OK(tenax_allgather(ctx, probe, all, sizeof probe));
  CHECK(memcmp(all[0], all[1], sizeof probe) == 0);
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
}

/* Checkpoints are named only by the caller's steps: the Trainer's own save schedule (save_steps,
 * by optimizer step) would mix its names with the solver's, and a resume could then restore the
 * fields of another time. Defaults save nothing on their own; asking for a schedule (save_strategy,
 * or save_steps, which used to be ignored) is refused. */
static void part_labels(tenax_context* ctx) {
  static float x[kRows][kFeatures], y[kRows][1];
  char dir[4200], output_dir[4300], path[4400];
  const char* overrides[3];
  tenax_model* model = make_mlp();
  tenax_trainer* trainer = NULL;
  tenax_array in = array2(x, TENAX_FLOAT32, TENAX_ORDER_C, kRows, kFeatures);
  tenax_array label = array2(y, TENAX_FLOAT32, TENAX_ORDER_C, kRows, 1);
  int step;
  fresh_dir("labels", dir, sizeof dir);
  snprintf(output_dir, sizeof output_dir, "output_dir=%s", dir);
  make_data(x, y, 0);
  overrides[0] = output_dir;
  overrides[1] = "save_steps=5"; /* would have saved steps 5 and 10 by optimizer step */
  overrides[2] = "disable_tqdm=true";
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 3), TENAX_ERR_CONFIG, "save_steps");
  CHECK(trainer == NULL);
  overrides[1] = "disable_tqdm=true";
  CHECK_OK(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 2));
  for (step = 0; step < 12; ++step) CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
  CHECK_OK(tenax_checkpoint_save(trainer, 7000));
  CHECK_OK(tenax_trainer_free(&trainer));
  snprintf(path, sizeof path, "%s/checkpoints/step-000007000", dir);
  CHECK(access(path, F_OK) == 0);
  snprintf(path, sizeof path, "%s/checkpoints/step-000000005", dir);
  CHECK(access(path, F_OK) != 0);
  snprintf(path, sizeof path, "%s/checkpoints/step-000000010", dir);
  CHECK(access(path, F_OK) != 0);
  overrides[1] = "save_strategy=steps";
  CHECK_FAILS(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 3), TENAX_ERR_CONFIG, "save_strategy");
  CHECK(trainer == NULL);
  CHECK_OK(tenax_model_free(&model));
}

/* The header's version macros agree with each other and with the library that is loaded. */
static void part_version(void) {
  char expected[64];
  const char* line = tenax_version();
  snprintf(expected, sizeof expected, "%d.%d.%d", TENAX_VERSION_MAJOR, TENAX_VERSION_MINOR, TENAX_VERSION_PATCH);
  CHECK(strcmp(TENAX_VERSION_STRING, expected) == 0);
  snprintf(expected, sizeof expected, "tenax %s (", TENAX_VERSION_STRING);
  CHECK(line != NULL && strncmp(line, expected, strlen(expected)) == 0);
  printf("header %s, library \"%s\"\n", TENAX_VERSION_STRING, line);
}

int main(int argc, char** argv) {
  tenax_context* ctx = NULL;
  const char* part;
  if (argc != 4) {
    fprintf(stderr, "usage: capi_test PART WORK_DIR TORCHSCRIPT_DIR\n");
    return 2;
  }
  part = argv[1];
  snprintf(work_dir, sizeof work_dir, "%s", argv[2]);
  snprintf(scripts_dir, sizeof scripts_dir, "%s", argv[3]);
  CHECK_OK(tenax_init(&ctx));
  if (ctx == NULL) return 1;
  printf("capi_test %s\n", part);
  if (strcmp(part, "mlp") == 0) {
    part_mlp(ctx);
  } else if (strcmp(part, "version") == 0) {
    part_version();
  } else if (strcmp(part, "orders") == 0) {
    part_orders(ctx);
  } else if (strcmp(part, "float64") == 0) {
    part_float64(ctx);
  } else if (strcmp(part, "state") == 0) {
    part_state(ctx);
  } else if (strcmp(part, "torchscript") == 0) {
    part_torchscript(ctx);
  } else if (strcmp(part, "bad_input") == 0) {
    part_bad_input(ctx);
  } else if (strcmp(part, "config") == 0) {
    part_config(ctx);
  } else if (strcmp(part, "metrics") == 0) {
    part_metrics(ctx);
  } else if (strcmp(part, "preemption") == 0) {
    part_preemption(ctx);
  } else if (strcmp(part, "bert") == 0) {
    part_bert(ctx);
  } else if (strcmp(part, "labels") == 0) {
    part_labels(ctx);
  } else if (strcmp(part, "two_ranks") == 0) {
    part_two_ranks(ctx);
  } else if (strcmp(part, "recovery_arguments") == 0) {
    part_recovery_arguments(ctx);
  } else if (strcmp(part, "recovery") == 0) {
    part_recovery(ctx);
  } else {
    fprintf(stderr, "unknown part '%s'\n", part);
    return 2;
  }
  CHECK_OK(tenax_finalize(&ctx));
  CHECK(ctx == NULL);
  printf("capi_test %s: %s (%d failed checks)\n", part, failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
