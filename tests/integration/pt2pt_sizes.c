/*
 * pt2pt_sizes -- message sizes and buffer alignment, ring exchange (send to
 * rank+1, receive from rank-1; self at 1 rank).
 *  - zero-length messages with NULL and non-NULL buffers (nothing written);
 *  - 1 byte and sizes around the usual thresholds, with send and receive
 *    buffers at every offset 1..7 from an 8-byte boundary;
 *  - element counts of every datatype (status.bytes = count * dtype size);
 *  - with --big: one message of 2 GiB + 1 byte from rank 0 to rank 1 (needs
 *    about 4.5 GiB of memory; run it with 2 ranks only).
 */
#include "common.h"

static int rank, size, dst, src;

/* One ring exchange of len bytes; send buffer at offset so, receive at ro. */
static void exchange(size_t len, int so, int ro, int tag)
{
    unsigned char *sraw = t_malloc(len + 8), *rraw = t_malloc(len + 8 + T_GUARD);
    unsigned char *sbuf = sraw + so, *rbuf = rraw + ro;
    plait_request_t req;
    plait_status_t st;
    t_fill(sbuf, len, t_key(1, (uint64_t)rank, len, (uint64_t)tag));
    t_poison(rbuf, len + T_GUARD);
    CHECK_RC(plait_isend(sbuf, len, PLAIT_BYTE, dst, tag, plait_comm_world(), &req));
    CHECK_RC(plait_recv(rbuf, len, PLAIT_BYTE, src, tag, plait_comm_world(), &st));
    CHECK(st.source == src && st.tag == tag && st.bytes == len, "status {%d, %d, %zu}, expected "
          "{%d, %d, %zu}", st.source, st.tag, st.bytes, src, tag, len);
    CHECK_RECV(rbuf, len, len, t_key(1, (uint64_t)src, len, (uint64_t)tag),
               "%zu bytes, send offset %d, receive offset %d", len, so, ro);
    CHECK_RC(plait_wait(&req, NULL));
    free(sraw);
    free(rraw);
}

static void zero_length(void)
{
    unsigned char buf[T_GUARD];
    plait_request_t req;
    plait_status_t st = { -5, -5, 999 };
    t_case = "zero-length, NULL buffers";
    CHECK_RC(plait_isend(NULL, 0, PLAIT_BYTE, dst, 1, plait_comm_world(), &req));
    CHECK_RC(plait_recv(NULL, 0, PLAIT_BYTE, src, 1, plait_comm_world(), &st));
    CHECK(st.source == src && st.tag == 1 && st.bytes == 0, "status {%d, %d, %zu}", st.source,
          st.tag, st.bytes);
    CHECK_RC(plait_wait(&req, NULL));

    t_case = "zero-length, real buffers (nothing may be written)";
    t_poison(buf, sizeof buf);
    CHECK_RC(plait_isend(buf, 0, PLAIT_FLOAT64, dst, 2, plait_comm_world(), &req));
    CHECK_RC(plait_recv(buf, 0, PLAIT_INT32, src, 2, plait_comm_world(), &st));
    CHECK(st.bytes == 0, "status.bytes %zu", st.bytes);
    CHECK(t_check_poison(buf, 0, sizeof buf) == T_NO_ERROR, "zero-length receive wrote byte %zu",
          t_check_poison(buf, 0, sizeof buf));
    CHECK_RC(plait_wait(&req, NULL));

    t_case = "zero-length into a non-empty buffer";
    CHECK_RC(plait_isend(NULL, 0, PLAIT_BYTE, dst, 3, plait_comm_world(), &req));
    CHECK_RC(plait_recv(buf, 16, PLAIT_BYTE, src, PLAIT_ANY_TAG, plait_comm_world(), &st));
    CHECK(st.bytes == 0 && st.tag == 3, "status {%d, %d, %zu}", st.source, st.tag, st.bytes);
    CHECK(t_check_poison(buf, 0, sizeof buf) == T_NO_ERROR, "receive of 0 bytes wrote byte %zu",
          t_check_poison(buf, 0, sizeof buf));
    CHECK_RC(plait_wait(&req, NULL));
}

static void unaligned(void)
{
    static const size_t lens[] = { 1, 2, 7, 63, 4095, 4097, 8193, 16385, 65537, (1u << 20) + 3 };
    static char name[96];
    t_case = name;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (int so = 0; so < 8; so++) {
            int ro = (so * 3 + (int)i) % 8;
            snprintf(name, sizeof name, "%zu bytes, send offset %d, receive offset %d", lens[i], so, ro);
            exchange(lens[i], so, ro, 100 + (int)i * 8 + so);
        }
}

static void dtypes(void)
{
    static const struct { plait_dtype_t dt; size_t esize; const char *name; } types[] = {
        { PLAIT_BYTE, 1, "BYTE" }, { PLAIT_INT8, 1, "INT8" }, { PLAIT_UINT8, 1, "UINT8" },
        { PLAIT_INT32, 4, "INT32" }, { PLAIT_UINT32, 4, "UINT32" }, { PLAIT_INT64, 8, "INT64" },
        { PLAIT_UINT64, 8, "UINT64" }, { PLAIT_FLOAT16, 2, "FLOAT16" },
        { PLAIT_BFLOAT16, 2, "BFLOAT16" }, { PLAIT_FLOAT32, 4, "FLOAT32" },
        { PLAIT_FLOAT64, 8, "FLOAT64" },
    };
    static const size_t counts[] = { 1, 1001, 70001 };
    static char name[96];
    t_case = name;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t c = 0; c < 3; c++) {
            size_t len = counts[c] * types[t].esize;
            int tag = 1000 + (int)(t * 3 + c);
            uint64_t *sbuf = t_malloc(len), *rbuf = t_malloc(len + T_GUARD);
            plait_request_t req;
            plait_status_t st;
            snprintf(name, sizeof name, "%zu elements of %s", counts[c], types[t].name);
            CHECK(plait_dtype_size(types[t].dt) == types[t].esize, "plait_dtype_size(%s) = %zu",
                  types[t].name, plait_dtype_size(types[t].dt));
            t_fill(sbuf, len, t_key(2, (uint64_t)rank, (uint64_t)tag, 0));
            t_poison(rbuf, len + T_GUARD);
            CHECK_RC(plait_isend(sbuf, counts[c], types[t].dt, dst, tag, plait_comm_world(), &req));
            CHECK_RC(plait_recv(rbuf, counts[c], types[t].dt, src, tag, plait_comm_world(), &st));
            CHECK(st.bytes == len, "status.bytes %zu, expected %zu", st.bytes, len);
            CHECK_RECV(rbuf, len, len, t_key(2, (uint64_t)src, (uint64_t)tag, 0), "%s", name);
            CHECK_RC(plait_wait(&req, NULL));
            free(sbuf);
            free(rbuf);
        }
}

/* 2 GiB + 1 byte from rank 0 to rank 1, both buffers at odd offsets. */
static void big(void)
{
    const size_t len = (2ull << 30) + 1;
    t_case = "2 GiB + 1 byte message";
    if (rank == 0) {
        unsigned char *raw = t_malloc(len + 8);
        t_fill(raw + 3, len, t_key(3, 0, 1, len));
        CHECK_RC(plait_send(raw + 3, len, PLAIT_BYTE, 1, 77, plait_comm_world()));
        free(raw);
    } else if (rank == 1) {
        unsigned char *raw = t_malloc(len + 8 + T_GUARD);
        plait_status_t st;
        t_poison(raw + 5, len + T_GUARD);
        CHECK_RC(plait_recv(raw + 5, len, PLAIT_BYTE, 0, 77, plait_comm_world(), &st));
        CHECK(st.source == 0 && st.tag == 77 && st.bytes == len, "status {%d, %d, %zu}", st.source,
              st.tag, st.bytes);
        CHECK_RECV(raw + 5, len, len, t_key(3, 0, 1, len), "2 GiB + 1 byte message");
        free(raw);
        printf("pt2pt_sizes: 2 GiB + 1 byte message arrived intact\n");
    }
}

int main(int argc, char **argv)
{
    int want_big = argc > 1 && strcmp(argv[1], "--big") == 0;
    t_init(&rank, &size);
    dst = (rank + 1) % size;
    src = (rank + size - 1) % size;
    if (want_big) {
        CHECK(size >= 2, "--big needs at least 2 ranks, got %d", size);
        big();
    } else {
        zero_length();
        t_case = "one byte";
        exchange(1, 0, 0, 5);
        unaligned();
        dtypes();
    }
    CHECK_RC(plait_barrier(plait_comm_world()));
    if (rank == 0) printf("pt2pt_sizes: %d ranks ok\n", size);
    t_finalize();
    return 0;
}
