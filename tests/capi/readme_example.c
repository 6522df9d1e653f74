/* The C example of docs/embedding.md ("C"), compiled and run by ctest so that it
 * cannot drift from the API: a toy solver relaxes its field, the surrogate learns the update from
 * 5-point stencils, a checkpoint every 100 steps carries field and model. Run twice on the same
 * output directory, the second run restores step 300 and has nothing left to do. */
#include <stdio.h>
#include <stdlib.h>
#include <tenax.h>

enum { N = 32, B = 64, STEPS = 300 };
static double u[N][N];

static void check(tenax_status s) {
  if (s != TENAX_OK) {
    fprintf(stderr, "tenax: %s: %s\n", tenax_status_name(s), tenax_last_error());
    exit(1);
  }
}
#define CHECK(call) check(call)

static void solve(void) { /* Jacobi-style relaxation with a hot edge */
  static double next[N][N];
  for (int i = 0; i < N; ++i) u[i][0] = 1.0;
  for (int i = 1; i < N - 1; ++i)
    for (int j = 1; j < N - 1; ++j) next[i][j] = 0.25 * (u[i - 1][j] + u[i + 1][j] + u[i][j - 1] + u[i][j + 1]);
  for (int i = 1; i < N - 1; ++i)
    for (int j = 1; j < N - 1; ++j) u[i][j] = next[i][j];
}

static void sample(float x[B][5], float y[B][1], int64_t step) { /* stencil -> relaxed value */
  for (int b = 0; b < B; ++b) {
    int i = 1 + (int)((step * 7 + b * 13) % (N - 2)), j = 1 + (int)((step * 3 + b * 5) % (N - 2));
    float s[5] = {(float)u[i][j], (float)u[i - 1][j], (float)u[i + 1][j], (float)u[i][j - 1], (float)u[i][j + 1]};
    for (int k = 0; k < 5; ++k) x[b][k] = s[k];
    y[b][0] = 0.25f * (s[1] + s[2] + s[3] + s[4]);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
    return 2;
  }
  char output_dir[4096];
  snprintf(output_dir, sizeof output_dir, "output_dir=%s", argv[1]);
  /* ---- docs/embedding.md's example starts here ---- */
  tenax_context* ctx;
  tenax_model* model;
  tenax_trainer* tr;
  float x[B][5], y[B][1];
  double loss = 0;
  int64_t saved, step;
  int32_t signal = 0;
  const int64_t widths[] = {5, 64, 1};
  const char* options[] = {output_dir, "learning_rate=1e-3", "max_steps=300", "logging_steps=100"};
  CHECK(tenax_init(&ctx)); /* tenax run, srun, mpirun or alone */
  CHECK(tenax_model_create_mlp(&model, widths, 3, "tanh", TENAX_LOSS_MSE));
  CHECK(tenax_trainer_create(&tr, ctx, model, NULL, options, 4));
  tenax_array field = {u, TENAX_FLOAT64, TENAX_ORDER_C, 2, 0, {N, N}};
  CHECK(tenax_register_state(tr, "u", &field, TENAX_PER_RANK)); /* saved and restored with the model */
  CHECK(tenax_checkpoint_restore(tr, &saved));                  /* -1: nothing saved yet */
  tenax_array in = {x, TENAX_FLOAT32, TENAX_ORDER_C, 2, 0, {B, 5}},
              out = {y, TENAX_FLOAT32, TENAX_ORDER_C, 2, 0, {B, 1}};
  for (step = saved + 1; step <= STEPS && !signal; ++step) {
    solve();
    sample(x, y, step);
    CHECK(tenax_train_step(tr, &in, &out, &loss));                         /* forward, backward, allreduce, AdamW */
    CHECK(tenax_preemption_requested(tr, &signal));                        /* SIGUSR1/SIGTERM on any rank */
    if (step % 100 == 0 || signal) CHECK(tenax_checkpoint_save(tr, step)); /* async */
  }
  CHECK(tenax_trainer_free(&tr)); /* waits for the save in flight */
  CHECK(tenax_model_free(&model));
  CHECK(tenax_finalize(&ctx));
  /* ---- docs/embedding.md's example ends here ---- */
  printf("readme_example: steps %lld..%lld, restored from %lld, last loss %.6f\n", (long long)(saved + 1),
         (long long)(step - 1), (long long)saved, loss);
  return signal ? TENAX_EXIT_PREEMPTED : 0;
}
