/*
 * fuzz_pp.c -- libFuzzer harness over the multipath protocol's packet path:
 * pp_parse, then pp_rx into a live connection that already has traffic in
 * flight both ways, then delivery. Any crash, sanitizer report or a
 * delivered message that was not sent is a bug.
 *
 * Built and run (bounded) by tests/udp/t-fuzz.sh with clang's libFuzzer.
 * Input: packets as [u8 mode][u16 len][bytes]; mode bit 0 set stamps a valid
 * common header (magic, known flags, rank, epoch, tag, zero reserved bytes)
 * over the bytes, so the fuzzer reaches the per-field checks behind the
 * parser; bit 1 makes it an ACK, bit 2 pads or cuts an ACK to its length.
 * A data packet flagged PP_F_RUN goes in as udp.c hands it over: the bytes
 * its run spans (pp_run_span).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/proto/pp.h"

#define KEY 0x5eed5eed5eed5eedull

/* An exposed region for placed packets (id 5): AddressSanitizer flags any
 * write that the bounds checks let past its end. */
static uint8_t *region;
#define REGION_LEN 4096

static void *place(void *arg, uint64_t id, uint64_t off, size_t *len)
{
    (void)arg;
    if (!region)
        region = malloc(REGION_LEN);
    if (id != 5 || off >= REGION_LEN)
        return NULL;
    if (*len > REGION_LEN - off)
        *len = REGION_LEN - off;
    return region + off;
}

static void setup(pp_conn_t *c, int me)
{
    pp_cfg_t cfg;
    pp_cfg_default(&cfg);
    cfg.key = KEY;
    cfg.me = (uint32_t)me;
    cfg.peer = (uint32_t)!me;
    cfg.my_epoch = me ? 7 : 3;
    cfg.peer_epoch = me ? 3 : 7;
    cfg.tx_isn = me ? 100 : 0xfffffff0u;
    cfg.rx_isn = me ? 0xfffffff0u : 100;
    cfg.mtu = 512;
    cfg.chunk = 2048;
    cfg.max_msg = 1u << 16;
    cfg.rx_buf_max = 1u << 18;
    cfg.place = place;
    pp_conn_init(c, &cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pp_conn_t c;
    static uint8_t msg[5000];
    pp_out_t o;
    uint32_t src;
    int type;
    uint64_t now = 1000000;
    pp_msg_t *m;
    setup(&c, 0);
    /* some traffic in flight, so ACK processing has a scoreboard to hit */
    pp_send(&c, "hdr", 3, msg, sizeof msg);
    while (pp_tx_next(&c, now, &o))
        ;
    while (size >= 3) {
        static uint8_t pkt[70000];
        int mode = data[0];
        size_t len = (size_t)data[1] | (size_t)data[2] << 8;
        data += 3;
        size -= 3;
        size_t take;
        if (len > size)
            len = size;
        take = len;
        memcpy(pkt, data, len);
        if ((mode & 7) == 7) {   /* an ACK of a valid length: its fields and 0..PP_WIN/64
                                  * bitmap words (mode's high bits), zeros after the input */
            size_t want = (mode & 8) ? PP_ACK_SHORT
                                     : PP_ACK_SHORT + 8 * (1 + (size_t)(mode >> 4) * (PP_WIN / 64 - 1) / 15);
            if (len < want)
                memset(pkt + len, 0, want - len);
            len = want;
        }
        if ((mode & 1) && len >= sizeof(pp_hdr_t)) {
            pp_hdr_t h;
            memcpy(&h, pkt, sizeof h);
            h.magic = PP_MAGIC;
            h.type = (mode & 2) ? PP_T_ACK : PP_T_DATA;
            h.flags &= h.type == PP_T_ACK ? PP_F_RUN : PP_F_ALL;   /* (an ACK's: runs cut) */
            if (h.type == PP_T_ACK)   /* (data keeps its ack_via: any value is a hint) */
                h.hlen = h.ack_via = 0;
            h.src = 1;
            h.epoch = 7;
            h.tag = pp_tag(KEY, 1, 0);
            memcpy(pkt, &h, sizeof h);
            if (h.type == PP_T_ACK && len > offsetof(pp_ack_t, rsv))
                pkt[offsetof(pp_ack_t, rsv)] = 0;
            if (len >= pp_sealed_len(&h, len))   /* (shorter: truncated, dropped first) */
                pp_seal(pkt, pp_sealed_len(&h, len), h.tag);
        }
        if (pp_parse(pkt, len, KEY, 0, &src, &type) < 0 && src == 1) {
            size_t span = type == PP_T_DATA ? pp_run_span(pkt, len) : 0;   /* as udp.c */
            pp_rx(&c, now, pkt, span ? span : len);
        }
        now += 50000;
        pp_poll(&c, now);
        while (pp_tx_next(&c, now, &o))
            ;
        pp_ack_next(&c, now, &o);
        while ((m = pp_deliver(&c)) != NULL) {
            if (m->got != m->len || m->hlen == 0 || m->hlen > m->len)
                abort();
            pp_msg_release(&c, m);
        }
        data += take;
        size -= take;
    }
    pp_conn_fini(&c);
    return 0;
}
