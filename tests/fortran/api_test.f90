! The Fortran module from Fortran: trains an MLP on real(8) and real(4) arrays, predicts, saves and
! restores registered state, and checks that bad input is a status with a message, not a crash.
! Usage: fortran_api_test <scratch directory> (removed and recreated: the first restore must
! find no checkpoint).
program api_test
  use, intrinsic :: iso_fortran_env, only: int64, real32, real64, error_unit
  use, intrinsic :: ieee_arithmetic, only: ieee_is_finite
  use tenax
  implicit none

  integer, parameter :: features = 2, batch = 8
  type(tenax_context) :: ctx
  type(tenax_model) :: model
  type(tenax_trainer) :: trainer
  character(len=1024) :: dir
  character(len=1100) :: output_dir, options(4), bad_option = 'no_such_key=1'
  real(real64), target :: u(5, 4), u_saved(5, 4)
  integer(int64), target :: solver_step(1)
  real(real64) :: x8(features, batch), y8(1, batch), p8(1, batch), p8_saved(1, batch), loss, total
  real(real32) :: x4(features, batch), y4(1, batch), p4(1, batch)
  integer(int64) :: step, optimizer_step
  integer :: checks = 0, failures = 0, i, rank, world_size

  call get_command_argument(1, dir)
  if (len_trim(dir) == 0) error stop 'usage: fortran_api_test <scratch directory>'
  call execute_command_line('rm -rf '//trim(dir))
  output_dir = 'output_dir='//trim(dir)

  do i = 1, batch
    x8(:, i) = [real(i, real64)/batch, 1 - real(i, real64)/batch]
    y8(1, i) = sum(x8(:, i)**2)
  end do
  x4 = real(x8, real32)
  y4 = real(y8, real32)

  call expect_ok(tenax_init(ctx), 'tenax_init')
  call expect_ok(tenax_rank(ctx, rank), 'tenax_rank')
  call expect_ok(tenax_world_size(ctx, world_size), 'tenax_world_size')
  call check(rank == 0 .and. world_size == 1, 'a process started alone is rank 0 of 1')
  total = 2.5_real64
  call expect_ok(tenax_allreduce(ctx, total, TENAX_SUM), 'tenax_allreduce of a scalar')
  call check(total == 2.5_real64, 'the sum over one rank is the value')

  ! ---- Train on real(8), then real(4) arrays; predict both ways -------------------------------
  call expect_ok(tenax_model_create_mlp(model, [features, 16, 1], 'tanh', TENAX_LOSS_MSE), 'create the MLP')
  ! Assigned one by one: gfortran 12 corrupts memory for [character(len=n) :: 'a='//trim(s), ...].
  options(1) = output_dir
  options(2:4) = [character(len=len(options)) :: 'max_steps=100', 'learning_rate=0.01', 'seed=7']
  call expect_ok(tenax_trainer_create(trainer, ctx, model, overrides=options), 'tenax_trainer_create')
  u = reshape([(real(i, real64)/3, i = 1, size(u))], shape(u))
  solver_step = 0
  call expect_ok(tenax_register_state(trainer, 'u', u, TENAX_PER_RANK), 'register u')
  call expect_ok(tenax_register_state(trainer, 'solver_step', solver_step, TENAX_REPLICATED), 'register solver_step')
  call expect_status(tenax_register_state(trainer, 'u', u, TENAX_PER_RANK), TENAX_ERR_INVALID_ARGUMENT, "'u'", &
                     'a name registered twice')
  call expect_status(tenax_register_state(trainer, 'strided', u(1:5:2, :), TENAX_PER_RANK), &
                     TENAX_ERR_INVALID_ARGUMENT, 'not contiguous', 'a strided section')
  call expect_ok(tenax_checkpoint_restore(trainer, step), 'restore with nothing saved')
  call check(step == -1, 'restore reports -1 when nothing was saved')

  do i = 1, 3
    call expect_ok(tenax_train_step(trainer, x8, y8, loss), 'train step on real(8)')
    call check(ieee_is_finite(loss) .and. loss >= 0, 'the real(8) step reports a loss')
  end do
  do i = 1, 3
    call expect_ok(tenax_train_step(trainer, x4, y4, loss), 'train step on real(4)')
    call check(ieee_is_finite(loss) .and. loss >= 0, 'the real(4) step reports a loss')
  end do
  call expect_ok(tenax_train_step(trainer, x8, y8), 'train step without asking for the loss')
  call expect_ok(tenax_optimizer_step(trainer, optimizer_step), 'tenax_optimizer_step')
  call check(optimizer_step == 7, 'seven optimizer steps taken')

  call expect_ok(tenax_predict(trainer, x8, p8), 'predict into real(8)')
  call expect_ok(tenax_predict(trainer, x4, p4), 'predict into real(4)')
  ! The model is float32: the same float32 input gives the same output, whichever dtype carries it.
  call check(all(p8 == real(p4, real64)), 'real(8) and real(4) predictions agree')
  call check(any(p8 /= p8(1, 1)), 'the prediction depends on the input')

  ! ---- Save, change everything, restore into a new trainer -----------------------------------
  solver_step = 42
  u_saved = u
  p8_saved = p8
  call expect_ok(tenax_checkpoint_save(trainer, 42), 'tenax_checkpoint_save')
  u = -1
  solver_step = -7
  call expect_ok(tenax_checkpoint_wait(trainer), 'tenax_checkpoint_wait')
  do i = 1, 3
    call expect_ok(tenax_train_step(trainer, x8, y8, loss), 'train step after the save')
  end do
  call expect_ok(tenax_predict(trainer, x8, p8), 'predict after more steps')
  call check(any(p8 /= p8_saved), 'training after the save changed the model')

  ! Bad input on a live trainer: a status and a message naming the argument.
  call expect_status(tenax_train_step(trainer, x8(1:1, :), y8, loss), TENAX_ERR_INVALID_ARGUMENT, 'input', &
                     'an input with 1 feature for a 2-feature MLP')
  call expect_status(tenax_train_step(trainer, x8, y8(:, 1:batch - 1), loss), TENAX_ERR_INVALID_ARGUMENT, &
                     'label', 'a label with one sample fewer than the input')
  call expect_status(tenax_predict(trainer, x8, p8(:, 1:batch - 1)), TENAX_ERR_INVALID_ARGUMENT, 'output', &
                     'a prediction output of the wrong shape')
  block
    real(real64) :: gathered(3)
    call expect_status(tenax_allgather(ctx, total, gathered), TENAX_ERR_INVALID_ARGUMENT, 'world size', &
                       'an allgather output of the wrong size')
  end block
  call expect_ok(tenax_trainer_free(trainer), 'tenax_trainer_free')
  call expect_status(tenax_train_step(trainer, x8, y8, loss), TENAX_ERR_INVALID_ARGUMENT, 'trainer', &
                     'a freed trainer')
  call expect_ok(tenax_model_free(model), 'tenax_model_free')

  call expect_ok(tenax_model_create_mlp(model, [integer(int64) :: features, 16, 1], 'tanh', TENAX_LOSS_MSE), &
                 'create the MLP again (8-byte widths)')
  call expect_status(tenax_trainer_create(trainer, ctx, model, overrides=[options(1:4), bad_option]), &
                     TENAX_ERR_CONFIG, 'no_such_key', 'an unknown configuration key')
  call expect_ok(tenax_trainer_create(trainer, ctx, model, overrides=options), 'a second trainer')
  call expect_ok(tenax_register_state(trainer, 'u', u, TENAX_PER_RANK), 'register u again')
  call expect_ok(tenax_register_state(trainer, 'solver_step', solver_step, TENAX_REPLICATED), &
                 'register solver_step again')
  ! Outside `tenax run --recovery in-process` asking for it changes nothing; after the first call
  ! that begins the run it is refused, naming the order.
  call expect_ok(tenax_enable_in_process_recovery(trainer), 'tenax_enable_in_process_recovery')
  call expect_ok(tenax_checkpoint_restore(trainer, step), 'restore the saved checkpoint')
  call expect_status(tenax_enable_in_process_recovery(trainer), TENAX_ERR_INVALID_ARGUMENT, 'after the first step', &
                     'tenax_enable_in_process_recovery after the restore')
  call check(step == 42, 'restore returns the label given to the save')
  call check(all(transfer(u, [0_int64]) == transfer(u_saved, [0_int64])), 'u is restored byte for byte')
  call check(solver_step(1) == 42, 'solver_step is restored')
  call expect_ok(tenax_optimizer_step(trainer, optimizer_step), 'tenax_optimizer_step after restore')
  call check(optimizer_step == 7, 'the optimizer step is restored')
  call expect_ok(tenax_predict(trainer, x8, p8), 'predict after restore')
  call check(all(transfer(p8, [0_int64]) == transfer(p8_saved, [0_int64])), 'the model is restored bit for bit')

  call expect_ok(tenax_trainer_free(trainer), 'free the second trainer')
  call expect_ok(tenax_model_free(model), 'free the second model')
  call expect_ok(tenax_finalize(ctx), 'tenax_finalize')
  call check(tenax_status_name(TENAX_ERR_CONFIG) == 'TENAX_ERR_CONFIG', 'tenax_status_name')
  call check(tenax_status_name(TENAX_RECOVERED) == 'TENAX_RECOVERED', 'tenax_status_name of TENAX_RECOVERED')
  call check(index(tenax_version(), 'tenax ' // TENAX_VERSION_STRING // ' (') == 1, &
             'tenax_version() names the release of the module (TENAX_VERSION_STRING)')

  if (failures > 0) then
    write (error_unit, '(i0, a, i0, a)') failures, ' of ', checks, ' checks failed'
    error stop 1
  end if
  write (*, '(a, i0, a)') 'fortran api test: all ', checks, ' checks passed'

contains

  subroutine check(condition, what)
    logical, intent(in) :: condition
    character(len=*), intent(in) :: what
    checks = checks + 1
    if (.not. condition) then
      failures = failures + 1
      write (error_unit, '(a)') 'FAILED: '//what
    end if
  end subroutine check

  subroutine expect_ok(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    call check(status == TENAX_OK, what//' returns TENAX_OK')
    if (status /= TENAX_OK) then
      write (error_unit, '(a)') '  got '//tenax_status_name(status)//': '//tenax_last_error()
      ! Everything after a failed setup call would only fail in its wake.
      error stop 1
    end if
  end subroutine expect_ok

  subroutine expect_status(status, expected, needle, what)
    integer, intent(in) :: status, expected
    character(len=*), intent(in) :: needle, what
    character(len=:), allocatable :: message
    message = tenax_last_error()
    call check(status == expected, what//' returns '//tenax_status_name(expected))
    if (status /= expected) write (error_unit, '(a)') '  got '//tenax_status_name(status)//': '//message
    call check(index(message, needle) > 0, what//': the message names "'//needle//'"')
    if (index(message, needle) == 0) write (error_unit, '(a)') '  message: "'//message//'"'
  end subroutine expect_status
end program api_test
