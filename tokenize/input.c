/* input.c: documents from files, stdin, compressed files and archives (see input.h). */
#include "input.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNIFF_BYTES 8192

struct tk_source {
    struct archive *a;
    char *name;
    int fd;
    int in_archive;        /* a real archive format, not a single (maybe compressed) stream */
    int started, done;     /* raw stream: its one document was handed out / finished */
    char sniff[SNIFF_BYTES]; /* archive members: bytes read while checking for binary */
    size_t sniff_len, sniff_pos;
    size_t skipped;
    size_t special[TK_SKIP_KINDS]; /* members that are not regular files, by kind */
    int empty_format;              /* an archive format with no members: its ARCHIVE_FORMAT_ base */
};

static int archive_fail(tk_source *s, gk_err *e)
{
    const char *msg = archive_error_string(s->a), *format = archive_format_name(s->a);
    if (msg)
        return gk_errf(e, GK_EFORMAT, "%s: %s", s->name, msg);
    /* libarchive says nothing when a format's first bytes (a text starting "PK00") lead to no
     * member: name the format the input was taken for */
    return gk_errf(e, GK_EFORMAT, "%s: not a readable %s, although its first bytes say so",
                   s->name, format && archive_format(s->a) ? format : "input");
}

static struct archive *new_reader(void)
{
    struct archive *a = archive_read_new();
    if (!a)
        return NULL;
    /* Only the filters and formats we claim: every "all" bidder risks taking text for a format. */
    archive_read_support_filter_gzip(a);
    archive_read_support_filter_bzip2(a);
    archive_read_support_filter_xz(a);
    archive_read_support_filter_lzma(a);
    archive_read_support_filter_zstd(a);
    archive_read_support_filter_lz4(a);
    archive_read_support_format_tar(a);
    archive_read_support_format_zip(a);
    archive_read_support_format_7zip(a);
    archive_read_support_format_empty(a);
    archive_read_support_format_raw(a);
    return a;
}

/* The compressions around the data, innermost first ("gzip inside xz"), in buf. */
static const char *layers(tk_source *s, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i + 1 < archive_filter_count(s->a) && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? " inside " : "",
                                archive_filter_name(s->a, i));
    return buf;
}

/* One layer of compression at most, and none around an archive that compresses its members
 * (zip, 7z): each layer multiplies what a few bytes expand to (gzip, 1000 times at most; a gzip of
 * a gzip of a gzip of 1 GB of zeros is 651 bytes), and nothing but a decompression bomb needs
 * two. */
static int check_layers(tk_source *s, int format, gk_err *e)
{
    char chain[256];
    int n = archive_filter_count(s->a) - 1; /* the last "filter" reads the bytes as stored */
    const char *compresses = format == ARCHIVE_FORMAT_ZIP    ? "zip"
                             : format == ARCHIVE_FORMAT_7ZIP ? "7z"
                                                             : NULL;
    if (n > 1)
        return gk_errf(e, GK_EFORMAT,
                       "%s: compressed %d times (%s): gpt-tokenize reads one layer of compression",
                       s->name, n, layers(s, chain, sizeof chain));
    if (n == 1 && compresses)
        return gk_errf(e, GK_EFORMAT, "%s: a %s archive inside %s: gpt-tokenize reads zip and 7z "
                       "archives as they are, not compressed again", s->name, compresses,
                       layers(s, chain, sizeof chain));
    return 0;
}

int tk_source_open(tk_source **out, const char *path, gk_err *e)
{
    int is_stdin = strcmp(path, "-") == 0;
    tk_source *s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(is_stdin ? "stdin" : path))) {
        free(s);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    s->fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY);
    struct stat st;
    int rc = 0;
    if (s->fd < 0)
        rc = gk_errno(e, path);
    else if (fstat(s->fd, &st) == 0 && S_ISDIR(st.st_mode))
        rc = gk_errf(e, GK_EFORMAT, "%s: is a directory", path);
    else if (!(s->a = new_reader()))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    else if (archive_read_open_fd(s->a, s->fd, 1 << 16) != ARCHIVE_OK)
        rc = archive_fail(s, e);
    else
        rc = check_layers(s, 0, e);
    if (rc) {
        tk_source_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

/* Reads up to SNIFF_BYTES of the current member into s->sniff; returns whether it holds a NUL. */
static int sniff_binary(tk_source *s, int *binary, gk_err *e)
{
    s->sniff_len = s->sniff_pos = 0;
    while (s->sniff_len < SNIFF_BYTES) {
        la_ssize_t n = archive_read_data(s->a, s->sniff + s->sniff_len, SNIFF_BYTES - s->sniff_len);
        if (n < 0)
            return archive_fail(s, e);
        if (n == 0)
            break;
        s->sniff_len += (size_t)n;
    }
    *binary = memchr(s->sniff, 0, s->sniff_len) != NULL;
    return 0;
}

/* A member that is not a regular file: its TK_SKIP_* kind; -2 for a directory (skipped without
 * a count: its files are members of their own); -1 for a regular file. A hard link names a
 * member before it, whatever type it claims. */
static int special_kind(struct archive_entry *entry)
{
    if (archive_entry_hardlink(entry))
        return TK_SKIP_LINK;
    switch (archive_entry_filetype(entry)) {
    case AE_IFREG: return -1;
    case AE_IFDIR: return -2;
    case AE_IFLNK: return TK_SKIP_LINK;
    case AE_IFCHR:
    case AE_IFBLK: return TK_SKIP_DEVICE;
    case AE_IFIFO: return TK_SKIP_FIFO;
    default: return TK_SKIP_OTHER;
    }
}

int tk_source_next(tk_source *s, int *more, gk_err *e)
{
    *more = 0;
    if (s->started && !s->in_archive) {
        s->done = 1;
        return 0;
    }
    for (;;) {
        struct archive_entry *entry;
        int r = archive_read_next_header(s->a, &entry);
        if (r == ARCHIVE_EOF) {
            int fmt = archive_format(s->a);
            int plain = fmt == 0 || fmt == ARCHIVE_FORMAT_RAW || fmt == ARCHIVE_FORMAT_EMPTY;
            if (!s->started && plain) { /* an empty plain input is still one (empty) document */
                s->started = 1;
                *more = 1;
            } else if (!s->started) {
                s->empty_format = fmt & ARCHIVE_FORMAT_BASE_MASK;
            }
            s->done = 1;
            return 0;
        }
        if (r < ARCHIVE_WARN)
            return archive_fail(s, e);
        if (!s->started &&
            (r = check_layers(s, archive_format(s->a) & ARCHIVE_FORMAT_BASE_MASK, e)))
            return r;
        s->in_archive = archive_format(s->a) != ARCHIVE_FORMAT_RAW &&
                        archive_format(s->a) != ARCHIVE_FORMAT_EMPTY;
        s->started = 1;
        s->sniff_len = s->sniff_pos = 0;
        if (!s->in_archive) {
            *more = 1;
            return 0;
        }
        int kind = special_kind(entry);
        if (kind >= 0)
            s->special[kind]++;
        if (kind != -1)
            continue;
        int binary = 0, rc = sniff_binary(s, &binary, e);
        if (rc)
            return rc;
        if (!binary) {
            *more = 1;
            return 0;
        }
        s->skipped++;
    }
}

int tk_source_read(tk_source *s, char *buf, size_t cap, size_t *got, gk_err *e)
{
    *got = 0;
    if (s->done)
        return 0;
    if (s->sniff_pos < s->sniff_len) {
        size_t n = s->sniff_len - s->sniff_pos;
        if (n > cap)
            n = cap;
        memcpy(buf, s->sniff + s->sniff_pos, n);
        s->sniff_pos += n;
        *got = n;
        return 0;
    }
    la_ssize_t n = archive_read_data(s->a, buf, cap);
    if (n < 0)
        return archive_fail(s, e);
    *got = (size_t)n;
    return 0;
}

int tk_source_is_archive(const tk_source *s) { return s->in_archive; }

size_t tk_source_skipped(const tk_source *s) { return s->skipped; }

size_t tk_source_skipped_special(const tk_source *s, int kind) { return s->special[kind]; }

const char *tk_source_empty_archive(const tk_source *s)
{
    switch (s->empty_format) {
    case 0: return NULL;
    /* libarchive takes any input that starts with a 512-byte block of NULs for a tar archive
     * that ends there: a real empty tar is only such blocks, so the two cannot be told apart */
    case ARCHIVE_FORMAT_TAR:
        return "an empty tar archive (it starts with 512 NUL bytes, a tar's end)";
    case ARCHIVE_FORMAT_ZIP: return "an empty zip archive";
    case ARCHIVE_FORMAT_7ZIP: return "an empty 7z archive";
    default: return "an empty archive";
    }
}

long long tk_source_position(const tk_source *s)
{
    return s->a ? (long long)archive_filter_bytes(s->a, -1) : 0;
}

void tk_source_close(tk_source *s)
{
    if (!s)
        return;
    if (s->a)
        archive_read_free(s->a);
    if (s->fd > STDIN_FILENO)
        close(s->fd);
    free(s->name);
    free(s);
}
