/* test_mem.c: the up-front memory checks: the host's available memory (common/mem.h) from fake
 * /proc and cgroup trees (MemAvailable, cgroup v2 and v1 limits of the process's cgroup and its
 * ancestors, RLIMIT_AS), the model's memory estimate (gk_gpt2_mem_estimate) against values
 * computed by hand from the layout in kernels/model/gpt2_params.c, and gk_gpt2_mem_check's message
 * on a backend whose mem_info reports a given amount. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/mem.h"
#include "kernels/backend.h"
#include "kernels/comm/comm.h"
#include "kernels/ref/ref.h"
#include "kernels/model/gpt2.h"
#include "kernels/model/gpt2_load.h"
#include "fake_gpu.h"
#include "test.h"

static char root[64];

/* Writes text to root/rel, creating its directories. */
static void put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void fresh_root(void)
{
    char cmd[128];
    if (root[0]) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", root);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
    }
    snprintf(root, sizeof root, "/tmp/gk_test_mem_XXXXXX");
    if (!mkdtemp(root)) root[0] = '\0';
    put("proc/meminfo",
        "MemTotal:       16000000 kB\nMemFree:  100 kB\nMemAvailable:   8000000 kB\n");
    put("proc/self/statm", "25000 1000 500 10 0 2000 0\n"); /* 25000 pages of address space */
}

static void read_at(gk_host_mem *m, size_t rlimit_as)
{
    char proc[128], cg[128];
    snprintf(proc, sizeof proc, "%s/proc", root);
    snprintf(cg, sizeof cg, "%s/cg", root);
    gk_host_mem_read_at(m, proc, cg, rlimit_as);
}

/* Only /proc/meminfo: MemAvailable, no cgroup, no rlimit. */
static void test_meminfo_only(void)
{
    fresh_root();
    gk_host_mem m;
    read_at(&m, GK_MEM_UNKNOWN);
    CHECK(m.meminfo == 8000000ull * 1024 && m.total == 16000000ull * 1024);
    CHECK(m.cgroup == GK_MEM_UNKNOWN && m.rlimit == GK_MEM_UNKNOWN);
    CHECK(m.avail == m.meminfo && strcmp(m.bound, "MemAvailable") == 0);
}

/* cgroup v2: the process's cgroup (0::/a/b) and its ancestors; the tightest room wins, here
 * a's (3 GB - 1 GB), not b's ("max") nor the root's. */
static void test_cgroup_v2(void)
{
    fresh_root();
    put("proc/self/cgroup", "0::/a/b\n");
    put("cg/a/b/memory.max", "max\n");
    put("cg/a/b/memory.current", "500000000\n");
    put("cg/a/memory.max", "3000000000\n");
    put("cg/a/memory.current", "1000000000\n");
    put("cg/memory.max", "6000000000\n");
    put("cg/memory.current", "1000000000\n");
    gk_host_mem m;
    read_at(&m, GK_MEM_UNKNOWN);
    CHECKF(m.cgroup == 2000000000u, "%zu", m.cgroup);
    CHECK(m.avail == 2000000000u && strcmp(m.bound, "cgroup memory limit") == 0);
    /* usage above the limit: no room at all */
    put("cg/a/b/memory.max", "400000000\n");
    read_at(&m, GK_MEM_UNKNOWN);
    CHECKF(m.cgroup == 0 && m.avail == 0, "%zu", m.cgroup);
}

/* cgroup v1 (a hybrid machine: "0::/" and a memory controller line): the memory hierarchy's
 * limit_in_bytes - usage_in_bytes; v1's "no limit" (a page multiple near 2^63) is no limit. */
static void test_cgroup_v1(void)
{
    fresh_root();
    put("proc/self/cgroup", "5:memory:/job\n4:cpu,cpuacct:/job\n0::/\n");
    put("cg/memory/job/memory.limit_in_bytes", "4000000000\n");
    put("cg/memory/job/memory.usage_in_bytes", "1500000000\n");
    put("cg/memory/memory.limit_in_bytes", "9223372036854771712\n");
    put("cg/memory/memory.usage_in_bytes", "7000000000\n");
    gk_host_mem m;
    read_at(&m, GK_MEM_UNKNOWN);
    CHECKF(m.cgroup == 2500000000u, "%zu", m.cgroup);
    CHECK(m.avail == 2500000000u);
    /* the path of another namespace, absent from this mount: the mount's root counts */
    put("proc/self/cgroup", "5:memory:/elsewhere\n0::/\n");
    put("cg/memory/memory.limit_in_bytes", "5000000000\n");
    read_at(&m, GK_MEM_UNKNOWN);
    CHECKF(m.cgroup == 0, "%zu: usage 7 GB is above the root's 5 GB", m.cgroup);
}

/* RLIMIT_AS: the limit minus the address space in use (statm: 25000 pages). */
static void test_rlimit(void)
{
    fresh_root();
    size_t page = (size_t)sysconf(_SC_PAGESIZE), lim = 1000000000;
    gk_host_mem m;
    read_at(&m, lim);
    CHECKF(m.rlimit == lim - 25000 * page, "%zu", m.rlimit);
    CHECK(m.avail == m.rlimit && strcmp(m.bound, "ulimit -v") == 0);
    read_at(&m, 1000); /* below what is in use already */
    CHECK(m.rlimit == 0 && m.avail == 0);
}

/* This machine's own values are read at all. */
static void test_this_machine(void)
{
    gk_host_mem m;
    gk_host_mem_read(&m);
    CHECK(m.meminfo != GK_MEM_UNKNOWN && m.meminfo > 0 && m.total >= m.meminfo);
    CHECK(m.avail <= m.meminfo);
}

static void test_mem_text(void)
{
    char b[32];
    CHECK(strcmp(gk_mem_text(800, b, sizeof b), "800 bytes") == 0);
    CHECK(strcmp(gk_mem_text(109200, b, sizeof b), "109.2 kB") == 0);
    CHECK(strcmp(gk_mem_text(31200000000u, b, sizeof b), "31.2 GB") == 0);
    CHECK(strcmp(gk_mem_text(999990000, b, sizeof b), "1.0 GB") == 0);
}

/* One layer, n_embd 16, one head, vocab 10 (padded to 64), block 8, batch 2 x 8, fp32, by hand
 * from gpt2_params.c (every tensor a multiple of 16 floats here; every activation rounded up to
 * 64 bytes):
 *   parameters: wte 64x16 = 1024, wpe 8x16 = 128, ln_f 2x16 = 32, per layer ln 4x16 = 64,
 *     c_attn 16x48 + 48 = 816, attn c_proj 256 + 16, c_fc 16x64 + 64 = 1088, mlp c_proj 1024 + 16
 *     = 3280 -> 4464 floats = 17856 bytes; gradients the same, optimizer twice that.
 *   activations (BT = 16 rows): layer: res, ln1, atty, res2, ln2 5 x 1024 bytes, qkv 3072, fch and
 *     fch_gelu 2 x 4096, 4 LayerNorm stats + lse 5 x 64 -> 16704; res_out, lnf, tmp 3 x 1024,
 *     lnf stats 2 x 64, logits 16 x 64 x 4 = 4096, losses and lse 2 x 64 -> 7424; backward: dres,
 *     dtmp, ddrop 3 x 1024, dqkv 3072, dfch 4096 -> 10240; token ids 2 x 64 and the decoding
 *     position 64 -> 34560 bytes, plus the 64 MiB scratch allowance and the host's (BT) targets
 *     and losses (128 bytes).
 * bf16 inference: masters only for wpe 128, biases and LayerNorms 240 floats -> 1472 bytes; bf16
 * copies of wte 1024, c_attn 768, attn c_proj 256, c_fc 1024, mlp c_proj 1024 -> 8192 bytes;
 * activations without the backward's 10240. */
static void test_estimate_by_hand(void)
{
    gk_gpt2_config c = {1, 1, 16, 8, 10, 1, 0.0f};
    gk_gpt2_mem m;
    gk_err e = {0};
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 8, 0, &m, &e), &e);
    CHECKF(m.params == 17856 && m.grads == 17856 && m.optimizer == 35712, "%zu %zu %zu", m.params,
           m.grads, m.optimizer);
    CHECKF(m.activations == 34560 + GK_GPT2_MEM_SCRATCH + 128, "%zu", m.activations);
    CHECK(m.total == 4 * 17856 + m.activations);
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 8, GK_GPT2_BF16, &m, &e), &e);
    CHECKF(m.params == 1472 + 8192 && m.grads == 0 && m.optimizer == 0, "%zu", m.params);
    CHECKF(m.activations == 34560 - 10240 + GK_GPT2_MEM_SCRATCH + 128, "%zu", m.activations);
    /* recompute keeps one fch_gelu for all layers: with one layer, nothing saved; with 3, two
     * layers' 4096 bytes (each other layer adds 16704) */
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 8, GK_GPT2_RECOMPUTE, &m, &e), &e);
    CHECKF(m.activations == 34560 + GK_GPT2_MEM_SCRATCH + 128, "%zu", m.activations);
    c.n_layer = 3;
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 8, GK_GPT2_RECOMPUTE, &m, &e), &e);
    CHECKF(m.activations == 34560 + 2 * (16704 - 4096) + GK_GPT2_MEM_SCRATCH + 128, "%zu",
           m.activations);
    /* and the LayerNorm outputs: each other layer keeps neither ln1 nor ln2 (2 x 1024 bytes) */
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 8, GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN, &m,
                                  &e),
             &e);
    CHECKF(m.activations == 34560 + 2 * (16704 - 4096 - 2048) + GK_GPT2_MEM_SCRATCH + 128, "%zu",
           m.activations);
    c.n_layer = 1;
    /* a bad config or batch is refused */
    CHECK(gk_gpt2_mem_estimate(&c, GK_F32, 2, 9, 0, &m, &e) == GK_EUSAGE);
}

/* The estimate is what gk_gpt2_create_ex allocates: the same numbers as the model's blocks for
 * a real config (checked through a counting backend: every alloc's bytes summed). */
static size_t allocated;
static void *(*ref_alloc)(gk_backend *, size_t);
static void *counting_alloc(gk_backend *be, size_t n)
{
    allocated += n;
    return ref_alloc(be, n);
}

/* A reference backend whose allocations are counted in `allocated` (NULL when it cannot open). */
static gk_backend *counting_backend(void)
{
    gk_backend *be = NULL;
    gk_err e = {0};
    CHECK_OK(gk_ref_create(&be, &e), &e);
    if (!be) return NULL;
    static gk_ops ops;
    ops = gk_ref_ops;
    ref_alloc = ops.alloc;
    ops.alloc = counting_alloc;
    be->ops = &ops;
    return be;
}

static void test_estimate_matches_create(void)
{
    gk_backend *be = counting_backend();
    gk_err e = {0};
    if (!be) return;
    gk_gpt2_config c = {3, 4, 64, 32, 301, 1, 0.1f};
    const int flags[] = {0, GK_GPT2_INFERENCE, GK_GPT2_BF16, GK_GPT2_RECOMPUTE,
                         GK_GPT2_INFERENCE | GK_GPT2_RECOMPUTE,
                         GK_GPT2_RECOMPUTE | GK_GPT2_RECOMPUTE_LN};
    for (int i = 0; i < 6; i++) {
        gk_gpt2 *m = NULL;
        gk_gpt2_mem est;
        allocated = 0;
        CHECK_OK(gk_gpt2_create_ex(&m, &c, be, 3, 20, flags[i], &e), &e);
        CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 3, 20, flags[i], &est, &e), &e);
        size_t host = GK_GPT2_MEM_SCRATCH + 3 * 20 * 2 * sizeof(int);
        CHECKF(est.total - host == allocated, "flags %d: estimate %zu, allocated %zu", flags[i],
               est.total - host, allocated);
        gk_gpt2_free(m);
    }
    gk_backend_free(be);
}

/* ZeRO-1 with GK_GPT2_DEFER_MOMENTS, rank 1 of 2 (the other rank played by a comm whose
 * all_gather returns -x - 1 for its part): create allocates no moments, set_comm this rank's
 * shard alone (gk_gpt2_mem_shard's number), and a checkpoint's gather a device buffer of at most
 * 2 x 2^20 floats while every rank's moments land in host memory in their places. The model has
 * over 2^21 floats, so that the gather takes several pieces. */
static int fake_all_gather(gk_comm *c, const float *in, float *out, size_t count, gk_err *e)
{
    (void)c, (void)e;
    for (size_t i = 0; i < count; i++) out[count + i] = in[i], out[i] = -in[i] - 1;
    return 0;
}
static int fake_allreduce_host(gk_comm *c, double *vals, int n, gk_err *e)
{
    (void)c, (void)vals, (void)n, (void)e; /* the other rank adds 0 */
    return 0;
}
static float moment_at(size_t x) { return (float)(x % 1000) * 0.25f; }

static void test_zero1_memory(void)
{
    gk_backend *be = counting_backend();
    gk_err e = {0};
    if (!be) return;
    static const gk_comm_ops fake_ops = {.name = "fake", .allreduce_host = fake_allreduce_host,
                                         .all_gather = fake_all_gather};
    gk_comm comm = {&fake_ops, 1, 2, NULL, GK_F32};
    gk_gpt2_config c = {2, 4, 256, 8, 4096, 1, 0.0f};
    gk_gpt2 *m = NULL;
    gk_gpt2_mem est;
    allocated = 0;
    CHECK_OK(gk_gpt2_create_ex(&m, &c, be, 1, 8, GK_GPT2_DEFER_MOMENTS, &e), &e);
    CHECK_OK(gk_gpt2_mem_estimate(&c, GK_F32, 1, 8, GK_GPT2_DEFER_MOMENTS, &est, &e), &e);
    size_t host = GK_GPT2_MEM_SCRATCH + 8 * 2 * sizeof(int), n = est.grads / sizeof(float);
    CHECKF(est.total - host - est.optimizer == allocated, "no moments: %zu, allocated %zu",
           est.total - host - est.optimizer, allocated);
    /* before set_comm the moments are nowhere: using them is refused, naming the order */
    gk_adamw h = {.beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f};
    CHECK(gk_gpt2_update(m, &h, 1e-3f, NULL, &e) == GK_EUSAGE &&
          strstr(e.msg, "gk_gpt2_set_comm first"));
    CHECK(gk_gpt2_tensor_get(m, 0, GK_TENSOR_ADAM_M, &(float){0}, &e) == GK_EUSAGE &&
          strstr(e.msg, "not allocated yet"));
    allocated = 0;
    CHECK_OK(gk_gpt2_set_comm(m, &comm, 1, &e), &e);
    gk_gpt2_mem_shard(&est, 2);
    size_t cnt = n / 2 / 16 * 16;
    CHECKF(allocated == est.optimizer && est.optimizer == 2 * (n - cnt) * sizeof(float),
           "shard: allocated %zu, estimate %zu, by hand %zu", allocated, est.optimizer,
           2 * (n - cnt) * sizeof(float));
    CHECK(n > (2u << 20) && cnt > (1u << 20)); /* several pieces */
    /* this rank's moments (tensor_set keeps its part: floats [cnt, 2 cnt) and the tail) */
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        float *h = malloc(p->numel * sizeof *h);
        for (size_t j = 0; h && j < p->numel; j++) h[j] = moment_at(p->offset + j);
        CHECK_OK(gk_gpt2_tensor_set(m, i, GK_TENSOR_ADAM_V, h, &e), &e);
        free(h);
    }
    CHECK(gk_gpt2_tensor_get(m, 0, GK_TENSOR_ADAM_V, &(float){0}, &e) == GK_EUSAGE);
    allocated = 0;
    CHECK_OK(gk_gpt2_moments_gather(m, 1, &e), &e);
    CHECKF(allocated == 2 * ((size_t)1 << 20) * sizeof(float), "gather's device buffer: %zu",
           allocated);
    size_t wrong = 0;
    for (int i = 0; i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        float *h = malloc(p->numel * sizeof *h);
        CHECK_OK(gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_V, h, &e), &e);
        for (size_t j = 0; h && j < p->numel; j++) {
            size_t x = p->offset + j; /* rank 0's part: what the fake made of ours */
            float want = x < cnt ? -moment_at(x + cnt) - 1 : moment_at(x);
            wrong += h[j] != want;
        }
        free(h);
    }
    CHECKF(wrong == 0, "%zu gathered moments out of place", wrong);
    /* packed (as a checkpoint's snapshot holds them): the same values, entry after entry */
    size_t all = gk_gpt2_num_scalars(m), at = 0;
    float *pm = malloc(all * sizeof *pm), *pv = malloc(all * sizeof *pv);
    CHECK_OK(gk_gpt2_shards_gather_packed(m, NULL, pm, pv, &e), &e);
    for (int i = 0; pv && i < gk_gpt2_n_params(m); i++) {
        const gk_param *p = gk_gpt2_param(m, i);
        float *h = malloc(p->numel * sizeof *h);
        CHECK_OK(gk_gpt2_tensor_get(m, i, GK_TENSOR_ADAM_V, h, &e), &e);
        wrong += h && memcmp(h, pv + at, p->numel * sizeof *h) != 0;
        at += p->numel;
        free(h);
    }
    CHECKF(wrong == 0 && at == all, "%zu packed tensors differ", wrong);
    free(pm), free(pv);
    gk_gpt2_moments_release(m);
    gk_gpt2_free(m);
    gk_backend_free(be);
}

/* gk_gpt2_mem_check on a device that reports 1 GB free: the message names every part, the total,
 * what is available and the hint; the model alone too big gets another hint. */
static void test_check_message(void)
{
    gk_err e = {0};
    gk_backend *be = fake_gpu_open(&e);
    CHECKF(be != NULL, "%s", e.msg);
    if (!be) return;
    fake_gpu_free = 1000000000;
    gk_gpt2_mem need = {.params = 200000000, .grads = 200000000, .optimizer = 400000000,
                        .activations = 800000000, .total = 1600000000, .master = 200000000};
    CHECK(gk_gpt2_mem_check(be, &need, 0, NULL, "lower batch_size or block_size", &e) == GK_ENOMEM);
    CHECKF(strcmp(e.msg, "model + batch need 1.6 GB (parameters 200.0 MB, gradients 200.0 MB, "
                  "optimizer 400.0 MB, activations 800.0 MB) but 1.0 GB are available on cuda "
                  "(Fake GPU, bf16): lower batch_size or block_size") == 0, "%s", e.msg);
    fake_gpu_free = 700000000;
    CHECK(gk_gpt2_mem_check(be, &need, 0, NULL, "lower batch_size or block_size", &e) == GK_ENOMEM);
    CHECKF(strstr(e.msg, ": even without its batch the model needs 800.0 MB") != NULL, "%s", e.msg);
    fake_gpu_free = 1600000000;
    CHECK_OK(gk_gpt2_mem_check(be, &need, 0, NULL, "x", &e), &e);
    /* host memory: the host-side extra adds to the device's need */
    be->props.host_memory = 1;
    /* (the host's own limits may lower it further: then they are named) */
    fake_gpu_free = 1700000000;
    gk_host_mem h;
    gk_host_mem_read(&h);
    int rc = gk_gpt2_mem_check(be, &need, 200000000, "checkpoint copy", "x", &e);
    CHECK(rc == GK_ENOMEM);
    if (h.avail > fake_gpu_free)
        CHECKF(strstr(e.msg, "need 1.8 GB (") &&
                   strstr(e.msg, ", checkpoint copy 200.0 MB) but 1.7 GB are "
                                 "available on cuda (Fake GPU, bf16): x"),
               "%s", e.msg);
    else
        CHECKF(strstr(e.msg, h.bound) != NULL, "%s", e.msg);
    gk_backend_free(be);
}

int main(void)
{
    RUN(test_meminfo_only);
    RUN(test_cgroup_v2);
    RUN(test_cgroup_v1);
    RUN(test_rlimit);
    RUN(test_this_machine);
    RUN(test_mem_text);
    RUN(test_estimate_by_hand);
    RUN(test_estimate_matches_create);
    RUN(test_zero1_memory);
    RUN(test_check_message);
    if (root[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", root);
        if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", root);
    }
    return TEST_END();
}
