/* shm.h -- the shared-memory transport (one host): internal declarations. */
#ifndef PLAIT_TRANSPORT_SHM_H
#define PLAIT_TRANSPORT_SHM_H

#include "transport/ptl.h"

extern const ptl_ops_t ptl_shm_ops;
extern const ptl_component_t ptl_shm_component;
extern const ptl_component_t ptl_self_component;

#endif
