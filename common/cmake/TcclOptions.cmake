# Shared build settings for the whole tree and for every stage built on its own.
# Included once; sets TCCL_HAVE_CUDA, TCCL_HAVE_IB and the warning flags.
include_guard(GLOBAL)

if(NOT DEFINED TCCL_WITH_CUDA)
  set(TCCL_WITH_CUDA "AUTO" CACHE STRING "Build the GPU executor: ON, OFF or AUTO")
endif()
if(NOT DEFINED TCCL_WITH_MPI)
  option(TCCL_WITH_MPI "Build the MPI-launched tests, examples and benchmarks" ON)
endif()
if(NOT DEFINED TCCL_WITH_IB)
  set(TCCL_WITH_IB "AUTO" CACHE STRING "Build the verbs Net (stage 6): ON, OFF or AUTO")
endif()

# Verbs (stage 6): the IB Net needs only libibverbs' headers to build; the library itself is
# opened with dlopen at run time (a machine without it runs over sockets). AUTO builds it when
# infiniband/verbs.h is found (Debian: libibverbs-dev).
set(TCCL_HAVE_IB OFF)
if(NOT TCCL_WITH_IB STREQUAL "OFF")
  find_path(TCCL_IBVERBS_INCLUDE_DIR infiniband/verbs.h)
  if(TCCL_IBVERBS_INCLUDE_DIR)
    set(TCCL_HAVE_IB ON)
  elseif(TCCL_WITH_IB STREQUAL "ON")
    message(FATAL_ERROR "TCCL_WITH_IB=ON but infiniband/verbs.h was not found (libibverbs-dev)")
  else()
    message(STATUS "tccl: no infiniband/verbs.h: the verbs Net is not built (libibverbs-dev)")
  endif()
endif()

set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE RelWithDebInfo CACHE STRING "Build type" FORCE)
endif()

# CUDA: AUTO turns it on when a CUDA compiler is found. The GPU code must also compile on the
# CPU-only machine (CI), so AUTO finds /usr/local/cuda/bin/nvcc even when no GPU is present.
set(TCCL_HAVE_CUDA OFF)
if(NOT TCCL_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Hopper (H100/H200): the GPUs we run on. Set before enable_language, which would
    # otherwise pick the compiler's default (an old architecture, without Hopper's code).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TCCL_HAVE_CUDA ON)
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  elseif(TCCL_WITH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TCCL_WITH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
message(STATUS "tccl: CUDA executor ${TCCL_HAVE_CUDA}")

# Warnings on and clean (house style). Applied per target through tccl_warnings().
function(tccl_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
endfunction()

find_package(Threads REQUIRED)
