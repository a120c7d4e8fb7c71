/*
 * shm.c -- shared-memory transport between ranks of one host.
 *
 * Every rank creates one segment holding its inbound rings, one per local peer
 * (ring i is written only by local peer i), plus a control block with the
 * wake-up word its blocked threads sleep on. The segment name goes to peers in
 * a PMIx card; the last peer to map it unlinks the name (mapped_by), so it
 * lives only while plait_init runs. A job killed inside plait_init (a rank
 * that never came, the launcher aborting) can still leave names behind; the
 * next job on the host removes those whose creating process is gone
 * (shm_sweep_stale).
 *
 * Large messages are not carried here: pt2pt reads them straight from the
 * sender's memory with get() (CMA, process_vm_readv: one copy), or, where the
 * kernel forbids it, streams them through the rings in slot-sized fragments.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "transport/shm/ring.h"
#include "transport/shm/shm.h"

#define SHM_MAGIC 0x31534d5449414c50ull /* "PLAITMS1" */
#define SHM_CARD_KEY "plait.shm"
#define SHM_BATCH 32   /* frames taken from one ring per progress call: fairness */
#define SHM_NCOOP 64   /* cooperative-copy descriptors per sending peer */
#define SHM_COOP_CHUNK (256 * 1024)   /* bytes claimed at a time */

/*
 * A cooperative copy: the receiver of a large message and its sender move it
 * together, the receiver reading chunks from the sender (process_vm_readv),
 * the sender writing chunks into the receiver (process_vm_writev), each
 * claiming the next chunk from `next`. Two cores copy at once where one
 * single-copy get is bound by one core's memcpy bandwidth; if the sender is
 * busy elsewhere the receiver simply claims every chunk itself. Descriptors
 * live in the receiver's segment, one array per sending peer.
 */
typedef struct {
    _Alignas(64) _Atomic uint64_t next;   /* gen << 32 | next chunk to claim: a claim
                                           * made for a stale use of the slot fails */
    _Atomic uint64_t done;                /* bytes copied, by both sides */
    _Atomic uint64_t redo;                /* 1 + a chunk the sender claimed but could not copy */
    uint64_t len, nchunks;
    uint64_t raddr;                       /* receiver's buffer */
    uint64_t saddr;                       /* sender's buffer */
    _Atomic uint32_t gen;                 /* odd while open */
} shm_coop_t;

typedef struct {
    _Atomic uint64_t magic;
    uint64_t key;            /* job key: a stale or foreign segment is refused */
    int32_t  owner;          /* world rank */
    int32_t  nrings;
    uint32_t nslots;
    uint32_t slot_size;
    _Atomic uint32_t mapped_by;              /* peers that mapped it: the last unlinks its name */
    _Alignas(64) _Atomic uint32_t wake;      /* futex word: bumped to wake sleepers */
    _Atomic uint32_t sleepers;               /* threads of the owner asleep on wake */
    _Alignas(64) unsigned char rings[];
} shm_ctl_t;

typedef struct {
    uint64_t magic;
    int32_t  pid;
    uint32_t nslots;
    uint32_t slot_size;
    char     name[80];
} shm_card_t;

typedef struct {
    int        world;
    int        pid;
    int        pidfd;        /* -1 when pidfd_open is unavailable */
    int        dead;
    int        cma;          /* 1 until process_vm_readv is refused for this peer */
    shm_ctl_t *seg;          /* the peer's segment (mapped) */
    size_t     seglen;
    shm_ring_t tx;           /* our ring inside the peer's segment */
    uint64_t   txpos;
    shm_ring_t rx;           /* the peer's ring inside our segment */
    uint64_t   rxpos;
    char       name[80];     /* its segment's name: unlinked for it if it died before
                              * the job's "all mapped" fence and this rank's init
                              * fails (under mpirun nobody else removes it) */
} shm_peer_t;

typedef struct {
    prt_job_t  *job;
    shm_ctl_t  *seg;         /* ours */
    size_t      seglen;
    int         mapped;      /* seg is an mmap (else malloc'd, single local rank) */
    char        name[80];
    int         linked;
    int         me;          /* our local index */
    int         nlocal;
    size_t      nslots, slot_size;
    int         cma;         /* PLAIT_SHM_CMA */
    shm_peer_t *peers;       /* by local index */
    int        *local_of;    /* world rank -> local index or -1 */
} shm_t;

static shm_t *shm_of(ptl_tl_t *tl) { return tl->priv; }

/* Rings of a host's ranks up to this many bytes in all are mapped with their
 * pages faulted in (MAP_POPULATE; a failure to populate is no error). On first
 * use each ring page costs a page fault in the writer and in the reader, and
 * a ring of 16 KiB slots first costs a thousand of them: 2 ranks, 16 KiB
 * ping-pong, 60 round trips right after start: 86 us each on average on the
 * 2-core VM, against 1.9 once warm (the benchmarks' short warm-ups measured
 * it: a 32 KiB allgather read 24 us). Larger hosts stay lazy: every ring of
 * 128 ranks would be 17 GB of /dev/shm, most of it never used. */
#define SHM_POPULATE_MAX ((size_t)256 << 20)

static int shm_map_flags(const shm_t *s)
{
    size_t rings = (size_t)s->nlocal * (size_t)s->nlocal * s->nslots * s->slot_size;
    return MAP_SHARED | (rings <= SHM_POPULATE_MAX ? MAP_POPULATE : 0);
}

static size_t shm_seg_bytes(int nrings, size_t nslots, size_t slot_size)
{
    return sizeof(shm_ctl_t) + (size_t)nrings * nslots * slot_size +
           (size_t)nrings * SHM_NCOOP * sizeof(shm_coop_t);
}

/* Descriptor i of the array for sending peer li, in the segment c. */
static shm_coop_t *shm_coop_at(shm_ctl_t *c, int li, unsigned i)
{
    shm_coop_t *base = (shm_coop_t *)(c->rings + (size_t)c->nrings * c->nslots * c->slot_size);
    return &base[(size_t)li * SHM_NCOOP + i];
}

static shm_ring_t shm_ring_at(shm_ctl_t *c, int i)
{
    shm_ring_t r = {c->rings + (size_t)i * c->nslots * c->slot_size, c->slot_size, c->nslots - 1};
    return r;
}

/* Age below which a stale-looking name is left alone: a process of another
 * PID namespace sharing this /dev/shm could look gone while its job's
 * plait_init still needs the name, which lives only that long. */
#define SHM_STALE_AGE_S 60

/* The pid in a name ending "-<pid>-<8 hex digits>" (plait's segments and
 * collective areas), or 0. */
static long shm_name_pid(const char *name)
{
    const char *hex = strrchr(name, '-'), *q;
    long pid = 0;
    if (!hex || strlen(hex + 1) != 8 || strspn(hex + 1, "0123456789abcdef") != 8)
        return 0;
    for (q = hex; q > name && q[-1] >= '0' && q[-1] <= '9'; q--)
        ;
    if (q == hex || q == name || q[-1] != '-' || hex - q > 9)
        return 0;
    for (; q < hex; q++)
        pid = pid * 10 + (*q - '0');
    return pid;
}

/* Removes plait names in /dev/shm of this user whose creating process is
 * gone and that were last sized or written over SHM_STALE_AGE_S ago (mtime:
 * set when the segment was made): what a job killed inside
 * plait_init left (under mpirun or srun nothing else removes them, and each
 * holds a few MB of memory). Best effort: any failure just leaves them. */
static void shm_sweep_stale(void)
{
    DIR *d = opendir("/dev/shm");
    struct dirent *e;
    struct stat st;
    time_t now = time(NULL);
    int removed = 0;
    long pid;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "plait-", 6) != 0 || (pid = shm_name_pid(e->d_name)) <= 0 ||
            pid == (long)getpid())
            continue;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
            now - st.st_mtime < SHM_STALE_AGE_S)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            removed++;
    }
    closedir(d);
    if (removed)
        prt_log(PRT_LOG_INFO, "removed %d shared-memory segment%s left in /dev/shm by processes "
                "that are gone (a job killed during plait_init)", removed, removed == 1 ? "" : "s");
}

static int shm_create(shm_t *s)
{
    prt_job_t *job = s->job;
    uint32_t salt;
    int fd;
    s->seglen = shm_seg_bytes(s->nlocal, s->nslots, s->slot_size);
    if (job->local_rank == 0)   /* one rank per host suffices */
        shm_sweep_stale();
    if (s->nlocal == 1) {   /* no peers: only the wake-up word is needed */
        s->seg = aligned_alloc(64, (sizeof(shm_ctl_t) + 63) & ~(size_t)63);
        if (!s->seg)
            return prt_err(PLAIT_ERR_NOMEM, "no memory for the shm control block");
        memset(s->seg, 0, sizeof(shm_ctl_t));
        return PLAIT_OK;
    }
    /* pid and a random part: a job that died before unlinking must not block
     * a later job that reuses the namespace name (srun, mpirun reuse them).
     * The "plait-<tag>-" prefix is what plaitrun's cleanup removes; the pid
     * is what shm_sweep_stale checks. */
    if (getrandom(&salt, sizeof salt, 0) != (ssize_t)sizeof salt)
        salt = prt_now_ns();
    snprintf(s->name, sizeof s->name, "/plait-%s-%d-%d-%08x", job->tag, job->rank, (int)getpid(),
             (unsigned)salt);
    fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0)
        return prt_err(PLAIT_ERR_TRANSPORT, "shm_open(%s) failed: %s", s->name, strerror(errno));
    s->linked = 1;
    if (ftruncate(fd, (off_t)s->seglen) != 0) {
        close(fd);
        return prt_err(PLAIT_ERR_NOMEM, "cannot size shared segment %s to %zu bytes: %s", s->name,
                       s->seglen, strerror(errno));
    }
    s->seg = mmap(NULL, s->seglen, PROT_READ | PROT_WRITE, shm_map_flags(s), fd, 0);
    close(fd);
    if (s->seg == MAP_FAILED) {
        s->seg = NULL;
        return prt_err(PLAIT_ERR_NOMEM, "mmap of %s (%zu bytes) failed: %s", s->name, s->seglen,
                       strerror(errno));
    }
    s->mapped = 1;
    return PLAIT_OK;
}

static void shm_init_ctl(shm_t *s)
{
    shm_ctl_t *c = s->seg;
    c->owner = s->job->rank;
    c->nrings = s->nlocal;
    c->nslots = (uint32_t)s->nslots;
    c->slot_size = (uint32_t)s->slot_size;
    atomic_store(&c->wake, 0);
    atomic_store(&c->sleepers, 0);
    for (int i = 0; s->nlocal > 1 && i < s->nlocal; i++) {
        shm_ring_t r = shm_ring_at(c, i);
        if (i != s->me)
            shm_ring_init(&r);
    }
    atomic_store_explicit(&c->magic, SHM_MAGIC, memory_order_release);
}

/* Under Yama ptrace_scope = 1 (Ubuntu's default) process_vm_readv between
 * sibling ranks is refused unless the target names a permitted tracer; the
 * peers are not our ancestors, so allow any process of our user, as Open MPI's
 * shared-memory transport does. Without it large messages take the two-copy
 * ring path. PLAIT_SHM_CMA=0 leaves the process untouched. */
static void shm_allow_cma(shm_t *s)
{
#ifdef PR_SET_PTRACER
    if (s->cma && prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0)
        prt_log(PRT_LOG_DEBUG, "prctl(PR_SET_PTRACER) failed: %s", strerror(errno));
#else
    (void)s;
#endif
}

int ptl_shm_setup(ptl_tl_t *tl, prt_job_t *job, const prt_config_t *cfg)
{
    shm_t *s = calloc(1, sizeof *s);
    shm_card_t card;
    if (!s)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for the shm transport");
    tl->ops = &ptl_shm_ops;
    tl->name = "shm";
    tl->priv = s;
    s->job = job;
    s->me = job->local_rank;
    s->nlocal = job->local_size;
    s->nslots = cfg->shm_ring_slots;
    s->slot_size = (SHM_SLOT_HDR + PTL_MAX_HDR + cfg->shm_eager_limit + 63) & ~(size_t)63;
    s->cma = cfg->shm_cma;
    PRT_CHECK(shm_create(s));
    shm_init_ctl(s);
    if (s->nlocal == 1)
        return PLAIT_OK;
    shm_allow_cma(s);
    memset(&card, 0, sizeof card);
    card.magic = SHM_MAGIC;
    card.pid = (int32_t)getpid();
    card.nslots = (uint32_t)s->nslots;
    card.slot_size = (uint32_t)s->slot_size;
    snprintf(card.name, sizeof card.name, "%s", s->name);
    return prt_boot_put(job, SHM_CARD_KEY, &card, sizeof card);
}

static int shm_pidfd(int pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* Checks a peer's card against ours: a mismatch means a foreign or corrupt card. */
static int shm_check_card(shm_t *s, int world, const shm_card_t *card, size_t len)
{
    if (len != sizeof *card || card->magic != SHM_MAGIC || card->pid <= 0 ||
        memchr(card->name, '\0', sizeof card->name) == NULL)
        return prt_err(PLAIT_ERR_TRANSPORT, "shared-memory card of rank %d is malformed", world);
    if (card->nslots != s->nslots || card->slot_size != s->slot_size)
        return prt_err(PLAIT_ERR_ARG, "rank %d uses a different PLAIT_SHM_RING_SLOTS or "
                       "PLAIT_SHM_EAGER_LIMIT: every rank must use the same settings", world);
    return PLAIT_OK;
}

static int shm_map_peer(shm_t *s, int li, const shm_card_t *card)
{
    shm_peer_t *p = &s->peers[li];
    int fd = shm_open(card->name, O_RDWR, 0);
    if (fd < 0)
        return prt_err(PLAIT_ERR_TRANSPORT, "cannot open rank %d's segment %s: %s", p->world,
                       card->name, strerror(errno));
    p->seglen = shm_seg_bytes(s->nlocal, s->nslots, s->slot_size);
    p->seg = mmap(NULL, p->seglen, PROT_READ | PROT_WRITE, shm_map_flags(s), fd, 0);
    close(fd);
    if (p->seg == MAP_FAILED) {
        p->seg = NULL;
        return prt_err(PLAIT_ERR_NOMEM, "mmap of rank %d's segment failed: %s", p->world,
                       strerror(errno));
    }
    if (atomic_load_explicit(&p->seg->magic, memory_order_acquire) != SHM_MAGIC ||
        p->seg->owner != p->world ||
        p->seg->nrings != s->nlocal || p->seg->nslots != s->nslots ||
        p->seg->slot_size != s->slot_size)
        return prt_err(PLAIT_ERR_TRANSPORT, "segment %s of rank %d does not belong to this job",
                       card->name, p->world);
    p->tx = shm_ring_at(p->seg, s->me);
    p->rx = shm_ring_at(s->seg, li);
    snprintf(p->name, sizeof p->name, "%s", card->name);
    /* the last of its peers to map it takes the name away at once: a rank
     * killed right after the job's second fence leaves nothing behind */
    if (atomic_fetch_add(&p->seg->mapped_by, 1) + 1 == (uint32_t)(s->nlocal - 1))
        shm_unlink(card->name);
    return PLAIT_OK;
}

static int shm_connect_peer(shm_t *s, int li)
{
    shm_peer_t *p = &s->peers[li];
    void *blob = NULL;
    size_t len = 0;
    int rc;
    PRT_CHECK(prt_boot_get(s->job, p->world, SHM_CARD_KEY, &blob, &len));
    rc = shm_check_card(s, p->world, blob, len);
    if (rc == PLAIT_OK) {
        const shm_card_t *card = blob;
        p->pid = card->pid;
        p->pidfd = shm_pidfd(p->pid);
        rc = shm_map_peer(s, li, card);
    }
    free(blob);
    return rc;
}

int ptl_shm_connect(ptl_tl_t *tl, prt_job_t *job)
{
    shm_t *s = shm_of(tl);
    s->peers = calloc((size_t)s->nlocal, sizeof *s->peers);
    s->local_of = malloc((size_t)job->size * sizeof(int));
    if (!s->peers || !s->local_of)
        return prt_err(PLAIT_ERR_NOMEM, "no memory for %d shm peers", s->nlocal);
    for (int r = 0; r < job->size; r++)
        s->local_of[r] = -1;
    s->seg->key = job->key;   /* known only after the first fence; checked after the second */
    for (int i = 0; i < s->nlocal; i++) {
        s->peers[i].world = job->local_peers[i];
        s->peers[i].pidfd = -1;
        s->peers[i].cma = s->cma;
        s->local_of[job->local_peers[i]] = i;
    }
    for (int i = 0; i < s->nlocal; i++)
        if (i != s->me)
            PRT_CHECK(shm_connect_peer(s, i));
    return PLAIT_OK;
}

int ptl_shm_verify(ptl_tl_t *tl)
{
    shm_t *s = shm_of(tl);
    for (int i = 0; s->peers && i < s->nlocal; i++)
        if (i != s->me && s->peers[i].seg->key != s->job->key)
            return prt_err(PLAIT_ERR_TRANSPORT, "segment of rank %d carries another job's key",
                           s->peers[i].world);
    return PLAIT_OK;
}

void ptl_shm_unlink(ptl_tl_t *tl)
{
    shm_t *s = shm_of(tl);
    if (s && s->linked) {
        shm_unlink(s->name);
        s->linked = 0;
    }
}

int ptl_shm_reaches(ptl_tl_t *tl, int peer)
{
    shm_t *s = shm_of(tl);
    return s && s->local_of && peer >= 0 && peer < s->job->size && s->local_of[peer] >= 0 &&
           s->local_of[peer] != s->me;
}

static void shm_wake(shm_ctl_t *c)
{
    /* Pairs with the sleeper's increment of sleepers: either it sees our
     * frame before sleeping, or we see it asleep and wake it. */
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&c->sleepers, memory_order_relaxed)) {
        atomic_fetch_add(&c->wake, 1);
        prt_futex_wake((volatile uint32_t *)&c->wake);
    }
}

void ptl_shm_wake_self(ptl_tl_t *tl) { shm_wake(shm_of(tl)->seg); }

/* Called without the state lock (a waiter about to sleep): a receive pass
 * may be moving rxpos meanwhile, so it is read atomically; a stale value
 * only makes the waiter look at a slot already taken and sleep, which the
 * wake-up word and the capped sleep cover. */
static int shm_any_pending(shm_t *s)
{
    for (int i = 0; s->nlocal > 1 && i < s->nlocal; i++)
        if (i != s->me &&
            shm_ring_peek(&s->peers[i].rx, __atomic_load_n(&s->peers[i].rxpos, __ATOMIC_RELAXED)))
            return 1;
    return 0;
}

void ptl_shm_sleep(ptl_tl_t *tl, long timeout_us, _Atomic int *done)
{
    shm_t *s = shm_of(tl);
    shm_ctl_t *c = s->seg;
    uint32_t w = atomic_load(&c->wake);
    atomic_fetch_add(&c->sleepers, 1);   /* seq_cst: orders against the peek below */
    if (!atomic_load(done) && !shm_any_pending(s))
        prt_futex_wait((volatile uint32_t *)&c->wake, w, timeout_us);
    atomic_fetch_sub(&c->sleepers, 1);
}

static int shm_send(ptl_tl_t *tl, int dst, const void *hdr, size_t hlen, const void *payload,
                    size_t plen)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p;
    if (!ptl_shm_reaches(tl, dst))
        return prt_err(PLAIT_ERR_INTERNAL, "shm: rank %d is not a local peer", dst);
    p = &s->peers[s->local_of[dst]];
    if (hlen > PTL_MAX_HDR || hlen + plen > s->slot_size - SHM_SLOT_HDR)
        return prt_err(PLAIT_ERR_INTERNAL, "shm: frame of %zu+%zu bytes exceeds a slot", hlen, plen);
    if (shm_ring_push(&p->tx, &p->txpos, hdr, (uint32_t)hlen, payload, (uint32_t)plen))
        return 1;
    shm_wake(p->seg);
    return PLAIT_OK;
}

static size_t shm_max_frame(ptl_tl_t *tl) { return shm_of(tl)->slot_size - SHM_SLOT_HDR; }

/* Drains up to SHM_BATCH frames from peer li's ring. A frame whose lengths do
 * not fit the slot is dropped and logged: nothing from the wire is trusted. */
static int shm_drain(shm_t *s, int li, ptl_rx_fn rx, void *ctx)
{
    shm_peer_t *p = &s->peers[li];
    size_t cap = s->slot_size - SHM_SLOT_HDR;
    int n = 0;
    shm_slot_t *slot;
    while (n < SHM_BATCH && (slot = shm_ring_peek(&p->rx, p->rxpos)) != NULL) {
        uint32_t hlen = slot->hlen, plen = slot->plen;
        if (hlen == 0 || hlen > PTL_MAX_HDR || (size_t)hlen + plen > cap)
            prt_log(PRT_LOG_ERROR, "shm: dropped a malformed frame from rank %d (%u+%u bytes)",
                    p->world, hlen, plen);
        else
            rx(ctx, p->world, slot->data, hlen, slot->data + hlen, plen);
        shm_ring_release(&p->rx, slot, &p->rxpos);
        n++;
    }
    if (n)
        shm_wake(p->seg);   /* the peer may sleep waiting for ring space */
    return n;
}

static int shm_progress(ptl_tl_t *tl, ptl_rx_fn rx, void *ctx)
{
    shm_t *s = shm_of(tl);
    int n = 0;
    for (int i = 0; s->nlocal > 1 && i < s->nlocal; i++)
        if (i != s->me)
            n += shm_drain(s, i, rx, ctx);
    return n;
}

/* A direct read or write of rank peer's memory failed with errno err: ESRCH
 * means the process is gone (PLAIT_ERR_PEER, so that the caller knows no
 * retry can help), anything else is a transport failure. */
static int shm_cma_fail(int peer, int pid, const char *what, int err)
{
    if (err == ESRCH)
        return prt_err(PLAIT_ERR_PEER, "%s: rank %d (pid %d) is gone: it died or left the job",
                       what, peer, pid);
    return prt_err(PLAIT_ERR_TRANSPORT, "%s from rank %d failed: %s", what, peer, strerror(err));
}

/* Single copy from the peer's address space; partial reads continue. */
static int shm_get(ptl_tl_t *tl, int peer, uint64_t raddr, void *buf, size_t len)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p;
    size_t done = 0;
    if (!ptl_shm_reaches(tl, peer))
        return prt_err(PLAIT_ERR_INTERNAL, "shm: get from non-local rank %d", peer);
    p = &s->peers[s->local_of[peer]];
    if (!p->cma)
        return PLAIT_ERR_UNSUPPORTED;
    while (done < len) {
        struct iovec l = {(char *)buf + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(raddr + done), len - done};
        ssize_t got = process_vm_readv(p->pid, &l, 1, &r, 1, 0);
        if (got > 0) {
            done += (size_t)got;
            continue;
        }
        if (got < 0 && errno == EINTR)
            continue;
        if (done == 0 && got < 0 && (errno == EPERM || errno == ENOSYS || errno == EACCES)) {
            prt_log(PRT_LOG_INFO, "process_vm_readv from rank %d refused (%s): copying through "
                    "shared memory instead", peer, strerror(errno));
            p->cma = 0;
            return PLAIT_ERR_UNSUPPORTED;
        }
        if (got < 0) {
            char what[96];
            snprintf(what, sizeof what, "shm: reading %zu bytes (after %zu)", len, done);
            return shm_cma_fail(peer, (int)p->pid, what, errno);
        }
        return prt_err(PLAIT_ERR_TRANSPORT, "shm: reading %zu bytes from rank %d made no progress "
                       "after %zu", len, peer, done);
    }
    return PLAIT_OK;
}

/* ------------------------------------------------------- cooperative copy */

/* A receiver's read of chunk k of a cooperative transfer failed. */
static int shm_coop_fail(const shm_peer_t *p, uint64_t k, int err)
{
    char what[64];
    snprintf(what, sizeof what, "shm: reading chunk %llu of a message", (unsigned long long)k);
    return shm_cma_fail(p->world, (int)p->pid, what, err);
}

static int coop_copy(shm_peer_t *p, const shm_coop_t *d, uint64_t k, int writer)
{
    uint64_t off = k * SHM_COOP_CHUNK;
    size_t n = d->len - off < SHM_COOP_CHUNK ? d->len - off : SHM_COOP_CHUNK;
    struct iovec mine = {(void *)(uintptr_t)((writer ? d->saddr : d->raddr) + off), n};
    struct iovec theirs = {(void *)(uintptr_t)((writer ? d->raddr : d->saddr) + off), n};
    size_t moved = 0;
    while (moved < n) {
        ssize_t got = writer ? process_vm_writev(p->pid, &mine, 1, &theirs, 1, 0)
                             : process_vm_readv(p->pid, &mine, 1, &theirs, 1, 0);
        if (got <= 0) {
            if (got < 0 && errno == EINTR)
                continue;
            return -1;
        }
        moved += (size_t)got;
        mine.iov_base = (char *)mine.iov_base + got;
        mine.iov_len -= (size_t)got;
        theirs.iov_base = (char *)theirs.iov_base + got;
        theirs.iov_len -= (size_t)got;
    }
    atomic_fetch_add_explicit((_Atomic uint64_t *)&d->done, n, memory_order_release);
    return 0;
}

/* Claims and copies chunks of the use `gen` of d until none is left. */
static int coop_claim_all(shm_peer_t *p, shm_coop_t *d, uint32_t gen, int writer)
{
    uint64_t v = atomic_load_explicit(&d->next, memory_order_acquire);
    for (;;) {
        uint64_t k = v & 0xffffffffu;
        if ((uint32_t)(v >> 32) != gen || k >= d->nchunks)
            return 0;
        if (!atomic_compare_exchange_weak_explicit(&d->next, &v, v + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        if (coop_copy(p, d, k, writer) != 0) {
            if (!writer)
                return shm_coop_fail(p, k, errno);
            atomic_store(&d->redo, k + 1);   /* the receiver copies it; stop helping */
            p->cma = 0;
            return 0;
        }
        v = atomic_load_explicit(&d->next, memory_order_acquire);
    }
}

static int shm_coop_open(ptl_tl_t *tl, int peer, uint64_t saddr, void *buf, size_t len,
                         uint64_t *handle)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p = &s->peers[s->local_of[peer]];
    if (!p->cma || len == 0 || len / SHM_COOP_CHUNK >= 0xffffffffu)
        return PLAIT_ERR_UNSUPPORTED;
    for (unsigned i = 0; i < SHM_NCOOP; i++) {
        shm_coop_t *d = shm_coop_at(s->seg, s->local_of[peer], i);
        uint32_t gen = atomic_load_explicit(&d->gen, memory_order_relaxed);
        if (gen & 1)
            continue;
        gen++;
        d->len = len;
        d->nchunks = (len + SHM_COOP_CHUNK - 1) / SHM_COOP_CHUNK;
        d->raddr = (uint64_t)(uintptr_t)buf;
        d->saddr = saddr;
        atomic_store_explicit(&d->done, 0, memory_order_relaxed);
        atomic_store_explicit(&d->redo, 0, memory_order_relaxed);
        atomic_store_explicit(&d->gen, gen, memory_order_relaxed);
        atomic_store_explicit(&d->next, (uint64_t)gen << 32, memory_order_release);
        *handle = (uint64_t)gen << 8 | i;
        return PLAIT_OK;
    }
    return PLAIT_ERR_UNSUPPORTED;   /* all descriptors busy: a plain get will do */
}

/* Receiver (owner = 1): copies what is left; 1 once every byte is in, 0 while
 * the sender still copies a chunk. Sender (owner = 0): helps until nothing is
 * left to claim; always 0. A handle that names no open use is ignored. */
static int shm_coop_work(ptl_tl_t *tl, int peer, uint64_t handle, int owner)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p = &s->peers[s->local_of[peer]];
    unsigned i = (unsigned)(handle & 0xff);
    uint32_t gen = (uint32_t)(handle >> 8);
    shm_coop_t *d;
    if (i >= SHM_NCOOP || !(gen & 1))
        return prt_err(PLAIT_ERR_TRANSPORT, "bad cooperative-copy handle from rank %d", peer);
    if (!owner) {
        if (p->cma)
            coop_claim_all(p, shm_coop_at(p->seg, s->me, i), gen, 1);
        return 0;
    }
    d = shm_coop_at(s->seg, s->local_of[peer], i);
    PRT_CHECK(coop_claim_all(p, d, gen, 0));
    if (atomic_load(&d->redo)) {
        uint64_t k = atomic_exchange(&d->redo, 0) - 1;
        if (coop_copy(p, d, k, 0) != 0)
            return shm_coop_fail(p, k, errno);
    }
    return atomic_load_explicit(&d->done, memory_order_acquire) == d->len;
}

static int shm_exited(shm_peer_t *p);

/* Frees the descriptor. After a failure or a cancel, no new chunk may be
 * claimed and a chunk the sender is copying must finish before the buffer
 * goes back to the caller: wait for it (bounded; a stuck sender leaks the
 * slot, a sender that died copies nothing more: its slot is left as it is,
 * quietly, the failure being reported already). */
static void shm_coop_close(ptl_tl_t *tl, int peer, uint64_t handle)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p = &s->peers[s->local_of[peer]];
    shm_coop_t *d = shm_coop_at(s->seg, s->local_of[peer], (unsigned)(handle & 0xff));
    uint32_t gen = (uint32_t)(handle >> 8);
    uint64_t v = atomic_exchange(&d->next, (uint64_t)gen << 32 | 0xffffffffu);
    uint64_t claimed = (v & 0xffffffffu) < d->nchunks ? (v & 0xffffffffu) : d->nchunks;
    uint64_t want = claimed * SHM_COOP_CHUNK < d->len ? claimed * SHM_COOP_CHUNK : d->len;
    uint64_t until = prt_now_ns() + 1000000000ull;
    int gone = 0;
    while (atomic_load(&d->done) < want && !atomic_load(&d->redo) && prt_now_ns() < until &&
           !(gone = shm_exited(p)))
        sched_yield();
    if (atomic_load(&d->done) < want && !atomic_load(&d->redo)) {
        prt_log(gone ? PRT_LOG_DEBUG : PRT_LOG_WARN, "rank %d %s its part of a copy: "
                "descriptor left unused", p->world, gone ? "exited during" : "never finished");
        return;
    }
    atomic_store_explicit(&d->gen, gen + 1, memory_order_release);
}

static int shm_exited(shm_peer_t *p)
{
    if (p->pidfd >= 0) {
        struct pollfd pfd = {p->pidfd, POLLIN, 0};
        return poll(&pfd, 1, 0) > 0;
    }
    if (kill(p->pid, 0) != 0 && errno == ESRCH)
        return 1;
    {   /* a zombie still answers kill(): read its state */
        char path[64], buf[256];
        int fd;
        ssize_t n;
        snprintf(path, sizeof path, "/proc/%d/stat", p->pid);
        fd = open(path, O_RDONLY);
        if (fd < 0)
            return 1;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            char *paren;
            buf[n] = '\0';
            paren = strrchr(buf, ')');
            return paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
        }
        return 0;
    }
}

static int shm_peer_alive(ptl_tl_t *tl, int peer)
{
    shm_t *s = shm_of(tl);
    shm_peer_t *p;
    if (!ptl_shm_reaches(tl, peer))
        return PLAIT_OK;
    p = &s->peers[s->local_of[peer]];
    if (!p->dead && shm_exited(p))
        p->dead = 1;
    return p->dead ? prt_err(PLAIT_ERR_PEER, "world rank %d (pid %d) on this host has exited", peer,
                             p->pid)
                   : PLAIT_OK;
}

static void shm_fini(ptl_tl_t *tl)
{
    shm_t *s = shm_of(tl);
    if (!s)
        return;
    for (int i = 0; s->linked && s->peers && i < s->nlocal; i++)   /* init failed */
        if (s->peers[i].name[0] && shm_exited(&s->peers[i]))
            shm_unlink(s->peers[i].name);
    ptl_shm_unlink(tl);
    for (int i = 0; s->peers && i < s->nlocal; i++) {
        if (s->peers[i].seg)
            munmap(s->peers[i].seg, s->peers[i].seglen);
        if (s->peers[i].pidfd >= 0)
            close(s->peers[i].pidfd);
    }
    if (s->mapped)
        munmap(s->seg, s->seglen);
    else
        free(s->seg);
    free(s->peers);
    free(s->local_of);
    free(s);
    tl->priv = NULL;
}

const ptl_ops_t ptl_shm_ops = {
    .send = shm_send,
    .max_frame = shm_max_frame,
    .get = shm_get,
    .progress = shm_progress,
    .peer_alive = shm_peer_alive,
    .coop_open = shm_coop_open,
    .coop_work = shm_coop_work,
    .coop_close = shm_coop_close,
    .fini = shm_fini,
};

/* ------------------------------------------------------------ components */

static int shm_usable(char *why, size_t len)
{
    char name[64];
    int fd;
    snprintf(name, sizeof name, "/plait-probe-%d", (int)getpid());
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
        snprintf(why, len, "shm_open failed: %s", strerror(errno));
        return 0;
    }
    close(fd);
    shm_unlink(name);
    snprintf(why, len, "POSIX shared memory; large messages by %s",
             access("/proc/sys/kernel/yama/ptrace_scope", F_OK) == 0
                 ? "process_vm_readv (single copy) when ptrace_scope permits, else ring copy"
                 : "process_vm_readv (single copy)");
    return 1;
}

static int self_usable(char *why, size_t len)
{
    snprintf(why, len, "messages to oneself, copied in process");
    return 1;
}

const ptl_component_t ptl_shm_component = {"shm", "shared-memory rings between ranks of one host",
                                           shm_usable};
const ptl_component_t ptl_self_component = {"self", "loopback inside one process", self_usable};
