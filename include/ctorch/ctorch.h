/* ctorch: a tensor runtime with hybrid execution. One include for the whole public API. */
#ifndef CTORCH_CTORCH_H
#define CTORCH_CTORCH_H

#include "ctorch/core.h"
#include "ctorch/ops.h"
#include "ctorch/exec.h"

#define CTORCH_VERSION_MAJOR 0
#define CTORCH_VERSION_MINOR 1
#define CTORCH_VERSION_PATCH 0

#endif
