/* store_serve.c: the rendezvous store server's requests (store_wire.h): its keys (a hash table
 * within the job's limits), HELLO (the protocol's version, the job's token compared in constant
 * time, one connection per rank) and the books of which ranks are connected and which have left.
 * Owns: the keys. Thread safety: the server's thread only (store_server.h). */
#include "kernels/comm/store_server.h"
#include "kernels/comm/store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gk_store_limits_for(gk_store_limits *l, int world)
{
    size_t w = world > 0 ? (size_t)world : 64;
    l->value = ((size_t)64 << 10) + 256 * w;
    l->keys = 64 + 16 * w;
    l->bytes = ((size_t)1 << 20) + 512 * w * w;
    /* a value, or a WAIT for every rank's key */
    l->frame = l->value + (MAX_KEY + 8) * (w + 8) + 1024;
    l->pending = 8 + (int)(w < 4096 ? w : 4096);
    if (l->value > MAX_VALUE)
        l->value = MAX_VALUE;
    if (l->frame > MAX_FRAME)
        l->frame = MAX_FRAME;
}

static size_t kv_bucket(const server *sv, const char *key)
{
    uint64_t h = 1469598103934665603ull;
    for (; *key; key++)
        h = (h ^ (uint8_t)*key) * 1099511628211ull;
    return (size_t)h & (sv->nb - 1);
}

static kv *kv_find(const server *sv, const char *key)
{
    for (kv *x = sv->tab[kv_bucket(sv, key)]; x; x = x->next)
        if (strcmp(x->key, key) == 0)
            return x;
    return NULL;
}

static int kv_grow(server *sv)
{
    size_t nb = sv->nb * 2, old = sv->nb;
    kv **tab = calloc(nb, sizeof *tab), **was = sv->tab;
    if (!tab)
        return -1;
    sv->tab = tab, sv->nb = nb;
    for (size_t i = 0; i < old; i++)
        for (kv *x = was[i], *next; x; x = next) {
            next = x->next;
            size_t b = kv_bucket(sv, x->key);
            x->next = tab[b], tab[b] = x;
        }
    free(was);
    return 0;
}

/* Sets key to n bytes: 0, -1 out of memory, or 1 when the job's limits do not allow it (*why). */
static int kv_put(server *sv, const char *key, const void *val, size_t n, char *why, size_t cap)
{
    kv *x = kv_find(sv, key);
    size_t klen = strlen(key), bytes = sv->bytes - (x ? x->n : 0) + n + (x ? 0 : klen);
    if (n > sv->lim.value)
        return snprintf(why, cap, "key '%s': a value of %zu bytes (this job's values: %zu at most)",
                        key, n, sv->lim.value), 1;
    if (!x && sv->nkeys >= sv->lim.keys)
        return snprintf(why, cap, "key '%s': the store holds %zu keys, this job's most", key,
                        sv->nkeys), 1;
    if (bytes > sv->lim.bytes)
        return snprintf(why, cap, "key '%s': the store would hold %zu bytes (this job's most: %zu)",
                        key, bytes, sv->lim.bytes), 1;
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy)
        return -1;
    if (n)
        memcpy(copy, val, n);
    if (!x) {
        if (sv->nkeys >= sv->nb && kv_grow(sv))
            return free(copy), -1;
        if (!(x = calloc(1, sizeof *x)) || !(x->key = strdup(key)))
            return free(x), free(copy), -1;
        size_t b = kv_bucket(sv, key);
        x->next = sv->tab[b], sv->tab[b] = x;
        sv->nkeys++;
    }
    free(x->val);
    x->val = copy, x->n = n;
    sv->bytes = bytes;
    return 0;
}

static int rank_hello(server *sv, int rank)
{
    if (rank >= sv->nr) {
        int nr = rank + 64;
        int *live = realloc(sv->live, nr * sizeof *live);
        if (live)
            sv->live = live;
        uint64_t *left = live ? realloc(sv->left, nr * sizeof *left) : NULL;
        if (!left)
            return -1;
        sv->left = left;
        memset(sv->live + sv->nr, 0, (nr - sv->nr) * sizeof *live);
        memset(sv->left + sv->nr, 0, (nr - sv->nr) * sizeof *left);
        sv->nr = nr;
    }
    sv->live[rank]++;
    sv->left[rank] = 0;
    return 0;
}

/* Appends a reply with status and up to one field (p, n; p NULL: none). */
static int reply(conn *c, int status, const void *p, size_t n)
{
    int fail = 0;
    size_t at = gk_store_frame_begin(&c->out, status, &fail);
    if (p)
        fail |= gk_store_buf_field(&c->out, p, n);
    if (!fail)
        gk_store_frame_end(&c->out, at);
    return fail ? -1 : 1;
}

static int reply_u32(conn *c, int status, uint32_t v)
{
    uint8_t b[4];
    gk_store_put_u32(b, v);
    return reply(c, status, b, 4);
}

/* A GET or WAIT whose key `missing` is absent: waits, or answers TIMEOUT once expired. */
static int pend(conn *c, uint64_t timeout_ms, uint32_t missing, int expired)
{
    if (expired)
        return reply_u32(c, ST_TIMEOUT, missing);
    if (!c->waiting)
        c->waiting = 1, c->deadline = gk_store_now() + (double)timeout_ms * 1e-3;
    return 0;
}

static int serve_add(server *sv, conn *c, gk_store_rd *r, int *changed)
{
    char key[MAX_KEY + 1], text[MAX_KEY + 40];
    uint64_t delta;
    if (gk_store_rd_key(r, key) || gk_store_rd_u64(r, &delta))
        return -1;
    kv *x = kv_find(sv, key);
    long long v = 0;
    if (x) {
        char *end;
        snprintf(text, 32, "%.*s", (int)(x->n < 31 ? x->n : 31), (const char *)x->val);
        errno = 0;
        v = strtoll(text, &end, 10);
        if (x->n == 0 || x->n > 30 || *end || errno) {
            snprintf(text, sizeof text, "key '%s' is not an integer", key);
            return reply(c, ST_ERR, text, strlen(text));
        }
    }
    v = (long long)((uint64_t)v + delta);
    snprintf(text, sizeof text, "%lld", v);
    char why[MAX_KEY + 120];
    int rc = kv_put(sv, key, text, strlen(text), why, sizeof why);
    if (rc)
        return rc < 0 ? -1 : reply(c, ST_ERR, why, strlen(why));
    *changed = 1;
    uint8_t b[8];
    gk_store_put_u64(b, (uint64_t)v);
    return reply(c, ST_OK, b, 8);
}

static int serve_wait(server *sv, conn *c, gk_store_rd *r, int expired)
{
    char key[MAX_KEY + 1];
    uint64_t ms;
    if (gk_store_rd_u64(r, &ms))
        return -1;
    for (uint32_t i = 0; r->n; i++) {
        if (gk_store_rd_key(r, key))
            return -1;
        if (!kv_find(sv, key))
            return pend(c, ms, i, expired);
    }
    return reply(c, ST_OK, NULL, 0);
}

static int by_departure(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The ranks gone, in the order they left: the first is the likeliest cause of a failure. */
static int serve_gone(server *sv, conn *c)
{
    uint64_t *order = malloc((size_t)(sv->nr + 1) * sizeof *order);
    uint8_t *list = malloc((size_t)(sv->nr + 1) * 4);
    int n = 0, rc = -1;
    for (int rank = 0; order && list && rank < sv->nr; rank++)
        if (sv->left[rank] && !sv->live[rank])
            order[n++] = sv->left[rank] << 24 | (uint64_t)rank;
    if (order && list) {
        qsort(order, (size_t)n, sizeof *order, by_departure);
        for (int i = 0; i < n; i++)
            gk_store_put_u32(list + 4 * i, (uint32_t)(order[i] & (MAX_RANK - 1)));
        rc = reply(c, ST_OK, list, 4 * (size_t)n);
    }
    free(order);
    free(list);
    return rc;
}

/* A refusal is counted in the store's own keys (GK_STORE_REFUSED, GK_STORE_REFUSED_LAST: the
 * count and the last one, "PEER: why"), so that rank 0 can say who was turned away. Past the
 * job's limits the count is simply not kept. */
static void note_refusal(server *sv, const conn *c, const char *text)
{
    char why[MAX_KEY + 120], line[600];
    sv->refused++;
    int n = snprintf(line, sizeof line, "%lld", sv->refused);
    kv_put(sv, GK_STORE_REFUSED, line, (size_t)n, why, sizeof why);
    n = snprintf(line, sizeof line, "%s: %s", c->peer, text);
    kv_put(sv, GK_STORE_REFUSED_LAST, line, n < (int)sizeof line ? (size_t)n : sizeof line - 1, why,
           sizeof why);
}

void gk_store_refuse(server *sv, conn *c, int reason, const char *text)
{
    note_refusal(sv, c, text);
    int fail = 0;
    uint8_t why = (uint8_t)reason;
    size_t at = gk_store_frame_begin(&c->out, ST_REFUSED, &fail);
    fail |= gk_store_buf_field(&c->out, &why, 1) | gk_store_buf_field(&c->out, text, strlen(text));
    if (!fail)
        gk_store_frame_end(&c->out, at);
    c->closing = 1;
    if (fail)
        c->dead = 1;
}

/* Whether token (n bytes) is the job's, in a time that depends on the job token's length only. */
static int token_ok(const server *sv, const uint8_t *token, size_t n)
{
    unsigned diff = n != sv->token_n;
    for (size_t i = 0; i < sv->token_n; i++)
        diff |= (uint8_t)sv->token[i] ^ (i < n ? token[i] : 0);
    return diff == 0;
}

/* The connection of rank's that is open, NULL if none. */
static const conn *rank_conn(const server *sv, int rank)
{
    for (int i = 0; i < sv->nc; i++)
        if (sv->c[i]->rank == rank && !sv->c[i]->dead)
            return sv->c[i];
    return NULL;
}

/* HELLO rank, version, token, pid: the connection becomes rank's, or is refused. */
static int serve_hello(server *sv, conn *c, gk_store_rd *r)
{
    char why[300];
    uint64_t rank, version = 0, pid = 0;
    const uint8_t *token = NULL;
    size_t n = 0;
    if (c->rank >= 0 || gk_store_rd_u64(r, &rank))
        return -1;
    if (r->n && gk_store_rd_u64(r, &version))
        return -1;
    if (version != VERSION || gk_store_rd_field(r, &token, &n) || gk_store_rd_u64(r, &pid) ||
        r->n) {
        snprintf(why, sizeof why, "the store speaks protocol %d, this client %llu", VERSION,
                 (unsigned long long)version);
        return gk_store_refuse(sv, c, RF_VERSION, why), 1;
    }
    if (!token_ok(sv, token, n))
        return gk_store_refuse(sv, c, RF_TOKEN, "wrong or missing job token"), 1;
    if (rank >= (uint64_t)(sv->world > 0 ? sv->world : MAX_RANK)) {
        snprintf(why, sizeof why, "rank %llu is not below the job's %d ranks",
                 (unsigned long long)rank, sv->world);
        return gk_store_refuse(sv, c, RF_RANK, why), 1;
    }
    const conn *first = rank_conn(sv, (int)rank);
    if (first) {
        snprintf(why, sizeof why, "rank %d is already connected from %s (pid %lld); refusing a "
                 "second rank %d from %s (pid %lld)", (int)rank, first->peer, first->pid,
                 (int)rank, c->peer, (long long)pid);
        return gk_store_refuse(sv, c, RF_DUPLICATE, why), 1;
    }
    if (rank_hello(sv, (int)rank))
        return -1;
    c->rank = (int)rank, c->pid = (long long)pid;
    uint8_t most[8]; /* so that the client refuses a longer value itself, naming it */
    gk_store_put_u64(most, sv->lim.value);
    return reply(c, ST_OK, most, 8);
}

static int serve_set(server *sv, conn *c, gk_store_rd *r, int *changed)
{
    char key[MAX_KEY + 1], why[MAX_KEY + 120];
    const uint8_t *p;
    size_t len;
    if (gk_store_rd_key(r, key) || gk_store_rd_field(r, &p, &len))
        return -1;
    int rc = kv_put(sv, key, p, len, why, sizeof why);
    if (rc)
        return rc < 0 ? -1 : reply(c, ST_ERR, why, strlen(why));
    *changed = 1;
    return reply(c, ST_OK, NULL, 0);
}

/* The number of ranks with a connection open now. */
static int serve_ranks(server *sv, conn *c)
{
    uint32_t n = 0;
    for (int rank = 0; rank < sv->nr; rank++)
        n += sv->live[rank] > 0;
    return reply_u32(c, ST_OK, n);
}

int gk_store_serve(server *sv, conn *c, const uint8_t *body, size_t n, int expired, int *changed)
{
    gk_store_rd r = {body + 1, n - 1};
    char key[MAX_KEY + 1];
    uint64_t v;
    kv *x;
    if (c->rank < 0 && body[0] != OP_HELLO)
        return -1;
    switch (body[0]) {
    case OP_HELLO:
        return serve_hello(sv, c, &r);
    case OP_SET:
        return serve_set(sv, c, &r, changed);
    case OP_GET:
        if (gk_store_rd_key(&r, key) || gk_store_rd_u64(&r, &v))
            return -1;
        return (x = kv_find(sv, key)) ? reply(c, ST_OK, x->val, x->n) : pend(c, v, 0, expired);
    case OP_ADD:
        return serve_add(sv, c, &r, changed);
    case OP_CHECK:
        if (gk_store_rd_key(&r, key))
            return -1;
        return reply(c, ST_OK, kv_find(sv, key) ? "\1" : "\0", 1);
    case OP_WAIT:
        return serve_wait(sv, c, &r, expired);
    case OP_GONE:
        return serve_gone(sv, c);
    case OP_RANKS:
        return serve_ranks(sv, c);
    }
    return -1;
}

void gk_store_conn_left(server *sv, conn *c)
{
    if (c->rank >= 0)
        if (--sv->live[c->rank] == 0)
            sv->left[c->rank] = ++sv->departures;
    c->rank = -1;
}

void gk_store_keys_free(server *sv)
{
    for (size_t i = 0; sv->tab && i < sv->nb; i++)
        for (kv *x = sv->tab[i], *next; x; x = next) {
            next = x->next;
            free(x->key);
            free(x->val);
            free(x);
        }
    free(sv->tab);
    sv->tab = NULL;
}
