# The CUDA backend (included by cmake/CtorchDeps.cmake). CTORCH_CUDA=AUTO builds it when
# CMake finds nvcc, ON requires it, OFF skips it. The runtime is linked statically: a
# machine without the NVIDIA driver then sees "no CUDA device" (cudaGetDeviceCount fails
# with cudaErrorNoDevice / cudaErrorInsufficientDriver), and the binary still starts.
# cuBLAS is a toolkit library (libcublas.so), needed at run time wherever the backend is built in.
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(CTORCH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "ctorch: CTORCH_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
  message(STATUS "ctorch: CUDA not found, building without the CUDA backend")
  return()
endif()

# H100/H200 and A100 as machine code, plus PTX for what comes after sm_90.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80-real;90-real;90-virtual")
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)

file(GLOB CTORCH_CUDA_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/*.c ${CMAKE_CURRENT_LIST_DIR}/*.cu)
list(APPEND CTORCH_BACKEND_SOURCES ${CTORCH_CUDA_SOURCES})
list(APPEND CTORCH_DEFINES CTORCH_HAVE_CUDA)
# the C glue includes cuda_runtime_api.h and cublas_v2.h (the object library links nothing)
list(APPEND CTORCH_PRIVATE_INCLUDES ${CUDAToolkit_INCLUDE_DIRS})
list(APPEND CTORCH_LIBS CUDA::cudart_static CUDA::cublas)

# cuDNN (convolutions) is optional twice: compiled in where its headers are found (a pip
# wheel's through CUDNN_ROOT / -DCTORCH_CUDNN_ROOT=...), and opened with dlopen at run time,
# so a binary built with it still runs where the library is missing (im2col + cuBLAS then).
# The library CMake found is the last place the loader looks. CTORCH_CUDNN=OFF skips it.
set(CTORCH_CUDNN "AUTO" CACHE STRING "cuDNN for convolutions: AUTO, ON or OFF")
if(NOT CTORCH_CUDNN STREQUAL "OFF")
  find_path(CTORCH_CUDNN_INCLUDE cudnn.h
    HINTS ${CTORCH_CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(CTORCH_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9
    HINTS ${CTORCH_CUDNN_ROOT} $ENV{CUDNN_ROOT} ${CUDAToolkit_LIBRARY_DIR} PATH_SUFFIXES lib lib64)
  if(CTORCH_CUDNN_INCLUDE)
    list(APPEND CTORCH_DEFINES CTORCH_HAVE_CUDNN)
    list(APPEND CTORCH_PRIVATE_INCLUDES ${CTORCH_CUDNN_INCLUDE})
    list(APPEND CTORCH_LIBS ${CMAKE_DL_LIBS})
    if(CTORCH_CUDNN_LIBRARY)
      get_filename_component(_cudnn_real ${CTORCH_CUDNN_LIBRARY} REALPATH)
      list(APPEND CTORCH_DEFINES "CTORCH_CUDNN_HINT=\"${_cudnn_real}\"")
    endif()
    message(STATUS "ctorch: cuDNN headers in ${CTORCH_CUDNN_INCLUDE} (library opened at run time)")
  elseif(CTORCH_CUDNN STREQUAL "ON")
    message(FATAL_ERROR "ctorch: CTORCH_CUDNN=ON but cudnn.h was not found (set CTORCH_CUDNN_ROOT)")
  else()
    message(STATUS "ctorch: no cuDNN headers: convolutions through im2col + cuBLAS")
  endif()
endif()

# nvcc as strict as the C compiler: host-side warnings from gcc, device-side warnings as
# errors when CTORCH_WERROR is on. (The top-level -Wall/-Wextra are C-only: nvcc does not take them.)
set(CTORCH_CUDA_FLAGS -Xcompiler=-Wall,-Wextra --Werror=all-warnings -Wno-deprecated-gpu-targets
    --expt-relaxed-constexpr)
if(NOT CTORCH_WERROR)
  set(CTORCH_CUDA_FLAGS -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets --expt-relaxed-constexpr)
endif()
add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:${CTORCH_CUDA_FLAGS}>")
message(STATUS "ctorch: CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}")
