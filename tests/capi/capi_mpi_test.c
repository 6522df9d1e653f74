/* tenax_init_mpi from C under `mpirun -n 2`: the solver's MPI_COMM_WORLD carries Tenax's
 * collectives (on a duplicate). Each rank trains on its own data; the replicas stay identical,
 * and the solver's own MPI traffic between Tenax calls is undisturbed.
 *
 *   mpirun -n 2 capi_mpi_test WORK_DIR */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tenax.h"

enum { kRows = 16 };

static tenax_array array2(void* data, int64_t d0, int64_t d1) {
  tenax_array a;
  memset(&a, 0, sizeof a);
  a.data = data;
  a.dtype = TENAX_FLOAT32;
  a.order = TENAX_ORDER_C;
  a.ndim = 2;
  a.shape[0] = d0;
  a.shape[1] = d1;
  return a;
}

int main(int argc, char** argv) {
  static float x[kRows][2], y[kRows][1], probe[4][1], all[2][4][1];
  static char dir[4096], output_dir[4200];
  const int64_t widths[] = {2, 8, 1};
  const char* overrides[5];
  tenax_context* ctx = NULL;
  tenax_model* model = NULL;
  tenax_trainer* trainer = NULL;
  tenax_array in, label, probe_in, probe_out;
  int32_t rank = -1, world = -1;
  int mpi_rank = -1, token = 0, i, s;
  if (argc != 2) {
    fprintf(stderr, "usage: mpirun -n 2 capi_mpi_test WORK_DIR\n");
    return 2;
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  CHECK_OK(tenax_init_mpi(&ctx, (int32_t)MPI_Comm_c2f(MPI_COMM_WORLD)));
  if (ctx == NULL) {
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  CHECK_OK(tenax_rank(ctx, &rank));
  CHECK_OK(tenax_world_size(ctx, &world));
  CHECK(rank == mpi_rank);
  CHECK(world == 2);

  /* Rank 0 names the run's directory; the solver's own broadcast tells rank 1. */
  if (rank == 0) {
    snprintf(dir, sizeof dir, "%s/mpi-XXXXXX", argv[1]);
    if (mkdtemp(dir) == NULL) {
      perror("mkdtemp");
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  MPI_Bcast(dir, (int)sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
  snprintf(output_dir, sizeof output_dir, "output_dir=%s", dir);
  overrides[0] = output_dir;
  overrides[1] = "learning_rate=0.01";
  overrides[2] = "max_steps=100";
  overrides[3] = "disable_tqdm=true";
  overrides[4] = "report_to=none";

  for (i = 0; i < kRows; ++i) { /* each rank its own data */
    x[i][0] = -1.0f + 2.0f * (float)i / (kRows - 1) + 0.1f * (float)rank;
    x[i][1] = (float)sin(3.0 * (i + 7 * rank));
    y[i][0] = (float)sin(2.0 * x[i][0]) + 0.5f * x[i][1];
  }
  in = array2(x, kRows, 2);
  label = array2(y, kRows, 1);
  probe_in = array2(x, 4, 2); /* rank-specific rows: the gather below compares rank 0's */
  probe_out = array2(probe, 4, 1);
  CHECK_OK(tenax_model_create_mlp(&model, widths, 3, "tanh", TENAX_LOSS_MSE));
  CHECK_OK(tenax_trainer_create(&trainer, ctx, model, NULL, overrides, 5));
  for (s = 0; s < 10; ++s) {
    CHECK_OK(tenax_train_step(trainer, &in, &label, NULL));
    /* The solver's traffic on its communicator between Tenax's steps. */
    token = rank + s;
    MPI_Allreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(token == 1 + 2 * s);
  }
  /* Both ranks predict on rank 0's probe rows. */
  MPI_Bcast(x, 8, MPI_FLOAT, 0, MPI_COMM_WORLD);
  CHECK_OK(tenax_predict(trainer, &probe_in, &probe_out));
  MPI_Allgather(probe, 4, MPI_FLOAT, all, 4, MPI_FLOAT, MPI_COMM_WORLD);
  CHECK(memcmp(all[0], all[1], sizeof probe) == 0);
  printf("rank %d: prediction %.6f %.6f %.6f %.6f\n", rank, probe[0][0], probe[1][0], probe[2][0], probe[3][0]);
  CHECK_OK(tenax_checkpoint_save(trainer, 10));
  CHECK_OK(tenax_trainer_free(&trainer));
  CHECK_OK(tenax_model_free(&model));
  CHECK_OK(tenax_finalize(&ctx));
  MPI_Allreduce(MPI_IN_PLACE, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("capi_mpi_test rank %d: %s (%d failed checks over both ranks)\n", rank, failures ? "FAILED" : "passed",
         failures);
  MPI_Finalize();
  return failures ? 1 : 0;
}
