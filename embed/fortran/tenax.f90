! Tenax Fortran module: embed fault-tolerant training in a Fortran simulation (Fortran 2008).
!
! A layer over the C API (embed/include/tenax.h; read it for what each call does and which calls
! are collective: every rank makes a collective call, in the same order). Each C function has
! a raw bind(c) interface named c_<function> and a Fortran wrapper under the C name that
! takes Fortran strings, Fortran arrays and typed handles:
!   - every wrapper is an integer function returning a status (TENAX_OK = 0); on any other status
!     tenax_last_error() gives the message (the argument, key, file or rank at fault);
!   - arrays: real(4), real(8) and integer(8), rank 1 to 4, passed in Fortran order as declared:
!     the batch is the LAST dimension (x(features, batch)); nothing is copied for contiguous
!     arrays. A registered state array keeps its address in Tenax: declare it TARGET (an
!     allocatable one too), register it whole or as a contiguous section, and keep it alive
!     until the trainer is freed;
!   - strings: trailing blanks are trimmed (fixed-length Fortran strings), then NUL-terminated.
!     Build a list of overrides in a character array variable, element by element: gfortran 12
!     corrupts the heap for a typed constructor of non-constant lengths such as
!     [character(len=200) :: 'output_dir='//trim(dir), 'max_steps=100'] (seen with valgrind);
!   - tenax_init_mpi takes the solver's communicator as an integer handle: `comm` from `use mpi`
!     or `comm%MPI_VAL` from `use mpi_f08`.
! Thread-safety: as the C API, one thread per context; the message of an error found on the
! Fortran side (a non-contiguous state array, sizes that disagree) is module state, not per thread.
!
!   use tenax
!   type(tenax_context) :: ctx
!   type(tenax_model) :: model
!   type(tenax_trainer) :: trainer
!   real(8), target :: u(nx, ny)
!   integer(8) :: step
!   if (tenax_init(ctx) /= TENAX_OK) error stop tenax_last_error()
!   ist = tenax_model_create_mlp(model, [2, 64, 1], 'tanh', TENAX_LOSS_MSE)
!   ist = tenax_trainer_create(trainer, ctx, model, 'surrogate.toml', ['max_steps=1000'])
!   ist = tenax_register_state(trainer, 'u', u, TENAX_PER_RANK)
!   ist = tenax_checkpoint_restore(trainer, step)          ! -1: nothing saved yet
!   ist = tenax_train_step(trainer, x, y, loss)            ! x(2, batch), y(1, batch)
module tenax
  use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_associated, c_loc, c_f_pointer, c_char, &
                                         c_null_char, c_int, c_int32_t, c_int64_t, c_float, c_double, c_size_t
  implicit none
  private

  ! ---- Constants (tenax.h) -----------------------------------------------------------------
  integer(c_int), parameter, public :: TENAX_OK = 0, TENAX_ERR_INVALID_ARGUMENT = 1, TENAX_ERR_NOT_INITIALIZED = 2, &
                                       TENAX_ERR_CONFIG = 3, TENAX_ERR_IO = 4, TENAX_ERR_PEER = 5, &
                                       TENAX_ERR_INTERNAL = 6, TENAX_RECOVERED = 7
  integer(c_int), parameter, public :: TENAX_EXIT_PREEMPTED = 3, TENAX_MAX_DIMS = 8
  integer(c_int), parameter, public :: TENAX_FLOAT32 = 0, TENAX_FLOAT64 = 1, TENAX_INT64 = 2
  integer(c_int), parameter, public :: TENAX_ORDER_C = 0, TENAX_ORDER_F = 1
  integer(c_int), parameter, public :: TENAX_REPLICATED = 0, TENAX_PER_RANK = 1
  integer(c_int), parameter, public :: TENAX_LOSS_MSE = 0, TENAX_LOSS_CROSS_ENTROPY = 1
  integer(c_int), parameter, public :: TENAX_SUM = 0, TENAX_MAX = 1, TENAX_MIN = 2
  !> The release of this module (tenax.h's TENAX_VERSION_*); tenax_version() names the library's.
  integer(c_int), parameter, public :: TENAX_VERSION_MAJOR = 0, TENAX_VERSION_MINOR = 1, TENAX_VERSION_PATCH = 0
  character(len=*), parameter, public :: TENAX_VERSION_STRING = '0.1.0'

  ! ---- Types ---------------------------------------------------------------------------------
  !> A view of the caller's memory (struct tenax_array), for the raw interfaces and for argument
  !> combinations the generics do not cover.
  type, bind(c), public :: tenax_array
    type(c_ptr) :: data = c_null_ptr
    integer(c_int32_t) :: dtype = TENAX_FLOAT32
    integer(c_int32_t) :: order = TENAX_ORDER_F
    integer(c_int32_t) :: ndim = 0
    integer(c_int32_t) :: reserved = 0
    integer(c_int64_t) :: shape(TENAX_MAX_DIMS) = 0
  end type tenax_array

  !> Handles: a distinct type each, so that a model cannot be passed where a trainer is expected.
  type, public :: tenax_context
    type(c_ptr) :: ptr = c_null_ptr
  end type tenax_context
  type, public :: tenax_model
    type(c_ptr) :: ptr = c_null_ptr
  end type tenax_model
  type, public :: tenax_trainer
    type(c_ptr) :: ptr = c_null_ptr
  end type tenax_trainer

  ! NUL-terminated copies of a Fortran string array and the char* array pointing into them; the
  ! variable must be TARGET and outlive the C call that reads it.
  type :: c_string_array
    character(kind=c_char), allocatable :: chars(:)
    type(c_ptr), allocatable :: ptrs(:)
  end type c_string_array

  ! The message of an error found on the Fortran side (no C call was made); cleared by every
  ! call that reaches the C library, so tenax_last_error() always describes the latest call.
  character(len=:), allocatable :: fortran_error_

  ! ---- Raw interfaces: the C functions as they are -------------------------------------------
  public :: c_tenax_last_error, c_tenax_status_name, c_tenax_version, c_tenax_init, c_tenax_init_mpi, c_tenax_finalize, &
            c_tenax_rank, c_tenax_world_size, c_tenax_allreduce, c_tenax_allgather, c_tenax_model_create_mlp, &
            c_tenax_model_load_torchscript, c_tenax_model_load_bert, c_tenax_model_create_from_config, &
            c_tenax_model_free, c_tenax_trainer_create, c_tenax_trainer_free, c_tenax_register_state, &
            c_tenax_checkpoint_restore, c_tenax_train_step, c_tenax_predict, c_tenax_checkpoint_save, &
            c_tenax_checkpoint_wait, c_tenax_preemption_requested, c_tenax_log_metrics, c_tenax_optimizer_step, &
            c_tenax_enable_in_process_recovery
  interface
    type(c_ptr) function c_tenax_last_error() bind(c, name='tenax_last_error')
      import :: c_ptr
    end function c_tenax_last_error
    type(c_ptr) function c_tenax_status_name(status) bind(c, name='tenax_status_name')
      import :: c_ptr, c_int
      integer(c_int), value :: status
    end function c_tenax_status_name
    type(c_ptr) function c_tenax_version() bind(c, name='tenax_version')
      import :: c_ptr
    end function c_tenax_version
    integer(c_int) function c_tenax_init(ctx) bind(c, name='tenax_init')
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: ctx
    end function c_tenax_init
    integer(c_int) function c_tenax_init_mpi(ctx, fortran_comm) bind(c, name='tenax_init_mpi')
      import :: c_ptr, c_int, c_int32_t
      type(c_ptr), intent(inout) :: ctx
      integer(c_int32_t), value :: fortran_comm
    end function c_tenax_init_mpi
    integer(c_int) function c_tenax_finalize(ctx) bind(c, name='tenax_finalize')
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: ctx
    end function c_tenax_finalize
    integer(c_int) function c_tenax_rank(ctx, rank) bind(c, name='tenax_rank')
      import :: c_ptr, c_int, c_int32_t
      type(c_ptr), value :: ctx
      integer(c_int32_t), intent(out) :: rank
    end function c_tenax_rank
    integer(c_int) function c_tenax_world_size(ctx, world_size) bind(c, name='tenax_world_size')
      import :: c_ptr, c_int, c_int32_t
      type(c_ptr), value :: ctx
      integer(c_int32_t), intent(out) :: world_size
    end function c_tenax_world_size
    integer(c_int) function c_tenax_allreduce(ctx, data, count, dtype, op) bind(c, name='tenax_allreduce')
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: ctx, data
      integer(c_int64_t), value :: count
      integer(c_int), value :: dtype, op
    end function c_tenax_allreduce
    integer(c_int) function c_tenax_allgather(ctx, in, out, bytes_per_rank) bind(c, name='tenax_allgather')
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: ctx, in, out
      integer(c_int64_t), value :: bytes_per_rank
    end function c_tenax_allgather
    integer(c_int) function c_tenax_model_create_mlp(model, widths, n_widths, activation, loss) &
        bind(c, name='tenax_model_create_mlp')
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_char
      type(c_ptr), intent(inout) :: model
      integer(c_int64_t), intent(in) :: widths(*)
      integer(c_int32_t), value :: n_widths
      character(kind=c_char), intent(in) :: activation(*)
      integer(c_int), value :: loss
    end function c_tenax_model_create_mlp
    integer(c_int) function c_tenax_model_load_torchscript(model, path, loss) &
        bind(c, name='tenax_model_load_torchscript')
      import :: c_ptr, c_int, c_char
      type(c_ptr), intent(inout) :: model
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int), value :: loss
    end function c_tenax_model_load_torchscript
    integer(c_int) function c_tenax_model_load_bert(model, directory, num_labels) bind(c, name='tenax_model_load_bert')
      import :: c_ptr, c_int, c_int64_t, c_char
      type(c_ptr), intent(inout) :: model
      character(kind=c_char), intent(in) :: directory(*)
      integer(c_int64_t), value :: num_labels
    end function c_tenax_model_load_bert
    !> overrides: a char* array (c_loc of type(c_ptr) elements) or c_null_ptr when n_overrides is 0.
    integer(c_int) function c_tenax_model_create_from_config(model, toml_path, overrides, n_overrides) &
        bind(c, name='tenax_model_create_from_config')
      import :: c_ptr, c_int, c_int32_t, c_char
      type(c_ptr), intent(inout) :: model
      character(kind=c_char), intent(in) :: toml_path(*)
      type(c_ptr), value :: overrides
      integer(c_int32_t), value :: n_overrides
    end function c_tenax_model_create_from_config
    integer(c_int) function c_tenax_model_free(model) bind(c, name='tenax_model_free')
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: model
    end function c_tenax_model_free
    !> toml_path: a NUL-terminated string's c_loc, or c_null_ptr for defaults only.
    integer(c_int) function c_tenax_trainer_create(trainer, ctx, model, toml_path, overrides, n_overrides) &
        bind(c, name='tenax_trainer_create')
      import :: c_ptr, c_int, c_int32_t
      type(c_ptr), intent(inout) :: trainer
      type(c_ptr), value :: ctx, model, toml_path, overrides
      integer(c_int32_t), value :: n_overrides
    end function c_tenax_trainer_create
    integer(c_int) function c_tenax_trainer_free(trainer) bind(c, name='tenax_trainer_free')
      import :: c_ptr, c_int
      type(c_ptr), intent(inout) :: trainer
    end function c_tenax_trainer_free
    integer(c_int) function c_tenax_register_state(trainer, name, array, scope) bind(c, name='tenax_register_state')
      import :: c_ptr, c_int, c_char, tenax_array
      type(c_ptr), value :: trainer
      character(kind=c_char), intent(in) :: name(*)
      type(tenax_array), intent(in) :: array
      integer(c_int), value :: scope
    end function c_tenax_register_state
    integer(c_int) function c_tenax_checkpoint_restore(trainer, step) bind(c, name='tenax_checkpoint_restore')
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: trainer
      integer(c_int64_t), intent(out) :: step
    end function c_tenax_checkpoint_restore
    integer(c_int) function c_tenax_train_step(trainer, input, label, loss) bind(c, name='tenax_train_step')
      import :: c_ptr, c_int, c_double, tenax_array
      type(c_ptr), value :: trainer
      type(tenax_array), intent(in) :: input, label
      real(c_double), intent(out) :: loss
    end function c_tenax_train_step
    integer(c_int) function c_tenax_predict(trainer, input, output) bind(c, name='tenax_predict')
      import :: c_ptr, c_int, tenax_array
      type(c_ptr), value :: trainer
      type(tenax_array), intent(in) :: input
      type(tenax_array), intent(inout) :: output
    end function c_tenax_predict
    integer(c_int) function c_tenax_checkpoint_save(trainer, step) bind(c, name='tenax_checkpoint_save')
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: trainer
      integer(c_int64_t), value :: step
    end function c_tenax_checkpoint_save
    integer(c_int) function c_tenax_checkpoint_wait(trainer) bind(c, name='tenax_checkpoint_wait')
      import :: c_ptr, c_int
      type(c_ptr), value :: trainer
    end function c_tenax_checkpoint_wait
    integer(c_int) function c_tenax_enable_in_process_recovery(trainer) &
        bind(c, name='tenax_enable_in_process_recovery')
      import :: c_ptr, c_int
      type(c_ptr), value :: trainer
    end function c_tenax_enable_in_process_recovery
    integer(c_int) function c_tenax_preemption_requested(trainer, requested) &
        bind(c, name='tenax_preemption_requested')
      import :: c_ptr, c_int, c_int32_t
      type(c_ptr), value :: trainer
      integer(c_int32_t), intent(out) :: requested
    end function c_tenax_preemption_requested
    integer(c_int) function c_tenax_log_metrics(trainer, step, names, values, n) bind(c, name='tenax_log_metrics')
      import :: c_ptr, c_int, c_int32_t, c_int64_t, c_double
      type(c_ptr), value :: trainer
      integer(c_int64_t), value :: step
      type(c_ptr), value :: names
      real(c_double), intent(in) :: values(*)
      integer(c_int32_t), value :: n
    end function c_tenax_log_metrics
    integer(c_int) function c_tenax_optimizer_step(trainer, step) bind(c, name='tenax_optimizer_step')
      import :: c_ptr, c_int, c_int64_t
      type(c_ptr), value :: trainer
      integer(c_int64_t), intent(out) :: step
    end function c_tenax_optimizer_step
    integer(c_size_t) function c_strlen(s) bind(c, name='strlen')
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
    end function c_strlen
  end interface

  ! ---- Fortran wrappers ----------------------------------------------------------------------
  public :: tenax_last_error, tenax_status_name, tenax_version, tenax_init, tenax_init_mpi, tenax_finalize, tenax_rank, &
            tenax_world_size, tenax_allreduce, tenax_allgather, tenax_model_create_mlp, &
            tenax_model_load_torchscript, tenax_model_load_bert, tenax_model_create_from_config, tenax_model_free, &
            tenax_trainer_create, tenax_trainer_free, tenax_register_state, tenax_checkpoint_restore, &
            tenax_train_step, tenax_predict, tenax_checkpoint_save, tenax_checkpoint_wait, &
            tenax_preemption_requested, tenax_log_metrics, tenax_optimizer_step, tenax_enable_in_process_recovery

  !> widths as default or 8-byte integers: tenax_model_create_mlp(model, [2, 64, 1], 'tanh', TENAX_LOSS_MSE)
  interface tenax_model_create_mlp
    module procedure model_create_mlp_i4, model_create_mlp_i8
  end interface tenax_model_create_mlp
  !> The solver's step as a default or an 8-byte integer.
  interface tenax_checkpoint_restore
    module procedure checkpoint_restore_i4, checkpoint_restore_i8
  end interface tenax_checkpoint_restore
  interface tenax_checkpoint_save
    module procedure checkpoint_save_i4, checkpoint_save_i8
  end interface tenax_checkpoint_save
  interface tenax_log_metrics
    module procedure log_metrics_i4, log_metrics_i8
  end interface tenax_log_metrics

  ! tenax_train_step(trainer, input, label [, loss]): input and label each real(4), real(8) or
  !   integer(8) of rank 1..4, or two tenax_array views.
  ! tenax_predict(trainer, input, output): input as above, output real(4) or real(8) of rank 1..4.
  ! tenax_register_state(trainer, name, array, scope): real(4), real(8) or integer(8), rank 1..4
  !   (a scalar: an array of one element), TARGET and contiguous.
  ! tenax_allreduce(ctx, data, op): in place, scalar or rank 1..4.
  ! tenax_allgather(ctx, in, out): in of rank k (0..3), out of rank k+1 with world size x size(in)
  !   elements of the same type, rank r's piece at out(..., r+1) when the last extent is the world.
  include 'tenax_generics.inc'

contains

  ! ---- Messages and strings ------------------------------------------------------------------

  !> The message of the last failed call ("" if none).
  function tenax_last_error() result(message)
    character(len=:), allocatable :: message
    if (allocated(fortran_error_)) then
      message = fortran_error_
    else
      message = fortran_string(c_tenax_last_error())
    end if
  end function tenax_last_error

  !> A short constant name for a status ('TENAX_ERR_CONFIG').
  function tenax_status_name(status) result(name)
    integer, intent(in) :: status
    character(len=:), allocatable :: name
    name = fortran_string(c_tenax_status_name(int(status, c_int)))
  end function tenax_status_name

  !> This library's build ('tenax 0.1.0 (commit ..., tree clean, flavour cpu, libtorch ..., ...)').
  function tenax_version() result(line)
    character(len=:), allocatable :: line
    line = fortran_string(c_tenax_version())
  end function tenax_version

  function fortran_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function fortran_string

  pure function c_string(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: c
    c = trim(s)//c_null_char
  end function c_string

  subroutine make_c_strings(strings, out)
    character(len=*), intent(in) :: strings(:)
    type(c_string_array), target, intent(out) :: out
    integer :: i, j, n, pos
    allocate (out%chars(sum(len_trim(strings)) + size(strings)), out%ptrs(size(strings)))
    pos = 1
    do i = 1, size(strings)
      n = len_trim(strings(i))
      out%ptrs(i) = c_loc(out%chars(pos))
      do j = 1, n
        out%chars(pos + j - 1) = strings(i)(j:j)
      end do
      out%chars(pos + n) = c_null_char
      pos = pos + n + 1
    end do
  end subroutine make_c_strings

  ! The char** argument for C: NULL for an absent or empty list.
  function c_string_list(strings) result(p)
    type(c_string_array), target, intent(in) :: strings
    type(c_ptr) :: p
    p = c_null_ptr
    if (size(strings%ptrs) > 0) p = c_loc(strings%ptrs)
  end function c_string_list

  ! Every wrapper passes the C status through here: the Fortran-side message of an earlier call
  ! must not be mistaken for this call's.
  integer(c_int) function from_c(status)
    integer(c_int), intent(in) :: status
    if (allocated(fortran_error_)) deallocate (fortran_error_)
    from_c = status
  end function from_c

  integer(c_int) function refuse(message)
    character(len=*), intent(in) :: message
    fortran_error_ = message
    refuse = TENAX_ERR_INVALID_ARGUMENT
  end function refuse

  integer(c_int) function refuse_not_contiguous(name)
    character(len=*), intent(in) :: name
    refuse_not_contiguous = refuse('tenax_register_state: the array of "'//trim(name)//'" is not contiguous '// &
                                   '(an array section with a stride?); Tenax keeps its address and restores it '// &
                                   'in place, so register a whole array, or a contiguous section such as u(:, 1:n)')
  end function refuse_not_contiguous

  function int_string(i) result(s)
    integer(c_int64_t), intent(in) :: i
    character(len=:), allocatable :: s
    character(len=24) :: buffer
    write (buffer, '(i0)') i
    s = trim(buffer)
  end function int_string

  ! ---- Context -------------------------------------------------------------------------------

  !> Collective. Joins the other ranks from the launch environment (tenax run, srun, mpirun).
  integer(c_int) function tenax_init(ctx) result(status)
    type(tenax_context), intent(inout) :: ctx
    status = from_c(c_tenax_init(ctx%ptr))
  end function tenax_init

  !> Collective over comm: an MPI Fortran handle (use mpi: comm; use mpi_f08: comm%MPI_VAL).
  integer(c_int) function tenax_init_mpi(ctx, comm) result(status)
    type(tenax_context), intent(inout) :: ctx
    integer, intent(in) :: comm
    status = from_c(c_tenax_init_mpi(ctx%ptr, int(comm, c_int32_t)))
  end function tenax_init_mpi

  !> Collective. Frees the context (free its trainers first).
  integer(c_int) function tenax_finalize(ctx) result(status)
    type(tenax_context), intent(inout) :: ctx
    status = from_c(c_tenax_finalize(ctx%ptr))
  end function tenax_finalize

  integer(c_int) function tenax_rank(ctx, rank) result(status)
    type(tenax_context), intent(in) :: ctx
    integer, intent(out) :: rank
    integer(c_int32_t) :: r
    r = -1
    status = from_c(c_tenax_rank(ctx%ptr, r))
    rank = int(r)
  end function tenax_rank

  integer(c_int) function tenax_world_size(ctx, world_size) result(status)
    type(tenax_context), intent(in) :: ctx
    integer, intent(out) :: world_size
    integer(c_int32_t) :: n
    n = 0
    status = from_c(c_tenax_world_size(ctx%ptr, n))
    world_size = int(n)
  end function tenax_world_size

  integer(c_int) function allreduce_view(ctx, data, op) result(status)
    type(tenax_context), intent(in) :: ctx
    type(tenax_array), intent(in) :: data
    integer(c_int), intent(in) :: op
    status = from_c(c_tenax_allreduce(ctx%ptr, data%data, product(data%shape(1:data%ndim)), data%dtype, op))
  end function allreduce_view

  integer(c_int) function allgather_views(ctx, in, out, element_bytes) result(status)
    type(tenax_context), intent(in) :: ctx
    type(tenax_array), intent(in) :: in, out
    integer, intent(in) :: element_bytes
    integer :: world_size
    integer(c_int64_t) :: n_in, n_out
    status = tenax_world_size(ctx, world_size)
    if (status /= TENAX_OK) return
    n_in = product(in%shape(1:in%ndim))
    n_out = product(out%shape(1:out%ndim))
    if (n_out /= world_size*n_in) then
      status = refuse('tenax_allgather: out has '//int_string(n_out)//' elements; it needs world size x size(in) = '// &
                      int_string(int(world_size, c_int64_t))//' x '//int_string(n_in))
      return
    end if
    status = from_c(c_tenax_allgather(ctx%ptr, in%data, out%data, n_in*element_bytes))
  end function allgather_views

  ! ---- Models --------------------------------------------------------------------------------

  integer(c_int) function model_create_mlp_i8(model, widths, activation, loss) result(status)
    type(tenax_model), intent(inout) :: model
    integer(c_int64_t), intent(in) :: widths(:)
    character(len=*), intent(in) :: activation
    integer(c_int), intent(in) :: loss
    status = from_c(c_tenax_model_create_mlp(model%ptr, widths, int(size(widths), c_int32_t), c_string(activation), &
                                             loss))
  end function model_create_mlp_i8

  integer(c_int) function model_create_mlp_i4(model, widths, activation, loss) result(status)
    type(tenax_model), intent(inout) :: model
    integer(c_int32_t), intent(in) :: widths(:)
    character(len=*), intent(in) :: activation
    integer(c_int), intent(in) :: loss
    status = model_create_mlp_i8(model, int(widths, c_int64_t), activation, loss)
  end function model_create_mlp_i4

  integer(c_int) function tenax_model_load_torchscript(model, path, loss) result(status)
    type(tenax_model), intent(inout) :: model
    character(len=*), intent(in) :: path
    integer(c_int), intent(in) :: loss
    status = from_c(c_tenax_model_load_torchscript(model%ptr, c_string(path), loss))
  end function tenax_model_load_torchscript

  integer(c_int) function tenax_model_load_bert(model, directory, num_labels) result(status)
    type(tenax_model), intent(inout) :: model
    character(len=*), intent(in) :: directory
    integer, intent(in) :: num_labels
    status = from_c(c_tenax_model_load_bert(model%ptr, c_string(directory), int(num_labels, c_int64_t)))
  end function tenax_model_load_bert

  !> The [model] table of a TOML file, then 'key=value' overrides.
  integer(c_int) function tenax_model_create_from_config(model, config, overrides) result(status)
    type(tenax_model), intent(inout) :: model
    character(len=*), intent(in) :: config
    character(len=*), intent(in), optional :: overrides(:)
    type(c_string_array), target :: strings
    if (present(overrides)) then
      call make_c_strings(overrides, strings)
    else
      call make_c_strings([character(len=1) ::], strings)
    end if
    status = from_c(c_tenax_model_create_from_config(model%ptr, c_string(config), c_string_list(strings), &
                                                     int(size(strings%ptrs), c_int32_t)))
  end function tenax_model_create_from_config

  integer(c_int) function tenax_model_free(model) result(status)
    type(tenax_model), intent(inout) :: model
    status = from_c(c_tenax_model_free(model%ptr))
  end function tenax_model_free

  ! ---- Trainer -------------------------------------------------------------------------------

  !> Collective. config: a TOML file (absent: defaults only); overrides: 'key=value' strings.
  integer(c_int) function tenax_trainer_create(trainer, ctx, model, config, overrides) result(status)
    type(tenax_trainer), intent(inout) :: trainer
    type(tenax_context), intent(in) :: ctx
    type(tenax_model), intent(in) :: model
    character(len=*), intent(in), optional :: config
    character(len=*), intent(in), optional :: overrides(:)
    type(c_string_array), target :: strings, path
    type(c_ptr) :: path_ptr
    path_ptr = c_null_ptr
    if (present(config)) then
      call make_c_strings([config], path)
      path_ptr = path%ptrs(1)
    end if
    if (present(overrides)) then
      call make_c_strings(overrides, strings)
    else
      call make_c_strings([character(len=1) ::], strings)
    end if
    status = from_c(c_tenax_trainer_create(trainer%ptr, ctx%ptr, model%ptr, path_ptr, c_string_list(strings), &
                                           int(size(strings%ptrs), c_int32_t)))
  end function tenax_trainer_create

  !> Collective. Waits for a checkpoint in flight, then frees the trainer.
  integer(c_int) function tenax_trainer_free(trainer) result(status)
    type(tenax_trainer), intent(inout) :: trainer
    status = from_c(c_tenax_trainer_free(trainer%ptr))
  end function tenax_trainer_free

  integer(c_int) function register_state_view(trainer, name, array, scope) result(status)
    type(tenax_trainer), intent(in) :: trainer
    character(len=*), intent(in) :: name
    type(tenax_array), intent(in) :: array
    integer(c_int), intent(in) :: scope
    status = from_c(c_tenax_register_state(trainer%ptr, c_string(name), array, scope))
  end function register_state_view

  !> Collective. step: the solver step of the restored checkpoint, or -1 when there is none.
  integer(c_int) function checkpoint_restore_i8(trainer, step) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int64_t), intent(out) :: step
    step = -1
    status = from_c(c_tenax_checkpoint_restore(trainer%ptr, step))
  end function checkpoint_restore_i8

  integer(c_int) function checkpoint_restore_i4(trainer, step) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int32_t), intent(out) :: step
    integer(c_int64_t) :: step8
    status = checkpoint_restore_i8(trainer, step8)
    step = int(step8, c_int32_t)
  end function checkpoint_restore_i4

  integer(c_int) function train_step_views(trainer, input, label, loss) result(status)
    type(tenax_trainer), intent(in) :: trainer
    type(tenax_array), intent(in) :: input, label
    real(c_double), intent(out), optional :: loss
    real(c_double) :: l
    l = 0
    status = from_c(c_tenax_train_step(trainer%ptr, input, label, l))
    if (present(loss)) loss = l
  end function train_step_views

  integer(c_int) function predict_views(trainer, input, output) result(status)
    type(tenax_trainer), intent(in) :: trainer
    type(tenax_array), intent(in) :: input
    type(tenax_array), intent(inout) :: output
    status = from_c(c_tenax_predict(trainer%ptr, input, output))
  end function predict_views

  !> Collective, asynchronous: registered arrays are copied before it returns.
  integer(c_int) function checkpoint_save_i8(trainer, step) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int64_t), intent(in) :: step
    status = from_c(c_tenax_checkpoint_save(trainer%ptr, step))
  end function checkpoint_save_i8

  integer(c_int) function checkpoint_save_i4(trainer, step) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int32_t), intent(in) :: step
    status = checkpoint_save_i8(trainer, int(step, c_int64_t))
  end function checkpoint_save_i4

  !> Not collective, on every rank, before the restore and the first step: this program handles
  !> TENAX_RECOVERED from every collective call (tenax.h says what it means and what it costs).
  integer(c_int) function tenax_enable_in_process_recovery(trainer) result(status)
    type(tenax_trainer), intent(in) :: trainer
    status = from_c(c_tenax_enable_in_process_recovery(trainer%ptr))
  end function tenax_enable_in_process_recovery

  !> Collective. Waits until the save in flight is committed.
  integer(c_int) function tenax_checkpoint_wait(trainer) result(status)
    type(tenax_trainer), intent(in) :: trainer
    status = from_c(c_tenax_checkpoint_wait(trainer%ptr))
  end function tenax_checkpoint_wait

  !> Collective. requested: the signal any rank received (SIGUSR1, SIGTERM), or 0.
  integer(c_int) function tenax_preemption_requested(trainer, requested) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer, intent(out) :: requested
    integer(c_int32_t) :: signal
    signal = 0
    status = from_c(c_tenax_preemption_requested(trainer%ptr, signal))
    requested = int(signal)
  end function tenax_preemption_requested

  !> Rank 0 writes names(i) = values(i) at step to the metric sinks of report_to.
  integer(c_int) function log_metrics_i8(trainer, step, names, values) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int64_t), intent(in) :: step
    character(len=*), intent(in) :: names(:)
    real(c_double), intent(in) :: values(:)
    type(c_string_array), target :: strings
    if (size(names) /= size(values)) then
      status = refuse('tenax_log_metrics: '//int_string(int(size(names), c_int64_t))//' names but '// &
                      int_string(int(size(values), c_int64_t))//' values; give one value per name')
      return
    end if
    call make_c_strings(names, strings)
    status = from_c(c_tenax_log_metrics(trainer%ptr, step, c_string_list(strings), values, &
                                        int(size(values), c_int32_t)))
  end function log_metrics_i8

  integer(c_int) function log_metrics_i4(trainer, step, names, values) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int32_t), intent(in) :: step
    character(len=*), intent(in) :: names(:)
    real(c_double), intent(in) :: values(:)
    status = log_metrics_i8(trainer, int(step, c_int64_t), names, values)
  end function log_metrics_i4

  !> The optimizer steps taken so far.
  integer(c_int) function tenax_optimizer_step(trainer, step) result(status)
    type(tenax_trainer), intent(in) :: trainer
    integer(c_int64_t), intent(out) :: step
    step = 0
    status = from_c(c_tenax_optimizer_step(trainer%ptr, step))
  end function tenax_optimizer_step

  ! ---- Array views: c_loc of the array and its shape as declared (TENAX_ORDER_F) --------------

  function make_view(dtype, shape) result(view)
    integer(c_int), intent(in) :: dtype
    integer(c_int64_t), intent(in) :: shape(:)
    type(tenax_array) :: view
    view%data = c_null_ptr
    view%dtype = dtype
    view%order = TENAX_ORDER_F
    view%ndim = int(size(shape), c_int32_t)
    view%reserved = 0
    view%shape = 0
    view%shape(1:size(shape)) = shape
  end function make_view

  include 'tenax_specifics.inc'
end module tenax
