/* ops/attention.c: the op tests of attention_fwd and attention_bwd (test_attention: on every
 * device and on each CUDA attention path, cuda-emu:flash and the like, as ops_harness.h says) and
 * of attention_fwd_at, the KV-cache step (test_attention_at).
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). Where the paths must differ or agree (the cases once test_cuda_attn's): in
 * bf16, flash and fa2 do not give plain's bits where their kernels apply (rounding P to bf16
 * changes some: the path did run); fa2's gradients are near flash's (both round P and dS to bf16
 * before the same products in the same order); auto is fa2, bit for bit (so that the device on
 * auto stands for fa2: the default device list has no :fa2), its output not plain's, its dqkv
 * not flash's; each path gives the same bits twice, cudnn on every case (its deterministic
 * backward), and cudnn must run GPT-2's shape itself (no note) and refuse dropout. */

static void run_attn_fwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    be->ops->attention_fwd(be, p[0], p[1], p[2], c->ip[0], c->ip[1], c->ip[2], c->ip[3], c->fp[0],
                           NKEY);
}
/* the forward first: out and lse are this backend's */
static void run_attn_bwd(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    int B = c->ip[0], T = c->ip[1], C = c->ip[2], NH = c->ip[3];
    be->ops->attention_fwd(be, p[3], p[4], p[2], B, T, C, NH, c->fp[0], NKEY);
    be->ops->attention_bwd(be, p[0], p[1], p[2], p[3], p[4], B, T, C, NH, c->fp[0], NKEY);
}
static void run_attn_at(gk_backend *be, void *const p[], const gk_elt t[], const tcase *c)
{
    (void)t;
    const int *i = c->ip;
    const void *fresh = i[6] ? p[3] : NULL; /* the new rows, or none: in the cache already */
    be->ops->attention_fwd_at(be, p[0], p[1], fresh, i[0], i[1], p[2], i[5], i[2], i[3]);
}

/* same bits twice; auto against the paths; cudnn's alone; one for the tiled kernels alone */
enum { A_DET = 1, A_PATHS = 2, A_BIG = 4, A_TILES = 8 };
typedef struct {
    int B, T, NH, hs;
    float p;
    int flags;
} attn_shape;

/* T around the kernels' 64-row tiles, head sizes 16 to 128 (24: no flash kernel), odd head
 * counts, dropout on and off. A_TILES: a second or third tile boundary (T 127 to 200) for the
 * tiled kernels (flash, fa2, cudnn); CUDA's row kernels (attention = plain, and fp32) have no
 * tiles and skip them (T^2 warp reductions, a third of test_ops' time under the emulator), their
 * loops' passes past 128 keys (ROW_THREADS) checked by the two shapes of T 129 and 130 left. */
static const attn_shape shapes[] = {
    {1, 1, 1, 16, 0, 0},               {2, 7, 3, 24, 0, 0},          {1, 64, 4, 16, 0, 0},
    {1, 65, 3, 64, 0, 0},              {2, 65, 1, 16, .1f, 0},       {1, 7, 4, 64, .1f, 0},
    {2, 13, 3, 16, 0, 0},              {2, 13, 3, 16, .1f, 0},       {2, 7, 3, 16, 0, 0},
    {1, 64, 2, 16, 0, 0},              {2, 65, 3, 16, 0, 0},         {1, 130, 2, 32, 0, 0},
    {1, 65, 3, 24, 0, 0},              {1, 66, 2, 64, 0, 0},         {2, 65, 3, 16, .25f, 0},
    {1, 7, 1, 16, .5f, 0},             {3, 127, 2, 64, 0, A_TILES},  {2, 129, 3, 64, 0, A_TILES},
    {1, 200, 4, 64, 0, A_PATHS | A_TILES}, {2, 200, 2, 32, 0, A_TILES}, {2, 129, 1, 128, .1f, 0},
    {2, 1, 2, 64, .1f, 0},             {2, 63, 2, 64, 0, 0},         {3, 65, 3, 32, .1f, 0},
    {2, 130, 2, 64, .2f, A_TILES},     {1, 130, 2, 128, 0, A_TILES}, {2, 65, 4, 16, 0, 0},
    {1, 63, 2, 128, .3f, 0},           {2, 65, 2, 32, .1f, A_DET},   {2, 65, 2, 32, 0, 0},
    {2, 1024, 12, 64, 0, A_BIG},
};

/* Whether the device runs attention in CUDA's row kernels (attn_rows_fwd and the like) */
static int cuda_rows_path(void)
{
    int cuda = dev->props.kind == GK_KIND_CUDA || dev->props.kind == GK_KIND_CUDA_EMU;
    return cuda && (dev_path == GK_ATTN_PLAIN || !bf16_run());
}

/* The sibling comparisons of a bf16 case on a CUDA device (bwd: the backward's case) */
static void attn_paths(tcase *c, const attn_shape *s, int bwd)
{
    /* where the kernel applies, P in bf16 changes some bits: the path ran, not plain's; which
     * path runs depends on hs and alignment, not T, so not again on the A_TILES shapes */
    int hs = s->hs, ran = s->T >= 7 && !(s->flags & A_TILES);
    int fa2 = dev_path == GK_ATTN_FA2 || dev_path == GK_ATTN_AUTO; /* auto: fa2's bits (below) */
    if (!bf16_run() || (dev->props.kind != GK_KIND_CUDA && dev->props.kind != GK_KIND_CUDA_EMU))
        return;
    if (dev_path == GK_ATTN_FLASH && !bwd && ran && (hs == 16 || hs == 32 || hs == 64))
        vs(c, GK_ATTN_PLAIN, 0, VS_DIFF);
    if (fa2 && !bwd && ran && hs % 16 == 0) vs(c, GK_ATTN_PLAIN, 0, VS_DIFF);
    if (fa2 && bwd) vs(c, GK_ATTN_FLASH, 0, VS_NEAR);
    /* fa2's gradients differ from flash's */
    if (dev_path == GK_ATTN_AUTO && (s->flags & A_PATHS)) {
        vs(c, GK_ATTN_FA2, 0, VS_SAME); /* (their forwards differ in a few inputs in many only) */
        if (bwd) vs(c, GK_ATTN_FLASH, 0, VS_DIFF);
        else vs(c, GK_ATTN_FA2, 1, VS_SAME);
    }
}

/* attention_fwd and attention_bwd of shape s */
static void attn_cases(const attn_shape *s)
{
    int B = s->B, T = s->T, NH = s->NH, hs = s->hs, C = NH * hs, b16 = bf16_run();
    int det = dev_path == GK_ATTN_CUDNN || (s->flags & A_DET);
    size_t n = (size_t)B * T * C;
    /* bf16: scores from bf16 q, k (exact products: lse is fp32's); probabilities rounded for the
     * second product; output */
    tcase *c = new_case(run_attn_fwd, hs + T + 8, "attention_fwd B%d T%d NH%d hs%d p %g", B, T, NH,
                        hs, s->p);
    c->b[add(c, B_ACT, R_OUT, n, 1, 0)].stages = 2 * b16;
    add(c, B_F32, R_OUT, (size_t)B * NH * T, 1, 0);
    add(c, B_ACT, R_IN, 3 * n, 2, 0);
    c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = NH, c->fp[0] = s->p, c->det = det;
    attn_paths(c, s, 0);
    check(c);
    /* bf16: the forward's output (in D = rowsum(dO O)), P, dS and dqkv rounded */
    c = new_case(run_attn_bwd, hs + 2 * T + 8, "attention_bwd B%d T%d NH%d hs%d p %g", B, T, NH, hs,
                 s->p);
    c->b[add(c, B_ACT, R_OUT, 3 * n, 1, 0)].stages = 4 * b16;
    add(c, B_ACT, R_IN, n, 1, 0);
    add(c, B_ACT, R_IN, 3 * n, 2, 0);
    add(c, B_ACT, R_TMP, n, 0, 0);
    add(c, B_F32, R_TMP, (size_t)B * NH * T, 0, 0);
    c->ip[0] = B, c->ip[1] = T, c->ip[2] = C, c->ip[3] = NH, c->fp[0] = s->p, c->det = det;
    attn_paths(c, s, 1);
    check(c);
}

/* cudnn refuses dropout: a usage error naming it, nothing run */
static void cudnn_dropout(void)
{
    int B = 1, T = 8, C = 64, NH = 1;
    void *qkv = dev->ops->alloc(dev, 4 * sizeof(uint16_t) * T * C);
    float *lse = dev->ops->alloc(dev, sizeof(float) * T);
    gk_err e = {0};
    dev->ops->attention_fwd(dev, (uint16_t *)qkv + 3 * T * C, lse, qkv, B, T, C, NH, 0.1f, NKEY);
    CHECKF(gk_backend_sync(dev, &e) == GK_EUSAGE && strstr(e.msg, "attention = cudnn: dropout 0.1"),
           "cudnn with dropout: %s", e.msg);
    dev->ops->free(dev, qkv), dev->ops->free(dev, lse);
    reopen_dev();
}

static void test_attention(void)
{
    int cudnn = dev_path == GK_ATTN_CUDNN;
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
        const attn_shape *s = &shapes[k];
        if ((!cudnn && (s->flags & A_BIG)) || (cudnn && s->p > 0)) continue; /* cudnn: no dropout */
        if ((s->flags & A_TILES) && cuda_rows_path()) continue;
        dev->note[0] = 0;
        attn_cases(s);
        if (!cudnn) continue;
        /* T = 1 */
        if (dev->note[0]) fprintf(stderr, "note: %s: T %d: %s\n", dev_name, s->T, dev->note);
        CHECKF(!(s->flags & A_BIG) || !dev->note[0], "cudnn did not run GPT-2's shape: %s",
               dev->note);
    }
    if (cudnn) cudnn_dropout();
}

/* KV cache: B, Tc, NH, hs, t0, n, new rows passed apart (stored into the cache by the op, which
 * is then compared too: exactly the reference's). Caches of up to 64 rows take the row kernel,
 * longer ones the split over chunks of keys. */
static void test_attention_at(void)
{
    static const int at[][7] = {
        {2, 9, 3, 16, 0, 9, 0},    {1, 65, 4, 64, 64, 1, 0},   {2, 20, 1, 24, 7, 5, 0},
        {2, 20, 1, 24, 7, 5, 1},   {1, 65, 4, 64, 64, 1, 1},   {3, 130, 2, 32, 100, 1, 1},
        {2, 70, 3, 16, 0, 1, 0},   {2, 70, 3, 16, 0, 70, 0},   {2, 70, 3, 16, 69, 1, 0},
        {2, 70, 3, 16, 33, 5, 0},  {2, 70, 3, 16, 64, 6, 0},   {2, 200, 3, 16, 0, 1, 1},
        {2, 200, 3, 16, 70, 1, 1}, {2, 200, 3, 16, 199, 1, 1}, {2, 200, 3, 16, 130, 3, 1},
    };
    int b16 = bf16_run();
    for (size_t k = 0; k < sizeof at / sizeof *at; k++) {
        const int *a = at[k];
        int C = a[2] * a[3];
        tcase *c = new_case(run_attn_at, a[3] + a[1] + 8,
                            "attention_fwd_at B%d Tc%d NH%d hs%d t0 %d n %d%s", a[0], a[1], a[2],
                            a[3], a[4], a[5], a[6] ? " new rows apart" : "");
        c->b[add(c, B_ACT, R_OUT, (size_t)a[0] * a[5] * C, 1, 0)].stages = 2 * b16;
        c->b[add(c, B_ACT, a[6] ? R_OUT : R_IN, (size_t)a[0] * a[1] * 3 * C, 2, 0)].exact = 1;
        c->ints[add(c, B_INT, R_IN, 1, 0, 0)] = rand_ints(1, a[4], a[4] + 1);
        if (a[6]) add(c, B_ACT, R_IN, (size_t)a[0] * a[5] * 3 * C, 2, 0);
        c->ip[0] = a[0], c->ip[1] = a[1], c->ip[2] = C, c->ip[3] = a[2], c->ip[4] = a[4],
        c->ip[5] = a[5];
        c->ip[6] = a[6];
        check(c);
    }
}
