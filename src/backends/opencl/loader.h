/* The OpenCL API, loaded at run time: libctorch does not link libOpenCL, so a machine
 * without an ICD loader runs with no OpenCL device. Every OpenCL call in the backend goes
 * through ocl_cl (ocl_cl.clFinish(q)), with the prototypes of CL/cl.h. */
#ifndef CT_OCL_LOADER_H
#define CT_OCL_LOADER_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdbool.h>

#define OCL_FUNCS(X)                                                                                            \
    X(clGetPlatformIDs) X(clGetPlatformInfo) X(clGetDeviceIDs) X(clGetDeviceInfo) X(clCreateContext)             \
    X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue) X(clCreateBuffer) X(clReleaseMemObject) \
    X(clCreateProgramWithSource) X(clCreateProgramWithBinary) X(clBuildProgram) X(clGetProgramInfo)             \
    X(clGetProgramBuildInfo) X(clReleaseProgram) X(clCreateKernel) X(clReleaseKernel) X(clSetKernelArg)         \
    X(clGetKernelWorkGroupInfo) X(clEnqueueNDRangeKernel) X(clEnqueueReadBuffer) X(clEnqueueWriteBuffer)        \
    X(clEnqueueCopyBuffer) X(clEnqueueFillBuffer) X(clEnqueueMapBuffer) X(clEnqueueUnmapMemObject)              \
    X(clEnqueueMarkerWithWaitList) X(clEnqueueBarrierWithWaitList) X(clWaitForEvents) X(clGetEventInfo)         \
    X(clReleaseEvent) X(clRetainEvent) X(clFlush) X(clFinish) X(clEnqueueMigrateMemObjects) X(clGetMemObjectInfo)   \
    X(clGetEventProfilingInfo)

typedef struct ocl_api {
#define OCL_PTR(f) __typeof__(&f) f;
    OCL_FUNCS(OCL_PTR)
#undef OCL_PTR
} ocl_api;

extern ocl_api ocl_cl;

/* Loads libOpenCL.so.1 once; false (with the reason logged at debug level) when the
 * library or one of the functions is missing: then there is no OpenCL device. */
bool ocl_load(void);

#endif
