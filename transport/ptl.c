/* ptl.c -- the list of transports built into this library. */
#include "config.h"

#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"
#include "transport/udp/udp.h"

static const ptl_component_t *const ptl_all[] = {&ptl_self_component, &ptl_shm_component,
                                                  &ptl_tcp_component, &ptl_udp_component};

const ptl_component_t *const *ptl_components(size_t *n)
{
    *n = sizeof ptl_all / sizeof ptl_all[0];
    return ptl_all;
}
