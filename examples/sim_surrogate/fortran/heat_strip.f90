! The simulation of the Fortran sim_surrogate example: the 2-D heat equation u_t = alpha (u_xx + u_yy)
! on the unit square, explicit finite differences (forward Euler, the 5-point stencil), decomposed
! across ranks in strips of whole rows. The same physics as the C++ example (../heat_solver.h):
! nx x ny cells, the top wall held at 1 (hot), the other three at 0, two Gaussian bumps at the start.
!
! Storage is Fortran's: u(0:nx+1, 0:rows+1), a row is a column of the array (u(:, i)), so the rows
! that the halo exchange sends are contiguous. Rank r owns global rows r*rows+1 .. (r+1)*rows;
! row 0 and rows+1 are ghosts (a neighbour's edge row, or a wall), columns 0 and nx+1 the cold walls.
! Every cell is updated by the same expression whichever rank owns it, so the field after n steps is
! bit-for-bit the same for any number of ranks and either halo transport.
!
! Nothing here knows about Tenax or MPI. Thread-safety: none; the solver's thread owns a strip.
module heat_strip
  use, intrinsic :: iso_fortran_env, only: int64, real64
  implicit none
  private

  !> The 5 values of the stencil around one cell: centre, north, south, west, east.
  integer, parameter, public :: kStencil = 5

  type, public :: strip
    integer(int64) :: nx = 0, rows = 0
    integer :: rank = 0, world_size = 1
    real(real64) :: courant = 0.2_real64, dt = 0
    !> The stored strip, ghosts included; registered with the checkpoint (TARGET, never reallocated).
    real(real64), allocatable :: u(:, :)
    real(real64), allocatable, private :: next(:, :)
  end type strip

  public :: strip_init, strip_step, sample_cells, stencils, cell_values, exact_update, probe_stencils

contains

  !> The strip of `rank` in a world of `world_size` (ny must be a multiple of it); `error` is ""
  !> or says which option is out of range.
  subroutine strip_init(s, nx, ny, courant, rank, world_size, error)
    type(strip), intent(inout) :: s
    integer(int64), intent(in) :: nx, ny
    real(real64), intent(in) :: courant
    integer, intent(in) :: rank, world_size
    character(len=:), allocatable, intent(out) :: error
    integer(int64) :: i, j, first_global_row
    real(real64) :: x, y, h
    error = ''
    if (nx < 4 .or. nx > 65536) then
      error = '--nx must be in 4..65536'
      return
    end if
    if (ny < world_size .or. mod(ny, int(world_size, int64)) /= 0) then
      error = '--ny must be a multiple of the world size (every rank owns a strip of equal rows)'
      return
    end if
    if (.not. (courant > 0 .and. courant <= 0.25_real64)) then
      error = '--courant must be in (0, 0.25]: forward Euler is unstable beyond 0.25'
      return
    end if
    s%nx = nx
    s%rows = ny / world_size
    s%rank = rank
    s%world_size = world_size
    s%courant = courant
    h = 1.0_real64 / real(nx, real64)
    s%dt = courant * h * h  ! alpha = 1
    allocate(s%u(0:nx + 1, 0:s%rows + 1), s%next(0:nx + 1, 0:s%rows + 1))
    s%u = 0
    s%next = 0
    first_global_row = rank * s%rows
    do i = 1, s%rows
      y = (real(first_global_row + i - 1, real64) + 0.5_real64) / real(ny, real64)
      do j = 1, nx
        x = (real(j - 1, real64) + 0.5_real64) / real(nx, real64)
        s%u(j, i) = bump(x, y, 0.3_real64, 0.6_real64, 0.12_real64, 0.9_real64) + &
                    bump(x, y, 0.7_real64, 0.35_real64, 0.08_real64, 0.6_real64)
      end do
    end do
    if (rank == 0) s%u(1:nx, 0) = 1  ! the hot wall
  end subroutine strip_init

  !> One forward-Euler step of the interior (the ghost rows must be current).
  subroutine strip_step(s)
    type(strip), intent(inout) :: s
    integer(int64) :: i, j
    real(real64) :: r
    r = s%courant
    do i = 1, s%rows
      do j = 1, s%nx
        s%next(j, i) = s%u(j, i) + r * (s%u(j, i - 1) + s%u(j, i + 1) + s%u(j - 1, i) + s%u(j + 1, i) - 4 * s%u(j, i))
      end do
    end do
    ! Copied back rather than swapped: the checkpoint holds the address of u.
    s%u(1:s%nx, 1:s%rows) = s%next(1:s%nx, 1:s%rows)
  end subroutine strip_step

  !> `count` interior cells (row, column) for the training batch of solver step `step`: a pure
  !> function of (seed, step, rank), so a resumed run samples what an uninterrupted one would have.
  !> Park and Miller's minimal standard generator: exact in 64-bit integers, no overflow.
  subroutine sample_cells(s, seed, step, cells)
    type(strip), intent(in) :: s
    integer(int64), intent(in) :: seed, step
    integer(int64), intent(out) :: cells(:, :)  ! (2, count)
    integer(int64), parameter :: modulus = 2147483647_int64, multiplier = 16807_int64
    integer(int64) :: state, k
    state = 1 + mod(mod(seed, modulus) * 7919_int64 + mod(step, modulus) * 104729_int64 + &
                    int(s%rank, int64) * 1299709_int64, modulus - 1)
    do k = 1, 3  ! nearby seeds give nearby first draws: let them drift apart
      state = mod(multiplier * state, modulus)
    end do
    do k = 1, size(cells, 2, kind=int64)
      state = mod(multiplier * state, modulus)
      cells(1, k) = 1 + mod(state, s%rows)
      state = mod(multiplier * state, modulus)
      cells(2, k) = 1 + mod(state, s%nx)
    end do
  end subroutine sample_cells

  !> The stencils at `cells` into x(kStencil, count): the batch is the last dimension.
  subroutine stencils(s, cells, x)
    type(strip), intent(in) :: s
    integer(int64), intent(in) :: cells(:, :)
    real(real64), intent(out) :: x(:, :)
    integer(int64) :: k, i, j
    do k = 1, size(cells, 2, kind=int64)
      i = cells(1, k)
      j = cells(2, k)
      x(:, k) = [s%u(j, i), s%u(j, i - 1), s%u(j, i + 1), s%u(j - 1, i), s%u(j + 1, i)]
    end do
  end subroutine stencils

  !> The values at `cells` into y(1, count).
  subroutine cell_values(s, cells, y)
    type(strip), intent(in) :: s
    integer(int64), intent(in) :: cells(:, :)
    real(real64), intent(out) :: y(:, :)
    integer(int64) :: k
    do k = 1, size(cells, 2, kind=int64)
      y(1, k) = s%u(cells(2, k), cells(1, k))
    end do
  end subroutine cell_values

  !> What one forward-Euler step makes of a stencil (the surrogate's exact answer).
  pure real(real64) function exact_update(s, st)
    type(strip), intent(in) :: s
    real(real64), intent(in) :: st(kStencil)
    exact_update = st(1) + s%courant * (st(2) + st(3) + st(4) + st(5) - 4 * st(1))
  end function exact_update

  !> The fixed probe stencils p(kStencil, count) on which the final surrogate is evaluated: smooth
  !> fields at several levels and gradients, the same in every run (as the C++ example's).
  subroutine probe_stencils(p)
    real(real64), intent(out) :: p(:, :)
    integer(int64) :: k, count
    real(real64) :: level, slope, curve
    count = size(p, 2, kind=int64)
    do k = 1, count
      level = (real(k - 1, real64) + 0.5_real64) / real(count, real64)
      slope = 0.05_real64 * sin(1.7_real64 * real(k - 1, real64))
      curve = 0.03_real64 * cos(2.3_real64 * real(k - 1, real64))
      p(:, k) = [level, level + slope + curve, level - slope + curve, level + 0.5_real64 * slope - curve, &
                 level - 0.5_real64 * slope - curve]
    end do
  end subroutine probe_stencils

  pure real(real64) function bump(x, y, cx, cy, width, height)
    real(real64), intent(in) :: x, y, cx, cy, width, height
    bump = height * exp(-((x - cx)**2 + (y - cy)**2) / (width * width))
  end function bump

end module heat_strip
