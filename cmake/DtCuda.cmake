# The CUDA backend (cuBLAS + NCCL + a few .cu kernels): src/kernels/cuda/ and
# src/comm/nccl/. DT_CUDA=AUTO enables it when nvcc, the CUDA toolkit (cudart,
# cuBLAS) and NCCL are all found; ON requires them; OFF skips the search. It
# only needs the toolkit to build: no GPU (and no driver) has to be present.
#
# NCCL and cuBLAS are looked for in the toolkit (and NCCL_HOME) first; only
# when one is missing there, in NVIDIA's pip wheels as PyTorch installs them
# (site-packages/nvidia/{nccl,cublas,cu13,...}/{include,lib}), where the
# libraries carry only their versioned names (libnccl.so.2, libcublas.so.12).
#
# Knobs: DT_CUDA_ARCHITECTURES (default "75-real;80-real;90": SASS for Turing,
# Ampere, Hopper plus compute_90 PTX that newer GPUs JIT; CUDA 13 dropped
# everything below 7.5), CMAKE_CUDA_COMPILER / CUDACXX, CMAKE_CUDA_HOST_COMPILER.
#
# Flags: the library's C flags (-Wall -Wextra -Werror, -fvisibility=hidden,
# sanitizers) are set with add_compile_options / target_compile_options for
# every language. nvcc does not understand most of them, so once CUDA is on
# they are rewritten to apply to C only, and CUDA gets its own equivalents:
# the host-compiler warnings through -Xcompiler and nvcc's own warnings as errors.
set(DT_HAVE_CUDA OFF)

# The include and lib folders of NVIDIA's pip wheels (nvidia-nccl-cu12,
# nvidia-cublas-cu12, the cu13 ones ...) for every site-packages python3 knows
# of, plus wherever `import nvidia` resolves (a namespace package: it may span
# several). Sets dt_wheel_include_dirs / dt_wheel_lib_dirs in the caller.
function(dt_cuda_pip_wheel_dirs)
  set(inc "")
  set(lib "")
  find_program(DT_PYTHON3 NAMES python3 python)
  if(DT_PYTHON3)
    execute_process(COMMAND ${DT_PYTHON3} -c [=[
import os, site, sysconfig
dirs = [sysconfig.get_paths()[k] for k in ("purelib", "platlib")]
try:
    dirs.append(site.getusersitepackages())
except Exception:
    pass
try:
    import nvidia
    dirs += [os.path.dirname(p) for p in nvidia.__path__]
except Exception:
    pass
seen = []
for d in dirs:
    n = os.path.join(d, "nvidia")
    if os.path.isdir(n) and n not in seen:
        seen.append(n)
print(";".join(seen), end="")
]=]
      OUTPUT_VARIABLE nvidia_dirs ERROR_QUIET RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      set(nvidia_dirs "")
    endif()
    foreach(n IN LISTS nvidia_dirs)
      file(GLOB pkg_inc LIST_DIRECTORIES true "${n}/*/include")
      file(GLOB pkg_lib LIST_DIRECTORIES true "${n}/*/lib")
      list(APPEND inc ${pkg_inc})
      list(APPEND lib ${pkg_lib})
    endforeach()
  endif()
  set(dt_wheel_include_dirs "${inc}" PARENT_SCOPE)
  set(dt_wheel_lib_dirs "${lib}" PARENT_SCOPE)
endfunction()

# Fallback when the toolkit has no NCCL or cuBLAS: find them in the pip wheels.
# A macro, so the results (cache entries, CUDAToolkit_INCLUDE_DIRS) stay in scope.
macro(dt_cuda_from_pip_wheels)
  dt_cuda_pip_wheel_dirs()
  message(STATUS "dtensor CUDA backend: NCCL/cuBLAS not all in the toolkit; "
    "trying pip wheels in: ${dt_wheel_lib_dirs}")
  # NAMES with the versioned files: the wheels ship no unversioned symlink
  if(NOT NCCL_INCLUDE_DIR)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${dt_wheel_include_dirs} NO_DEFAULT_PATH)
  endif()
  if(NOT NCCL_LIBRARY)
    find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${dt_wheel_lib_dirs} NO_DEFAULT_PATH)
  endif()
  if(NOT CUDA_cublas_LIBRARY)
    find_library(CUDA_cublas_LIBRARY NAMES cublas libcublas.so.13 libcublas.so.12
      HINTS ${dt_wheel_lib_dirs} NO_DEFAULT_PATH)
    find_path(DT_CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${CUDAToolkit_INCLUDE_DIRS}
      ${dt_wheel_include_dirs} NO_DEFAULT_PATH)
    if(CUDA_cublas_LIBRARY AND DT_CUBLAS_INCLUDE_DIR)
      # the targets' include path is CUDAToolkit_INCLUDE_DIRS (dt_cuda_use ...)
      list(APPEND CUDAToolkit_INCLUDE_DIRS ${DT_CUBLAS_INCLUDE_DIR})
      list(REMOVE_DUPLICATES CUDAToolkit_INCLUDE_DIRS)
    else()
      set(CUDA_cublas_LIBRARY CUDA_cublas_LIBRARY-NOTFOUND)
    endif()
  endif()
endmacro()
set(DT_CUDA_ARCHITECTURES "75-real;80-real;90" CACHE STRING
  "CUDA_ARCHITECTURES of the CUDA backend's kernels")

if(NOT DT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  # nvcc need not be on PATH: the toolkit's default place is tried too.
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(DT_NVCC nvcc HINTS /usr/local/cuda/bin $ENV{CUDA_HOME}/bin $ENV{CUDA_PATH}/bin)
    if(DT_NVCC)
      set(ENV{CUDACXX} ${DT_NVCC})
    endif()
  endif()
  check_language(CUDA) # a real try-compile: nvcc plus a working host compiler
  set(dt_cuda_missing "")
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT})
      get_filename_component(dt_nvcc_dir ${CMAKE_CUDA_COMPILER} DIRECTORY)
      get_filename_component(CUDAToolkit_ROOT ${dt_nvcc_dir} DIRECTORY) # the toolkit of that nvcc
    endif()
    find_package(CUDAToolkit QUIET)
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY OR NOT CUDA_cublas_LIBRARY)
      dt_cuda_from_pip_wheels()
    endif()
    if(NOT CUDAToolkit_FOUND OR NOT CUDA_cudart_LIBRARY OR NOT CUDA_cublas_LIBRARY)
      string(APPEND dt_cuda_missing " cudart/cuBLAS")
    endif()
    if(NOT NCCL_INCLUDE_DIR OR NOT NCCL_LIBRARY)
      string(APPEND dt_cuda_missing " NCCL")
    endif()
  else()
    set(dt_cuda_missing " nvcc (or its host compiler)")
  endif()
  if(dt_cuda_missing STREQUAL "")
    set(DT_HAVE_CUDA ON)
    enable_language(CUDA)
  elseif(DT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DT_CUDA=ON but not found:${dt_cuda_missing} "
      "(nvcc=${CMAKE_CUDA_COMPILER}, nccl=${NCCL_LIBRARY}); set CUDACXX / NCCL_HOME or use DT_CUDA=OFF")
  else()
    message(STATUS "dtensor CUDA backend: not found:${dt_cuda_missing}")
  endif()
endif()
message(STATUS "dtensor CUDA backend: ${DT_HAVE_CUDA}")

# "-Wall" -> C only, plus the CUDA spelling of it (or nothing when nvcc has none).
function(dt_cuda_split_flags in_list out_var)
  set(result "")
  foreach(opt IN LISTS in_list)
    if(opt MATCHES "^\\$<") # already a generator expression: leave it alone
      list(APPEND result "${opt}")
      continue()
    endif()
    list(APPEND result "$<$<COMPILE_LANGUAGE:C>:${opt}>")
    if(opt STREQUAL "-g")
      # (no -O levels: CMAKE_CUDA_FLAGS_<CONFIG> has nvcc's, and a second one
      # makes nvcc warn "incompatible redefinition for option 'optimize'")
      list(APPEND result "$<$<COMPILE_LANGUAGE:CUDA>:${opt}>")
    elseif(opt MATCHES "^-(W|f)" AND NOT opt MATCHES "sanitize|,")
      # (sanitizers stay C-only: nvcc's -Xcompiler splits at commas)
      list(APPEND result "$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${opt}>")
    endif()
  endforeach()
  set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

if(DT_HAVE_CUDA)
  # Link the shared runtime everywhere: the C targets link libcudart.so, and a
  # static cudart in the same process would be a second runtime.
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  # Directory-wide options set before this file (CMakeLists.txt's -Wall ...).
  get_directory_property(dt_dir_opts COMPILE_OPTIONS)
  dt_cuda_split_flags("${dt_dir_opts}" dt_dir_opts)
  # nvcc's own diagnostics as errors, like -Werror for the C files.
  list(APPEND dt_dir_opts "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings>")
  set_directory_properties(PROPERTIES COMPILE_OPTIONS "${dt_dir_opts}")
endif()

# Adds the CUDA sources to @p target (the library's object library) and makes
# its earlier target_compile_options C-only (with CUDA equivalents).
function(dt_cuda_add_sources target)
  if(DT_HAVE_CUDA)
    file(GLOB_RECURSE cuda_src CONFIGURE_DEPENDS
      ${PROJECT_SOURCE_DIR}/src/kernels/cuda/*.c ${PROJECT_SOURCE_DIR}/src/kernels/cuda/*.cu
      ${PROJECT_SOURCE_DIR}/src/comm/nccl/*.c)
    target_sources(${target} PRIVATE ${cuda_src})
    get_target_property(opts ${target} COMPILE_OPTIONS)
    if(opts)
      dt_cuda_split_flags("${opts}" opts)
      set_target_properties(${target} PROPERTIES COMPILE_OPTIONS "${opts}")
    endif()
    target_compile_definitions(${target} PRIVATE DT_HAVE_CUDA=1)
    target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE_DIR})
    set_target_properties(${target} PROPERTIES
      CUDA_ARCHITECTURES "${DT_CUDA_ARCHITECTURES}"
      CUDA_VISIBILITY_PRESET hidden
      CUDA_SEPARABLE_COMPILATION OFF)
  endif()
endfunction()

# Absolute library paths rather than the CUDA:: imported targets, so the
# exported dtensor::dtensor_static does not need find_package(CUDAToolkit)
# in consumers' projects.
function(dt_cuda_link target)
  if(DT_HAVE_CUDA)
    target_link_libraries(${target} PRIVATE ${CUDA_cudart_LIBRARY} ${CUDA_cublas_LIBRARY}
      ${NCCL_LIBRARY})
  endif()
endfunction()

# For test/tool targets that call the CUDA runtime themselves (tests/cuda/).
function(dt_cuda_use target)
  if(DT_HAVE_CUDA)
    target_compile_definitions(${target} PRIVATE DT_HAVE_CUDA=1)
    target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS} ${NCCL_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${CUDA_cudart_LIBRARY} ${CUDA_cublas_LIBRARY}
      ${NCCL_LIBRARY})
  endif()
endfunction()
