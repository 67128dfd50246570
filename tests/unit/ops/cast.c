/* ops/cast.c: the cast between fp32 and bf16: exact, round to nearest even.
 * Part of test_ops (included by test_ops.c: one binary; the driver and tolerance model are
 * ops_harness.h's). */

static void test_cast(void)
{
    /* ties (even below, even above), just above a tie, signs, a subnormal, the largest float
     * (rounds to inf), inf, NaN, then random values */
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x3f808001u, 0xbf808000u, 0x00000001u,
                                0x7f7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x00000000u};
    const size_t ns = sizeof special / sizeof *special, n = 1000 + ns;
    float *x = malloc(sizeof(float) * n), *back = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * n);
    memcpy(x, special, sizeof special);
    for (size_t i = ns; i < n; i++) x[i] = (gk_rng_uniform(seed, i) * 2.0f - 1.0f) * 1e3f;
    seed++;
    float *f = dev->ops->alloc(dev, 4 * n), *g = dev->ops->alloc(dev, 4 * n);
    uint16_t *b = dev->ops->alloc(dev, 2 * n);
    CHECK(f && g && b);
    if (f && g && b) {
        dev->ops->to_device(dev, f, x, 4 * n);
        dev->ops->cast(dev, b, GK_BF16, f, GK_F32, n);
        dev->ops->cast(dev, g, GK_F32, b, GK_BF16, n);
        dev->ops->to_host(dev, h, b, 2 * n);
        dev->ops->to_host(dev, back, g, 4 * n);
    }
    gk_err e = {0};
    CHECKF(gk_backend_sync(dev, &e) == 0, "cast: %s", e.msg);
    size_t bad = 0, bad_back = 0;
    for (size_t i = 0; i < n; i++) {
        uint16_t want = gk_f2bf16(x[i]);
        int nan = isnan(x[i]) && (h[i] & 0x7fffu) > 0x7f80u; /* any NaN stays a NaN */
        bad += h[i] != want && !nan;
        float w = gk_bf16f(h[i]);
        bad_back += memcmp(&w, &back[i], 4) != 0;
        if (i < ns && h[i] != want && !nan)
            fprintf(stderr, "cast %08x -> %04x, want %04x\n", special[i], h[i], want);
    }
    CHECKF(bad == 0, "cast f32 -> bf16: %zu of %zu differ", bad, n);
    CHECKF(bad_back == 0, "cast bf16 -> f32: %zu of %zu not exact", bad_back, n);
    dev->ops->free(dev, f), dev->ops->free(dev, g), dev->ops->free(dev, b);
    free(x), free(back), free(h);
}
