/* udp.h -- the software multipath transport over UDP: internal declarations. */
#ifndef PLAIT_TRANSPORT_UDP_H
#define PLAIT_TRANSPORT_UDP_H

#include "transport/ptl.h"

extern const ptl_ops_t ptl_udp_ops;
extern const ptl_component_t ptl_udp_component;

#endif
