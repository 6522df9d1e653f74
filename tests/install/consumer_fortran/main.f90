! A Fortran program outside the Tenax tree, built against an installed Tenax: one training step.
program consumer
  use tenax
  implicit none
  type(tenax_context) :: ctx
  type(tenax_model) :: model
  type(tenax_trainer) :: trainer
  character(len=4096) :: dir
  character(len=4200) :: options(2)
  real(8) :: x(2, 4), y(1, 4), loss

  call get_command_argument(1, dir)
  x = reshape([0d0, 1d0, 1d0, 0d0, 1d0, 1d0, 0d0, 0d0], shape(x))
  y = reshape([1d0, 1d0, 2d0, 0d0], shape(y))
  loss = -1
  call check(tenax_init(ctx), 'tenax_init')
  call check(tenax_model_create_mlp(model, [2, 8, 1], 'tanh', TENAX_LOSS_MSE), 'tenax_model_create_mlp')
  options(1) = 'output_dir='//dir
  options(2) = 'max_steps=1'
  call check(tenax_trainer_create(trainer, ctx, model, overrides=options), 'tenax_trainer_create')
  call check(tenax_train_step(trainer, x, y, loss), 'tenax_train_step')
  call check(tenax_trainer_free(trainer), 'tenax_trainer_free')
  call check(tenax_model_free(model), 'tenax_model_free')
  call check(tenax_finalize(ctx), 'tenax_finalize')
  if (.not. loss >= 0) error stop 'the train step reported no loss'
  print '(a, g0, a)', 'fortran consumer ok (loss ', loss, ')'

contains

  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= TENAX_OK) then
      print '(a)', what//': '//tenax_status_name(status)//': '//tenax_last_error()
      error stop 1
    end if
  end subroutine check
end program consumer
