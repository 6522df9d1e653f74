! tenax_init_mpi from Fortran with the solver's own communicator, passed as an integer handle:
! `comm` from `use mpi`, or `comm%MPI_VAL` from `use mpi_f08` (built with TENAX_TEST_MPI_F08).
! Run by mpirun with 2 or more ranks. The communicator is MPI_COMM_WORLD with the ranks reversed,
! so Tenax's ranks prove that it uses the handle it is given; one train step on different data per
! rank must leave every rank with the same model (gradients averaged over that communicator).
! Usage: mpirun -n 2 fortran_init_mpi_test <scratch directory>
program init_mpi_test
#ifdef TENAX_TEST_MPI_F08
  use mpi_f08
#else
  use mpi
#endif
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit
  use tenax
  implicit none

#ifdef TENAX_TEST_MPI_F08
  type(MPI_Comm) :: comm
#else
  integer :: comm
#endif
  type(tenax_context) :: ctx
  type(tenax_model) :: model
  type(tenax_trainer) :: trainer
  character(len=1024) :: dir
  character(len=1100) :: options(3)
  integer :: ierr, world_rank, n, rank, world_size, handle, i
  real(real64) :: total, x(2, 4), y(1, 4), p(1, 4), loss
  real(real64), allocatable :: all_p(:, :, :)
  integer(int64), allocatable :: all_ranks(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, world_rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, 0, n - 1 - world_rank, comm, ierr)
#ifdef TENAX_TEST_MPI_F08
  handle = comm%MPI_VAL
#else
  handle = comm
#endif
  call get_command_argument(1, dir)
  if (len_trim(dir) == 0) call fail('usage: fortran_init_mpi_test <scratch directory>')

  call expect_ok(tenax_init_mpi(ctx, handle), 'tenax_init_mpi')
  call expect_ok(tenax_rank(ctx, rank), 'tenax_rank')
  call expect_ok(tenax_world_size(ctx, world_size), 'tenax_world_size')
  if (world_size /= n) call fail('tenax_world_size is not the size of the communicator')
  if (rank /= n - 1 - world_rank) call fail('tenax_rank is not the rank in the communicator given (reversed)')

  total = rank + 1
  call expect_ok(tenax_allreduce(ctx, total, TENAX_SUM), 'tenax_allreduce')
  if (nint(total) /= n*(n + 1)/2) call fail('tenax_allreduce did not sum over the ranks')
  allocate (all_ranks(n))
  call expect_ok(tenax_allgather(ctx, int(rank, int64), all_ranks), 'tenax_allgather')
  if (any(all_ranks /= [(int(i, int64), i = 0, n - 1)])) call fail('tenax_allgather is not in rank order')

  options(1) = 'output_dir='//trim(dir)
  options(2) = 'max_steps=10'
  options(3) = 'seed=3'
  call expect_ok(tenax_model_create_mlp(model, [2, 8, 1], 'tanh', TENAX_LOSS_MSE), 'tenax_model_create_mlp')
  call expect_ok(tenax_trainer_create(trainer, ctx, model, overrides=options), 'tenax_trainer_create')
  ! Different data on every rank: only an average over the ranks keeps the models equal.
  do i = 1, 4
    x(:, i) = [real(i + rank, real64), real(i*rank, real64)]/8
    y(1, i) = rank - 0.5_real64
  end do
  call expect_ok(tenax_train_step(trainer, x, y, loss), 'tenax_train_step')
  x(:, :) = 0.25_real64
  call expect_ok(tenax_predict(trainer, x, p), 'tenax_predict')
  allocate (all_p(1, 4, n))
  call expect_ok(tenax_allgather(ctx, p, all_p), 'tenax_allgather of the predictions')
  do i = 2, n
    if (any(transfer(all_p(:, :, i), [0_int64]) /= transfer(all_p(:, :, 1), [0_int64]))) &
      call fail('the ranks hold different models after a train step')
  end do

  call expect_ok(tenax_trainer_free(trainer), 'tenax_trainer_free')
  call expect_ok(tenax_model_free(model), 'tenax_model_free')
  call expect_ok(tenax_finalize(ctx), 'tenax_finalize')
  call MPI_Comm_free(comm, ierr)
  call MPI_Finalize(ierr)
  print '(a, i0, a)', 'rank ', rank, ': fortran init_mpi test passed'

contains

  subroutine expect_ok(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= TENAX_OK) call fail(what//': '//tenax_status_name(status)//': '//tenax_last_error())
  end subroutine expect_ok

  subroutine fail(message)
    character(len=*), intent(in) :: message
    write (error_unit, '(a, i0, a)') 'rank ', world_rank, ': FAILED: '//message
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    error stop 1
  end subroutine fail
end program init_mpi_test
