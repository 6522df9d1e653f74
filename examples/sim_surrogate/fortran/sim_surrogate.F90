! sim_surrogate_f: the Fortran 2008 version of examples/sim_surrogate. A 2-D heat solver (heat_strip.f90)
! that owns its main loop, decomposed in row strips across ranks, and trains an MLP surrogate of its
! own update (stencil -> next value) online through the Tenax Fortran module, one optimizer step every
! --train-every solver steps. The field, the time and the solver step are registered as state and
! saved with the model and optimizer every --save-every steps, atomically; a restarted or requeued
! run resumes at the saved solver step and ends byte-identical to an uninterrupted one.
!
! Launch: a single process; `mpirun -n N` (halo exchange with MPI_Sendrecv on MPI_COMM_WORLD,
! gradients over MPI via tenax_init_mpi); `srun` or `tenax run` (halo exchange over
! tenax_allgather: no MPI needed, ranks from SLURM_PROCID/SLURM_NTASKS or the agent).
! Preemption (SIGUSR1/SIGTERM to any rank): every rank stops at the same solver step, saves, exits 3.
! Under `tenax run --recovery in-process` a lost rank is healed while this process lives on: a
! collective call returns TENAX_RECOVERED with the field, the time and the solver step put back to
! the last completed training step, and the loop goes on from there (as examples/sim_surrogate does).
! Exit status: 0 done, 1 failure, 2 bad option or configuration, 3 preempted (requeue me).
!
!   sim_surrogate_f --output-dir runs/sim-f [--result FILE] [--steps 600] [--nx 64] [--ny 64]
!                   [--train-every 5] [--save-every 50] [--batch 64] [--probes 16] [--seed 7]
!                   [--learning-rate 0.001]
! Writes, when done, FILE (default OUTPUT_DIR/result.txt, rank 0): the whole final field and the
! surrogate's prediction on --probes fixed stencils, as text whose numbers round-trip.
program sim_surrogate_f
  use, intrinsic :: iso_fortran_env, only: int64, real64, error_unit, output_unit
  use heat_strip
  use tenax
#ifdef SIM_WITH_MPI
  use mpi
#endif
  implicit none

  integer, parameter :: kExitFailure = 1, kExitUsage = 2
  character(len=4096) :: output_dir = '', result_path = ''
  integer(int64) :: steps = 600, nx = 64, ny = 64, train_every = 5, save_every = 50, batch = 64, probes = 16
  integer(int64) :: seed = 7
  real(real64) :: learning_rate = 1.0e-3_real64
  type(strip), target :: s
  type(tenax_context) :: ctx
  type(tenax_model) :: model
  type(tenax_trainer) :: trainer
  real(real64), target :: time(1) = 0
  integer(int64), target :: solver_step(1) = 0
  integer(int64) :: step, first, saved, recoveries = 0
  integer(int64), allocatable :: cells(:, :)
  real(real64), allocatable :: x(:, :), y(:, :), probe(:, :), prediction(:, :)
  real(real64) :: loss
  integer :: rank = 0, world_size = 1, signal_number = 0, status = 0
  logical :: use_mpi = .false.
  character(len=:), allocatable :: problem
  character(len=4200) :: overrides(6)

  call parse_options()
  use_mpi = launched_by_mpirun()
  call start_ranks()
  call strip_init(s, nx, ny, 0.2_real64, rank, world_size, problem)
  if (len(problem) > 0) call fail(kExitUsage, problem // ' (world size ' // itoa(int(world_size, int64)) // ')')

  call check(tenax_model_create_mlp(model, [5_int64, 32_int64, 32_int64, 1_int64], 'tanh', TENAX_LOSS_MSE), &
             'tenax_model_create_mlp')
  ! Element by element: gfortran 12 corrupts the heap for a typed array constructor of strings of
  ! non-constant lengths (embed/fortran/tenax.f90 says more).
  overrides(1) = 'output_dir=' // trim(output_dir)
  overrides(2) = 'max_steps=' // itoa(max(1_int64, steps / train_every))
  overrides(3) = 'learning_rate=' // rtoa(learning_rate)
  overrides(4) = 'seed=' // itoa(seed)
  overrides(5) = 'logging_steps=' // itoa(max(1_int64, save_every / train_every))
  overrides(6) = 'save_total_limit=3'
  call check(tenax_trainer_create(trainer, ctx, model, overrides=overrides), 'tenax_trainer_create')
  call check(tenax_model_free(model), 'tenax_model_free')
  call check(tenax_register_state(trainer, 'field', s%u, TENAX_PER_RANK), 'tenax_register_state(field)')
  call check(tenax_register_state(trainer, 'time', time, TENAX_REPLICATED), 'tenax_register_state(time)')
  call check(tenax_register_state(trainer, 'solver_step', solver_step, TENAX_REPLICATED), &
             'tenax_register_state(solver_step)')
  ! This program handles TENAX_RECOVERED (healed_by below); without `tenax run --recovery
  ! in-process` the call changes nothing.
  call check(tenax_enable_in_process_recovery(trainer), 'tenax_enable_in_process_recovery')

  if (use_mpi) then
    call say('2-D heat equation, ' // itoa(nx) // ' x ' // itoa(ny) // ' cells on ' // itoa(int(world_size, int64)) // &
             ' rank(s) (halo over MPI), ' // itoa(steps) // ' solver steps')
  else
    call say('2-D heat equation, ' // itoa(nx) // ' x ' // itoa(ny) // ' cells on ' // itoa(int(world_size, int64)) // &
             ' rank(s) (halo over tenax_allgather), ' // itoa(steps) // ' solver steps')
  end if
  status = tenax_checkpoint_restore(trainer, saved)
  if (status == TENAX_RECOVERED) then
    ! This process replaces a lost rank: its strip, the time and the solver step came from live peers.
    write (output_unit, '(a)') 'sim_surrogate_f: rank ' // itoa(int(rank, int64)) // ' replaces a lost rank: ' // &
      'healed from live peers (not from disk) at solver step ' // itoa(solver_step(1)) // ' (time ' // rtoa(time(1)) // ')'
    flush (output_unit)
    first = solver_step(1) + 1
  else
    call check(status, 'tenax_checkpoint_restore')
    if (saved >= 0) then
      if (solver_step(1) /= saved) call fail(kExitFailure, 'the checkpoint of step ' // itoa(saved) // &
                                             ' holds solver_step ' // itoa(solver_step(1)))
      call say('resumed at solver step ' // itoa(saved) // ' (time ' // rtoa(time(1)) // ')')
      first = saved + 1
    else
      call say('no checkpoint in ' // trim(output_dir) // '/checkpoints: starting at solver step 0')
      first = 1
    end if
  end if

  allocate(cells(2, batch), x(kStencil, batch), y(1, batch))
  ! The step of this run's last save, for a preemption (a replacement's healed step counts as saved).
  saved = merge(solver_step(1), -1_int64, status == TENAX_RECOVERED)
  step = first
  ! Every collective call goes through healed_by: on TENAX_RECOVERED the registered state is that
  ! of the last completed training step, and the loop goes on after it (go_on_after_heal).
  do
    do while (step <= steps)
      if (halo_healed()) then
        call go_on_after_heal()
        cycle
      end if
      if (mod(step, train_every) == 0) then
        ! The surrogate learns the update itself: the stencil before the step, the value after it.
        call sample_cells(s, seed, step, cells)
        call stencils(s, cells, x)
      end if
      call strip_step(s)
      time(1) = time(1) + s%dt
      solver_step(1) = step
      if (mod(step, train_every) == 0) then
        call cell_values(s, cells, y)
        if (healed_by(tenax_train_step(trainer, x, y, loss), 'tenax_train_step at solver step ' // itoa(step))) then
          call go_on_after_heal()
          cycle
        end if
      end if
      if (mod(step, save_every) == 0) then
        if (healed_by(tenax_checkpoint_save(trainer, step), 'tenax_checkpoint_save(' // itoa(step) // ')')) then
          call go_on_after_heal()
          cycle
        end if
        saved = step
      end if
      if (healed_by(tenax_preemption_requested(trainer, signal_number), 'tenax_preemption_requested')) then
        call go_on_after_heal()
        cycle
      end if
      if (signal_number /= 0) then
        if (saved /= step) then
          if (healed_by(tenax_checkpoint_save(trainer, step), 'tenax_checkpoint_save(' // itoa(step) // ')')) then
            call go_on_after_heal()
            cycle
          end if
        end if
        if (healed_by(tenax_checkpoint_wait(trainer), 'tenax_checkpoint_wait')) then
          call go_on_after_heal()
          cycle
        end if
        call say('preempted by ' // signal_name(signal_number) // ' at solver step ' // itoa(step) // &
                 ': checkpoint committed; exiting 3 so that the job is requeued')
        call finish(TENAX_EXIT_PREEMPTED)
      end if
      step = step + 1
    end do
    ! The last save is committed before the result is written; a peer lost meanwhile sends the loop back.
    if (.not. healed_by(tenax_checkpoint_wait(trainer), 'tenax_checkpoint_wait')) exit
    call go_on_after_heal()
  end do
  if (recoveries > 0) call say('recovered in process ' // itoa(recoveries) // ' time(s)')

  allocate(probe(kStencil, probes), prediction(1, probes))
  call probe_stencils(probe)
  call check(tenax_predict(trainer, probe, prediction), 'tenax_predict')
  call write_result()
  call say('finished at solver step ' // itoa(steps) // ', time ' // rtoa(time(1)) // '; surrogate on probe 1: ' // &
           rtoa(prediction(1, 1)) // ' (exact ' // rtoa(exact_update(s, probe(:, 1))) // ')')
  call finish(0)

contains

  subroutine parse_options()
    integer :: i, n
    character(len=4096) :: name, value
    n = command_argument_count()
    i = 1
    do while (i <= n)
      call get_command_argument(i, name)
      if (name == '--help' .or. name == '-h') then
        write (output_unit, '(a)') 'usage: sim_surrogate_f --output-dir DIR [--result FILE] [--steps N] [--nx N] [--ny N] ' // &
          '[--train-every N] [--save-every N] [--batch N] [--probes N] [--seed N] [--learning-rate X]'
        stop
      end if
      if (i == n) call fail(kExitUsage, 'option ' // trim(name) // ' needs a value; see --help')
      call get_command_argument(i + 1, value)
      select case (name)
      case ('--output-dir')
        output_dir = value
      case ('--result')
        result_path = value
      case ('--steps')
        steps = positive(name, value)
      case ('--nx')
        nx = positive(name, value)
      case ('--ny')
        ny = positive(name, value)
      case ('--train-every')
        train_every = positive(name, value)
      case ('--save-every')
        save_every = positive(name, value)
      case ('--batch')
        batch = positive(name, value)
      case ('--probes')
        probes = positive(name, value)
      case ('--seed')
        seed = positive(name, value)
      case ('--learning-rate')
        learning_rate = real_value(name, value)
      case default
        call fail(kExitUsage, 'unknown option ' // trim(name) // '; see --help')
      end select
      i = i + 2
    end do
    if (len_trim(output_dir) == 0) call fail(kExitUsage, '--output-dir is required (where checkpoints and results go)')
    if (len_trim(result_path) == 0) result_path = trim(output_dir) // '/result.txt'
  end subroutine parse_options

  integer(int64) function positive(name, value)
    character(len=*), intent(in) :: name, value
    integer :: ios
    read (value, *, iostat=ios) positive
    if (ios /= 0 .or. positive < 1) call fail(kExitUsage, trim(name) // ' must be a positive integer, got ' // trim(value))
  end function positive

  real(real64) function real_value(name, value)
    character(len=*), intent(in) :: name, value
    integer :: ios
    read (value, *, iostat=ios) real_value
    if (ios /= 0 .or. .not. real_value > 0) call fail(kExitUsage, trim(name) // ' must be a positive number, got ' // &
                                                      trim(value))
  end function real_value

  ! mpirun with more than one rank: the solver uses MPI. srun, tenax run and a single process do not
  ! initialise MPI at all (an MPI_Init under srun needs a PMI that the site may not have).
  logical function launched_by_mpirun()
    character(len=32) :: value
    integer :: length, status, n
    launched_by_mpirun = .false.
    call get_environment_variable('OMPI_COMM_WORLD_SIZE', value, length, status)
    if (status /= 0) call get_environment_variable('PMI_SIZE', value, length, status)
    if (status /= 0) return
    read (value, *, iostat=status) n
    launched_by_mpirun = status == 0 .and. n > 1
  end function launched_by_mpirun

  subroutine start_ranks()
    integer :: status
#ifdef SIM_WITH_MPI
    integer :: ierr
    if (use_mpi) then
      call MPI_Init(ierr)
      call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
      call MPI_Comm_size(MPI_COMM_WORLD, world_size, ierr)
      ! Gradients over a duplicate of the solver's communicator: Tenax's traffic never mixes with
      ! the halo exchange.
      status = tenax_init_mpi(ctx, MPI_COMM_WORLD)
      if (status == TENAX_ERR_CONFIG) then
        call say('tenax_init_mpi: ' // tenax_last_error() // '; averaging gradients over Gloo (tenax_init)')
        status = tenax_init(ctx)
      end if
      call check(status, 'tenax_init')
      return
    end if
#else
    if (use_mpi) call fail(kExitUsage, 'started by mpirun, but sim_surrogate_f was built without MPI ' // &
                                       '(CMake found no MPI Fortran); start it with srun or tenax run')
#endif
    status = tenax_init(ctx)
    call check(status, 'tenax_init')
    call check(tenax_rank(ctx, rank), 'tenax_rank')
    call check(tenax_world_size(ctx, world_size), 'tenax_world_size')
  end subroutine start_ranks

  ! Fills the ghost rows 0 and rows+1 from the neighbours' edge rows (walls stay as they are).
  ! A status of a collective call: .true. for TENAX_RECOVERED (a peer was lost and the job healed in
  ! process); any other failure ends the program (check).
  logical function healed_by(call_status, what)
    integer, intent(in) :: call_status
    character(len=*), intent(in) :: what
    healed_by = call_status == TENAX_RECOVERED
    if (.not. healed_by) call check(call_status, what)
  end function healed_by

  ! After TENAX_RECOVERED: the field, the time and the solver step are those of the last completed
  ! training step on every rank; the loop goes on after it (a save or step cut short is not redone
  ! here, and every rank agrees on what a preemption would save).
  subroutine go_on_after_heal()
    recoveries = recoveries + 1
    step = solver_step(1) + 1
    saved = solver_step(1)
    call say('a rank was lost; healed in process without restarting this process: going on from solver step ' // &
             itoa(solver_step(1)) // ' (time ' // rtoa(time(1)) // '), the field rolled back in memory')
  end subroutine go_on_after_heal

  ! Fills the ghost rows 0 and rows+1 from the neighbours' edge rows (walls stay as they are);
  ! .true. if a peer was lost meanwhile (TENAX_RECOVERED: the ghosts are left as they were).
  logical function halo_healed()
    real(real64), allocatable, save :: edges(:, :), all_edges(:, :, :)
    integer(int64) :: n, rows
#ifdef SIM_WITH_MPI
    integer :: up, down, ierr
#endif
    halo_healed = .false.
    if (world_size == 1) return
    n = s%nx
    rows = s%rows
#ifdef SIM_WITH_MPI
    if (use_mpi) then
      up = merge(rank - 1, MPI_PROC_NULL, rank > 0)
      down = merge(rank + 1, MPI_PROC_NULL, rank + 1 < world_size)
      ! The first row goes up while the bottom ghost comes from below, then the other way round.
      call MPI_Sendrecv(s%u(1:n, 1), int(n), MPI_DOUBLE_PRECISION, up, 1, s%u(1:n, rows + 1), int(n), &
                        MPI_DOUBLE_PRECISION, down, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      call MPI_Sendrecv(s%u(1:n, rows), int(n), MPI_DOUBLE_PRECISION, down, 2, s%u(1:n, 0), int(n), &
                        MPI_DOUBLE_PRECISION, up, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      if (ierr /= MPI_SUCCESS) call fail(kExitFailure, 'MPI_Sendrecv of the halo failed')
      return
    end if
#endif
    ! Without MPI: every rank's two edge rows to every rank (a strip needs only its neighbours',
    ! but this is the one collective the C API offers for it).
    if (.not. allocated(edges)) allocate(edges(n, 2), all_edges(n, 2, world_size))
    edges(:, 1) = s%u(1:n, 1)
    edges(:, 2) = s%u(1:n, rows)
    halo_healed = healed_by(tenax_allgather(ctx, edges, all_edges), 'tenax_allgather of the halo')
    if (halo_healed) return
    if (rank > 0) s%u(1:n, 0) = all_edges(:, 2, rank)                 ! the last row of rank - 1
    if (rank + 1 < world_size) s%u(1:n, rows + 1) = all_edges(:, 1, rank + 2)  ! the first row of rank + 1
  end function halo_healed

  ! The result, for a byte comparison of two runs (one uninterrupted, one killed and resumed): the
  ! whole field (gathered) and the surrogate on the probes, as text whose numbers round-trip.
  ! Rank 0 writes it to a temporary file and renames it into place.
  subroutine write_result()
    real(real64), allocatable :: mine(:, :), field(:, :, :)
    integer :: unit, ios, r
    integer(int64) :: i, k
    allocate(mine(s%nx, s%rows), field(s%nx, s%rows, world_size))
    mine = s%u(1:s%nx, 1:s%rows)
    if (world_size > 1) then
      call check(tenax_allgather(ctx, mine, field), 'tenax_allgather of the final field')
    else
      field(:, :, 1) = mine
    end if
    if (rank /= 0) return
    open (newunit=unit, file=trim(result_path) // '.tmp', status='replace', action='write', iostat=ios)
    if (ios /= 0) call fail(kExitFailure, 'cannot write ' // trim(result_path) // '.tmp (--result): does its ' // &
                                          'directory exist?')
    write (unit, '(a)') 'sim_surrogate_f nx ' // itoa(s%nx) // ' ny ' // itoa(ny) // ' step ' // itoa(steps) // &
                        ' time ' // rtoa(time(1))
    do r = 1, world_size
      do i = 1, s%rows
        write (unit, '(*(es25.17e3))') field(:, i, r)
      end do
    end do
    write (unit, '(a)') 'probes ' // itoa(probes) // ': stencil (5), surrogate, exact'
    do k = 1, probes
      write (unit, '(*(es25.17e3))') probe(:, k), prediction(1, k), exact_update(s, probe(:, k))
    end do
    close (unit)
    call rename_file(trim(result_path) // '.tmp', trim(result_path))
  end subroutine write_result

  subroutine rename_file(from, to)
    character(len=*), intent(in) :: from, to
    integer :: status
    call execute_command_line('mv -f "' // from // '" "' // to // '"', exitstat=status)
    if (status /= 0) call fail(kExitFailure, 'cannot rename ' // from // ' to ' // to)
  end subroutine rename_file

  ! Frees the trainer and the context (collective), then ends the process with `code`.
  subroutine finish(code)
    integer, intent(in) :: code
    integer :: status
#ifdef SIM_WITH_MPI
    integer :: ierr
#endif
    status = tenax_trainer_free(trainer)
    if (status == TENAX_OK) status = tenax_finalize(ctx)
    if (status /= TENAX_OK) call fail(kExitFailure, 'shutting down: ' // tenax_last_error())
#ifdef SIM_WITH_MPI
    if (use_mpi) call MPI_Finalize(ierr)
#endif
    flush (output_unit)
    if (code == 0) stop
    stop code, quiet=.true.
  end subroutine finish

  ! A failed Tenax call ends the process: 2 for a configuration error (a requeue would not help), else
  ! 1 (the launcher's restart or the batch script's requeue resumes from the last checkpoint).
  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status == TENAX_OK) return
    call fail(merge(kExitUsage, kExitFailure, status == TENAX_ERR_CONFIG), &
              what // ': ' // tenax_status_name(status) // ': ' // tenax_last_error())
  end subroutine check

  subroutine fail(code, message)
    integer, intent(in) :: code
    character(len=*), intent(in) :: message
    write (error_unit, '(a)') 'sim_surrogate_f rank ' // itoa(int(rank, int64)) // ': ' // message
    flush (error_unit)
    ! No MPI_Finalize: peers may be gone; the exit status is what the launcher reads.
    stop code, quiet=.true.
  end subroutine fail

  subroutine say(message)
    character(len=*), intent(in) :: message
    if (rank /= 0) return
    write (output_unit, '(a)') 'sim_surrogate_f: ' // message
    flush (output_unit)
  end subroutine say

  function signal_name(number) result(name)
    integer, intent(in) :: number
    character(len=:), allocatable :: name
    select case (number)
    case (10)
      name = 'SIGUSR1'
    case (15)
      name = 'SIGTERM'
    case default
      name = 'signal ' // itoa(int(number, int64))
    end select
  end function signal_name

  function itoa(i) result(out)
    integer(int64), intent(in) :: i
    character(len=:), allocatable :: out
    character(len=24) :: text
    write (text, '(i0)') i
    out = trim(text)
  end function itoa

  function rtoa(r) result(out)
    real(real64), intent(in) :: r
    character(len=:), allocatable :: out
    character(len=32) :: text
    write (text, '(es24.17)') r
    out = trim(adjustl(text))
  end function rtoa

end program sim_surrogate_f
