/* tcp.h -- the kernel-TCP transport: internal declarations. */
#ifndef PLAIT_TRANSPORT_TCP_H
#define PLAIT_TRANSPORT_TCP_H

#include "transport/ptl.h"

extern const ptl_ops_t ptl_tcp_ops;
extern const ptl_component_t ptl_tcp_component;

#endif
