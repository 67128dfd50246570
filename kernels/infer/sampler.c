/* sampler.c: the sampling chain (see sampler.h). */
#include "kernels/infer/sampler.h"

#include <math.h>
#include <stdlib.h>


void gk_fill(gk_list *l, const float *logits, int n)
{
    for (int i = 0; i < n; i++) /* a NaN as -inf: never drawn */
        l->c[i] = (gk_cand){i, logits[i] == logits[i] ? logits[i] : -INFINITY, 0.0f};
    l->n = n;
    l->sorted = 0;
}

void gk_temperature(gk_list *l, float t)
{
    float inv = 1.0f / t;
    for (int i = 0; i < l->n; i++) l->c[i].logit *= inv;
}

/* a ranks before b: larger logit, then lower id */
static int before(const gk_cand *a, const gk_cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cmp_cand(const void *pa, const void *pb)
{
    const gk_cand *a = pa, *b = pb;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* min-heap on rank (the root is the worst kept candidate) */
static void sift_down(gk_cand *h, int n, int i)
{
    for (;;) {
        int w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && before(&h[w], &h[l])) w = l;
        if (r < n && before(&h[w], &h[r])) w = r;
        if (w == i) return;
        gk_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

void gk_top_k(gk_list *l, int k)
{
    if (k <= 0 || k >= l->n) return;
    // the first k form a heap whose root is the worst of them; better ones replace it
    gk_cand *h = l->c;
    for (int i = k / 2 - 1; i >= 0; i--) sift_down(h, k, i);
    for (int i = k; i < l->n; i++)
        if (before(&l->c[i], &h[0])) {
            h[0] = l->c[i];
            sift_down(h, k, 0);
        }
    l->n = k;
    qsort(l->c, k, sizeof *l->c, cmp_cand);
    l->sorted = 1;
}

void gk_softmax(gk_list *l)
{
    float mx = -INFINITY;
    for (int i = 0; i < l->n; i++)
        if (l->c[i].logit > mx) mx = l->c[i].logit;
    double sum = 0;
    for (int i = 0; i < l->n; i++) {
        l->c[i].p = expf(l->c[i].logit - mx);
        sum += l->c[i].p;
    }
    for (int i = 0; i < l->n; i++) l->c[i].p = (float)(l->c[i].p / sum);
}

void gk_top_p(gk_list *l, float top_p)
{
    if (top_p >= 1.0f || l->n <= 1) return;
    if (!l->sorted) {
        qsort(l->c, l->n, sizeof *l->c, cmp_cand);
        l->sorted = 1;
    }
    double cum = 0;
    int keep = l->n;
    for (int i = 0; i < l->n; i++) {
        cum += l->c[i].p;
        if (cum >= top_p) {
            keep = i + 1;
            break;
        }
    }
    l->n = keep;
    for (int i = 0; i < keep; i++) l->c[i].p = (float)(l->c[i].p / cum);
}

int gk_pick(const gk_list *l, float u)
{
    double total = 0;
    for (int i = 0; i < l->n; i++) total += l->c[i].p;
    double target = (double)u * total, cum = 0;
    for (int i = 0; i < l->n; i++) {
        cum += l->c[i].p;
        if (target < cum) return l->c[i].id;
    }
    return l->c[l->n - 1].id; /* u * total rounded up to total */
}

/* Two passes that vectorize, the largest value then its first index, as a scan from logits[0]
 * keeping the first strict maximum would pick (that scan, one dependent step per logit, took 2%
 * of a token on GPT-2's 50257): a NaN is never larger (a NaN logits[0] is the answer), and -0 and
 * +0 tie. */
int gk_greedy(const float *logits, int n)
{
    float m = logits[0], lane[8];
    if (m != m) return 0;
    for (int j = 0; j < 8; j++) lane[j] = m;
    int i = 1;
    for (; i + 8 <= n; i += 8) /* eight running maxima, one vector */
        for (int j = 0; j < 8; j++) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
    for (; i < n; i++) m = logits[i] > m ? logits[i] : m;
    for (int j = 0; j < 8; j++) m = lane[j] > m ? lane[j] : m;
    for (i = 0; i < n; i++)
        if (logits[i] == m) return i;
    return 0;
}

struct gk_sampler {
    gk_params p;
    int n_vocab;
    gk_list list;
};

int gk_sampler_create(gk_sampler **out, const gk_params *p, int n_vocab, gk_err *e)
{
    if (!(p->temperature >= 0) || !(p->top_p > 0 && p->top_p <= 1) || p->top_k < 0 || n_vocab < 1)
        return gk_errf(e, GK_EUSAGE, "sampler: need temperature >= 0, 0 < top-p <= 1, top-k >= 0");
    gk_sampler *s = calloc(1, sizeof *s);
    gk_cand *c = malloc(sizeof *c * (size_t)n_vocab);
    if (!s || !c) {
        free(s);
        free(c);
        return gk_errf(e, GK_ENOMEM, "sampler: out of memory");
    }
    s->p = *p;
    s->n_vocab = n_vocab;
    s->list.c = c;
    *out = s;
    return 0;
}

void gk_sampler_free(gk_sampler *s)
{
    if (!s) return;
    free(s->list.c);
    free(s);
}

int gk_sample(gk_sampler *s, const float *logits, uint32_t sample, uint64_t step)
{
    if (s->p.temperature == 0.0f) return gk_greedy(logits, s->n_vocab);
    gk_list *l = &s->list;
    gk_fill(l, logits, s->n_vocab);
    gk_temperature(l, s->p.temperature);
    gk_top_k(l, s->p.top_k);
    gk_softmax(l);
    gk_top_p(l, s->p.top_p);
    float u = gk_sample_uniform(s->p.seed, sample, step);
    return gk_pick(l, u);
}
