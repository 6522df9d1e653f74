/* A C program outside the Tenax tree, built against an installed Tenax: one training step. */
#include <stdio.h>
#include <tenax.h>

#define CHECK(call)                                                                           \
  do {                                                                                        \
    tenax_status status_ = (call);                                                            \
    if (status_ != TENAX_OK) {                                                                \
      fprintf(stderr, "%s: %s: %s\n", #call, tenax_status_name(status_), tenax_last_error()); \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s <output directory>\n", argv[0]);
    return 2;
  }
  char output_dir[4096];
  snprintf(output_dir, sizeof output_dir, "output_dir=%s", argv[1]);
  const char* overrides[] = {output_dir, "max_steps=1"};
  const int64_t widths[] = {2, 8, 1};
  float x[4][2] = {{0, 1}, {1, 0}, {1, 1}, {0, 0}};
  float y[4][1] = {{1}, {1}, {2}, {0}};
  tenax_array input = {x, TENAX_FLOAT32, TENAX_ORDER_C, 2, 0, {4, 2}};
  tenax_array label = {y, TENAX_FLOAT32, TENAX_ORDER_C, 2, 0, {4, 1}};
  tenax_context* ctx = NULL;
  tenax_model* model = NULL;
  tenax_trainer* trainer = NULL;
  double loss = -1;

  CHECK(tenax_init(&ctx));
  CHECK(tenax_model_create_mlp(&model, widths, 3, "tanh", TENAX_LOSS_MSE));
  CHECK(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 2));
  CHECK(tenax_train_step(trainer, &input, &label, &loss));
  CHECK(tenax_trainer_free(&trainer));
  CHECK(tenax_model_free(&model));
  CHECK(tenax_finalize(&ctx));
  if (!(loss >= 0)) {
    fprintf(stderr, "the train step reported loss %g\n", loss);
    return 1;
  }
  printf("c consumer ok (loss %g)\n", loss);
  return 0;
}
