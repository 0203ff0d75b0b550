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

#ifndef CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV /* cl_nv_device_attribute_query (cl_ext.h) */
#define CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV 0x4000
#define CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV 0x4001
#endif

/* Whether the device is an NVIDIA GPU whose PTX has dp4a (compute capability 6.1 and up):
 * the kernels' OCL_HAVE_DP4A. Any other device refuses the query and gets false. */
static inline bool ocl_nv_dp4a(cl_device_id id)
{
    cl_uint major = 0, minor = 0;
    if (ocl_cl.clGetDeviceInfo(id, CL_DEVICE_COMPUTE_CAPABILITY_MAJOR_NV, sizeof major, &major, NULL) != CL_SUCCESS ||
        ocl_cl.clGetDeviceInfo(id, CL_DEVICE_COMPUTE_CAPABILITY_MINOR_NV, sizeof minor, &minor, NULL) != CL_SUCCESS)
        return false;
    return major > 6 || (major == 6 && minor >= 1);
}

/* Loads libOpenCL.so.1 once; false (with the reason logged at debug level) when the
 * library or one of the functions is missing: then there is no OpenCL device. */
bool ocl_load(void);

#endif
