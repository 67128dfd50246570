/* safetensors_sum.c: the per-tensor checksums gptkit stores in a safetensors file's __metadata__
 * (GK_ST_CHECKSUMS_KEY, see safetensors.h): CRC-32 computation and verification.
 * Speed: zlib's crc32 on one core is slower than reading a cached file, so a large buffer is
 * split over threads and the parts joined with crc32_combine. */
#include "common/io/safetensors.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define PART_MIN (8u << 20) /* a thread gets at least this many bytes */
#define MAX_THREADS 8

typedef struct crc_part {
    const uint8_t *p;
    size_t n;
    uLong crc;
} crc_part;

static void *crc_thread(void *arg)
{
    crc_part *part = arg;
    part->crc = crc32_z(0, part->p, part->n);
    return NULL;
}

uint32_t gk_crc32(uint32_t crc, const void *data, size_t n)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    size_t k = n / PART_MIN;
    if (cpus > 0 && k > (size_t)cpus) k = (size_t)cpus;
    return gk_crc32_parts(crc, data, n, k);
}

uint32_t gk_crc32_parts(uint32_t crc, const void *data, size_t n, size_t k)
{
    if (k > MAX_THREADS) k = MAX_THREADS;
    if (k < 2)
        return (uint32_t)crc32_z(crc, data, n);
    crc_part parts[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    size_t each = n / k, at = 0;
    for (size_t i = 0; i < k; i++) {
        parts[i] = (crc_part){(const uint8_t *)data + at, i + 1 < k ? each : n - at, 0};
        at += parts[i].n;
        started[i] = i > 0 && pthread_create(&tid[i], NULL, crc_thread, &parts[i]) == 0;
    }
    for (size_t i = 0; i < k; i++) /* part 0, and any part whose thread did not start, here */
        if (!started[i]) crc_thread(&parts[i]);
    uLong out = crc;
    for (size_t i = 0; i < k; i++) {
        if (started[i]) pthread_join(tid[i], NULL);
        out = crc32_combine(out, parts[i].crc, (z_off_t)parts[i].n);
    }
    return (uint32_t)out;
}

/* ---- verification ---------------------------------------------------------------------- */

static int damaged(const gk_st_file *f, gk_err *err, const char *name, const char *problem)
{
    return gk_errf(err, GK_EFORMAT, "%s: tensor %.200s: %s (the file is damaged)", gk_st_path(f),
                   name, problem);
}

/* The stored checksum of tensor name into *out; 0, or -1 when absent or malformed. */
static int stored_crc(json_t *sums, const char *name, uint32_t *out)
{
    const char *hex = json_string_value(json_object_get(sums, name));
    if (!hex || strlen(hex) != 8 || strspn(hex, "0123456789abcdefABCDEF") != 8)
        return -1; /* strtoul alone would take a sign or spaces */
    *out = (uint32_t)strtoul(hex, NULL, 16);
    return 0;
}

int gk_st_verify(const gk_st_file *f, int *verified, gk_err *err)
{
    *verified = 0;
    const char *text = gk_st_meta(f, GK_ST_CHECKSUMS_KEY);
    if (!text)
        return 0;
    json_t *sums = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(sums)) {
        json_decref(sums);
        return gk_errf(err, GK_EFORMAT, "%s: metadata %s is not a JSON object of checksums "
                       "(the file is damaged)", gk_st_path(f), GK_ST_CHECKSUMS_KEY);
    }
    int rc = 0;
    if (json_object_size(sums) != gk_st_count(f)) /* the names must match one for one */
        rc = gk_errf(err, GK_EFORMAT, "%s: metadata %s holds %zu checksums for %zu tensors "
                     "(the file is damaged)", gk_st_path(f), GK_ST_CHECKSUMS_KEY,
                     json_object_size(sums), gk_st_count(f));
    for (size_t i = 0; rc == 0 && i < gk_st_count(f); i++) {
        const gk_st_tensor *t = gk_st_at(f, i);
        uint32_t want;
        if (stored_crc(sums, t->name, &want) != 0)
            rc = damaged(f, err, t->name, "no checksum (8 hex digits) in " GK_ST_CHECKSUMS_KEY);
        else if (gk_crc32(0, t->data, t->nbytes) != want)
            rc = damaged(f, err, t->name, "checksum mismatch");
    }
    json_decref(sums);
    *verified = rc == 0;
    return rc;
}
