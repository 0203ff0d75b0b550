/* Shared by the benches that call the OpenCL API through the backend's loader
 * (ocl_enqueue.c, ocl_q8mv.c). Header-only, static inline. */
#ifndef CT_BENCH_OCL_BENCH_H
#define CT_BENCH_OCL_BENCH_H

#include "backends/opencl/loader.h"

/* The first GPU of any platform (where the library's opencl:0 also lands), else the first
 * device of any type; its name into name[len]. 2: a GPU, 1: another device, 0: none. */
static inline int ob_pick_device(cl_device_id *dev, char *name, size_t len)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (ocl_cl.clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) return 0;
    int found = 0;
    for (cl_uint p = 0; p < np && found < 2; p++) {
        cl_device_id d;
        cl_uint nd = 0;
        if (ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_GPU, 1, &d, &nd) == CL_SUCCESS && nd) *dev = d, found = 2;
        else if (!found && ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &d, &nd) == CL_SUCCESS && nd)
            *dev = d, found = 1;
    }
    if (found) ocl_cl.clGetDeviceInfo(*dev, CL_DEVICE_NAME, len, name, NULL);
    return found;
}

#endif
