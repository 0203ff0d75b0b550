# Optional dependencies, each detected at configure time. Sets:
#   CTORCH_LIBS, CTORCH_DEFINES, CTORCH_PRIVATE_INCLUDES, CTORCH_BACKEND_SOURCES
set(CTORCH_LIBS m Threads::Threads)
set(CTORCH_DEFINES "")
set(CTORCH_PRIVATE_INCLUDES "")
set(CTORCH_BACKEND_SOURCES "")
set(CTORCH_PC_REQUIRES "")
find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)

# OpenBLAS: the f32/f64 GEMM on the CPU.
if(NOT CTORCH_BLAS STREQUAL "OFF")
  if(PkgConfig_FOUND)
    pkg_check_modules(OPENBLAS QUIET IMPORTED_TARGET openblas)
  endif()
  if(OPENBLAS_FOUND)
    list(APPEND CTORCH_LIBS PkgConfig::OPENBLAS)
    list(APPEND CTORCH_DEFINES CTORCH_HAVE_BLAS)
    set(CTORCH_PC_REQUIRES "openblas")
    message(STATUS "ctorch: OpenBLAS ${OPENBLAS_VERSION}")
  elseif(CTORCH_BLAS STREQUAL "ON")
    message(FATAL_ERROR "ctorch: CTORCH_BLAS=ON but OpenBLAS was not found (apt-get install libopenblas-dev)")
  else()
    message(STATUS "ctorch: OpenBLAS not found, using the built-in GEMM")
  endif()
endif()

# Backends: each is a folder with its own CMake fragment, included when present.
foreach(be cuda opencl)
  string(TOUPPER ${be} BE)
  if(NOT CTORCH_${BE} STREQUAL "OFF" AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/${be}/backend.cmake)
    include(${CMAKE_CURRENT_SOURCE_DIR}/src/backends/${be}/backend.cmake)
  endif()
endforeach()
