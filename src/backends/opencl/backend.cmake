# The OpenCL backend (included by cmake/CtorchDeps.cmake). Only the headers are needed at
# build time: the library is loaded with dlopen("libOpenCL.so.1") at first use, so a
# machine without OpenCL runs the same binary with no OpenCL device.
#   CTORCH_OPENCL=AUTO: built when CL/cl.h is found; ON: required; OFF: not built.
find_path(CTORCH_OPENCL_INCLUDE_DIR CL/cl.h)
if(CTORCH_OPENCL_INCLUDE_DIR)
  set(_ocl_dir ${CMAKE_CURRENT_SOURCE_DIR}/src/backends/opencl)
  file(GLOB _ocl_c CONFIGURE_DEPENDS ${_ocl_dir}/*.c)
  file(GLOB _ocl_cl CONFIGURE_DEPENDS ${_ocl_dir}/kernels/*.cl)
  set(_ocl_gen ${CMAKE_CURRENT_BINARY_DIR}/generated/ocl_sources.c)
  set(_ocl_prefix ${CMAKE_CURRENT_SOURCE_DIR}/src/quant/quant_blocks.h)
  # The kernels embedded as C strings, each with quant_blocks.h in front; remade when a
  # .cl file or the header changes (a new .cl file re-runs the configure step: GLOB above).
  add_custom_command(OUTPUT ${_ocl_gen}
    COMMAND ${CMAKE_COMMAND} -DOUT=${_ocl_gen} -DPREFIX=${_ocl_prefix} "-DSOURCES=${_ocl_cl}"
            -P ${_ocl_dir}/embed.cmake
    DEPENDS ${_ocl_cl} ${_ocl_prefix} ${_ocl_dir}/embed.cmake
    COMMENT "Embedding the OpenCL kernels" VERBATIM)
  list(APPEND CTORCH_BACKEND_SOURCES ${_ocl_c} ${_ocl_gen})
  list(APPEND CTORCH_DEFINES CTORCH_HAVE_OPENCL)
  list(APPEND CTORCH_PRIVATE_INCLUDES ${CTORCH_OPENCL_INCLUDE_DIR})
  list(APPEND CTORCH_LIBS ${CMAKE_DL_LIBS})
  message(STATUS "ctorch: OpenCL backend (headers in ${CTORCH_OPENCL_INCLUDE_DIR}, libOpenCL.so.1 loaded at run time)")
elseif(CTORCH_OPENCL STREQUAL "ON")
  message(FATAL_ERROR "ctorch: CTORCH_OPENCL=ON but CL/cl.h was not found (apt-get install opencl-c-headers)")
else()
  message(STATUS "ctorch: OpenCL headers not found, no OpenCL backend")
endif()
