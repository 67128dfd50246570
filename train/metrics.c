/* metrics.c: metrics.jsonl and loss.svg (see metrics.h). */
#include "metrics.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"
#include "common/io/outfile.h"

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int add_point(tr_metrics *m, const tr_point *p)
{
    if (gk_grow(&m->pts, &m->cap, m->n + 1, sizeof *m->pts, 256))
        return -1;
    m->pts[m->n++] = *p;
    return 0;
}

static double get_num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Reads the old log's points with step <= keep_until into the history; *complete is the length
 * of its complete lines (a last line without its newline was cut by a kill). */
static int load_old(tr_metrics *m, int64_t keep_until, off_t *complete)
{
    *complete = 0;
    FILE *f = fopen(m->jsonl_path, "r");
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t r;
    int rc = 0;
    while (rc == 0 && (r = getline(&line, &cap, f)) > 0) {
        if (line[r - 1] != '\n')
            break;
        *complete += r;
        json_t *o = json_loads(line, 0, NULL);
        double step = o ? get_num(o, "step") : NAN;
        if (o && !isnan(step) && step <= (double)keep_until) {
            tr_point p = {(int64_t)step, get_num(o, "loss"), get_num(o, "train_loss"),
                          get_num(o, "val_loss")};
            rc = add_point(m, &p);
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return rc;
}

int tr_metrics_open(tr_metrics *m, const char *out_dir, int64_t keep_until, gk_err *e)
{
    memset(m, 0, sizeof *m);
    m->jsonl_path = join(out_dir, "metrics.jsonl");
    m->svg_path = join(out_dir, "loss.svg");
    if (!m->jsonl_path || !m->svg_path) {
        tr_metrics_close(m);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    off_t complete = 0;
    if (keep_until >= 0 && load_old(m, keep_until, &complete) != 0) {
        tr_metrics_close(m);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    struct stat st;
    int rc = 0;
    if (keep_until >= 0 && stat(m->jsonl_path, &st) == 0 && st.st_size > complete &&
        truncate(m->jsonl_path, complete) != 0) /* drop the cut line only */
        rc = gk_errno(e, m->jsonl_path);
    if (!rc && !(m->jsonl = fopen(m->jsonl_path, keep_until >= 0 ? "a" : "w")))
        rc = gk_errno(e, m->jsonl_path);
    if (rc)
        tr_metrics_close(m);
    return rc;
}

/* key: the value, or null when it is NaN or infinite (JSON has no such numbers). */
static void set_num(json_t *o, const char *key, double v)
{
    json_object_set_new(o, key, isfinite(v) ? json_real(v) : json_null());
}

/* Appends text and a newline to the log, all or nothing: a write that a full disk cuts short is
 * truncated away, so that the log never ends in half a line. Written to the descriptor (the
 * stream's buffer stays empty), so that the cut is known to the byte. */
static int append_line(tr_metrics *m, const char *text, gk_err *e)
{
    size_t n = strlen(text), done = 0;
    char *line = malloc(n + 1);
    if (!line)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    memcpy(line, text, n);
    line[n++] = '\n';
    int fd = fileno(m->jsonl), err = 0;
    off_t end = lseek(fd, 0, SEEK_END);
    while (done < n && !err) {
        ssize_t w = write(fd, line + done, n - done);
        if (w > 0)
            done += (size_t)w;
        else if (!(w < 0 && errno == EINTR))
            err = w < 0 ? errno : EIO;
    }
    free(line);
    if (!err)
        return 0;
    if (done > 0 && end >= 0 && ftruncate(fd, end) != 0) {
        /* the cut line stays; a resume removes it (load_old) */
    }
    errno = err;
    return gk_errno(e, m->jsonl_path);
}

int tr_metrics_log(tr_metrics *m, const tr_step_record *r, gk_err *e)
{
    json_t *o = json_object();
    json_object_set_new(o, "step", json_integer(r->step));
    if (r->has & TR_HAS_STEP) {
        set_num(o, "loss", r->loss);
        set_num(o, "lr", r->lr);
        set_num(o, "grad_norm", r->grad_norm);
        set_num(o, "ms", r->ms);
        set_num(o, "tokens_per_s", r->tokens_per_s);
    }
    if (r->has & TR_HAS_MFU)
        set_num(o, "mfu", r->mfu);
    if (r->has & TR_HAS_COMM)
        set_num(o, "comm_ms", r->comm_ms);
    if (r->has & TR_HAS_TRAIN_LOSS)
        set_num(o, "train_loss", r->train_loss);
    if (r->has & TR_HAS_VAL_LOSS)
        set_num(o, "val_loss", r->val_loss);
    if (r->has & TR_HAS_HELLASWAG) {
        set_num(o, "hellaswag_acc", r->hellaswag_acc);
        set_num(o, "hellaswag_acc_norm", r->hellaswag_acc_norm);
    }
    if (r->skipped > 0)
        json_object_set_new(o, "skipped", json_integer(r->skipped));
    char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(8));
    json_decref(o);
    tr_point p = {r->step, r->has & TR_HAS_STEP ? r->loss : NAN,
                  r->has & TR_HAS_TRAIN_LOSS ? r->train_loss : NAN,
                  r->has & TR_HAS_VAL_LOSS ? r->val_loss : NAN};
    int rc = 0;
    if (!s || add_point(m, &p) != 0)
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    else
        rc = append_line(m, s, e);
    free(s);
    return rc;
}

int tr_metrics_plot(const tr_metrics *m, gk_err *e)
{
    gk_outfile f;
    int rc = gk_outfile_open(&f, m->svg_path, e);
    if (rc)
        return rc;
    tr_plot_svg(f.fp, m->pts, m->n);
    return gk_outfile_commit(&f, e);
}

void tr_metrics_close(tr_metrics *m)
{
    if (m->jsonl)
        fclose(m->jsonl);
    free(m->jsonl_path);
    free(m->svg_path);
    free(m->pts);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- SVG plot */

enum { W = 720, H = 420, L = 60, R = 20, TOP = 30, BOT = 45 };

typedef struct frame {
    double x0, x1, y0, y1;
} frame;

static double px(const frame *fr, double x)
{
    return L + (x - fr->x0) / (fr->x1 - fr->x0) * (W - L - R);
}
static double py(const frame *fr, double y)
{
    return H - BOT - (y - fr->y0) / (fr->y1 - fr->y0) * (H - TOP - BOT);
}

static void series(FILE *f, const frame *fr, const tr_point *pts, size_t n, size_t field,
                   const char *color, double width)
{
    int started = 0;
    for (size_t i = 0; i < n; i++) {
        double v = *(const double *)((const char *)&pts[i] + field);
        if (!isfinite(v))
            continue;
        fprintf(f, "%s%.1f,%.1f", started ? " " : "<polyline fill=\"none\" points=\"",
                px(fr, (double)pts[i].step), py(fr, v));
        started = 1;
    }
    if (started)
        fprintf(f, "\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n", color, width);
}

static frame bounds(const tr_point *pts, size_t n)
{
    frame fr = {0, 1, INFINITY, -INFINITY};
    for (size_t i = 0; i < n; i++) {
        double v[3] = {pts[i].loss, pts[i].train_loss, pts[i].val_loss};
        for (int k = 0; k < 3; k++)
            if (isfinite(v[k])) {
                fr.y0 = fmin(fr.y0, v[k]);
                fr.y1 = fmax(fr.y1, v[k]);
            }
        fr.x1 = fmax(fr.x1, (double)pts[i].step);
    }
    if (!(fr.y0 < fr.y1)) {
        fr.y0 = isfinite(fr.y0) ? fr.y0 - 1 : 0;
        fr.y1 = fr.y0 + 2;
    }
    return fr;
}

void tr_plot_svg(FILE *f, const tr_point *pts, size_t n)
{
    frame fr = bounds(pts, n);
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            W, H);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"14\">loss</text>\n", L);
    for (int i = 0; i <= 5; i++) { /* grid and tick labels */
        double y = fr.y0 + (fr.y1 - fr.y0) * i / 5, x = fr.x0 + (fr.x1 - fr.x0) * i / 5;
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L,
                W - R, py(&fr, y), py(&fr, y));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", L - 6,
                py(&fr, y) + 4, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", px(&fr, x),
                H - BOT + 16, x);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2,
            H - 8);
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n",
            L, TOP, W - L - R, H - TOP - BOT);
    series(f, &fr, pts, n, offsetof(tr_point, loss), "#9ecae1", 1);
    series(f, &fr, pts, n, offsetof(tr_point, train_loss), "#08519c", 2);
    series(f, &fr, pts, n, offsetof(tr_point, val_loss), "#d94801", 2);
    const char *names[3] = {"step loss", "train (eval)", "val (eval)"},
               *colors[3] = {"#9ecae1", "#08519c", "#d94801"};
    for (int k = 0; k < 3; k++) {
        int y = TOP + 14 + 16 * k;
        fprintf(f,
                "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" "
                "stroke=\"%s\" stroke-width=\"2\"/>\n",
                W - R - 120, W - R - 100, y - 4, y - 4, colors[k]);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", W - R - 95, y, names[k]);
    }
    fprintf(f, "</svg>\n");
}
