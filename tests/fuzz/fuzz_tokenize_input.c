/* fuzz_tokenize_input.c: gpt-tokenize's inputs (tokenize/input.c through libarchive: plain text,
 * gzip, bzip2, xz, lzma, zstd, lz4, tar, zip, 7z). The input is the bytes of one input file, read
 * three ways: as a file (tk_source_open on a path: seekable, so zip and 7z read their central
 * directory), as stdin on a pipe (tk_source_open "-": zip streamed), and by tk_read_all,
 * gpt-tokenize's reading loop, from the pipe with a --doc-sep. Every document is read to its end
 * (at most TEXT_MAX bytes of text in all: a decompression bomb's tail is the harness's limit).
 * Properties: each call returns 0 or a negative gk_err code with a message, and after an error
 * nothing more is called but close; a read returns at most the bytes asked for, and 0 again
 * after a document's end; the position never goes back and never passes the file's size; text
 * that no format claims (printable ASCII under 512 bytes, not bzip2's "BZh" or zip's "PK00") is
 * one document holding exactly the input; a gzip around a gzip or a zip is refused (one layer of
 * compression at most); file and pipe give the same documents unless the input may be a zip or
 * 7z (read differently without seeking); tk_read_all's documents are the pipe's documents cut at
 * the separator, empty pieces dropped, with the same count of skipped binary members. */
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "tests/fuzz/fuzz.h"
#include "tokenize/input.h"
#include "tokenize/run.h"

/* libarchive 3.6's readers allocate what a (damaged) header declares: the 7z reader asked for
 * 2^60 bytes from 165 bytes of input, and (CI, 2026-11) for 4.4 GB. Outside ASan, malloc
 * fails or hands out untouched pages and the reader reports the damage. Here, as on a machine
 * with 1 GB to spare, a request over 1 GB fails (returns NULL) instead of aborting under ASan
 * or tripping libFuzzer's malloc limit (-rss_limit_mb=2048 in run.sh). */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=1024";
}

#define TEXT_MAX ((size_t)32 << 20) /* text read per way, in all documents */
#define DOCS_MAX 100000             /* documents (and skipped members) per way */

/* What one way read: the documents' text end to end, and where each starts. */
typedef struct text {
    char *p;
    size_t len, cap;
    size_t *starts, docs, skipped;
    int failed, capped;
} text;

static void append(text *t, const char *p, size_t n)
{
    if (n == 0) return;
    if (t->len + n > t->cap) {
        t->cap = t->cap ? t->cap : 4096;
        while (t->cap < t->len + n) t->cap *= 2;
        t->p = realloc(t->p, t->cap);
        FZ_ASSERT(t->p, "out of memory for %zu bytes", t->cap);
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void check_error(int rc, const gk_err *e, const char *what)
{
    FZ_ASSERT(rc < 0 && e->code == rc && e->msg[0], "%s: rc %d, code %d, message '%s'", what, rc,
              e->code, e->msg);
}

/* Reads the current document to its end into t. Returns 0 or the error code. */
static int read_doc(tk_source *s, text *t, gk_err *e)
{
    static char buf[4099]; /* an odd size: reads split members and sniffed bytes anywhere */
    size_t got = 1;
    while (got > 0) {
        size_t cap = 1 + (t->len % sizeof buf);
        int rc = tk_source_read(s, buf, cap, &got, e);
        if (rc) return check_error(rc, e, "read"), rc;
        FZ_ASSERT(got <= cap, "read %zu bytes into %zu", got, cap);
        if (t->len + got > TEXT_MAX) return t->capped = 1, 0;
        append(t, buf, got);
    }
    int rc = tk_source_read(s, buf, sizeof buf, &got, e); /* the end stays the end */
    if (rc) return check_error(rc, e, "read after the end"), rc;
    FZ_ASSERT(got == 0, "%zu bytes after the end of a document", got);
    return 0;
}

/* Every document of path into t. size: the input's (the position stays within it). */
static void read_source(const char *path, size_t size, text *t)
{
    tk_source *s = NULL;
    gk_err e = {0};
    int rc = tk_source_open(&s, path, &e), more = 1;
    if (rc) {
        check_error(rc, &e, "open");
        FZ_ASSERT(!s, "a source on failure");
        t->failed = 1;
        return;
    }
    long long pos = tk_source_position(s);
    while (!t->capped && t->docs + t->skipped < DOCS_MAX) {
        if ((rc = tk_source_next(s, &more, &e))) {
            check_error(rc, &e, "next");
            break;
        }
        t->skipped = tk_source_skipped(s);
        if (!more) break;
        t->starts = realloc(t->starts, (t->docs + 1) * sizeof *t->starts);
        FZ_ASSERT(t->starts, "out of memory");
        t->starts[t->docs++] = t->len;
        if ((rc = read_doc(s, t, &e))) break;
        long long now = tk_source_position(s);
        FZ_ASSERT(now >= pos && now <= (long long)size, "position %lld after %lld (size %zu)", now,
                  pos, size);
        pos = now;
    }
    t->failed = rc != 0;
    tk_source_close(s);
}

/* ---- tk_read_all, with a consumer that keeps the documents in a text ------------------ */

static int keep_begin(void *ctx, gk_err *e)
{
    (void)e;
    text *t = ctx;
    t->starts = realloc(t->starts, (t->docs + 1) * sizeof *t->starts);
    FZ_ASSERT(t->starts, "out of memory");
    t->starts[t->docs++] = t->len;
    return 0;
}

static int feed_capped(void *ctx, const char *p, size_t n, gk_err *e)
{
    text *t = ctx;
    if (t->len + n > TEXT_MAX) return gk_errf(e, GK_EUSAGE, "fuzz: text cap");
    append(t, p, n);
    return 0;
}

static int keep_end(void *ctx, gk_err *e)
{
    (void)ctx;
    (void)e;
    return 0;
}

/* Checks that c's documents are whole's documents cut at every sep, empty pieces dropped. */
static void same_pieces(const text *c, const text *whole, const char *sep)
{
    size_t k = 0, sl = strlen(sep);
    for (size_t d = 0; d < whole->docs; d++) {
        size_t p = whole->starts[d], end = d + 1 < whole->docs ? whole->starts[d + 1] : whole->len;
        while (p < end) {
            const char *hit = memmem(whole->p + p, end - p, sep, sl);
            size_t stop = hit ? (size_t)(hit - whole->p) : end;
            if (stop > p) {
                size_t n = stop - p, at = k < c->docs ? c->starts[k] : 0;
                size_t cend = k + 1 < c->docs ? c->starts[k + 1] : c->len;
                FZ_ASSERT(k < c->docs && cend - at == n && !memcmp(c->p + at, whole->p + p, n),
                          "piece %zu (%zu bytes at %zu of document %zu) differs", k, n, p, d);
                k++;
            }
            p = hit ? stop + sl : end;
        }
    }
    FZ_ASSERT(k == c->docs, "%zu documents, %zu expected", c->docs, k);
}

/* The pipe's documents through tk_read_all cut at sep: the pieces of the pipe's own documents. */
static void read_all(const char *sep, const text *whole)
{
    text c = {0};
    tk_consumer cons = {keep_begin, feed_capped, keep_end, &c};
    char *inputs[] = {"-"};
    const char *tmp = getenv("TMPDIR"); /* gpt-tokenize's main passes it (gk_env) */
    tk_read_opts o = {.inputs = inputs,
                      .ninputs = 1,
                      .doc_sep = sep,
                      .tmpdir = tmp && *tmp ? tmp : "/tmp"};
    tk_read_stats st = {0};
    gk_err e = {0};
    int rc = tk_read_all(&o, &cons, &st, &e);
    if (rc) check_error(rc, &e, "tk_read_all");
    /* Parquet on a pipe (read from its end) is copied to a temporary file and read as Parquet,
     * not as a plain document (as the pipe's documents read it); a member is text */
    int parquet =
        whole->docs == 1 && whole->skipped == 0 && whole->len >= 4 && !memcmp(whole->p, "PAR1", 4);
    int full = !whole->capped && whole->docs + whole->skipped < DOCS_MAX &&
               !strstr(e.msg, "fuzz: text cap") && !parquet;
    if (full)
        FZ_ASSERT(!rc == !whole->failed, "tk_read_all %s, the pipe's documents %s",
                  rc ? e.msg : "read", whole->failed ? "failed" : "read");
    if (!rc && full) {
        FZ_ASSERT((size_t)st.skipped_binary == whole->skipped, "skipped %lld, not %zu",
                  (long long)st.skipped_binary, whole->skipped);
        same_pieces(&c, whole, sep);
    }
    free(c.p);
    free(c.starts);
}

/* ---- the three ways ------------------------------------------------------------------- */

/* Runs fn with the pipe of data on stdin (fd 0 restored after). */
static int with_stdin(const uint8_t *data, size_t size)
{
    static int saved = -2;
    if (saved == -2) saved = dup(STDIN_FILENO);
    int p = fz_pipe(data, size);
    if (p < 0 || saved < 0) {
        if (p >= 0) close(p);
        return -1;
    }
    dup2(p, STDIN_FILENO);
    close(p);
    return saved;
}

static void restore_stdin(int saved) { dup2(saved, STDIN_FILENO); }

/* Printable text that no format claims: under a tar header's 512 bytes, and not starting with
 * bzip2's "BZh" or "PK00" (a split zip's marker, which libarchive's zip reader takes). */
static int plain_text(const uint8_t *data, size_t size)
{
    if (size >= 512 || (size >= 3 && !memcmp(data, "BZh", 3)) ||
        (size >= 4 && !memcmp(data, "PK00", 4)))
        return 0;
    for (size_t i = 0; i < size; i++)
        if ((data[i] < 0x20 || data[i] > 0x7e) && data[i] != '\n' && data[i] != '\t') return 0;
    return 1;
}

/* Inflates a gzip stream's first bytes into out[0..cap): how many, or 0 if it is none; *header:
 * whether zlib read its whole gzip header (libarchive takes such bytes for gzip). */
static size_t gunzip(const uint8_t *data, size_t size, uint8_t *out, size_t cap, int *header)
{
    z_stream z = {.next_in = (uint8_t *)data, .avail_in = (unsigned)size, .next_out = out,
                  .avail_out = (unsigned)cap};
    gz_header head = {0};
    *header = 0;
    if (size < 2 || data[0] != 0x1f || data[1] != 0x8b || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        return 0;
    inflateGetHeader(&z, &head);
    int r = Z_OK;
    while (r == Z_OK && z.avail_out > 0)
        r = inflate(&z, Z_SYNC_FLUSH);
    *header = head.done == 1;
    inflateEnd(&z);
    return cap - z.avail_out;
}

/* Whether data is a gzip whose text starts with a gzip header or a zip's: a second layer of
 * compression, which the reader refuses (a decompression bomb's shape). */
static int gzip_around_compression(const uint8_t *data, size_t size)
{
    static uint8_t in[1 << 16], inner[16];
    int header;
    size_t n = gunzip(data, size, in, sizeof in, &header);
    return (n >= 4 && !memcmp(in, "PK\3\4", 4)) ||
           (gunzip(in, n, inner, sizeof inner, &header), header);
}

static int seeks(const uint8_t *data, size_t size)
{
    return size && (memmem(data, size, "PK", 2) || memmem(data, size, "7z\xbc\xaf\x27\x1c", 6));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    text file = {0}, piped = {0};
    const char *path = fz_file(0, data, size);
    if (!path) return 0;
    read_source(path, size, &file);
    if (plain_text(data, size))
        FZ_ASSERT(!file.failed && file.docs == 1 && file.len == size &&
                      (!size || !memcmp(file.p, data, size)),
                  "plain text of %zu bytes: %s, %zu documents, %zu bytes", size,
                  file.failed ? "failed" : "read", file.docs, file.len);
    if (gzip_around_compression(data, size))
        FZ_ASSERT(file.failed, "compressed twice, read: %zu documents, %zu bytes", file.docs,
                  file.len);
    int saved = size <= FZ_PIPE_MAX ? with_stdin(data, size) : -1;
    if (saved >= 0) {
        read_source("-", size, &piped);
        restore_stdin(saved);
        int full = !file.capped && !piped.capped && file.docs < DOCS_MAX && piped.docs < DOCS_MAX;
        if (full && !seeks(data, size))
            FZ_ASSERT(file.failed == piped.failed && file.len == piped.len &&
                          file.docs == piped.docs &&
                          (!file.len || !memcmp(file.p, piped.p, file.len)) &&
                          (!file.docs ||
                           !memcmp(file.starts, piped.starts, file.docs * sizeof *file.starts)),
                      "file (%s, %zu documents, %zu bytes) and pipe (%s, %zu, %zu) differ",
                      file.failed ? "failed" : "read", file.docs, file.len,
                      piped.failed ? "failed" : "read", piped.docs, piped.len);
    }
    if (saved >= 0 && with_stdin(data, size) >= 0) {
        static const char *seps[] = {"\n", "\n\n", "<|endoftext|>", "e"};
        read_all(seps[size % 4], &piped);
        restore_stdin(saved);
    }
    free(file.p);
    free(piped.p);
    free(file.starts);
    free(piped.starts);
    return 0;
}
